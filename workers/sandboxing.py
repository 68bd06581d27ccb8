"""The worker's model processes (``evaluation.sandbox``): configured from the settings, one
started ahead of its job where a horse can (a ready horse warms one up while it waits).

The work horse never loads a model itself: it hands the model to a model process, answers its
questions (the device's timing lock, the readings), scores the predictions and saves.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import tempfile
from pathlib import Path

from django.conf import settings

from evaluation.confine import Protections, default_read_paths, probe
from evaluation.runner import DeviceConfig
from evaluation.sandbox import ModelProcess, SandboxSettings

log = logging.getLogger(__name__)
PROTECTIONS = ("no_new_privs", "seccomp", "landlock", "netns", "rlimits")
# The model process started ahead (a ready horse's), for the device it was started for.
_spare: tuple[DeviceConfig, ModelProcess] | None = None


def device_paths(device: DeviceConfig) -> tuple[str, ...]:
    """The device files a model process may open read-write: the GPU's, on CUDA."""
    return tuple(sorted(glob.glob("/dev/nvidia*"))) if device.use_cuda else ()


def scratch_root(device: DeviceConfig) -> Path:
    """Where this worker's model processes get their scratch directories: one folder per worker,
    which it empties when it starts and stops (a horse killed outright leaves its model
    process's behind)."""
    return Path(tempfile.gettempdir()) / f"portal-models-{device.worker_name}"


def clear_scratch(device: DeviceConfig) -> None:
    """Remove what this worker's model processes left; only while none of them runs."""
    shutil.rmtree(scratch_root(device), ignore_errors=True)


def sandbox_settings(device: DeviceConfig) -> SandboxSettings:
    extra = tuple(os.path.realpath(p) for p in settings.EVAL_SANDBOX_READ_PATHS)
    root = scratch_root(device)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return SandboxSettings(
        scratch_root=str(root),
        read_paths=(*default_read_paths(), *extra),
        device_paths=device_paths(device),
        cpu_seconds=settings.EVAL_SANDBOX_CPU_SECONDS,
        allow_test_hook=bool(settings.EVAL_SANDBOX_TEST_HOOK),
    )


def start_ahead(device: DeviceConfig) -> None:
    """Start this process's next model process now, to wait, warm, for the job."""
    global _spare
    if _spare is None:
        _spare = (device, ModelProcess(sandbox_settings(device), device))


def model_process_ready() -> None:
    """Wait until the model process started ahead has warmed up (a ready horse's warm-up)."""
    if _spare is not None:
        _spare[1].wait_ready()


def model_process(device: DeviceConfig) -> ModelProcess:
    """The model process for this process's job: the one started ahead, or a new one."""
    global _spare
    spare, _spare = _spare, None
    if spare is not None and spare[0] == device and spare[1].alive():
        return spare[1]
    if spare is not None:
        spare[1].stop()
    return ModelProcess(sandbox_settings(device), device)


def protections_check(device: DeviceConfig) -> tuple[Protections | None, str | None]:
    """What a model process of this worker gets (a short-lived probe), and why the worker must
    not start (a protection ``EVAL_SANDBOX_REQUIRE`` asks for is missing), or None."""
    unknown = sorted(set(settings.EVAL_SANDBOX_REQUIRE) - set(PROTECTIONS))
    if unknown:
        return None, f"EVAL_SANDBOX_REQUIRE names unknown protections: {', '.join(unknown)}"
    try:
        protections = probe(device_paths(device))
    except Exception as exc:
        log.exception("the model process's protections could not be probed")
        if settings.EVAL_SANDBOX_REQUIRE:
            return None, f"the model process's protections could not be probed: {exc}"
        return None, None
    lacking = [p for p in settings.EVAL_SANDBOX_REQUIRE if p not in protections.active()]
    if lacking:
        why = "; ".join(protections.missing) or "not offered by this host"
        return protections, f"the model process lacks {', '.join(lacking)} ({why})"
    return protections, None
