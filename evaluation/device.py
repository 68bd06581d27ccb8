"""This worker's DeviceConfig, from settings and what NVML reports about its GPU."""

from __future__ import annotations

import contextlib
import os
import socket

import onnxruntime as ort
from django.conf import settings

from evaluation.gpu import gpu_info
from evaluation.runner import CUDA, DeviceConfig

# The worker parent imports this module, so importing pynvml here means every forked work horse
# inherits it instead of importing it again for each job (about 30 ms on a small CPU). Importing
# the module neither initialises NVML nor touches CUDA.
with contextlib.suppress(ImportError):
    import pynvml  # noqa: F401


def worker_name() -> str:
    return settings.EVAL_WORKER_NAME or f"{socket.gethostname()}.{os.getpid()}"


def device_config(name: str | None = None) -> DeviceConfig:
    """CUDA when configured (or, with EVAL_DEVICE=auto, when both onnxruntime and NVML see a GPU).

    gpu_mem_limit is this worker's share of the GPU: EVAL_GPU_MEMORY_BYTES when set, else
    EVAL_GPU_MEMORY_FRACTION of the total memory NVML reports, so several workers can share one GPU.
    """
    gpu = gpu_info(settings.EVAL_GPU_INDEX, os.environ.get("EVAL_GPU_UUID") or None)
    cuda_built = CUDA in ort.get_available_providers()
    mode = settings.EVAL_DEVICE
    use_cuda = cuda_built and (mode == "cuda" or (mode == "auto" and gpu is not None))
    limit: int | None = settings.EVAL_GPU_MEMORY_BYTES or None
    if limit is None and gpu is not None:
        limit = int(gpu.memory_total * settings.EVAL_GPU_MEMORY_FRACTION)
    return DeviceConfig(
        worker_name=name or worker_name(),
        use_cuda=use_cuda,
        device_id=settings.EVAL_GPU_INDEX,  # a CUDA ordinal: relative to CUDA_VISIBLE_DEVICES
        gpu_mem_limit=limit if use_cuda else None,
        cudnn_conv_algo_search=settings.EVAL_CUDNN_CONV_ALGO_SEARCH,
        intra_op_threads=settings.EVAL_INTRA_OP_THREADS,
        inter_op_threads=settings.EVAL_INTER_OP_THREADS,
        graph_optimization=settings.EVAL_GRAPH_OPTIMIZATION,
        warmup_runs=settings.EVAL_WARMUP_RUNS,
        device_name=gpu.name if gpu is not None else "CPU",
        # On CUDA the driver maps address space far beyond what it uses, so an address-space
        # limit would refuse every session there; gpu_mem_limit bounds the device instead.
        cpu_memory_limit_bytes=(
            settings.EVAL_CPU_MEMORY_LIMIT_MB * 1_048_576
            if settings.EVAL_CPU_MEMORY_LIMIT_MB and not use_cuda
            else None
        ),
    )
