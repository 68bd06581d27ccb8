"""The runner's evaluation loop against a bare onnxruntime loop on the same session, data and
thread settings: what the GPU acceptance check holds to its limit (``workers.gpu_acceptance``)
and ``benchmarks/runner_overhead.py`` reports. The method is in that benchmark's docstring.

The runner is timed as a worker runs it: ``predict`` with the progress callback and the scoring
gate a model process gives it (``evaluation.model_process.RemoteHooks``), whose questions go over
a channel to the worker's answers (``evaluation.sandbox._Conversation``, on a thread) with
the job's own hooks (``workers.measurement.Measurement``: the scoring turn in the evaluation
queue's Redis). Only the worker's write of the progress to the database is left out: it is the
worker's, in another process, and never in the model process's loop.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort

from evaluation.channel import Channel
from evaluation.metrics import compute_family
from evaluation.model_process import RemoteHooks
from evaluation.runner import (
    CUDA,
    Dataset,
    DeviceConfig,
    GiveWay,
    create_session,
    padded_batches,
    predict,
)
from evaluation.sandbox import ModelProcess, _Conversation
from evaluation.spec import TaskSpec
from submissions.demo import baselines, datasets
from submissions.demo.tasks import TASKS
from workers.measurement import Measurement

# The session's methods that run a model: which of them each side calls, and how often, is
# counted (``calls``), so that a figure is only ever given for the same call on both sides.
RUN_METHODS = ("run", "run_with_iobinding", "run_with_ort_values", "run_with_ortvaluevector")


def seconds(fn: Callable[[], Any]) -> float:
    """Wall-clock seconds of one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@dataclass(frozen=True)
class Workload:
    name: str
    model: bytes
    data: Dataset
    spec: TaskSpec


def _spec(task: dict[str, object], limit_s: float = 600) -> TaskSpec:
    return TaskSpec(
        batch_size=int(task["batch_size"]),  # type: ignore[call-overload]
        input_shape=tuple(task["input_shape"]),  # type: ignore[arg-type]
        input_dtype="float32",
        output_shape=tuple(task["output_shape"]),  # type: ignore[arg-type]
        metric=str(task["metric"]),
        max_model_bytes=1 << 30,
        time_limit_s=limit_s,
    )


def workloads() -> list[Workload]:
    """The digits logistic-regression baseline and the 3x3 conv depth baseline of the demo."""
    digits = baselines.digits_baselines(datasets.load_digits_train())
    logistic = next(b for b in digits if b.name == "logistic-regression")
    conv = next(b for b in baselines.depth_baselines() if b.name == "conv-3x3")
    depth_data = datasets.build_depth_dataset(n=32, seed=0)
    return [
        Workload(
            "digits logistic regression, 1,000 × [1, 8, 8], batch 32",
            logistic.onnx_bytes,
            Dataset.from_arrays(datasets.load_digits_test()),
            _spec(TASKS["digits"]),
        ),
        Workload(
            "depth 3×3 conv, 32 × [3, 448, 448] → [448, 448], batch 8",
            conv.onnx_bytes,
            Dataset.from_arrays(depth_data),
            _spec(TASKS["depth-448"]),
        ),
    ]


def bare_loop(
    session: ort.InferenceSession, inputs: np.ndarray, batch_size: int, warmup: int
) -> np.ndarray:
    """What anyone would write with onnxruntime alone to get the predictions of a dataset at a
    fixed batch shape (with IOBinding on CUDA, as the runner does), passing one ``RunOptions`` to
    every run: an evaluator needs one to stop a run that overruns its limit."""
    name, out = session.get_inputs()[0].name, [session.get_outputs()[0].name]
    batches = padded_batches(inputs, batch_size)
    options = ort.RunOptions()
    if session.get_providers()[0] != CUDA:
        for _ in range(warmup):
            session.run(out, {name: batches[0]}, options)
        outputs = [session.run(out, {name: b}, options)[0] for b in batches]
        return np.concatenate(outputs)[: len(inputs)]
    outputs = []
    for batch in [batches[0]] * warmup + batches:
        binding = session.io_binding()
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(batch, "cuda", 0))
        binding.bind_output(out[0], "cuda", 0)
        session.run_with_iobinding(binding, options)
        outputs.append(binding.copy_outputs_to_cpu()[0])
    return np.concatenate(outputs[warmup:])[: len(inputs)]


class _WorkerEnd(ModelProcess):
    """The worker's end of a model process's channel, where the model process is this one: the
    worker's own answers (``_Conversation``) over a pipe, with no process to watch."""

    def __init__(self, channel: Channel) -> None:  # no process is started
        self.channel = channel

    def alive(self) -> bool:
        return True


@contextlib.contextmanager
def production_hooks(spec: TaskSpec, device: DeviceConfig) -> Iterator[RemoteHooks]:
    """The hooks ``predict`` gets in a worker's model process, answered over a pipe by the
    worker's code with the job's ``Measurement`` hooks, on a thread: a forked process would do
    as a worker's, but this process may have initialised CUDA (``gpu_check``), after which a
    fork is undefined. The thread and the pipe are stopped on every exit."""
    to_worker, from_model = os.pipe()
    to_model, from_worker = os.pipe()
    measured = Measurement(device, lock_wait_s=spec.timing.lock_wait_s)
    progress: list[float] = []  # the worker's database write of it is not the model's loop
    worker = _WorkerEnd(Channel(to_worker, from_worker))
    conversation = _Conversation(worker, measured.hooks(), progress.append, spec.time_limit_s)
    thread = threading.Thread(target=conversation.until_result, name="worker-end", daemon=True)
    thread.start()
    remote = RemoteHooks(Channel(to_model, from_model))
    try:
        yield remote
    finally:
        with contextlib.suppress(OSError):
            remote.channel.send({"op": "result"})  # the worker's end stops answering
        thread.join(timeout=10)
        for fd in (to_worker, from_model, to_model, from_worker):
            os.close(fd)


