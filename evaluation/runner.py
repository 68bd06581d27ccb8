"""Run one model over one dataset at the task's fixed batch shape, score it and time it.

Pure: model bytes + arrays + TaskSpec + DeviceConfig in, EvalResult out. No Django, no Redis, so it
can be tested against a numpy reference and benchmarked against a bare onnxruntime loop.
Failures that are the model's fault raise EvaluationError with a message for the submitter.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.ma
import numpy.random
import onnxruntime as ort

from evaluation.limits import TimeLimit, time_limit_message
from evaluation.metrics import compute_family
from evaluation.sizes import MIB
from evaluation.spec import TaskSpec
from evaluation.timing import (
    Alone,
    RunGroup,
    ScoringGate,
    Timing,
    TimingHooks,
    measure,
)

if TYPE_CHECKING:  # the onnx package it needs is no import of a model process's at its start
    from evaluation.costs import StaticCosts

# numpy.ma and numpy.random load lazily, on the first np.percentile of a process: loaded with
# this module, at a worker's start rather than in its first job.

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
# onnxruntime's process-wide logger: errors only, as each session's own log_severity_level. At
# its default (warnings), onnxruntime-gpu 1.31 logs "No registered plugin EP device found for
# 'CUDAExecutionProvider'" on every CUDA session before it uses the built-in provider.
ort.set_default_logger_severity(3)
ProgressCallback = Callable[[float], None]
perf_counter = time.perf_counter
GRAPH_OPTIMIZATION_LEVELS = {
    "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
# How onnxruntime words an allocation that failed: its BFC arena, or C++ std::bad_alloc.
# The CPU arena says "Failed to allocate memory for requested buffer of size N"; the CUDA arena at
# its gpu_mem_limit says "Available memory of M is smaller than requested bytes of N" (BFCArena,
# seen on an H200 with onnxruntime-gpu 1.31).
_OUT_OF_MEMORY = re.compile(
    r"Failed to allocate memory|bad_alloc|out of memory|Available memory of \d+ is smaller than",
    re.IGNORECASE,
)
_REQUESTED_BYTES = re.compile(r"(?:buffer of size|requested bytes of) (\d+)")
_FAILING_NODE = re.compile(r"while running (\w+) node")
# What a failing InferenceSession.run raises: onnxruntime's own pybind exception types (they have
# no common base), RuntimeError for other C++ exceptions, MemoryError for std::bad_alloc.
ONNXRUNTIME_ERRORS: tuple[type[BaseException], ...] = (
    *(
        value
        for value in vars(ort.capi.onnxruntime_pybind11_state).values()
        if isinstance(value, type) and issubclass(value, Exception)
    ),
    RuntimeError,
    MemoryError,
)


class EvaluationError(Exception):
    """The model could not be evaluated; ``str(exc)`` is safe to show the submitter, and so is
    ``engine_log``: onnxruntime's own lines about the model (``evaluation.run_report``)."""

    engine_log: list[dict[str, str]] = []  # each error sets its own


class DeviceUnavailable(EvaluationError):
    """The worker could not run the task's device: not the model's fault (it costs no quota)."""


CUDA_NOT_ACTIVE = (
    "This task is timed on a GPU, but the CUDA execution provider did not run the model on the "
    "evaluation machine. This is not a problem with your model and does not count against your "
    "quota; operators have been told, and an operator can re-run it."
)


