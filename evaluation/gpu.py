"""GPU facts from NVML (nvidia-ml-py), and CPU/RAM facts for hosts without a GPU.

NVML is the one GPU boundary the tests fake: every call goes through ``_nvml()``, which returns
the initialised ``pynvml`` module (or raises when NVML cannot start). Every NVML error becomes
"no GPU" plus a readable reason, or a missing field, never an exception for the caller: a
library that is not installed, a driver that is not loaded, a query the GPU does not support, a
GPU that fell off the bus. NVML does not initialise CUDA, so the worker process may call it
safely (it never initialises CUDA itself).
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

log = logging.getLogger(__name__)

# NVML return codes (nvml.h); pynvml raises NVMLError subclasses carrying them in ``.value``.
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_memory: int | None  # None where the driver cannot tell (NVML_VALUE_NOT_AVAILABLE)


@dataclass(frozen=True)
class GpuInfo:
    index: int
    uuid: str
    name: str
    memory_total: int
    memory_used: int
    utilization_gpu: int | None
    utilization_memory: int | None
    temperature_c: int | None
    power_w: float | None
    power_limit_w: float | None
    processes: tuple[GpuProcess, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GpuReading:
    """One look at a GPU: ``gpu`` is None when there is none to read, and ``problem`` says why.

    ``problem`` is empty on a healthy read and on a host that simply has no NVIDIA driver; it is
    set when something an operator should look at went wrong (driver not loaded, GPU lost, ...).
    """

    gpu: GpuInfo | None
    problem: str = ""
    no_gpu_reason: str = ""


@dataclass(frozen=True)
class HostInfo:
    cpu_count: int
    cpu_percent: float
    load_1m: float | None
    memory_total: int
    memory_used: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _nvml() -> Any:
    """The initialised pynvml module. Raises ImportError or pynvml.NVMLError when unusable."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def _why_no_nvml(exc: BaseException) -> tuple[str, str]:
    """(problem, no_gpu_reason) for an error that stopped NVML from starting."""
    code = _code(exc)
    if isinstance(exc, ImportError):
        return "", "nvidia-ml-py is not installed"
    if code == NVML_ERROR_LIBRARY_NOT_FOUND:
        return "", "no NVIDIA driver on this host (libnvidia-ml not found)"
    if code == NVML_ERROR_DRIVER_NOT_LOADED:
        return "NVIDIA driver is installed but not loaded", "NVIDIA driver not loaded"
    if code == NVML_ERROR_NO_PERMISSION:
        return "no permission to talk to the NVIDIA driver", "no permission for NVML"
    return f"NVML could not start: {exc}", "NVML unavailable"


def _why_unreadable(exc: BaseException, wanted: str) -> str:
    code = _code(exc)
    if code == NVML_ERROR_GPU_IS_LOST:
        return f"GPU {wanted} is lost (fell off the bus); the host needs a reset"
    if code == NVML_ERROR_NOT_FOUND:
        return f"GPU {wanted} not found on this host"
    if code == NVML_ERROR_NO_PERMISSION:
        return f"no permission to read GPU {wanted}"
    return f"NVML could not read GPU {wanted}: {exc}"


def _optional(fn: Any, *args: Any) -> Any:
    """One NVML query that a GPU may not support: None instead of an error.

    A lost GPU is not a missing feature, so that error still propagates.
    """
    try:
        return fn(*args)
    except Exception as exc:
        if _code(exc) == NVML_ERROR_GPU_IS_LOST:
            raise
        log.debug("NVML query %s failed: %s", getattr(fn, "__name__", fn), exc)
        return None


def _as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _handle(nvml: Any, index: int | None, uuid: str | None) -> Any:
    if uuid:
        return nvml.nvmlDeviceGetHandleByUUID(uuid)
    return nvml.nvmlDeviceGetHandleByIndex(index or 0)


