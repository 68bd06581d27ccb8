"""What a job measures around the runner: peak memory, the device's conditions, the timing lock.

CPU paths run for real (a real worker, real Redis); the GPU paths run against the fake NVML,
the one faked boundary.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from django.test import Client
from onnx import TensorProto, helper, numpy_helper

from evaluation.gpu import gpu_device_use
from evaluation.runner import DeviceConfig, create_session, time_model
from evaluation.timing import TimingProtocol
from submissions.models import Submission
from tests.builders import DIGITS_SPEC, finish
from tests.workers import fake_nvml
from tests.workers.fake_nvml import GIB, FakeGpu, FakeNvml
from tests.workers.fleet_support import fast_model, submit
from workers.device_lock import device_lock, device_lock_key
from workers.measurement import CpuPeak, Measurement, cpu_facts
from workers.worker import EvaluationWorker

MIB = 1024 * 1024
A40 = FakeGpu()


def wide_model(columns: int) -> bytes:
    """A digits classifier that spreads each input row over ``columns`` copies on the way:
    an intermediate of batch x 64 x columns floats (16 x 64 x 25,600 x 4 B = 100 MiB)."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    nodes = [
        helper.make_node("Reshape", ["input", "column"], ["col"]),
        helper.make_node("Expand", ["col", "wide_shape"], ["wide"]),
        helper.make_node("ReduceMean", ["wide"], ["flat"], axes=[2], keepdims=0),
        helper.make_node("MatMul", ["flat", "W"], ["output"]),
    ]
    init = [
        numpy_helper.from_array(np.array([-1, 64, 1], np.int64), "column"),
        numpy_helper.from_array(np.array([1, 64, columns], np.int64), "wide_shape"),
        numpy_helper.from_array(np.eye(64, 10, dtype=np.float32), "W"),
    ]
    return finish(helper.make_graph(nodes, "wide", [x], [y], init))