@dataclass(frozen=True)
class DeviceConfig:
    """How this worker runs sessions; fixed per worker so every model gets the same treatment."""

    worker_name: str = "worker"
    use_cuda: bool = False
    device_id: int = 0
    gpu_mem_limit: int | None = None
    cudnn_conv_algo_search: str = "EXHAUSTIVE"
    use_tf32: bool = False
    intra_op_threads: int = 0
    intra_op_spinning: bool = False
    inter_op_threads: int = 1
    graph_optimization: str = "all"
    warmup_runs: int = 2
    device_name: str = "CPU"
    # Address space one CPU evaluation may add to its model process (RLIMIT_AS, applied there);
    # None when unlimited or on CUDA, whose driver maps far more virtual memory than it uses.
    cpu_memory_limit_bytes: int | None = None

    def session_options(self) -> ort.SessionOptions:
        """The same options for every model on this worker, so timings compare like with like."""
        options = ort.SessionOptions()
        options.graph_optimization_level = GRAPH_OPTIMIZATION_LEVELS[self.graph_optimization]
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.intra_op_num_threads = self.intra_op_threads
        options.inter_op_num_threads = self.inter_op_threads
        options.log_severity_level = 3
        # onnxruntime's intra-op threads spin (busy-wait) after their work by default. They then
        # burn the cores the worker's own Python work, its database and Redis round trips and
        # the other workers' model processes need, and a small model's job took measurably longer
        # (docs/benchmarks-history.md). Off, they sleep when idle.
        options.add_session_config_entry(
            "session.intra_op.allow_spinning", "1" if self.intra_op_spinning else "0"
        )
        return options

    def providers(self) -> list[Any]:
        if not self.use_cuda:
            return [CPU]
        # Options as documented for the CUDA execution provider: bound the arena to this worker's
        # share of the GPU and grow it only by what is asked, so workers sharing a GPU coexist.
        cuda_options: dict[str, Any] = {
            "device_id": self.device_id,
            "arena_extend_strategy": "kSameAsRequested",
            "cudnn_conv_algo_search": self.cudnn_conv_algo_search.upper(),  # the EP's enum names
            # Copies on the compute stream (the documented default, stated so it cannot drift):
            # a timed run then includes no copy racing with the model's kernels.
            "do_copy_in_default_stream": "1",
            # The provider's default is on: float32 products rounded to TF32 (10-bit mantissa),
            # which moved the digits model's logits by 1.5e-3 from the CPU's on an H200.
            "use_tf32": "1" if self.use_tf32 else "0",
        }
        if self.gpu_mem_limit:
            cuda_options["gpu_mem_limit"] = int(self.gpu_mem_limit)
        return [(CUDA, cuda_options), CPU]


@dataclass(frozen=True)
class Dataset:
    inputs: np.ndarray
    targets: np.ndarray
    public: np.ndarray  # bool per row: True public, False private

    @classmethod
    def from_arrays(cls, arrays: Any) -> Dataset:
        inputs, targets = arrays["inputs"], arrays["targets"]
        if "split" in arrays:
            public = np.asarray(arrays["split"]).astype(str) == "public"
        else:
            public = np.ones(len(inputs), dtype=bool)
        return cls(inputs=inputs, targets=targets, public=public)


@dataclass
class EvalResult:
    score: float | None
    score_private: float | None
    metrics: dict[str, float]
    metrics_private: dict[str, float]
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    throughput: float
    provider: str
    device_name: str
    ort_version: str
    samples_evaluated: int
    batch_latencies_ms: list[float] = field(default_factory=list)
    peak_memory_bytes: int | None = None
    latency_p90_ms: float | None = None
    latency_mean_ms: float | None = None
    latency_spread: float | None = None
    latency_unstable: bool = False
    latency_sessions: int = 1
    latency_session_spread: float | None = None  # (max - min) / median of the sessions' p50s
    energy_per_sample_j: float | None = None  # the device's, over the timed passes (GPU)
    average_power_w: float | None = None
    timing_exclusive: bool = False
    timing: dict[str, Any] = field(default_factory=dict)
    costs: StaticCosts | None = None  # completed from a run where inspection's were incomplete
    run_report: dict[str, Any] = field(default_factory=dict)  # evaluation.run_report


def _mb(n: int) -> str:
    return f"{n / MIB:,.0f} MiB"  # binary units, named as such (evaluation/sizes.py)


def out_of_memory_error(exc: BaseException, device: DeviceConfig) -> EvaluationError | None:
    """A plain message when ``exc`` is a failed allocation (the memory limit was hit), else None."""
    text = str(exc)
    if not isinstance(exc, MemoryError) and not _OUT_OF_MEMORY.search(text):
        return None
    limit = device.gpu_mem_limit if device.use_cuda else device.cpu_memory_limit_bytes
    where = f" of {_mb(limit)}" if limit else ""
    requested = _REQUESTED_BYTES.search(text)
    node = _FAILING_NODE.search(text)
    detail = ""
    if requested:
        detail = f" It asked for {_mb(int(requested.group(1)))} at once"
        detail += f" (operator {node.group(1)})." if node else "."
    return EvaluationError(
        f"The model ran out of memory: it needs more than the per-evaluation limit{where} "
        f"on this worker.{detail}"
    )


