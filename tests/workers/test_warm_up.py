"""What a model process started ahead runs while it waits (evaluation.warm_up.warm_up_model): on
CUDA a model whose operators load cuBLAS and cuDNN, so a submission's first run does not
(measured on GPUs: docs/benchmarks.md), run as a reader of the GPU's timing lock; on CPU the tiny
Add. This machine has no GPU: the model is checked and run here on CPU, its effect on a GPU only
measured there."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
import onnx
import pytest

from evaluation.runner import DeviceConfig, create_session
from evaluation.selftest import tiny_model
from evaluation.warm_up import library_warm_model, warm_up_model
from queueing.queues import evaluation_redis
from tests.workers import fake_nvml
from tests.workers.fake_nvml import FakeGpu, FakeNvml
from workers import sandboxing
from workers.device import device_config
from workers.device_lock import device_lock, device_lock_key


def test_a_cuda_model_process_warms_up_with_convolutions_and_matrix_products_a_cpu_one_with_add():
    cpu = replace(device_config("warm-up-test"), use_cuda=False)
    cuda = replace(cpu, use_cuda=True)

    model, inputs = warm_up_model(cpu)
    assert model == tiny_model() and inputs.shape == (4,)

    model, inputs = warm_up_model(cuda)
    assert model == library_warm_model()
    graph = onnx.load_from_string(model).graph
    assert [n.op_type for n in graph.node].count("Conv") == 3
    assert all(len(n.input) == 3 for n in graph.node if n.op_type == "Conv")  # with a bias
    assert {"MatMul", "Gemm"} <= {n.op_type for n in graph.node}
    declared = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    assert list(inputs.shape) == declared and declared[0] > 1  # several rows: cuBLAS's gemm


def test_the_library_warm_up_model_is_valid_and_runs_with_the_workers_session_options():
    model = library_warm_model()
    onnx.checker.check_model(onnx.load_from_string(model), full_check=True)
    _, inputs = warm_up_model(replace(device_config("warm-up-test"), use_cuda=True))
    session = create_session(model, replace(device_config("warm-up-test"), use_cuda=False))
    (out,) = session.run(None, {"x": inputs + 1.0})
    assert out.shape == (inputs.shape[0], 4)
    assert np.isfinite(out).all() and (out > 0).all()


@pytest.mark.django_db
def test_a_gpu_warm_up_waits_for_another_workers_timing_on_the_device(
    monkeypatch: Any, settings: Any
) -> None:
    # NVML is the faked boundary (it names the GPU's lock); the lock is the real one in Redis.
    settings.EVAL_GPU_UUID = ""
    gpu = FakeGpu()
    fake_nvml.install(monkeypatch, FakeNvml(gpu))
    cuda = DeviceConfig(use_cuda=True, device_name=gpu.name)
    connection = evaluation_redis()
    key = device_lock_key(gpu_uuid=gpu.uuid)
    connection.delete(key, f"{key}:timers", f"{key}:scorers")

    sandboxing.prepare_ahead(cuda)  # what a first warm-up loads: the next one is quick
    sandboxing.model_process(cuda).stop()

    held, release = threading.Event(), threading.Event()
    released: list[float] = []

    def timing() -> None:
        with device_lock(connection, key, wait_s=5, ttl_s=5):
            held.set()
            release.wait(10)

    def let_go() -> None:
        released.append(time.monotonic())  # the lock is freed only after this
        release.set()

    timer = threading.Thread(target=timing)
    timer.start()
    assert held.wait(5)
    threading.Timer(1.0, let_go).start()
    sandboxing.prepare_ahead(cuda)
    done = time.monotonic()
    sandboxing.model_process(cuda).stop()
    timer.join()
    # Its model process ran the warm-up model only once the timing had let go of the device.
    assert released and done >= released[0]
