"""GPU facts from NVML (nvidia-ml-py), for worker configuration and stats.

NVML is the one GPU boundary the tests fake: every call goes through ``_nvml()``, which returns
the ``pynvml`` module or None when there is no usable NVIDIA driver. Any NVML error becomes "no
GPU" or a logged warning, never an exception for the caller. NVML does not initialise CUDA, so
the parent worker process may call it safely before forking work horses.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger(__name__)


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _nvml() -> Any | None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ImportError, ...
        log.debug("NVML unavailable: %s", exc)
        return None
    return pynvml


def _optional(fn: Any, *args: Any) -> Any:
    """One NVML query that a GPU may not support; None instead of an error."""
    try:
        return fn(*args)
    except Exception as exc:
        log.debug("NVML query %s failed: %s", getattr(fn, "__name__", fn), exc)
        return None


def _as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _handle(nvml: Any, index: int | None, uuid: str | None) -> Any:
    if uuid:
        return nvml.nvmlDeviceGetHandleByUUID(uuid)
    return nvml.nvmlDeviceGetHandleByIndex(index or 0)


def gpu_info(index: int | None = 0, uuid: str | None = None) -> GpuInfo | None:
    """Stats for one GPU, found by UUID when given (stable across reboots), else by index."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        handle = _handle(nvml, index, uuid)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        rates = _optional(nvml.nvmlDeviceGetUtilizationRates, handle)
        power = _optional(nvml.nvmlDeviceGetPowerUsage, handle)
        limit = _optional(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
        return GpuInfo(
            index=int(_optional(nvml.nvmlDeviceGetIndex, handle) or index or 0),
            uuid=_as_str(nvml.nvmlDeviceGetUUID(handle)),
            name=_as_str(nvml.nvmlDeviceGetName(handle)),
            memory_total=int(memory.total),
            memory_used=int(memory.used),
            utilization_gpu=rates.gpu if rates is not None else None,
            utilization_memory=rates.memory if rates is not None else None,
            temperature_c=_optional(
                nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU
            ),
            power_w=power / 1000.0 if power is not None else None,
            power_limit_w=limit / 1000.0 if limit is not None else None,
        )
    except Exception as exc:  # GPU lost, bad UUID, driver went away mid-call
        log.warning("NVML could not read GPU %s: %s", uuid or index, exc)
        return None
    finally:
        _optional(nvml.nvmlShutdown)