def create_session(model_bytes: bytes, device: DeviceConfig) -> ort.InferenceSession:
    try:
        session = ort.InferenceSession(
            model_bytes, device.session_options(), providers=device.providers()
        )
    except Exception as exc:  # onnxruntime raises its own pybind exception types
        oom = out_of_memory_error(exc, device)
        if oom is not None:
            raise oom from exc
        raise EvaluationError(f"onnxruntime could not load the model: {exc}") from exc
    # Otherwise a provider failure during a run (EPFail) makes InferenceSession.run print a line,
    # move the session to the CPU and run again: scores and timings from the CPU under the
    # provider read before the run. Such a run fails the evaluation instead.
    session.disable_fallback()
    return session


class GiveWay:
    """The scoring loop's side of the device's readers-writer lock: between batches, when another
    worker's timing holds or waits for the device, wait for it; for at most ``budget_s`` in all
    (the task's time limit), with the watchdog's clock stopped meanwhile, since waiting for
    another worker is not the model's time."""

    def __init__(self, gate: ScoringGate, budget_s: float) -> None:
        self.gate = gate
        self.budget_s = budget_s
        self.waited_s = 0.0

    def between_batches(self, limit: TimeLimit) -> None:
        if self.waited_s < self.budget_s and self.gate.due():
            with limit.paused():
                self.waited_s += self.gate.give_way(self.budget_s - self.waited_s)


# The most often the scoring loop reports its progress and asks whether to give way to another
# worker's timing. Neither answer is fresher much more often: the worker writes progress every
# PROGRESS_INTERVAL_S (workers.jobs) and refreshes whether a timing wants the device every
# ScoringTurn.poll_s (workers.device_lock). In a model process each ask is a round trip to the
# worker (evaluation.model_process.RemoteHooks), far longer than a small model's batch, and the
# worker's answering it takes a core from onnxruntime's threads.
CHECK_EVERY_S = 0.1


def _batches_within(seconds: float, batch_s: float) -> int:
    """How many batches of ``batch_s`` each fit in ``seconds``: at least one."""
    if seconds <= 0:
        return 1
    return max(1, int(seconds / batch_s)) if batch_s > 0 else 1 << 20


