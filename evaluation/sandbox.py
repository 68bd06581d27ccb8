"""The worker's side of a model process (``evaluation.model_process``): start it (from a fresh
interpreter, or forked by the worker's ``evaluation.model_server``), hand it one job, answer its
questions, take its predictions, stop it.

Started ahead of its job where it can be (it imports onnxruntime and sets it up, CUDA included,
before any model is known), one process per model: whatever a model does to its process ends
with it. What comes back is checked as untrusted data: the predictions' shape and type, every
number of the timing.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.channel import Channel, ChannelClosed, ChannelError, ChannelTimeout, Message
from evaluation.confine import Protections, default_read_paths, engine_sites
from evaluation.costs import StaticCosts
from evaluation.limits import LOADING, time_limit_message
from evaluation.model_server import ForkedProcess, ModelServer
from evaluation.runner import DeviceConfig, DeviceUnavailable, EvaluationError, ModelRun
from evaluation.spec import TaskSpec
from evaluation.timing import Alone, ScoringGate, Timing, TimingHooks, TimingProtocol
from evaluation.warm_up import warm_up_model

ROOT = Path(__file__).resolve().parent.parent
PR_SET_PDEATHSIG = 1
# Environment variables a model process may be given (device selection, library paths, locale);
# nothing else of the worker's environment reaches it.
PASSED_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH", "LANG", "TZ")
# Each of its threads' libraries would start a pool of its own before confinement otherwise.
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# onnxruntime starts its telemetry's thread at import unless told not to: the model process
# server must stay single-threaded to fork, and a model process has nobody to report to.
NO_TELEMETRY = {"ORT_DISABLE_TELEMETRY": "1"}
READY_TIMEOUT_S = 120.0
POLL_S = 0.5
HEADER_MAX = 1 << 20  # a message's parts other than a result's predictions


class ModelProcessDied(EvaluationError):
    """The model's process ended without a result: killed (out of memory, CPU time) or crashed
    inside onnxruntime. Its ``returncode`` says how."""

    def __init__(self, message: str, returncode: int | None, why: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.why = why  # how it ended, for the operators' log


@dataclass(frozen=True)
class SandboxSettings:
    """How a worker's model processes are started and confined."""

    scratch_root: str = field(default_factory=tempfile.gettempdir)
    read_paths: tuple[str, ...] = field(default_factory=default_read_paths)
    device_paths: tuple[str, ...] = ()
    cpu_seconds: int | None = 3600
    network_namespace: bool = True
    allow_test_hook: bool = False  # tests only: a job may carry Python run where a model loads


