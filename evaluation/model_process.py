"""The model's process: a fresh interpreter that loads and runs one untrusted model, confined.

Started by the worker (``evaluation.sandbox.ModelProcess``) with ``python -m
evaluation.model_process``, or forked, from ``main`` on, by the worker's model process server
(``evaluation.model_server``, started the same way), with a clean environment (none of the
portal's settings or credentials), no file descriptor but its channel (stdin, stdout) and
stderr, and a private scratch directory as its working and temporary directory. Its first
message says how to confine itself and warm up. It confines itself (``evaluation.confine``: no
network, a read-only view of its libraries, no exec, no fork, resource limits), warms
onnxruntime up and says it is ready. Then
it takes one job: the model's bytes, the inputs and how to run them; it sends back the
predictions, the timing and, when asked, the costs a run observes. It never sees the targets:
the worker scores the predictions. While it runs, the timing lock, the device readings and the
progress bar are the worker's: asked for over the channel (``RemoteHooks``).

A fork of the worker would carry the worker's secrets in its memory; this process starts from an
exec (its own, or the server's) and imports nothing of Django or of the portal's settings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator
from typing import Any

from evaluation.channel import Channel, Message
from evaluation.confine import Confinement, Protections, confine
from evaluation.run_report import EngineLog

ENGINE_LIBRARIES_BYTES = 256 << 20
THREAD_STACK_BYTES = 8 << 20  # glibc's default stack size, as onnxruntime's threads get it


def _vm_size() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


class RemoteHooks:
    """The runner's TimingHooks, answered by the worker over the channel."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.facts: dict[str, Any] = {}
        # What the worker answered to "scoring": whether a timing wanted the device as the turn
        # began, for the runner's first ask (before its warm-up) without a round trip of its own.
        self.due_on_entry: bool | None = None

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        self.channel.send({"op": op, **fields})
        return self.channel.receive().header

    @contextlib.contextmanager
    def lock(self) -> Iterator[bool]:
        held = bool(self.ask("lock").get("held"))
        try:
            yield held
        finally:
            self.ask("unlock")

    def observe(self) -> dict[str, Any]:
        reading = self.ask("observe").get("reading")
        return reading if isinstance(reading, dict) else {}

    @contextlib.contextmanager
    def scoring(self) -> Iterator[RemoteHooks]:
        self.due_on_entry = bool(self.ask("scoring").get("due"))
        try:
            yield self
        finally:
            self.due_on_entry = None
            self.ask("scored")

    def due(self) -> bool:  # the scoring gate's side (evaluation.timing.ScoringGate)
        due, self.due_on_entry = self.due_on_entry, None
        return due if due is not None else bool(self.ask("due").get("due"))

    def give_way(self, limit_s: float) -> float:
        return float(self.ask("give_way", limit_s=limit_s).get("waited_s", 0.0))

    def progress(self, fraction: float) -> None:
        self.channel.send({"op": "progress", "fraction": fraction})


def _run(channel: Channel, job: Message, allow_test_hook: bool) -> tuple[dict[str, Any], Any]:
    """Load and run the job's model; its result (the header and the predictions), or raise
    what went wrong."""
    from evaluation.run_report import profile_one_batch
    from evaluation.runner import (
        DeviceConfig,
        EvaluationError,
        create_session,
        first_inputs_batch,
        out_of_memory_error,
        run_model,
    )
    from evaluation.spec import TaskSpec
    from evaluation.timing import TimingHooks, TimingProtocol

    spec_fields = dict(job.header["spec"])
    spec_fields["timing"] = TimingProtocol(**spec_fields["timing"])
    for key in ("input_shape", "output_shape"):
        spec_fields[key] = tuple(spec_fields[key])
    spec = TaskSpec(**spec_fields)
    device = DeviceConfig(**job.header["device"])
    model_bytes, inputs = job.blobs["model"], job.arrays["inputs"]
    channel.send({"op": "loading"})  # the worker starts measuring this process's memory
    channel.receive()
    hook = job.header.get("test_hook")
    try:
        if hook and allow_test_hook:  # tests only: hostile code where a model would be parsed
            exec(compile(hook, "<test hook>", "exec"), {"model_bytes": model_bytes})
        session = create_session(model_bytes, device)
    except MemoryError as exc:  # the address-space limit, hit outside onnxruntime's arena
        raise out_of_memory_error(exc, device) or EvaluationError(str(exc)) from exc
    channel.send({"op": "loaded"})
    remote = RemoteHooks(channel)
    hooks = TimingHooks(lock=remote.lock, observe=remote.observe, scoring=remote.scoring)
    report: dict[str, Any] = {}

    def profiled(gate: Any) -> None:
        """The run report's batch, in the scoring turn of the predictions (before the timing):
        it gives way to another worker's timing as scoring does."""
        nonlocal report
        try:
            if gate.due():
                gate.give_way(spec.time_limit_s)
            batch = first_inputs_batch(inputs, spec)
            report = profile_one_batch(model_bytes, batch, device, tempfile.gettempdir())
        except Exception as exc:  # the result stands without it
            report = {"error": f"no profile: {type(exc).__name__}"}

    run = run_model(
        session,
        inputs,
        spec,
        device,
        progress=remote.progress,
        hooks=hooks,
        in_turn=profiled if job.header.get("report") else None,
    )
    costs = None
    if job.header.get("complete_costs"):
        with contextlib.suppress(Exception):  # the result stands without them
            # Imported here: it imports onnx, which most jobs never need.
            from evaluation.profiled_shapes import costs_from_run

            batch = first_inputs_batch(inputs, spec)
            costs = dataclasses.asdict(costs_from_run(model_bytes, batch))
    timing = dataclasses.asdict(run.timing)
    header: dict[str, Any] = {"op": "result", "timing": timing, "provider": run.provider}
    header["costs"] = costs
    header["scoring_wait_s"] = run.scoring_wait_s
    header["report"] = report
    return header, {"preds": run.preds}


