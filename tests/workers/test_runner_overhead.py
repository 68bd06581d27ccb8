"""The runner against a bare loop (``workers.runner_overhead``), on real sessions of the demo's
digits model: what the figure stands on, not the figure (numbers are the benchmark's).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from evaluation.runner import CPU, CUDA, DeviceConfig, create_session, predict
from workers.device_lock import device_lock_key, scorers_key
from workers.runner_overhead import (
    calls,
    measure,
    production_hooks,
    runner_seconds,
    shown,
    workloads,
)

DEVICE = DeviceConfig(intra_op_threads=1, warmup_runs=2)


@pytest.fixture(scope="module")
def digits() -> Any:
    return workloads()[0]


def no_worker_end_left() -> bool:
    return not [t for t in threading.enumerate() if t.name == "worker-end"]


@pytest.mark.parametrize("as_worker", [True, False])
def test_the_runner_and_the_bare_loop_make_the_same_call_as_often_with_the_same_predictions(
    digits: Any, queue: Any, as_worker: bool
) -> None:
    row = measure(digits, DEVICE, budget_s=0, as_worker=as_worker)  # the least: 7 rounds

    batches = -(-len(digits.data.inputs) // digits.spec.batch_size)
    assert row["provider"] == CPU
    assert row["runner_calls"] == row["bare_calls"] == {"run": DEVICE.warmup_runs + batches}
    assert row["same_call"] and row["same_predictions"]
    assert shown(row) is None
    assert row["repeats"] == 7 and row["as_worker"] is as_worker
    assert no_worker_end_left()  # the worker's end it started has stopped


def test_the_runner_is_timed_inside_a_scoring_turn_the_worker_registers_in_redis(
    digits: Any, queue: Any
) -> None:
    key = scorers_key(device_lock_key(gpu_uuid=None))
    session = create_session(digits.model, DEVICE)
    inputs = digits.data.inputs.astype(np.float32)
    with production_hooks(digits.spec, DEVICE) as remote:
        with remote.scoring() as gate:
            assert queue.connection.zcard(key) == 1  # the worker's ScoringTurn, as in a job
            assert gate.due() is False  # answered when the turn began: no round trip
        assert queue.connection.zcard(key) == 0
        seconds, preds = runner_seconds(remote, session, inputs, digits.spec, DEVICE)
    assert seconds > 0
    assert np.array_equal(preds, predict(session, inputs, digits.spec, DEVICE))
    assert no_worker_end_left()


def test_calls_counts_each_run_method_and_leaves_the_session_as_it_was(digits: Any) -> None:
    session = create_session(digits.model, DEVICE)
    batch = digits.data.inputs[:32].astype(np.float32)
    counted, out = calls(session, lambda: session.run(None, {"input": batch}))
    assert counted == {"run": 1} and out[0].shape == (32, 10)
    assert "run" not in vars(session)  # the class's own method again


def test_a_row_is_not_shown_when_its_sides_differ_or_its_provider_is_not_the_one_claimed() -> None:
    """Rows made up here: what ``shown`` refuses, whatever ran."""
    row: dict[str, object] = {
        "provider": CUDA,
        "runner_calls": {"run_with_iobinding": 10},
        "bare_calls": {"run_with_iobinding": 10},
        "same_call": True,
        "same_predictions": True,
    }
    assert shown(row, provider=CUDA) is None
    on_cpu = {**row, "provider": CPU}
    assert shown(on_cpu, provider=CUDA) == f"the session ran on {CPU}, not {CUDA}"
    other = {**row, "runner_calls": {"run": 10}, "same_call": False}
    assert shown(other) == (
        "the runner and the bare loop made different calls: runner {'run': 10}, "
        "bare loop {'run_with_iobinding': 10}"
    )
    assert shown({**row, "same_predictions": False}) == (
        "the runner's predictions differ from the bare loop's"
    )


def test_cuda_asked_for_where_the_cpu_runs_is_not_shown_as_a_cuda_figure(
    digits: Any, queue: Any
) -> None:
    # Real: this machine's onnxruntime has no CUDA provider, so the session falls back to CPU.
    row = measure(digits, replace(DEVICE, use_cuda=True), budget_s=0)
    assert row["provider"] == CPU
    assert shown(row, provider=CUDA) == f"the session ran on {CPU}, not {CUDA}"