@dataclass
class SandboxRun:
    run: ModelRun
    costs: StaticCosts | None
    # The participant's run report (evaluation.run_report) when asked for, and onnxruntime's
    # own log lines: data the model's process sent, checked for form only.
    report: dict[str, Any] = field(default_factory=dict)
    engine_log: list[dict[str, str]] = field(default_factory=list)


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _environment(scratch: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env.update(SINGLE_THREADED)
    env.update(NO_TELEMETRY)
    # The evaluation package, then numpy and onnxruntime where the worker found them: a host
    # whose onnxruntime-gpu is on the worker's PYTHONPATH must not run the model on another one.
    path = os.pathsep.join([str(ROOT), *engine_sites()])
    env.update(PATH="/usr/bin:/bin", HOME=scratch, TMPDIR=scratch, PYTHONPATH=path)
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    return env


def _started(scratch: str) -> tuple[subprocess.Popen[bytes], Channel]:
    """A model process from a fresh interpreter, its stdin and stdout the channel."""
    process = subprocess.Popen(
        [sys.executable, "-s", "-m", "evaluation.model_process"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_environment(scratch),
        cwd=scratch,
        close_fds=True,
        preexec_fn=_die_with_parent,
    )
    assert process.stdin is not None and process.stdout is not None
    return process, Channel(process.stdout.fileno(), process.stdin.fileno())


def _forked(server: ModelServer, scratch: str) -> tuple[ForkedProcess, Channel]:
    """A model process forked by the server, on two pipes as a started one has."""
    from_worker, to_child = os.pipe()
    from_child, to_worker = os.pipe()
    try:
        process = server.spawn(scratch, from_worker, to_worker)
    except BaseException:
        os.close(to_child)
        os.close(from_child)
        raise
    finally:  # the child holds its own copies
        os.close(from_worker)
        os.close(to_worker)
    return process, Channel(from_child, to_child)


def start_server(scratch_root: str) -> ModelServer:
    """The worker's model process server, with a model process's environment and fate."""
    return ModelServer(_environment(scratch_root), scratch_root, _die_with_parent)


class ModelProcess:
    """One model process, started at once; ``wait_ready`` (its warm-up runs then) and
    ``evaluate`` once, then ``stop``."""

    def __init__(
        self, settings: SandboxSettings, device: DeviceConfig, server: ModelServer | None = None
    ) -> None:
        """Forked by ``server`` when given (ServerUnavailable when it cannot), else started."""
        self.settings = settings
        self.scratch = tempfile.mkdtemp(prefix="model-", dir=settings.scratch_root)
        config = {
            "scratch": self.scratch,
            "read_paths": list(settings.read_paths),
            "device_paths": list(settings.device_paths),
            "cpu_seconds": settings.cpu_seconds,
            "address_space_added_bytes": device.cpu_memory_limit_bytes,
            "network_namespace": settings.network_namespace,
            "allow_test_hook": settings.allow_test_hook,
            "device": dataclasses.asdict(device),
        }
        model, inputs = warm_up_model(device)  # built here: the process need not import onnx
        config["warm_up_input"] = list(inputs.shape)
        self.process: subprocess.Popen[bytes] | ForkedProcess
        try:
            if server is not None:
                self.process, self.channel = _forked(server, self.scratch)
            else:
                self.process, self.channel = _started(self.scratch)
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        self._send({"op": "start", "config": config}, blobs={"warm_up_model": model})
        self.protections: Protections | None = None
        # The GPU's use before this process started, set by a worker that can read it
        # (workers.sandboxing): a worker NVML cannot tell the PIDs of measures the process by it.
        self.device_before: dict[str, Any] = {}

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Only a signal (a cancel, from another thread): ``stop`` reaps and cleans up."""
        with contextlib.suppress(OSError):
            self.process.kill()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> Protections:
        if self.protections is None:
            self._send({"op": "warm"})
            message = self._receive(time.monotonic() + timeout_s, "starting")
            if message.op != "ready":
                raise ChannelError(f"the model process said {message.op!r} before it was ready")
            self.protections = Protections.from_dict(message.header["protections"])
        return self.protections

    def evaluate(
        self,
        model_bytes: bytes,
        inputs: np.ndarray,
        spec: TaskSpec,
        device: DeviceConfig,
        *,
        hooks: TimingHooks,
        progress: Callable[[float], None] = lambda _: None,
        before_loading: Callable[[], None] = lambda: None,
        complete_costs: bool = False,
        test_hook: str | None = None,
        report: bool = False,
    ) -> SandboxRun:
        """Run the model in this process; EvaluationError (ModelProcessDied when the process
        ended without a word) for what the model did."""
        self.wait_ready()
        header: dict[str, Any] = {"op": "evaluate", "spec": dataclasses.asdict(spec)}
        header.update(device=dataclasses.asdict(device), complete_costs=complete_costs)
        header["test_hook"] = test_hook
        header["report"] = report
        self._send(header, arrays={"inputs": inputs}, blobs={"model": model_bytes})
        self._expect("loading", None)
        before_loading()
        self._send({"op": "go"})
        # Session creation is bounded here: no RunOptions reaches it inside the process.
        self._expect("loaded", time.monotonic() + spec.time_limit_s, spec.time_limit_s)
        result = _Conversation(self, hooks, progress, spec.time_limit_s).until_result()
        # The process waits, its memory still readable (peak memory), until ``stop``.
        return _checked(result, len(inputs), spec)

    def _expect(self, op: str, deadline: float | None, limit_s: float | None = None) -> None:
        try:
            message = self._receive(deadline, "loading the model")
        except ChannelTimeout:
            self.stop()
            raise EvaluationError(time_limit_message(limit_s or 0.0, LOADING)) from None
        if message.op == "error":
            raise _error_of(message)
        if message.op != op:
            raise EvaluationError(f"The model's process answered {message.op!r}, not {op!r}.")

    def _send(self, header: dict[str, Any], **parts: Any) -> None:
        try:
            self.channel.send(header, **parts)
        except ChannelClosed:
            raise self._died("receiving its job") from None

    def _receive(self, deadline: float | None, doing: str, max_bytes: int = HEADER_MAX) -> Message:
        """The next message; ModelProcessDied when the process ended, ChannelTimeout past
        ``deadline`` (None: no deadline)."""
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise ChannelTimeout(doing)
            wait = POLL_S if left is None else min(POLL_S, left)
            if self.channel.readable(wait):
                try:
                    return self.channel.receive(max_bytes=max_bytes)
                except ChannelClosed:
                    raise self._died(doing) from None
                except ChannelError as exc:  # the model's doing once a model is in it
                    self.stop()
                    raise EvaluationError(
                        f"The model's process broke the protocol while {doing}: {exc}."
                    ) from exc
            if not self.alive():
                raise self._died(doing)

    def _died(self, doing: str) -> ModelProcessDied:
        code = self.process.wait()
        if code < 0 and -code == signal.SIGXCPU:
            why = "it ran past its CPU time limit"
        elif code < 0:
            why = f"it was killed by signal {signal.Signals(-code).name}"
        else:
            why = f"it exited with status {code}"
        return ModelProcessDied(
            f"The evaluation process ended while {doing}: {why} (out of memory, a crash inside "
            "the model's operators, or its limits).",
            code,
            f"while {doing}: {why}",
        )

    def stop(self) -> None:
        """Kill the process if it still runs, reap it, remove its scratch directory."""
        if self.alive():
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        if isinstance(self.process, ForkedProcess):
            self.channel.close()
            self.process.close()
        else:
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class _Conversation:
    """The worker's answers while the model runs: the lock, the readings, the scoring turn."""

    def __init__(
        self,
        process: ModelProcess,
        hooks: TimingHooks,
        progress: Callable[[float], None],
        limit_s: float,
    ) -> None:
        self.process = process
        self.hooks = hooks
        self.progress = progress
        self.limit_s = limit_s  # the most it may ask to give way for: the task's time limit
        self.lock_context: contextlib.AbstractContextManager[bool] | None = None
        self.scoring_context: contextlib.AbstractContextManager[ScoringGate] | None = None
        self.gate: ScoringGate = Alone()

    def until_result(self) -> Message:
        try:
            while True:
                message = self.process._receive(None, "running the model", max_bytes=1 << 40)
                if message.op in ("result", "error"):
                    if message.op == "error":
                        raise _error_of(message)
                    return message
                self._answer(message)
        finally:
            self._leave()

    def _answer(self, message: Message) -> None:
        """Answer one question; what a runner never asks (a second lock, a number that is not
        one) ends the evaluation: the process is not the runner it should be."""
        op, reply = message.op, dict[str, Any]()
        try:
            if op == "progress":
                self.progress(min(max(_number(message.header.get("fraction")), 0.0), 1.0))
                return
            if op == "lock" and self.lock_context is None:
                self.lock_context = self.hooks.lock()
                reply["held"] = bool(self.lock_context.__enter__())
            elif op == "unlock":
                self._leave_lock()
            elif op == "observe":
                reply["reading"] = self.hooks.observe()
            elif op == "scoring" and self.scoring_context is None:
                self.scoring_context = self.hooks.scoring()
                self.gate = self.scoring_context.__enter__()
                reply["due"] = self.gate.due()  # the runner's first ask, answered in advance
            elif op == "scored":
                self._leave_scoring()
            elif op == "due":
                reply["due"] = self.gate.due()
            elif op == "give_way":
                wait_s = min(_number(message.header.get("limit_s")), self.limit_s)
                reply["waited_s"] = self.gate.give_way(max(wait_s, 0.0))
            else:
                raise ValueError(f"it asked for {op!r}, which it may not here")
        except ValueError as exc:
            raise EvaluationError(f"The model's process broke the protocol: {exc}.") from exc
        self.process._send({"op": "ok", **reply})

    def _leave_lock(self) -> None:
        context, self.lock_context = self.lock_context, None
        if context is not None:
            context.__exit__(None, None, None)

    def _leave_scoring(self) -> None:
        context, self.scoring_context, self.gate = self.scoring_context, None, Alone()
        if context is not None:
            context.__exit__(None, None, None)

    def _leave(self) -> None:
        self._leave_lock()
        self._leave_scoring()


def _engine_log(message: Message) -> list[dict[str, str]]:
    """onnxruntime's lines the model's process sent: a list of {level, text} strings."""
    lines = message.header.get("engine_log") or []
    if not isinstance(lines, list):
        return []
    return [
        {"level": str(line.get("level", ""))[:10], "text": str(line.get("text", ""))[:500]}
        for line in lines[:50]
        if isinstance(line, dict)
    ]


def _error_of(message: Message) -> Exception:
    """The model process's error as an exception; onnxruntime's lines in its ``engine_log``."""
    kind, text = message.header.get("kind"), str(message.header.get("message", ""))[:4000]
    error: EvaluationError | ModelProcessFailed
    if kind == "device":
        error = DeviceUnavailable(text)
    elif kind == "model":
        error = EvaluationError(text)
    else:
        error = ModelProcessFailed(text)
    error.engine_log = _engine_log(message)
    return error


class ModelProcessFailed(Exception):
    """An error on our side inside the model's process (its traceback), not an EvaluationError."""

    engine_log: list[dict[str, str]] = []  # each error sets its own


def _checked(message: Message, rows: int, spec: TaskSpec) -> SandboxRun:
    """The result as data of ours, or EvaluationError when it is not what a run gives."""
    try:
        preds = message.arrays["preds"]
        expected = (rows, *spec.output_shape)
        if preds.shape != expected or preds.dtype.kind not in "fiub":
            raise ValueError(f"predictions of shape {preds.shape} ({preds.dtype}), not {expected}")
        timing = _timing(message.header["timing"])
        costs = message.header.get("costs")
        run = ModelRun(
            preds=preds,
            timing=timing,
            provider=str(message.header["provider"]),
            scoring_wait_s=_number(message.header["scoring_wait_s"]),
        )
        report = message.header.get("report") or {}
        if not isinstance(report, dict):
            raise ValueError("a run report that is not an object")
        return SandboxRun(
            run=run,
            costs=_costs(costs) if costs else None,
            report=report,
            engine_log=_engine_log(message),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise EvaluationError(f"The model's process sent a result that is not one: {exc}") from exc


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    return float(value)


def _timing(fields: dict[str, Any]) -> Timing:
    fields = dict(fields)
    fields["protocol"] = TimingProtocol(**fields["protocol"])
    timing = Timing(**fields)
    for name in (
        "p50_ms",
        "p90_ms",
        "p95_ms",
        "p99_ms",
        "mean_ms",
        "spread",
        "duration_s",
        "held_s",
    ):
        _number(getattr(timing, name))
    for name in ("energy_per_batch_j", "average_power_w", "precision"):
        if getattr(timing, name) is not None:
            _number(getattr(timing, name))
    timing.kept_batches_ms = [_number(v) for v in timing.kept_batches_ms]
    timing.pass_medians_ms = [_number(v) for v in timing.pass_medians_ms]
    return timing


def _costs(fields: dict[str, Any]) -> StaticCosts:
    fields = dict(fields)
    fields["not_counted"] = tuple((str(op), int(n)) for op, n in fields["not_counted"])
    return StaticCosts(**fields)