def _error(exc: BaseException) -> dict[str, Any]:
    from evaluation.runner import DeviceUnavailable, EvaluationError

    if isinstance(exc, EvaluationError):
        kind = "device" if isinstance(exc, DeviceUnavailable) else "model"
        return {"op": "error", "kind": kind, "message": str(exc)}
    return {"op": "error", "kind": "internal", "message": traceback.format_exc()}


def _start(channel: Channel, start: Message, base_vm: int | None) -> Protections:
    """This process confined, the engine imported, onnxruntime warmed up when the worker says so.

    Confined before onnxruntime is imported: importing it starts a thread, and an unshared
    namespace needs a single-threaded process, Landlock binds the threads started after it. numpy
    is imported already (the channel's), before confinement, which counts its mappings in; onnx
    is imported only for a job that asks for costs (evaluation.profiled_shapes). A process forked
    by the model process server (``evaluation.model_server``) has onnxruntime mapped already:
    ``base_vm`` is what the server mapped before it, so its limit is the one it would have had."""
    config = start.header["config"]
    added = config.get("address_space_added_bytes")
    threads = config["device"].get("intra_op_threads") or os.cpu_count() or 1
    protections = confine(
        Confinement(
            scratch=config["scratch"],
            read_paths=tuple(config["read_paths"]),
            device_paths=tuple(config.get("device_paths", ())),
            cpu_seconds=config.get("cpu_seconds"),
            address_space_bytes=(
                (base_vm or _vm_size()) + _engine_bytes(threads) + int(added) if added else None
            ),
            network_namespace=bool(config.get("network_namespace", True)),
            cuda_driver=bool(config["device"].get("use_cuda")),
        )
    )
    import numpy as np

    from evaluation import runner

    channel.receive()  # the worker's go-ahead: on a GPU, its turn on the device
    device = runner.DeviceConfig(**config["device"])
    inputs = np.zeros(config["warm_up_input"], dtype=np.float32)
    runner.create_session(start.blobs["warm_up_model"], device).run(None, {"x": inputs})
    return protections


def _engine_bytes(threads: int) -> int:
    """Address space onnxruntime and the engine map beside a model: their libraries, and a stack
    for each of the session's threads."""
    return ENGINE_LIBRARIES_BYTES + threads * THREAD_STACK_BYTES


def main(base_vm: int | None = None) -> None:
    channel = Channel(0, os.dup(1))
    os.dup2(2, 1)  # a library's print must not land in the channel
    try:
        start = channel.receive()  # how to confine and warm up (never on the command line)
        protections = _start(channel, start, base_vm)
    except BaseException:
        print(traceback.format_exc(), file=sys.stderr)
        os._exit(3)
    channel.send({"op": "ready", "protections": protections.as_dict()})
    job = channel.receive()
    if job.op != "evaluate":
        os._exit(0)
    log = EngineLog()  # what onnxruntime writes to stderr, for the participant's run report
    try:
        with log.capture():
            header, arrays = _run(channel, job, bool(start.header["config"].get("allow_test_hook")))
        channel.send({**header, "engine_log": log.lines()}, arrays=arrays)
    except BaseException as exc:
        channel.send({**_error(exc), "engine_log": log.lines()})
    with contextlib.suppress(Exception):  # until the worker has read what it needs and stops it
        channel.receive()
    os._exit(0)


if __name__ == "__main__":
    main()
