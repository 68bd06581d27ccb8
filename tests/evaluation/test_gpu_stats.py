"""evaluation/gpu.py: NVML stats and every NVML failure, through a fake NVML (no GPU here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pynvml
import pytest

from evaluation.gpu import GpuProcess, gpu_info, gpu_reading, host_info
from tests.workers.fake_nvml import GIB, FakeGpu, FakeNvml, install, install_failure


def test_a_gpu_reading_carries_every_stat_nvml_reports(monkeypatch: Any) -> None:
    fake = install(monkeypatch, FakeNvml(FakeGpu(processes=[(4242, 6 * GIB), (77, None)])))

    reading = gpu_reading(0)

    gpu = reading.gpu
    assert gpu is not None and reading.problem == "" and reading.no_gpu_reason == ""
    assert (gpu.name, gpu.uuid, gpu.index) == ("NVIDIA A40", FakeGpu().uuid, 0)
    assert (gpu.memory_total, gpu.memory_used) == (48 * GIB, 12 * GIB)
    assert (gpu.utilization_gpu, gpu.utilization_memory, gpu.temperature_c) == (63, 41, 71)
    assert (gpu.power_w, gpu.power_limit_w) == (182.0, 300.0)  # NVML answers in milliwatts
    assert gpu.processes == (GpuProcess(4242, 6 * GIB), GpuProcess(77, None))
    assert fake.shutdowns == 1  # every read releases NVML again


def test_a_gpu_is_found_by_uuid_before_index(monkeypatch: Any) -> None:
    second = FakeGpu(index=1, uuid="GPU-second", name="NVIDIA L4")
    install(monkeypatch, FakeNvml(FakeGpu(), second))

    assert gpu_info(0, "GPU-second").name == "NVIDIA L4"
    assert gpu_info(1).uuid == "GPU-second"


def test_queries_a_gpu_does_not_support_leave_their_fields_empty(monkeypatch: Any) -> None:
    unsupported = pynvml.NVML_ERROR_NOT_SUPPORTED
    gpu = FakeGpu(
        errors={
            name: unsupported
            for name in (
                "nvmlDeviceGetTemperature",
                "nvmlDeviceGetPowerUsage",
                "nvmlDeviceGetEnforcedPowerLimit",
                "nvmlDeviceGetUtilizationRates",
                "nvmlDeviceGetComputeRunningProcesses",
            )
        }
    )
    install(monkeypatch, FakeNvml(gpu))

    reading = gpu_reading(0)

    assert reading.problem == "" and reading.gpu is not None
    assert reading.gpu.memory_used == 12 * GIB
    assert reading.gpu.temperature_c is None and reading.gpu.power_w is None
    assert reading.gpu.utilization_gpu is None and reading.gpu.processes == ()


@pytest.mark.parametrize(
    ("code", "problem", "reason"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "", "no NVIDIA driver on this host"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver is installed but not loaded", "not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission", "no permission"),
        (pynvml.NVML_ERROR_UNKNOWN, "NVML could not start", "NVML unavailable"),
    ],
)
def test_nvml_that_cannot_start_means_no_gpu_and_says_why(
    monkeypatch: Any, code: int, problem: str, reason: str
) -> None:
    install_failure(monkeypatch, code)

    reading = gpu_reading(0)

    assert reading.gpu is None
    assert problem in reading.problem and (problem or reading.problem == "")
    assert reason in reading.no_gpu_reason


@pytest.mark.parametrize("failing", ["nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTemperature"])
def test_a_gpu_that_fell_off_the_bus_is_reported_lost_even_from_an_optional_query(
    monkeypatch: Any, failing: str
) -> None:
    install(monkeypatch, FakeNvml(FakeGpu(errors={failing: pynvml.NVML_ERROR_GPU_IS_LOST})))

    reading = gpu_reading(0)

    assert reading.gpu is None
    assert "GPU #0 is lost" in reading.problem


def test_a_wrong_uuid_is_reported_not_found(monkeypatch: Any) -> None:
    install(monkeypatch)

    reading = gpu_reading(0, "GPU-nope")

    assert reading.gpu is None and reading.problem == "GPU GPU-nope not found on this host"


def test_any_other_error_inside_nvml_is_a_problem_not_a_crash(monkeypatch: Any) -> None:
    fake = install(monkeypatch)
    monkeypatch.setattr(fake, "nvmlDeviceGetUUID", lambda gpu: 1 / 0)

    reading = gpu_reading(0)

    assert reading.gpu is None and "could not read GPU #0" in reading.problem
    assert fake.shutdowns == 1


def test_the_real_nvml_on_a_machine_without_a_gpu_answers_no_gpu() -> None:
    reading = gpu_reading(0)  # not faked: this machine has no NVIDIA driver

    assert reading.gpu is None and reading.problem == ""
    assert "no NVIDIA driver" in reading.no_gpu_reason


def test_host_info_reports_cpu_and_ram_as_the_kernel_does() -> None:
    meminfo = dict(
        line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line
    )
    total = int(meminfo["MemTotal"].split()[0]) * 1024

    host = host_info()

    assert host.memory_total == total
    assert 0 < host.memory_used < total
    assert host.cpu_count == len(
        [x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("processor")]
    )
    assert 0.0 <= host.cpu_percent <= 100.0
