"""``oep check``: the server's own inspection, then one run at the task's batch shape, locally.

Uses evaluation/inspect.py and evaluation/runner.py as they are (both free of Django), so a model
is refused here with the very message the upload or the worker would give, before a quota slot
is spent. What cannot be judged here: the hidden data (so the score), the worker's memory limit
unless ``--memory-limit-mb`` gives it, and the GPU (the run is on CPU).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.inspect import ModelInfo, check_file_name, inspect_model
from evaluation.limits import LOADING, added_memory_limit, process_deadline, time_limit_message
from evaluation.runner import DeviceConfig, create_session, predict
from evaluation.spec import TaskSpec

UPLOAD = "Refused at upload"
RUN = "Fails when run"


@dataclass(frozen=True)
class CheckReport:
    info: ModelInfo
    output_shape: tuple[int, ...]
    output_dtype: str
    seconds_per_batch: float


def task_spec(task: dict[str, Any]) -> TaskSpec:
    """The TaskSpec the server builds from the same task, from its API fields."""
    return TaskSpec(
        batch_size=int(task["batch_size"]),
        input_shape=tuple(task["input_shape"]),
        input_dtype=str(task["input_dtype"]),
        output_shape=tuple(task["output_shape"]),
        metric=str(task["metric"]),
        max_model_bytes=int(task["max_model_bytes"]),
        time_limit_s=float(task["time_limit_s"]),
        requires_gpu=bool(task.get("requires_gpu", False)),
        metric_options=dict(task.get("metric_options") or {}),
    )


def random_batch(spec: TaskSpec, seed: int = 0) -> np.ndarray:
    """One batch of the task's shape and dtype: normal floats, small non-negative integers
    (valid as class indices or token ids for most models), any byte for uint8."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(spec.input_dtype)
    if dtype.kind == "f":
        return rng.standard_normal(spec.batch_shape).astype(dtype)
    high = 256 if dtype == np.uint8 else 10
    return rng.integers(0, high, size=spec.batch_shape).astype(dtype)


def _loading_deadline_passed(limit_s: float) -> None:
    print(f"{RUN}: {time_limit_message(limit_s, LOADING)}", file=sys.stderr, flush=True)


def model_check(path: Path, task: dict[str, Any], memory_limit_mb: int = 0) -> CheckReport:
    """Raise ModelRejected (refused at upload) or EvaluationError (would fail on the worker).

    Session creation is bounded like on the worker: at the task's time limit this process ends
    (exit status 3) after printing the worker's message.
    """
    spec = task_spec(task)
    check_file_name(path.name)
    info = inspect_model(path, spec)
    limit = memory_limit_mb * 1_048_576 or None
    device = DeviceConfig(worker_name="local", warmup_runs=1, cpu_memory_limit_bytes=limit)
    model_bytes = path.read_bytes()
    with added_memory_limit(limit):
        with process_deadline(
            spec.time_limit_s, lambda: _loading_deadline_passed(spec.time_limit_s)
        ):
            session = create_session(model_bytes, device)
        start = time.perf_counter()
        preds = predict(session, random_batch(spec), spec, device)
        seconds = time.perf_counter() - start
    return CheckReport(
        info=info,
        output_shape=tuple(preds.shape),
        output_dtype=str(preds.dtype),
        seconds_per_batch=seconds / (1 + device.warmup_runs),
    )
