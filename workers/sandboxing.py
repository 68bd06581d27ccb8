"""The worker's model processes (``evaluation.sandbox``): configured from the settings, forked
by the worker's model process server (``EVAL_MODEL_SERVER``, ``evaluation.model_server``) or
started directly, the next one started and warmed up while the worker is idle
(``EVAL_START_AHEAD``), and the running one killed on request (a cancel).

The worker never loads a model itself: it hands the model to a model process, answers its
questions (the device's timing lock, the readings), scores the predictions and saves.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from django.conf import settings
from rq.exceptions import StopRequested

from evaluation.confine import Protections, default_read_paths, probe
from evaluation.gpu import gpu_device_use
from evaluation.model_server import ModelServer, ServerUnavailable
from evaluation.runner import DeviceConfig
from evaluation.sandbox import ModelProcess, SandboxSettings, start_server
from evaluation.timing import ScoringGate, scoring_alone
from workers.device import nvml_target
from workers.measurement import Measurement

log = logging.getLogger(__name__)
PROTECTIONS = ("no_new_privs", "seccomp", "landlock", "netns", "rlimits")
# The model process started ahead, for the device it was started for.
_spare: tuple[DeviceConfig, ModelProcess] | None = None
# The model process of the job running now (``running_model_process``).
_running: ModelProcess | None = None
# Model processes killed at the end of their run and not reaped yet (``reap_stopped``).
_unreaped: list[ModelProcess] = []
# The worker's model process server; once it failed, this worker starts its model processes
# directly until it stops (``_server_failed``).
_server: ModelServer | None = None
_server_failed = False
# The worker was asked to stop (SIGINT, SIGTERM) during a job: the job starts no further
# timing session, so a stopping worker's job ends within the first session's bounds.
_stopping = False


def device_paths(device: DeviceConfig) -> tuple[str, ...]:
    """The device files a model process may open read-write: the GPU's, on CUDA."""
    return tuple(sorted(glob.glob("/dev/nvidia*"))) if device.use_cuda else ()


def scratch_root(device: DeviceConfig) -> Path:
    """Where this worker's model processes get their scratch directories: one folder per worker,
    which it empties when it starts and stops (a worker killed outright leaves its model
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


def new_model_process(device: DeviceConfig) -> ModelProcess:
    """A model process forked by the worker's server, or started directly when the server is
    off or failed."""
    sandbox = sandbox_settings(device)
    server = _model_server(sandbox.scratch_root)
    before = gpu_device_use(*nvml_target()) if device.use_cuda else {}
    process = None
    if server is not None:
        try:
            process = ModelProcess(sandbox, device, server)
        except ServerUnavailable as exc:
            _give_up_server(str(exc))
    process = process or ModelProcess(sandbox, device)
    process.device_before = before
    return process


def _model_server(scratch_root: str) -> ModelServer | None:
    global _server
    if not settings.EVAL_MODEL_SERVER or _server_failed:
        return None
    if _server is not None and not _server.alive():
        _give_up_server(f"it ended ({_server.process.returncode})")
        return None
    if _server is None:
        try:
            _server = start_server(scratch_root)
        except OSError as exc:
            _give_up_server(f"it could not be started ({exc})")
    return _server


def _give_up_server(why: str) -> None:
    """Said once: from now on this worker starts each model process from a fresh interpreter."""
    global _server_failed
    log.warning("model process server given up, model processes started directly: %s", why)
    _server_failed = True
    stop_server()


def stop_server() -> None:
    """Stop the worker's model process server and the model processes it forked (the worker
    stops); the next model process starts a new one, unless the server was given up."""
    global _server
    server, _server = _server, None
    if server is not None:
        server.stop()


def server_pid() -> int | None:
    """The pid of the worker's model process server, while it runs."""
    server = _server
    return server.process.pid if server is not None and server.alive() else None


def start_ahead(device: DeviceConfig) -> None:
    """Start this worker's next model process now, to wait, warm, for the job."""
    global _spare
    reap_stopped()  # the last job's gone first: its memory is not counted as the next one's
    if _spare is None:
        _spare = (device, new_model_process(device))


