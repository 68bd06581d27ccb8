"""Which device this worker evaluates on: one rule for the worker, its sessions and its cards.

``gpu_pin`` says which GPU a worker uses, in the words NVML and CUDA each understand. NVML
ignores ``CUDA_VISIBLE_DEVICES`` and numbers GPUs by PCI bus id; CUDA numbers the visible GPUs
fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``. So the worker makes CUDA see exactly its
GPU, by UUID when one is configured (``CUDA_VISIBLE_DEVICES=GPU-...``, which CUDA accepts as a
device name) or by the NVML index in PCI bus order, and every session then uses CUDA ordinal 0.
This must happen before anything initialises CUDA: the worker parent never does, so it sets the
environment at start and every model process and self-test child inherits it.

``choose_device`` says whether a worker's model processes use CUDA, from the configured mode,
whether onnxruntime has the CUDA provider, what NVML found, and the CUDA self-test
(evaluation/selftest.py).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

import onnxruntime as ort
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from evaluation.gpu import GpuInfo, gpu_info
from evaluation.runner import CUDA, DeviceConfig

# Imported with this module, at the worker's start rather than in its first job. Importing the
# module neither initialises NVML nor touches CUDA.
with contextlib.suppress(ImportError):
    import pynvml  # noqa: F401

CUDA_DEVICE_ID = 0  # the pinned GPU is the only one CUDA sees in a worker


@dataclass(frozen=True)
class GpuPin:
    """One GPU, named for NVML (``uuid``, else ``index``) and for CUDA (the environment)."""

    uuid: str | None
    index: int
    cuda_environment: dict[str, str]
    cuda_device_id: int = CUDA_DEVICE_ID


def gpu_pin(*, uuid: str, index: int, environ: Mapping[str, str]) -> GpuPin:
    """The one device rule. A pre-set ``CUDA_VISIBLE_DEVICES`` naming another GPU is refused:
    NVML would then read one GPU while CUDA ran on another."""
    visible = uuid or str(index)
    preset = environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if preset and preset != visible:
        which = f"EVAL_GPU_UUID={uuid}" if uuid else f"EVAL_GPU_INDEX={index}"
        raise ImproperlyConfigured(
            f"CUDA_VISIBLE_DEVICES={preset} names other GPUs than {which}; NVML ignores "
            "CUDA_VISIBLE_DEVICES, so the stats and the memory share would describe another GPU "
            "than the one the model runs on. Unset CUDA_VISIBLE_DEVICES and pin the worker with "
            "EVAL_GPU_UUID (or EVAL_GPU_INDEX, counted as nvidia-smi counts)."
        )
    return GpuPin(
        uuid=uuid or None,
        index=index,
        cuda_environment={"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": visible},
    )


def nvml_target() -> tuple[int, str | None]:
    """(index, uuid) as NVML reads this worker's GPU: by UUID when one is configured."""
    return settings.EVAL_GPU_INDEX, settings.EVAL_GPU_UUID or None


def this_gpu_pin() -> GpuPin:
    return gpu_pin(uuid=settings.EVAL_GPU_UUID, index=settings.EVAL_GPU_INDEX, environ=os.environ)


def pin_cuda(pin: GpuPin, environ: MutableMapping[str, str] = os.environ) -> None:
    """Make CUDA see only the pinned GPU; only effective before CUDA is initialised."""
    environ.update(pin.cuda_environment)


@dataclass(frozen=True)
class DeviceChoice:
    use_cuda: bool
    problem: str = ""  # why CUDA is not used although it was asked for or possible
    memory_share: int | None = None  # bytes of the GPU this worker's evaluations may use


def memory_share(gpu: GpuInfo | None) -> int | None:
    """This worker's share of its GPU: EVAL_GPU_MEMORY_BYTES, else the fraction of NVML's total."""
    if settings.EVAL_GPU_MEMORY_BYTES:
        return int(settings.EVAL_GPU_MEMORY_BYTES)
    if gpu is None:
        return None
    return int(gpu.memory_total * settings.EVAL_GPU_MEMORY_FRACTION)


def choose_device(
    *, mode: str, cuda_built: bool, gpu: GpuInfo | None, selftest_problem: str | None
) -> DeviceChoice:
    """CUDA when configured or (auto) when NVML sees the GPU, and the self-test did not fail.

    ``selftest_problem`` is None when no self-test ran in this process's lineage (a job called
    directly), "" when it passed, else the reason it failed.
    """
    if mode == "cpu":
        return DeviceChoice(use_cuda=False)
    if not cuda_built:
        problem = "onnxruntime was installed without the CUDA execution provider"
        return DeviceChoice(use_cuda=False, problem=problem if mode == "cuda" else "")
    if mode == "auto" and gpu is None:
        return DeviceChoice(use_cuda=False)
    if selftest_problem:
        return DeviceChoice(use_cuda=False, problem=selftest_problem)
    return DeviceChoice(use_cuda=True, memory_share=memory_share(gpu))


# Set by the worker after its CUDA self-test, read by its jobs.
_selftest_problem: str | None = None


def record_selftest(problem: str) -> None:
    global _selftest_problem
    _selftest_problem = problem


def current_choice(gpu: GpuInfo | None) -> DeviceChoice:
    return choose_device(
        mode=settings.EVAL_DEVICE,
        cuda_built=CUDA in ort.get_available_providers(),
        gpu=gpu,
        selftest_problem=_selftest_problem,
    )


def worker_name() -> str:
    return settings.EVAL_WORKER_NAME or f"{socket.gethostname()}.{os.getpid()}"


def device_config(name: str | None = None) -> DeviceConfig:
    """This worker's session configuration, on the pinned GPU when CUDA is chosen.

    gpu_mem_limit is this worker's share of the GPU: EVAL_GPU_MEMORY_BYTES when set, else
    EVAL_GPU_MEMORY_FRACTION of the total memory NVML reports, so several workers can share one GPU.
    """
    gpu = gpu_info(*nvml_target()) if settings.EVAL_DEVICE != "cpu" else None
    choice = current_choice(gpu)  # CUDA sees only the pinned GPU: the worker set it at start
    return DeviceConfig(
        worker_name=name or worker_name(),
        use_cuda=choice.use_cuda,
        device_id=CUDA_DEVICE_ID,
        gpu_mem_limit=choice.memory_share,
        cudnn_conv_algo_search=settings.EVAL_CUDNN_CONV_ALGO_SEARCH,
        use_tf32=settings.EVAL_CUDA_TF32,
        intra_op_threads=settings.EVAL_INTRA_OP_THREADS,
        intra_op_spinning=settings.EVAL_INTRA_OP_SPINNING,
        inter_op_threads=settings.EVAL_INTER_OP_THREADS,
        graph_optimization=settings.EVAL_GRAPH_OPTIMIZATION,
        warmup_runs=settings.EVAL_WARMUP_RUNS,
        device_name=gpu.name if gpu is not None and choice.use_cuda else "CPU",
        # On CUDA the driver maps address space far beyond what it uses, so an address-space
        # limit would refuse every session there; gpu_mem_limit bounds the device instead.
        cpu_memory_limit_bytes=(
            settings.EVAL_CPU_MEMORY_LIMIT_MB * 1_048_576
            if settings.EVAL_CPU_MEMORY_LIMIT_MB and not choice.use_cuda
            else None
        ),
    )