def _processes(nvml: Any, handle: Any) -> tuple[GpuProcess, ...]:
    found = _optional(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    return tuple(
        GpuProcess(
            pid=int(p.pid),
            used_memory=int(p.usedGpuMemory) if p.usedGpuMemory is not None else None,
        )
        for p in found
    )


def _read(nvml: Any, index: int | None, uuid: str | None) -> GpuInfo:
    handle = _handle(nvml, index, uuid)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    rates = _optional(nvml.nvmlDeviceGetUtilizationRates, handle)
    power = _optional(nvml.nvmlDeviceGetPowerUsage, handle)  # milliwatts
    limit = _optional(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    found_index = _optional(nvml.nvmlDeviceGetIndex, handle)
    return GpuInfo(
        index=int(found_index if found_index is not None else index or 0),
        uuid=_as_str(nvml.nvmlDeviceGetUUID(handle)),
        name=_as_str(nvml.nvmlDeviceGetName(handle)),
        memory_total=int(memory.total),
        memory_used=int(memory.used),
        utilization_gpu=rates.gpu if rates is not None else None,
        utilization_memory=rates.memory if rates is not None else None,
        temperature_c=_optional(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
        power_w=power / 1000.0 if power is not None else None,
        power_limit_w=limit / 1000.0 if limit is not None else None,
        processes=_processes(nvml, handle),
    )


def gpu_reading(index: int | None = 0, uuid: str | None = None) -> GpuReading:
    """Stats for one GPU, found by UUID when given (stable across reboots), else by index."""
    try:
        nvml = _nvml()
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
        problem, reason = _why_no_nvml(exc)
        log.log(logging.WARNING if problem else logging.DEBUG, "no GPU: %s", problem or reason)
        return GpuReading(gpu=None, problem=problem, no_gpu_reason=reason)
    if nvml is None:  # a fake NVML standing for "no driver"
        return GpuReading(gpu=None, no_gpu_reason="NVML unavailable")
    wanted = uuid or f"#{index or 0}"
    try:
        return GpuReading(gpu=_read(nvml, index, uuid))
    except Exception as exc:  # GPU lost, bad UUID, driver went away mid-call
        problem = _why_unreadable(exc, wanted)
        log.warning("%s", problem)
        return GpuReading(gpu=None, problem=problem, no_gpu_reason=problem)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:
            log.debug("nvmlShutdown failed: %s", exc)


def gpu_info(index: int | None = 0, uuid: str | None = None) -> GpuInfo | None:
    """The GPU's stats, or None when there is no GPU to read (the reason is logged)."""
    return gpu_reading(index, uuid).gpu


def host_info() -> HostInfo:
    """CPU and RAM of this host, for workers without a GPU (and shown beside a GPU's stats).

    ``cpu_percent`` is measured since the previous call in this process, so the first call of a
    process reads 0.0; heartbeats call it every few seconds.
    """
    memory = psutil.virtual_memory()
    try:
        load: float | None = os.getloadavg()[0]
    except OSError:  # not available on this platform
        load = None
    return HostInfo(
        cpu_count=psutil.cpu_count() or 1,
        cpu_percent=float(psutil.cpu_percent(interval=None)),
        load_1m=load,
        memory_total=int(memory.total),
        memory_used=int(memory.total - memory.available),
    )


def _read_safely(index: int | None, uuid: str | None, read: Any) -> dict[str, Any]:
    """``read(nvml, handle)`` for one GPU, or {} when NVML or the GPU cannot be read."""
    try:
        nvml = _nvml()
    except Exception as exc:
        log.debug("NVML unavailable: %s", exc)
        return {}
    if nvml is None:
        return {}
    try:
        return dict(read(nvml, _handle(nvml, index, uuid)))
    except Exception as exc:
        log.warning("%s", _why_unreadable(exc, uuid or f"#{index or 0}"))
        return {}
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:
            log.debug("nvmlShutdown failed: %s", exc)


def gpu_facts(index: int | None = 0, uuid: str | None = None) -> dict[str, Any]:
    """What does not change while a model is timed: the GPU's name and UUID, the driver and the
    CUDA version it supports (nvmlSystemGetCudaDriverVersion, e.g. 12040 → "12.4")."""

    def read(nvml: Any, handle: Any) -> dict[str, Any]:
        cuda = _optional(nvml.nvmlSystemGetCudaDriverVersion)
        return {
            "gpu_name": _as_str(nvml.nvmlDeviceGetName(handle)),
            "gpu_uuid": _as_str(nvml.nvmlDeviceGetUUID(handle)),
            "driver": _as_str(_optional(nvml.nvmlSystemGetDriverVersion) or ""),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else "",
        }

    return _read_safely(index, uuid, read)


def device_use(nvml: Any, handle: Any, processes: Any = None) -> dict[str, Any]:
    """The device's used memory and how many compute processes NVML lists on it: what a worker
    whose PIDs NVML does not know (its own PID namespace) measures its model process by."""
    memory = _optional(nvml.nvmlDeviceGetMemoryInfo, handle)
    if processes is None:
        processes = _processes(nvml, handle)
    return {
        "device_memory_used_bytes": int(memory.used) if memory is not None else None,
        "compute_processes": len(processes),
    }


def gpu_device_use(index: int | None = 0, uuid: str | None = None) -> dict[str, Any]:
    """``device_use`` of one GPU; {} when it cannot be read."""
    return _read_safely(index, uuid, device_use)


def gpu_sample(
    index: int | None = 0, uuid: str | None = None, pid: int | None = None
) -> dict[str, Any]:
    """The GPU as it is now: SM and memory clocks (MHz), temperature, power, the energy counter,
    and the device memory process ``pid`` holds (NVML's per-process usedGpuMemory; None when
    NVML lists no such process, e.g. a worker in its own PID namespace, or cannot tell)."""

    def read(nvml: Any, handle: Any) -> dict[str, Any]:
        power = _optional(nvml.nvmlDeviceGetPowerUsage, handle)
        sample: dict[str, Any] = {
            "sm_clock_mhz": _optional(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
            "memory_clock_mhz": _optional(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
            "temperature_c": _optional(
                nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU
            ),
            "power_w": power / 1000.0 if power is not None else None,
            # Millijoules since the driver loaded (Volta and newer; None elsewhere): the timing
            # phase's energy is the difference between its start and end readings.
            "energy_mj": _optional(nvml.nvmlDeviceGetTotalEnergyConsumption, handle),
        }
        if pid is not None:
            processes = _processes(nvml, handle)
            mine = [p.used_memory for p in processes if p.pid == pid]
            sample["process_memory_bytes"] = mine[0] if mine else None
            sample.update(device_use(nvml, handle, processes))
        return sample

    return _read_safely(index, uuid, read)