def test_cpu_peak_counts_what_is_added_after_it_starts_not_what_was_there() -> None:
    before = np.ones(32 * MIB // 8)  # resident before: not the evaluation's
    peak = CpuPeak()
    added = np.ones(64 * MIB // 8)  # touched: 64 MiB resident
    del added
    assert 60 * MIB <= peak.added_bytes() < 90 * MIB
    del before


@pytest.mark.django_db
def test_the_cpu_facts_are_read_once_per_process_and_each_measurement_adds_to_its_own_copy(
    settings: Any, queue: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    cpu_facts.cache_clear()
    EvaluationWorker([queue], connection=queue.connection, name="facts-test").start_device()
    assert cpu_facts.cache_info().currsize == 1  # read by the worker at start
    gpu_class = Measurement(DeviceConfig(), lock_wait_s=1, device_class="cpu-big")
    plain = Measurement(DeviceConfig(), lock_wait_s=1)
    assert cpu_facts.cache_info().misses == 1  # and never read again in the process
    assert gpu_class.facts["device_class"] == "cpu-big" and plain.facts["device_class"] == "cpu"
    assert "device_class" not in cpu_facts()
    assert plain.facts["cpu_model"] == cpu_facts()["cpu_model"] != ""


@pytest.mark.django_db(transaction=True)
def test_a_cpu_evaluation_records_its_peak_memory(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    task = make_task(submissions_per_day=10)
    small = submit(alice, task, fast_model(1))
    wide = submit(alice, task, wide_model(25_600))

    run_worker()

    small, wide = (Submission.objects.get(pk=s.pk) for s in (small, wide))
    assert small.status == wide.status == "succeeded", wide.error_message
    assert small.peak_memory_bytes is not None and small.peak_memory_bytes > 0
    assert wide.peak_memory_bytes is not None and wide.peak_memory_bytes >= 100 * MIB
    assert wide.peak_memory_bytes > small.peak_memory_bytes + 90 * MIB
    client = Client()
    client.force_login(alice)
    page = client.get(f"/submissions/{wide.pk}/").content.decode()
    assert "Peak memory" in page and " MiB of RAM" in page
    assert client.get(f"/api/submissions/{wide.pk}/").json()["peak_memory_bytes"] > 100 * MIB


def cuda_device() -> DeviceConfig:
    return DeviceConfig(use_cuda=True, device_name="NVIDIA A40")


def test_on_gpu_the_peak_is_the_largest_device_memory_nvml_reports_for_the_model_process(
    monkeypatch: Any, settings: Any
) -> None:
    settings.EVAL_GPU_UUID = ""
    gpu = FakeGpu(processes=[(4242, 6 * GIB), (os.getpid(), 2 * GIB)])
    fake = fake_nvml.install(monkeypatch, FakeNvml(gpu))
    measured = Measurement(cuda_device(), lock_wait_s=1)
    hooks = measured.hooks()

    start = hooks.observe()
    gpu.processes = [(4242, 6 * GIB), (os.getpid(), 3 * GIB)]  # the arena grew while timing
    end = hooks.observe()

    assert measured.peak_memory_bytes() == 3 * GIB  # the model process's, not the other's
    assert start == {
        "sm_clock_mhz": 1740,
        "memory_clock_mhz": 7251,
        "temperature_c": 71,
        "power_w": 182.0,
        "energy_mj": start["energy_mj"],
    }
    assert end["temperature_c"] == 71 and end["energy_mj"] >= start["energy_mj"] > 5_000_000
    assert hooks.facts == {
        "gpu_name": "NVIDIA A40",
        "gpu_uuid": A40.uuid,
        "driver": "550.54.15",
        "cuda_driver": "12.4",
        "device_class": "cuda",
    }
    assert measured.lock_key == f"eval:timing-lock:gpu:{A40.uuid}"
    assert fake.shutdowns == 3  # every NVML session closed


def test_on_gpu_the_energy_of_the_timed_passes_comes_from_the_counter_read_at_their_ends(
    monkeypatch: Any, settings: Any
) -> None:
    """The counter's difference over the timed passes, per batch and as average power: a
    device drawing 182 W throughout reads 182 W, whatever the model; a GPU without the
    counter leaves both empty."""
    settings.EVAL_GPU_UUID = ""
    fake_nvml.install(monkeypatch, FakeNvml(FakeGpu(power_mw=182_000)))
    measured = Measurement(cuda_device(), lock_wait_s=1)
    spec = replace(DIGITS_SPEC, timing=TimingProtocol(min_time_s=0.3, passes=3))
    session = create_session(fast_model(), DeviceConfig())
    batch = np.zeros((spec.batch_size, 1, 8, 8), np.float32)

    timing = time_model(session, batch, spec, DeviceConfig(), measured.hooks())

    assert timing.average_power_w == pytest.approx(182.0, rel=0.02)
    assert timing.energy_per_batch_j == pytest.approx(
        182.0 * timing.duration_s / timing.batches, rel=0.02
    )
    fake_nvml.install(monkeypatch, FakeNvml(FakeGpu(energy_mj=None)))
    before_volta = Measurement(cuda_device(), lock_wait_s=1)
    timing = time_model(session, batch, spec, DeviceConfig(), before_volta.hooks())
    assert timing.energy_per_batch_j is None and timing.average_power_w is None


def test_in_a_pid_namespace_the_peak_is_what_the_device_gained_since_the_process_started(
    monkeypatch: Any, settings: Any
) -> None:
    """NVML lists the model process under the host's PID, which this worker cannot match: the
    device's used memory then tells, while the model process is the one compute process added."""
    settings.EVAL_GPU_UUID = ""
    gpu = FakeGpu(memory_used=1 * GIB, processes=[])
    fake_nvml.install(monkeypatch, FakeNvml(gpu))
    before = gpu_device_use(0, None)
    assert before == {"device_memory_used_bytes": 1 * GIB, "compute_processes": 0}
    gpu.processes = [(81234, 3 * GIB)]  # the host's PID, not the model process's own
    gpu.memory_used = 4 * GIB + 7 * MIB
    measured = Measurement(cuda_device(), lock_wait_s=1, pid=4321, device_before=before)

    sample = measured.hooks().observe()

    assert measured.peak_memory_bytes() == 3 * GIB + 7 * MIB
    assert "device_memory_used_bytes" not in sample and "compute_processes" not in sample
    gpu.processes = [(81234, 3 * GIB), (81299, 1 * GIB)]  # another worker's process came
    gpu.memory_used = 6 * GIB
    other = Measurement(cuda_device(), lock_wait_s=1, pid=4321, device_before=before)
    other.hooks().observe()
    assert other.peak_memory_bytes() is None  # its memory would be counted too: none


def test_on_gpu_a_model_process_nvml_does_not_list_has_no_peak_rather_than_a_wrong_one(
    monkeypatch: Any, settings: Any
) -> None:
    settings.EVAL_GPU_UUID = ""
    fake_nvml.install(monkeypatch, FakeNvml(FakeGpu(processes=[(4242, 6 * GIB)])))
    measured = Measurement(cuda_device(), lock_wait_s=1)
    measured.hooks().observe()
    assert measured.peak_memory_bytes() is None


def test_conditions_degrade_to_nothing_when_the_gpu_cannot_be_read(
    monkeypatch: Any, settings: Any
) -> None:
    settings.EVAL_GPU_UUID = ""
    lost = FakeGpu(errors={"nvmlDeviceGetClockInfo": 15, "nvmlDeviceGetMemoryInfo": 15})
    fake_nvml.install(monkeypatch, FakeNvml(lost))
    assert Measurement(cuda_device(), lock_wait_s=1).hooks().observe() == {}


def test_the_timing_lock_makes_a_second_holder_wait_and_gives_up_after_its_wait(
    queue: Any,
) -> None:
    key = device_lock_key(gpu_uuid="GPU-test")
    order: list[str] = []
    holding = threading.Event()

    def first() -> None:
        with device_lock(queue.connection, key, wait_s=1, ttl_s=1) as held:
            assert held
            order.append("first in")
            holding.set()
            time.sleep(2.5)  # longer than the TTL: renewal keeps it
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    with device_lock(queue.connection, key, wait_s=0.5, ttl_s=1) as held:
        assert held is False  # the wait ran out: timed anyway, and marked
        order.append("gave up")
    with device_lock(queue.connection, key, wait_s=10, ttl_s=1) as held:
        assert held is True
        order.append("second in")
    thread.join()
    assert order == ["first in", "gave up", "first out", "second in"]
    assert not queue.connection.exists(key)  # released, not left to expire
