"""Run one model over one dataset at the task's fixed batch shape, score it and time it.

Pure: model bytes + arrays + TaskSpec + DeviceConfig in, EvalResult out. No Django, no Redis, so it
can be tested against a numpy reference and benchmarked against a bare onnxruntime loop.
Failures that are the model's fault raise EvaluationError with a message for the submitter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnxruntime as ort

from evaluation.metrics import compute_family
from evaluation.spec import TaskSpec

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
ProgressCallback = Callable[[float], None]


class EvaluationError(Exception):
    """The model could not be evaluated; ``str(exc)`` is safe to show the submitter."""


@dataclass(frozen=True)
class DeviceConfig:
    """How this worker runs sessions; fixed per worker so every model gets the same treatment."""

    worker_name: str = "worker"
    use_cuda: bool = False
    device_id: int = 0
    gpu_mem_limit: int | None = None
    cudnn_conv_algo_search: str = "EXHAUSTIVE"
    intra_op_threads: int = 0
    warmup_runs: int = 2
    device_name: str = "CPU"

    def providers(self) -> list[Any]:
        if not self.use_cuda:
            return [CPU]
        # Options as documented for the CUDA execution provider: bound the arena to this worker's
        # share of the GPU and grow it only by what is asked, so workers sharing a GPU coexist.
        cuda_options: dict[str, Any] = {
            "device_id": self.device_id,
            "arena_extend_strategy": "kSameAsRequested",
            "cudnn_conv_algo_search": self.cudnn_conv_algo_search,
            "do_copy_in_default_stream": True,
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


def _session(model_bytes: bytes, device: DeviceConfig) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = device.intra_op_threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(model_bytes, options, providers=device.providers())
    except Exception as exc:  # onnxruntime raises its own pybind exception types
        raise EvaluationError(f"onnxruntime could not load the model: {exc}") from exc


class _Watchdog:
    """Stops a run at the time limit by setting RunOptions.terminate from another thread.

    SIGALRM is not delivered while onnxruntime is inside C++, so a signal cannot do this.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.run_options = ort.RunOptions()
        self.fired = threading.Event()
        self._timer = threading.Timer(limit_s, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired.set()
        self.run_options.terminate = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def check(self) -> None:
        if self.fired.is_set():
            raise EvaluationError(f"time limit of {self.limit_s:g} s exceeded")


class _Executor:
    """Runs one fixed-shape batch and returns (outputs, seconds). IOBinding on CUDA."""

    def __init__(
        self, session: ort.InferenceSession, run_options: ort.RunOptions, device: DeviceConfig
    ):
        self.session = session
        self.run_options = run_options
        self.input_name = session.get_inputs()[0].name
        self.output_name = session.get_outputs()[0].name
        self.on_cuda = session.get_providers()[0] == CUDA
        self.device_id = device.device_id

    def __call__(self, batch: np.ndarray) -> tuple[np.ndarray, float]:
        if not self.on_cuda:
            start = time.perf_counter()
            (out,) = self.session.run(
                [self.output_name], {self.input_name: batch}, self.run_options
            )
            return out, time.perf_counter() - start
        # Inputs are copied to the device before the clock starts; outputs stay on the device
        # until it stops, and run_with_iobinding synchronises, so the time is the model's alone.
        binding = self.session.io_binding()
        x = ort.OrtValue.ortvalue_from_numpy(batch, "cuda", self.device_id)
        binding.bind_ortvalue_input(self.input_name, x)
        binding.bind_output(self.output_name, "cuda", self.device_id)
        binding.synchronize_inputs()
        start = time.perf_counter()
        self.session.run_with_iobinding(binding, self.run_options)
        binding.synchronize_outputs()
        elapsed = time.perf_counter() - start
        return binding.copy_outputs_to_cpu()[0], elapsed


def _batches(inputs: np.ndarray, batch_size: int) -> list[tuple[int, np.ndarray]]:
    """Every batch has exactly batch_size rows; the last is padded by repeating its last row."""
    batches = []
    for start in range(0, len(inputs), batch_size):
        chunk = inputs[start : start + batch_size]
        if len(chunk) < batch_size:
            pad = np.repeat(chunk[-1:], batch_size - len(chunk), axis=0)
            chunk = np.concatenate([chunk, pad])
        batches.append((start, np.ascontiguousarray(chunk)))
    return batches


def _check_output(out: np.ndarray, spec: TaskSpec, index: int) -> None:
    expected = spec.output_batch_shape
    if tuple(out.shape) != expected:
        raise EvaluationError(
            f"The model's output has shape {list(out.shape)} but this task expects "
            f"{list(expected)} (batch {spec.batch_size} × per-sample {list(spec.output_shape)})."
        )
    if not np.issubdtype(out.dtype, np.number):
        raise EvaluationError(
            f"The model's output has type {out.dtype}; a numeric tensor is expected."
        )
    if not np.all(np.isfinite(out)):
        raise EvaluationError(f"The model's output contains NaN or infinity (batch {index + 1}).")


def _score(
    spec: TaskSpec, preds: np.ndarray, data: Dataset
) -> tuple[dict[str, float], dict[str, float]]:
    try:
        public = (
            compute_family(spec.metric, preds[data.public], data.targets[data.public])
            if data.public.any()
            else {}
        )
        private = (
            compute_family(spec.metric, preds[~data.public], data.targets[~data.public])
            if (~data.public).any()
            else {}
        )
    except ValueError as exc:
        raise EvaluationError(f"The model's predictions cannot be scored: {exc}") from exc
    return public, private


def _check_provider(session: ort.InferenceSession, spec: TaskSpec, device: DeviceConfig) -> str:
    provider = session.get_providers()[0]
    if spec.requires_gpu and provider != CUDA:
        raise EvaluationError(
            f"CUDA execution provider not available on worker {device.worker_name}"
        )
    return provider


def evaluate(
    model_bytes: bytes,
    data: Dataset,
    spec: TaskSpec,
    device: DeviceConfig,
    progress: ProgressCallback | None = None,
) -> EvalResult:
    session = _session(model_bytes, device)
    provider = _check_provider(session, spec, device)
    inputs = data.inputs.astype(spec.input_dtype, copy=False)
    batches = _batches(inputs, spec.batch_size)
    n = len(inputs)
    preds: np.ndarray | None = None
    times: list[float] = []
    with _Watchdog(spec.time_limit_s) as watchdog:
        run = _Executor(session, watchdog.run_options, device)
        try:
            for _ in range(device.warmup_runs):
                run(batches[0][1])
            for index, (start, batch) in enumerate(batches):
                out, seconds = run(batch)
                _check_output(out, spec, index)
                if preds is None:
                    preds = np.empty((n, *spec.output_shape), dtype=out.dtype)
                rows = min(spec.batch_size, n - start)
                preds[start : start + rows] = out[:rows]  # padding rows never reach a metric
                times.append(seconds)
                if progress is not None:
                    progress((index + 1) / len(batches))
        except EvaluationError:
            raise
        except Exception as exc:  # onnxruntime's pybind errors, incl. the watchdog's terminate
            watchdog.check()
            raise EvaluationError(f"The model failed while running: {exc}") from exc
    assert preds is not None  # there is at least one batch: datasets are never empty
    public, private = _score(spec, preds, data)
    ms = np.asarray(times) * 1000.0
    return EvalResult(
        score=public.get(spec.metric),
        score_private=private.get(spec.metric),
        metrics=public,
        metrics_private=private,
        latency_p50_ms=float(np.percentile(ms, 50)),
        latency_p95_ms=float(np.percentile(ms, 95)),
        latency_p99_ms=float(np.percentile(ms, 99)),
        throughput=float(n / max(sum(times), 1e-12)),
        provider=provider,
        device_name=device.device_name if provider == CUDA else "CPU",
        ort_version=ort.__version__,
        samples_evaluated=n,
        batch_latencies_ms=[round(float(t), 4) for t in ms],
    )