class _Executor:
    """Runs the fixed-shape batches, timing each one; IOBinding on CUDA.

    Only onnxruntime's errors become EvaluationErrors (the model's fault); anything else raised in
    the loop, such as the database refusing a progress update, stays an error on our side.
    """

    def __init__(self, session: ort.InferenceSession, limit: TimeLimit, device: DeviceConfig):
        self.session = session
        self.limit = limit
        self.run_options = limit.run_options
        self.device = device
        self.input_name = session.get_inputs()[0].name
        self.output_names = [session.get_outputs()[0].name]
        self.on_cuda = session.get_providers()[0] == CUDA
        # InferenceSession.run, the call a bare onnxruntime loop makes (benchmarks.runner_overhead)
        self.run_cpu = session.run
        self.step = 1  # the CPU loop's first stretch of batches, until a warm-up measures them

    def model_error(self, exc: BaseException) -> EvaluationError:
        if self.limit.exceeded:  # a run stopped by the watchdog raises like any failed run
            return EvaluationError(time_limit_message(self.limit.limit_s))
        oom = out_of_memory_error(exc, self.device)
        if oom is not None:
            return oom
        return EvaluationError(f"The model failed while running: {exc}")

    def _checkpoints(
        self, turn: GiveWay | None, progress: ProgressCallback | None
    ) -> tuple[Callable[[TimeLimit], None] | None, float]:
        """The scoring loop's checkpoints: what gives way to other workers' timings (None:
        nobody to give way to), and when the first checkpoint is due (never, with neither that
        nor progress to report)."""
        between = None if turn is None or isinstance(turn.gate, Alone) else turn.between_batches
        idle = progress is None and between is None
        return between, math.inf if idle else perf_counter() + CHECK_EVERY_S

    def _checkpoint(
        self,
        done: int,
        total: int,
        progress: ProgressCallback | None,
        between: Callable[[TimeLimit], None] | None,
    ) -> float:
        """A checkpoint between batches, ``done`` of ``total`` done, ``CHECK_EVERY_S`` after the
        last: report progress, then give way to another worker's timing before the next batch;
        when the next one is due. None after the last batch: the worker sets the progress to 1
        when it saves the result, and the scoring turn is left right after it."""
        if progress is not None:
            progress(done / total)
        if between is not None:
            between(self.limit)
        return perf_counter() + CHECK_EVERY_S

    def run_all(
        self,
        batches: list[np.ndarray],
        spec: TaskSpec,
        progress: ProgressCallback | None,
        turn: GiveWay | None,
    ) -> tuple[list[np.ndarray], bool]:
        """The output of every batch, and whether they were all screened finite as they came
        (``_BackgroundScreen``; False: not screened, or not proven finite). Nothing is timed here:
        the timing phase (``time_model``) measures latency on its own.

        On CPU the batches run in stretches of about ``CHECK_EVERY_S`` (as long as the last
        stretch's, or the warm-up's, batches say), each stretch the bare loop's own
        comprehension of ``InferenceSession.run``; after each, the shape of its first output is
        checked (every output's is, once, by ``_gathered``) and, when due, a checkpoint
        (``_checkpoint``) reports progress and gives way to other workers' timings."""
        if self.on_cuda:
            return self.run_each(batches, spec, progress, turn, self._run_cuda)
        outputs: list[np.ndarray] = []
        run, names, feed = self.run_cpu, self.output_names, self.input_name
        options, expected, total = self.run_options, spec.output_batch_shape, len(batches)
        between, next_at = self._checkpoints(turn, progress)
        clock, step, done = perf_counter, self.step, 0
        try:
            while True:
                started = clock()
                stretch = [run(names, {feed: b}, options)[0] for b in batches[done : done + step]]
                ended = clock()
                if stretch[0].shape != expected:
                    raise _shape_error(stretch[0], spec)
                outputs += stretch
                done += len(stretch)
                if done == total:
                    break
                if ended >= next_at:
                    next_at = self._checkpoint(done, total, progress, between)
                step = _batches_within(CHECK_EVERY_S, (ended - started) / len(stretch))
        except ONNXRUNTIME_ERRORS as exc:
            raise self.model_error(exc) from exc
        return outputs, False

    def run_each(
        self,
        batches: list[np.ndarray],
        spec: TaskSpec,
        progress: ProgressCallback | None,
        turn: GiveWay | None,
        run_one: Callable[[np.ndarray], np.ndarray],
    ) -> tuple[list[np.ndarray], bool]:
        """``run_all`` one batch at a time through ``run_one`` (on CUDA, ``_run_cuda``), a large
        output screened while the next batch runs (``_BackgroundScreen``)."""
        outputs: list[np.ndarray] = []
        screen: _BackgroundScreen | None = None
        expected = spec.output_batch_shape
        between, next_at = self._checkpoints(turn, progress)
        clock, total = perf_counter, len(batches)
        try:
            for batch in batches:
                out = run_one(batch)
                if out.shape != expected:
                    raise _shape_error(out, spec)
                outputs.append(out)
                if screen is not None:
                    screen.add(out)
                elif len(outputs) == 1 and _screens_during_runs(self.on_cuda, out):
                    screen = _BackgroundScreen.start(out)
                if clock() >= next_at and len(outputs) < total:
                    next_at = self._checkpoint(len(outputs), total, progress, between)
        except ONNXRUNTIME_ERRORS as exc:
            raise self.model_error(exc) from exc
        finally:
            screened = screen is not None and screen.close()
        return outputs, screened

    def warm_up(self, batch: np.ndarray, runs: int) -> None:
        try:
            if self.on_cuda:
                for _ in range(runs):
                    self._run_cuda(batch)
                return
            run, names, feed = self.run_cpu, self.output_names, self.input_name
            options, started = self.run_options, perf_counter()
            for _ in range(runs):
                run(names, {feed: batch}, options)
            # How many batches the scoring loop's first stretch runs (``run_all``).
            if runs:
                self.step = _batches_within(CHECK_EVERY_S, (perf_counter() - started) / runs)
        except ONNXRUNTIME_ERRORS as exc:
            raise self.model_error(exc) from exc

    def _bound_run(self, batch: np.ndarray) -> Callable[[], None]:
        """One run of ``batch`` on CUDA with the input copied to the device once and the output
        left there, synchronised at its end: what the timing phase times on a GPU."""
        binding = self.session.io_binding()
        x = ort.OrtValue.ortvalue_from_numpy(batch, "cuda", self.device.device_id)
        binding.bind_ortvalue_input(self.input_name, x)
        binding.bind_output(self.output_names[0], "cuda", self.device.device_id)
        binding.synchronize_inputs()
        run_bound, sync, options = (
            self.session.run_with_iobinding,
            binding.synchronize_outputs,
            self.run_options,
        )

        def once() -> None:
            run_bound(binding, options)
            sync()

        return once

    def timed_group(self, batch: np.ndarray) -> RunGroup:
        """``k`` -> ``k`` runs of ``batch`` back to back between two clock reads, returning
        their seconds: the timing phase's unit (``k`` = 1, or more for a batch of microseconds,
        ``timing.GROUP_MIN_S``). The loop is a bare benchmark's: the same call, nothing else.

        On CUDA the input is copied to the device once and the output stays there, so only the
        model's kernels are inside the clock; on CPU the clock holds the very call a bare
        onnxruntime loop makes."""
        options = self.run_options
        if self.on_cuda:
            run_cuda = self._bound_run(batch)

            def group_cuda(k: int) -> Callable[[], float]:
                def runs() -> float:
                    start = perf_counter()
                    for _ in repeat(None, k):
                        run_cuda()
                    return perf_counter() - start

                return runs

            return group_cuda
        run, names, feed = self.session.run, self.output_names, {self.input_name: batch}

        def group(k: int) -> Callable[[], float]:
            def runs() -> float:
                start = perf_counter()
                for _ in repeat(None, k):
                    run(names, feed, options)
                return perf_counter() - start

            return runs

        return group

    def _run_cuda(self, batch: np.ndarray) -> np.ndarray:
        """One batch through IOBinding, as the timing phase runs it (``timed_group``): the input
        bound on the device, the output left there until the run is over, then copied back.
        run_with_iobinding synchronises the device at the end of the run, and
        synchronize_outputs makes sure of it."""
        binding = self.session.io_binding()
        x = ort.OrtValue.ortvalue_from_numpy(batch, "cuda", self.device.device_id)
        binding.bind_ortvalue_input(self.input_name, x)
        binding.bind_output(self.output_names[0], "cuda", self.device.device_id)
        binding.synchronize_inputs()
        self.session.run_with_iobinding(binding, self.run_options)
        binding.synchronize_outputs()
        return binding.copy_outputs_to_cpu()[0]


