"""The runner's evaluation loop against a bare onnxruntime loop on the same session, data and
thread settings: what the GPU acceptance check holds to its limit (``workers.gpu_acceptance``)
and ``benchmarks/runner_overhead.py`` reports. The method is in that benchmark's docstring."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort

from evaluation.metrics import compute_family
from evaluation.runner import (
    CUDA,
    Dataset,
    DeviceConfig,
    create_session,
    padded_batches,
    predict,
)
from evaluation.spec import TaskSpec
from submissions.demo import baselines, datasets
from submissions.demo.tasks import TASKS


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


def measure(work: Workload, device: DeviceConfig, budget_s: float) -> dict[str, object]:
    """Rounds of runner, bare loop and a second bare loop (the noise control), in rotating order,
    for about ``budget_s`` seconds and at least 7 rounds."""
    session = create_session(work.model, device)
    inputs = work.data.inputs.astype(work.spec.input_dtype)
    size = work.spec.batch_size
    contestants = {
        "runner": lambda: predict(session, inputs, work.spec, device),
        "bare": lambda: bare_loop(session, inputs, size, device.warmup_runs),
        "control": lambda: bare_loop(session, inputs, size, device.warmup_runs),
    }
    order = list(contestants)
    rounds: list[dict[str, float]] = []
    deadline = time.monotonic() + budget_s
    while len(rounds) < 7 or time.monotonic() < deadline:
        order = order[1:] + order[:1]  # each goes first, second and third in turn
        rounds.append({name: seconds(contestants[name]) for name in order})
    preds = predict(session, inputs, work.spec, device)
    assert np.array_equal(preds, bare_loop(session, inputs, size, device.warmup_runs))
    scoring_s = seconds(
        lambda: compute_family(work.spec.metric, preds, work.data.targets, work.spec.metric_options)
    )
    return {
        "workload": work.name,
        "provider": session.get_providers()[0],
        "bare_ms": 1000 * statistics.median(r["bare"] for r in rounds),
        "runner_ms": 1000 * statistics.median(r["runner"] for r in rounds),
        "ratio": statistics.median(r["runner"] / r["bare"] for r in rounds),
        "control": statistics.median(r["control"] / r["bare"] for r in rounds),
        "scoring_ms": 1000 * scoring_s,
        "repeats": len(rounds),
    }
