"""What a ready work horse runs while it waits (workers.ready_horse.warm_up_model): on CUDA a
model whose operators load cuBLAS and cuDNN, so a submission's first run does not (measured on
GPUs: docs/benchmarks.md), run as a reader of the GPU's timing lock; on CPU the tiny Add. This
machine has no GPU: the model is checked and run here on CPU, its effect on a GPU only measured
there."""

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
from queueing.queues import evaluation_redis
from tests.workers import fake_nvml
from tests.workers.fake_nvml import FakeGpu, FakeNvml
from workers.device import device_config
from workers.device_lock import device_lock, device_lock_key
from workers.ready_horse import library_warm_model, warm_up, warm_up_model


def test_a_cuda_horse_warms_up_with_convolutions_and_matrix_products_a_cpu_horse_with_the_add():
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

    warm_up(task=None, device=cuda)  # what a first warm-up loads: the next one is quick

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
    warm_up(task=None, device=cuda)
    done = time.monotonic()
    timer.join()
    # It ran its model only once the timing had let go of the device (without the turn it was
    # over 5 ms after it began, long before).
    assert released and done >= released[0]


# In a fresh Python: a worker's imports, then children forked before and after the worker set up
# onnxruntime (workers.jobs.warm_onnxruntime), each making and running the tiny session a ready
# horse warms up with and reporting its minor page faults; and the worker's threads around it.
_FORKED_WARM_UP = """
import json, os, resource, statistics, django
django.setup()
import numpy as np
from workers import jobs  # noqa: F401  what a worker has loaded
from workers import worker  # noqa: F401  what a worker has loaded
from evaluation.runner import DeviceConfig, create_session
from evaluation.selftest import tiny_model

def child_faults():
    samples = []
    for _ in range(5):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            session = create_session(tiny_model(), DeviceConfig(intra_op_threads=1))
            session.run(None, {"x": np.zeros(4, np.float32)})
            os.write(write, str(resource.getrusage(resource.RUSAGE_SELF).ru_minflt).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            samples.append(int(pipe.read()))
        os.waitpid(pid, 0)
    return statistics.median(samples)

cold = child_faults()
threads = len(os.listdir("/proc/self/task"))
jobs.warm_onnxruntime()
print(json.dumps({"cold": cold, "warm": child_faults(), "threads": [threads,
      len(os.listdir("/proc/self/task"))]}))
"""


def test_a_worker_sets_up_onnxruntime_once_for_all_its_horses(settings: Any) -> None:
    import json
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_WARM_UP], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    # onnxruntime's first session in a process sets up its environment and registries: forked
    # from a worker that did that already, a horse writes far fewer pages (1,891 -> 878 on the
    # development box).
    assert measured["warm"] < measured["cold"] - 300, measured
    # The worker's warm-up session left no thread behind: nothing of onnxruntime runs at a fork.
    before, after = measured["threads"]
    assert after == before, measured