def prepare_ahead(device: DeviceConfig) -> None:
    """While the worker is idle: its next model process started and warmed up (onnxruntime's
    set-up, and on a GPU the CUDA context, cuBLAS and cuDNN), so the job does not wait for
    them. Nothing here may stop the worker but a stop request: a step that fails is done again
    when the job runs."""
    try:
        start_ahead(device)
        with _turn_on_device(device) as turn:
            if turn.due():
                turn.give_way(settings.EVAL_TIMING_LOCK_WAIT_S)
            if _spare is not None:
                _spare[1].wait_ready()
    except StopRequested:  # rq's signal handler: the worker was asked to stop meanwhile
        stop_spare()
        raise
    except Exception as exc:
        log.warning("model process not started ahead (%s)", exc)
        stop_spare()


def _turn_on_device(device: DeviceConfig) -> AbstractContextManager[ScoringGate]:
    """On a GPU the model process's warm-up run (cuDNN's algorithm search, cuBLAS's first
    products: kernels of its own) is a reader of the device's timing lock, as scoring is:
    it waits while another worker's timing holds or waits for the GPU, and a timing that starts
    meanwhile waits for it. The CPU's tiny Add disturbs nobody and takes no turn."""
    if not device.use_cuda:
        return scoring_alone()
    try:  # NVML names the device's lock; Redis failing is handled by the turn itself
        return Measurement(device, lock_wait_s=settings.EVAL_TIMING_LOCK_WAIT_S).scoring()
    except Exception as exc:
        log.warning("warm-up without a turn on the device (%s)", exc)
        return scoring_alone()


def stop_spare() -> None:
    """Stop the model process started ahead, if any, and reap those killed (the worker stops)."""
    global _spare
    spare, _spare = _spare, None
    if spare is not None:
        spare[1].stop()
    reap_stopped()


def model_process(device: DeviceConfig) -> ModelProcess:
    """The model process for a job: the one started ahead, or a new one."""
    global _spare
    reap_stopped()
    spare, _spare = _spare, None
    if spare is not None and spare[0] == device and spare[1].alive():
        return spare[1]
    if spare is not None:
        spare[1].stop()
    return new_model_process(device)


@contextmanager
def running_model_process(device: DeviceConfig) -> Iterator[ModelProcess]:
    """The job's model process, known as the running one (``kill_running``) until it is
    killed at the end. Reaping it (the kernel unmapping onnxruntime, the server's word on its
    exit, its scratch removed) waits for ``reap_stopped``: after the result is saved, or before
    the next model process starts, whichever comes first."""
    global _running
    process = model_process(device)
    _running = process
    try:
        yield process
    finally:
        _running = None
        process.kill()
        _unreaped.append(process)


def reap_stopped() -> None:
    """Reap the model processes killed at the end of their runs (``ModelProcess.stop``)."""
    while _unreaped:
        _unreaped.pop().stop()


def running_pid() -> int | None:
    """The pid of the running job's model process, for the worker's card."""
    process = _running
    return process.pid if process is not None else None


def kill_running() -> None:
    """Kill the running job's model process (a cancel, from rq's command thread): the job sees
    it die and ends. Only a signal: the job's own thread reaps it and cleans up."""
    process = _running
    if process is not None and process.alive():
        process.kill()


def protections_check(device: DeviceConfig) -> tuple[Protections | None, str | None]:
    """What a model process of this worker gets (a short-lived probe), and why the worker must
    not start (a protection ``EVAL_SANDBOX_REQUIRE`` asks for is missing), or None."""
    unknown = sorted(set(settings.EVAL_SANDBOX_REQUIRE) - set(PROTECTIONS))
    if unknown:
        return None, f"EVAL_SANDBOX_REQUIRE names unknown protections: {', '.join(unknown)}"
    try:
        protections = probe(device_paths(device), cuda_driver=device.use_cuda)
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


def set_stopping(stopping: bool) -> None:
    """Set by the worker: True when it was asked to stop, False when it starts."""
    global _stopping
    _stopping = stopping


def stopping() -> bool:
    return _stopping
