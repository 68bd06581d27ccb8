"""A fake pynvml module: the ONLY faked part of the fleet tests, because this machine has no GPU.

It stands in at the ``evaluation.gpu._nvml()`` boundary and raises pynvml's real exception
classes (``pynvml.NVMLError(code)`` builds the matching ``NVMLError_*`` subclass), so the code
under test classifies exactly what a real driver would raise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

GIB = 1024**3


@dataclass
class FakeGpu:
    index: int = 0
    uuid: str = "GPU-5d5e2b8c-0000-4000-8000-a40a40a40a40"
    name: str = "NVIDIA A40"
    memory_total: int = 48 * GIB
    memory_used: int = 12 * GIB
    utilization_gpu: int = 63
    utilization_memory: int = 41
    temperature_c: int = 71
    power_mw: int = 182_000
    power_limit_mw: int = 300_000
    sm_clock_mhz: int = 1740
    memory_clock_mhz: int = 7251
    processes: list[tuple[int, int | None]] = field(default_factory=lambda: [(4242, 6 * GIB)])
    # The energy counter: this many millijoules when made, growing at ``power_mw`` as time
    # passes, as a real counter does (None: a GPU before Volta, which has none).
    energy_mj: int | None = 5_000_000
    made_at: float = field(default_factory=time.monotonic)
    # NVML function name → return code to raise instead of answering
    errors: dict[str, int] = field(default_factory=dict)


class FakeNvml:
    """Enough of pynvml for evaluation.gpu; counts init/shutdown to check they pair up."""

    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVMLError = pynvml.NVMLError

    def __init__(self, *gpus: FakeGpu, driver: str = "550.54.15", cuda_driver: int = 12040) -> None:
        self.gpus = list(gpus) or [FakeGpu()]
        self.shutdowns = 0
        self.driver = driver
        self.cuda_driver = cuda_driver

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda_driver

    def nvmlDeviceGetClockInfo(self, gpu: FakeGpu, clock: int) -> int:
        assert clock in (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM)
        mhz = gpu.sm_clock_mhz if clock == pynvml.NVML_CLOCK_SM else gpu.memory_clock_mhz
        return self._answer(gpu, "nvmlDeviceGetClockInfo", mhz)

    def _answer(self, gpu: FakeGpu, fn: str, value: Any) -> Any:
        if fn in gpu.errors:
            raise pynvml.NVMLError(gpu.errors[fn])
        return value

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeGpu:
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> Any:
        info = SimpleNamespace(total=gpu.memory_total, used=gpu.memory_used)
        return self._answer(gpu, "nvmlDeviceGetMemoryInfo", info)

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> Any:
        rates = SimpleNamespace(gpu=gpu.utilization_gpu, memory=gpu.utilization_memory)
        return self._answer(gpu, "nvmlDeviceGetUtilizationRates", rates)

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> int:
        return self._answer(gpu, "nvmlDeviceGetPowerUsage", gpu.power_mw)

    def nvmlDeviceGetTotalEnergyConsumption(self, gpu: FakeGpu) -> int:
        if gpu.energy_mj is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        spent = gpu.power_mw * (time.monotonic() - gpu.made_at)  # mW x s = mJ
        return self._answer(gpu, "nvmlDeviceGetTotalEnergyConsumption", gpu.energy_mj + int(spent))

    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: FakeGpu) -> int:
        return self._answer(gpu, "nvmlDeviceGetEnforcedPowerLimit", gpu.power_limit_mw)

    def nvmlDeviceGetIndex(self, gpu: FakeGpu) -> int:
        return self._answer(gpu, "nvmlDeviceGetIndex", gpu.index)

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> str:
        return self._answer(gpu, "nvmlDeviceGetUUID", gpu.uuid)

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> bytes:
        return self._answer(gpu, "nvmlDeviceGetName", gpu.name.encode())  # older pynvml: bytes

    def nvmlDeviceGetTemperature(self, gpu: FakeGpu, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._answer(gpu, "nvmlDeviceGetTemperature", gpu.temperature_c)

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu) -> list[Any]:
        found = [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in gpu.processes]
        return self._answer(gpu, "nvmlDeviceGetComputeRunningProcesses", found)


def install(monkeypatch: Any, nvml: FakeNvml | None = None) -> FakeNvml:
    """Make evaluation.gpu see ``nvml`` (a fresh A40 by default) instead of the real driver."""
    fake = nvml or FakeNvml()
    monkeypatch.setattr("evaluation.gpu._nvml", lambda: fake)
    return fake


def install_failure(monkeypatch: Any, code: int) -> None:
    """Make NVML fail to start with ``code``, as nvmlInit does on a broken host."""

    def failing() -> Any:
        raise pynvml.NVMLError(code)

    monkeypatch.setattr("evaluation.gpu._nvml", failing)