def padded_batches(inputs: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Every batch has exactly batch_size rows; the last is padded by repeating its last row."""
    batches = []
    for start in range(0, len(inputs), batch_size):
        chunk = inputs[start : start + batch_size]
        if len(chunk) < batch_size:
            pad = np.repeat(chunk[-1:], batch_size - len(chunk), axis=0)
            chunk = np.concatenate([chunk, pad])
        batches.append(np.ascontiguousarray(chunk))
    return batches


def first_batch(data: Dataset, spec: TaskSpec) -> np.ndarray:
    """The dataset's first batch at the task's fixed shape (padded): what timing runs on."""
    return first_inputs_batch(data.inputs, spec)


def first_inputs_batch(inputs: np.ndarray, spec: TaskSpec) -> np.ndarray:
    """The first batch of ``inputs`` at the task's fixed shape (padded)."""
    batch = inputs[: spec.batch_size].astype(spec.input_dtype, copy=False)
    return padded_batches(batch, spec.batch_size)[0]


def _shape_error(out: np.ndarray, spec: TaskSpec) -> EvaluationError:
    return EvaluationError(
        f"The model's output has shape {list(out.shape)} but this task expects "
        f"{list(spec.output_batch_shape)} (batch {spec.batch_size} × per-sample "
        f"{list(spec.output_shape)})."
    )


def _gathered(outputs: list[np.ndarray], rows: int, spec: TaskSpec) -> np.ndarray:
    """The outputs of every batch (there is at least one: datasets are never empty) as one array
    of the first ``rows`` rows, the padding dropped; EvaluationError when an output does not
    have the task's shape or is not numeric.

    One concatenation checks every output's shape: it needs the same number of dimensions and
    the same dimensions after the first in each, which its result's shape then shows, and
    outputs of one row count that add up to the batches' rows each have a batch's rows."""
    joined: np.ndarray | None
    try:
        joined = np.concatenate(outputs)
    except ValueError:  # outputs of different ranks or trailing dimensions, or 0-dimensional
        joined = None
    if (
        joined is None
        or joined.shape != (len(outputs) * spec.batch_size, *spec.output_shape)
        or len(set(map(len, outputs))) != 1
    ):
        expected = spec.output_batch_shape
        raise _shape_error(next((o for o in outputs if o.shape != expected), outputs[0]), spec)
    if joined.dtype.kind not in "iufc":  # np.number's kinds, without its type hierarchy's walk
        raise EvaluationError(
            f"The model's output has type {joined.dtype}; a numeric tensor is expected."
        )
    return joined[:rows]


_DOT_SCREENED = (np.dtype(np.float32), np.dtype(np.float64))  # what BLAS dots
# Predictions this large are screened in parts, one thread each (numpy lets go of the GIL in the
# dot product): on a GPU host one thread's read of the depth model's predictions took longer than
# the runner's whole margin over a bare IOBinding loop. Chosen, not tuned: four parts were faster
# than one thread there (more were not tried); on a 2-core box the threads' start ate most of the
# gain, so parts stay at 4 MB or more (the figures: docs/benchmarks-history.md).
_SCREEN_PART_BYTES = 4 << 20
_SCREEN_THREADS = 4


def _dot_finite(values: np.ndarray) -> bool:
    return math.isfinite(np.vdot(values, values))  # vdot flattens a contiguous array for free


def _screen_parts(preds: np.ndarray) -> int:
    """How many threads screen ``preds``: one per 4 MB, at most 4 and the CPUs this process may
    use (a worker pinned to cores gets no more)."""
    if preds.nbytes < 2 * _SCREEN_PART_BYTES:
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(_SCREEN_THREADS, cpus or 1, preds.nbytes // _SCREEN_PART_BYTES))


def _parallel_dot_finite(preds: np.ndarray, parts: int) -> bool:
    """``_dot_finite`` over ``parts`` slices of ``preds``, this thread reading the first. A part
    that could not be screened (no thread to be had under a tight address-space limit: this
    thread reads it instead) or that raised counts as "look closer", never as finite."""
    slices = np.array_split(preds.reshape(-1), parts)
    finite = [False] * parts

    def screen(index: int) -> None:
        finite[index] = _dot_finite(slices[index])

    threads: list[threading.Thread] = []
    try:
        for index in range(1, parts):
            thread = threading.Thread(target=screen, args=(index,), daemon=True)
            thread.start()
            threads.append(thread)
    except RuntimeError:  # "can't start new thread"
        for index in range(len(threads) + 1, parts):
            screen(index)
    screen(0)
    for thread in threads:
        thread.join()
    return all(finite)


def _screened_finite(preds: np.ndarray) -> bool:
    """True when one reduction proves every value finite; False means "look closer", not
    "not finite": finite values can overflow it.

    NaN and infinities carry through both screens: in the dot product every term is a square, so
    an infinity stays one; in the sum, opposite infinities make NaN. float32 and float64 use the
    dot product of the values with themselves (BLAS: one read, vectorised, no allocation, and no
    floating-point state to save and restore, since BLAS raises no numpy warning), in parts on
    several threads from 8 MB (``_screen_parts``); other floats, and arrays not contiguous row by
    row, their sum. On the depth model's predictions the dot product was faster than the sum,
    which had itself replaced ``np.isfinite``'s mask for being faster; on the digits model's small
    outputs the dot product still beat the mask, which is why every size is screened (the
    figures: docs/benchmarks-history.md)."""
    if preds.dtype in _DOT_SCREENED and preds.flags.c_contiguous:
        if preds.nbytes < 2 * _SCREEN_PART_BYTES:  # one part (``_screen_parts``), this thread
            return math.isfinite(np.vdot(preds, preds))
        parts = _screen_parts(preds)
        return _dot_finite(preds) if parts == 1 else _parallel_dot_finite(preds, parts)
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.add.reduce(preds, axis=None)))