def runner_seconds(
    remote: RemoteHooks,
    session: ort.InferenceSession,
    inputs: np.ndarray,
    spec: TaskSpec,
    device: DeviceConfig,
) -> tuple[float, np.ndarray]:
    """``predict`` as ``evaluation.runner.run_model`` calls it in a model process: inside the
    scoring turn, with its gate and the progress callback; the seconds it took and its
    predictions. The turn is entered and left outside the clock, once per evaluation, like the
    model's loading."""
    with remote.scoring() as gate:
        start = time.perf_counter()
        turn = GiveWay(gate, spec.time_limit_s)
        preds = predict(session, inputs, spec, device, remote.progress, turn)
        return time.perf_counter() - start, preds


def bare_seconds(remote: RemoteHooks, fn: Callable[[], Any]) -> float:
    """The seconds ``fn`` took, started as ``runner_seconds`` starts ``predict``: right after the
    worker has answered the scoring turn's start. Each side then starts from the same state of
    the CPU's caches, which that round trip and the Redis call behind it leave colder than a loop
    run straight after another."""
    with remote.scoring():
        return seconds(fn)


def calls(session: ort.InferenceSession, fn: Callable[[], Any]) -> tuple[Counter[str], Any]:
    """Which of the session's run methods (``RUN_METHODS``) ``fn`` called, how often; its result."""
    counted: Counter[str] = Counter()

    def counting(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return method(*args, **kwargs)

        return run

    for name in RUN_METHODS:
        setattr(session, name, counting(name, getattr(session, name)))
    try:
        result = fn()
    finally:
        for name in RUN_METHODS:
            delattr(session, name)  # the class's own method again
    return counted, result


def measure(
    work: Workload, device: DeviceConfig, budget_s: float, *, as_worker: bool = True
) -> dict[str, object]:
    """Rounds of runner, bare loop and a second bare loop (the noise control), in rotating order,
    for about ``budget_s`` seconds and at least 7 rounds; then one more of each, counting the
    session's run calls each makes (``calls``) and comparing their predictions.

    ``as_worker``: the runner as a worker's model process runs it, each side starting right after
    a scoring turn's round trip (``runner_seconds``, ``bare_seconds``); else ``predict`` alone,
    with nobody to give way to and no progress, back to back with the bare loops (the measure of
    the rows before the runner was timed as a worker runs it)."""
    session = create_session(work.model, device)
    inputs = work.data.inputs.astype(work.spec.input_dtype)
    size, spec, warmup = work.spec.batch_size, work.spec, device.warmup_runs

    def bare() -> np.ndarray:
        return bare_loop(session, inputs, size, warmup)

    with contextlib.ExitStack() as stack:
        if as_worker:
            remote = stack.enter_context(production_hooks(spec, device))

            def runner() -> tuple[float, np.ndarray]:
                return runner_seconds(remote, session, inputs, spec, device)

            def bare_s() -> float:
                return bare_seconds(remote, bare)

        else:

            def runner() -> tuple[float, np.ndarray]:
                start = time.perf_counter()
                preds = predict(session, inputs, spec, device)
                return time.perf_counter() - start, preds

            def bare_s() -> float:
                return seconds(bare)

        contestants = {"runner": lambda: runner()[0], "bare": bare_s, "control": bare_s}
        order = list(contestants)
        rounds: list[dict[str, float]] = []
        deadline = time.monotonic() + budget_s
        while len(rounds) < 7 or time.monotonic() < deadline:
            order = order[1:] + order[:1]  # each goes first, second and third in turn
            rounds.append({name: contestants[name]() for name in order})
        runner_calls, (_, preds) = calls(session, runner)
    bare_calls, bare_preds = calls(session, bare)
    scoring_s = seconds(
        lambda: compute_family(work.spec.metric, preds, work.data.targets, work.spec.metric_options)
    )
    return {
        "workload": work.name,
        "as_worker": as_worker,
        "provider": session.get_providers()[0],
        "runner_calls": dict(runner_calls),
        "bare_calls": dict(bare_calls),
        "same_call": runner_calls == bare_calls and len(runner_calls) == 1,
        "same_predictions": bool(np.array_equal(preds, bare_preds)),
        "bare_ms": 1000 * statistics.median(r["bare"] for r in rounds),
        "runner_ms": 1000 * statistics.median(r["runner"] for r in rounds),
        "ratio": statistics.median(r["runner"] / r["bare"] for r in rounds),
        "control": statistics.median(r["control"] / r["bare"] for r in rounds),
        "scoring_ms": 1000 * scoring_s,
        "repeats": len(rounds),
    }


def shown(row: dict[str, object], *, provider: str | None = None) -> str | None:
    """Why ``row`` does not show what its figure claims (the same onnxruntime call, the same
    number of times, on ``provider`` when given, with the same predictions); None when it does."""
    if provider is not None and row["provider"] != provider:
        return f"the session ran on {row['provider']}, not {provider}"
    if not row["same_call"]:
        return (
            f"the runner and the bare loop made different calls: runner {row['runner_calls']}, "
            f"bare loop {row['bare_calls']}"
        )
    if not row["same_predictions"]:
        return "the runner's predictions differ from the bare loop's"
    return None