# A batch output this large is screened while the next batch runs on a GPU (``_BackgroundScreen``).
_BACKGROUND_SCREEN_BYTES = 1 << 20


def _screens_during_runs(on_cuda: bool, out: np.ndarray) -> bool:
    """Whether the outputs whose first batch is ``out`` are screened as they come. On CUDA the
    Python thread only waits while a batch runs (onnxruntime and numpy's dot product both let go
    of the GIL), so screening a large output costs nothing there; on CPU, onnxruntime's threads
    use every core the worker has, and the screen waits for the loop to end."""
    return (
        on_cuda
        and out.dtype in _DOT_SCREENED
        and out.flags.c_contiguous
        and out.nbytes >= _BACKGROUND_SCREEN_BYTES
    )


class _BackgroundScreen:
    """``_screened_finite`` on each batch's output, on one helper thread, while the next batch
    runs: on a GPU host, screening the depth model's predictions after the loop took as long as
    the runner's whole margin over a bare IOBinding loop. Only the last batch's screen is left after
    the loop, and it overlaps the concatenation. A screen that fails, or a thread that could not
    start, leaves the exact check after the loop to decide."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[np.ndarray | None] = queue.SimpleQueue()
        self._finite = True
        self._thread = threading.Thread(target=self._work, name="finite-screen", daemon=True)

    @classmethod
    def start(cls, first: np.ndarray) -> _BackgroundScreen | None:
        screen = cls()
        try:
            screen._thread.start()
        except RuntimeError:  # "can't start new thread": the check after the loop does it all
            return None
        screen.add(first)
        return screen

    def add(self, out: np.ndarray) -> None:
        self._queue.put(out)

    def _work(self) -> None:
        while (out := self._queue.get()) is not None:
            if self._finite:
                try:
                    self._finite = _screened_finite(out)
                except Exception:  # anything odd: the exact check decides
                    self._finite = False

    def close(self) -> bool:
        """Wait for the screens still queued: True when every output was screened finite."""
        self._queue.put(None)
        self._thread.join()
        return self._finite


def _check_finite(preds: np.ndarray, batch_size: int) -> None:
    """One vectorised pass after the loop: cheaper than a check per batch on small models. A
    screen (``_screened_finite``) passes finite predictions in one reduction; the exact check
    below decides whatever it could not."""
    if preds.dtype.kind not in "fc" or _screened_finite(preds):
        return
    finite = np.isfinite(preds).reshape(len(preds), -1).all(axis=1)
    if not finite.all():
        batch = int(np.argmin(finite)) // batch_size + 1
        raise EvaluationError(f"The model's output contains NaN or infinity (batch {batch}).")


def predict(
    session: ort.InferenceSession,
    inputs: np.ndarray,
    spec: TaskSpec,
    device: DeviceConfig,
    progress: ProgressCallback | None = None,
    turn: GiveWay | None = None,
) -> np.ndarray:
    """Warm up, then run every batch once under the watchdog: checked predictions for the real
    rows. This is what the benchmark compares with a bare loop.
    ``turn`` gives way to other workers' timings on the device, before warming up and between
    batches."""
    batches = padded_batches(inputs, spec.batch_size)
    with TimeLimit(spec.time_limit_s) as limit:
        executor = _Executor(session, limit, device)
        if turn is not None:
            turn.between_batches(limit)
        executor.warm_up(batches[0], device.warmup_runs)
        outputs, screened = executor.run_all(batches, spec, progress, turn)
    preds = _gathered(outputs, len(inputs), spec)
    if not screened:
        _check_finite(preds, spec.batch_size)
    return preds


def _score(
    spec: TaskSpec, preds: np.ndarray, data: Dataset
) -> tuple[dict[str, float], dict[str, float]]:
    try:
        public = (
            compute_family(
                spec.metric, preds[data.public], data.targets[data.public], spec.metric_options
            )
            if data.public.any()
            else {}
        )
        private = (
            compute_family(
                spec.metric, preds[~data.public], data.targets[~data.public], spec.metric_options
            )
            if (~data.public).any()
            else {}
        )
    except ValueError as exc:
        raise EvaluationError(f"The model's predictions cannot be scored: {exc}") from exc
    return public, private


def _check_provider(session: ort.InferenceSession, spec: TaskSpec, device: DeviceConfig) -> str:
    provider = session.get_providers()[0]
    if spec.requires_gpu and provider != CUDA:
        # Participants never see worker or host names; the operator log has the traceback.
        raise DeviceUnavailable(CUDA_NOT_ACTIVE)
    return provider


def time_model(
    session: ort.InferenceSession,
    batch: np.ndarray,
    spec: TaskSpec,
    device: DeviceConfig,
    hooks: TimingHooks,
) -> Timing:
    """The timing phase, after scoring: the task's protocol on one batch, under the device lock.

    Bounded by the task's time limit like scoring, armed once the lock is held: waiting for
    another worker's timing is not the model's time.
    """
    limit = TimeLimit(spec.time_limit_s)
    executor = _Executor(session, limit, device)

    @contextlib.contextmanager
    def locked_then_limited() -> Iterator[bool]:
        with hooks.lock() as exclusive, limit:
            yield exclusive

    timed = executor.timed_group(batch)
    try:
        timing = measure(
            timed(1),
            spec.timing,
            lock=locked_then_limited,
            observe=hooks.observe,
            warm_up=lambda: executor.warm_up(batch, max(device.warmup_runs, 1)),
            run_group=timed,
            # Further rounds stay within half the limit the phase runs under: the warm-up and
            # the first round have the rest.
            rounds_within_s=spec.time_limit_s / 2,
        )
    except ONNXRUNTIME_ERRORS as exc:
        raise executor.model_error(exc) from exc
    timing.conditions.update(hooks.facts)
    return timing


def _build_facts(provider: str, device: DeviceConfig) -> dict[str, Any]:
    """What ran the timing, as far as the runner knows; the job adds the driver and clocks."""
    build = ort.capi.build_and_package_info
    return {
        "provider": provider,
        "device_name": device.device_name if provider == CUDA else "CPU",
        "onnxruntime": ort.__version__,
        "cuda_build": getattr(build, "cuda_version", "") if provider == CUDA else "",
        "cudnn_build": getattr(build, "cudnn_version", "") if provider == CUDA else "",
    }


@dataclass
class ModelRun:
    """What running the model gave, before scoring: the model's side of an evaluation, which a
    confined model process sends back (``evaluation.model_process``); the targets never enter it."""

    preds: np.ndarray
    timing: Timing
    provider: str
    scoring_wait_s: float


def run_model(
    session: ort.InferenceSession,
    inputs: np.ndarray,
    spec: TaskSpec,
    device: DeviceConfig,
    progress: ProgressCallback | None = None,
    hooks: TimingHooks | None = None,
    in_turn: Callable[[ScoringGate], None] | None = None,
) -> ModelRun:
    """Everything after session creation that runs the model: check the provider, predict every
    row, then time one batch. ``in_turn``: more work on the device after the predictions, in the
    same scoring turn (the run report's profiled batch), given the turn's gate."""
    provider = _check_provider(session, spec, device)
    inputs = inputs.astype(spec.input_dtype, copy=False)
    hooks = hooks or TimingHooks()
    with hooks.scoring() as gate:  # left before timing: a worker never waits for itself
        turn = GiveWay(gate, spec.time_limit_s)
        preds = predict(session, inputs, spec, device, progress, turn)
        if in_turn is not None:
            in_turn(gate)
    timing = time_model(session, first_inputs_batch(inputs, spec), spec, device, hooks)
    timing.conditions = {**_build_facts(provider, device), **timing.conditions}
    return ModelRun(preds=preds, timing=timing, provider=provider, scoring_wait_s=turn.waited_s)


def score_run(run: ModelRun, data: Dataset, spec: TaskSpec, device: DeviceConfig) -> EvalResult:
    """The result of ``run`` on ``data``: its scores against the targets, and its timing."""
    public, private = _score(spec, run.preds, data)
    timing, provider = run.timing, run.provider
    return EvalResult(
        score=public.get(spec.metric),
        score_private=private.get(spec.metric),
        metrics=public,
        metrics_private=private,
        latency_p50_ms=timing.p50_ms,
        latency_p90_ms=timing.p90_ms,
        latency_p95_ms=timing.p95_ms,
        latency_p99_ms=timing.p99_ms,
        latency_mean_ms=timing.mean_ms,
        latency_spread=timing.spread,
        latency_unstable=timing.unstable,
        latency_sessions=timing.sessions,
        latency_session_spread=timing.session_spread,
        energy_per_sample_j=(
            timing.energy_per_batch_j / spec.batch_size
            if timing.energy_per_batch_j is not None
            else None
        ),
        average_power_w=timing.average_power_w,
        timing_exclusive=timing.exclusive,
        timing={**timing.summary(), "scoring_wait_s": round(run.scoring_wait_s, 3)},
        throughput=spec.batch_size * 1000.0 / max(timing.mean_ms, 1e-12),
        provider=provider,
        device_name=device.device_name if provider == CUDA else "CPU",
        ort_version=ort.__version__,
        samples_evaluated=len(run.preds),
        batch_latencies_ms=timing.kept_batches_ms,
    )


def evaluate_session(
    session: ort.InferenceSession,
    data: Dataset,
    spec: TaskSpec,
    device: DeviceConfig,
    progress: ProgressCallback | None = None,
    hooks: TimingHooks | None = None,
) -> EvalResult:
    """Everything after session creation, in this process: run the model, then score the run."""
    run = run_model(session, data.inputs, spec, device, progress, hooks)
    return score_run(run, data, spec, device)


def evaluate(
    model_bytes: bytes,
    data: Dataset,
    spec: TaskSpec,
    device: DeviceConfig,
    progress: ProgressCallback | None = None,
    hooks: TimingHooks | None = None,
) -> EvalResult:
    session = create_session(model_bytes, device)
    return evaluate_session(session, data, spec, device, progress, hooks)
