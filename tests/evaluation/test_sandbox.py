"""The model process (evaluation.sandbox, evaluation.model_process) on its own: real processes,
real onnxruntime, no worker. What it gives back is what running the model here gives."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from evaluation.confine import default_read_paths
from evaluation.runner import DeviceConfig, EvaluationError, create_session, run_model
from evaluation.sandbox import ModelProcess, ModelProcessDied, SandboxSettings
from evaluation.timing import TimingHooks
from tests.builders import DIGITS_SPEC, linear_classifier

DEVICE = DeviceConfig(intra_op_threads=1, warmup_runs=1, cpu_memory_limit_bytes=1 << 30)
SPEC = DIGITS_SPEC


@pytest.fixture
def model() -> bytes:
    rng = np.random.default_rng(3)
    return linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))


@pytest.fixture
def inputs() -> np.ndarray:
    return np.random.default_rng(4).normal(size=(37, 1, 8, 8)).astype(np.float32)


def _settings(tmp_path: Any) -> SandboxSettings:
    return SandboxSettings(scratch_root=str(tmp_path), allow_test_hook=True)


@pytest.fixture
def process(tmp_path: Any) -> Iterator[ModelProcess]:
    started = ModelProcess(
        SandboxSettings(scratch_root=str(tmp_path), allow_test_hook=True), DEVICE
    )
    yield started
    started.stop()


def test_predictions_and_costs_from_the_model_process_are_those_of_a_run_here(
    process: ModelProcess, model: bytes, inputs: np.ndarray
) -> None:
    protections = process.wait_ready()
    outcome = process.evaluate(
        model, inputs, SPEC, DEVICE, hooks=TimingHooks(), complete_costs=True
    )

    here = run_model(create_session(model, DEVICE), inputs, SPEC, DEVICE)
    assert np.array_equal(outcome.run.preds, here.preds)
    assert outcome.run.provider == here.provider == "CPUExecutionProvider"
    assert outcome.run.timing.batches >= SPEC.timing.min_batches
    assert outcome.costs is not None and outcome.costs.macs == 64 * 10 * SPEC.batch_size
    assert "seccomp" in protections.active() and "landlock" in protections.active()


def test_the_worker_answers_the_lock_the_readings_and_the_progress(
    process: ModelProcess, model: bytes, inputs: np.ndarray
) -> None:
    asked: list[str] = []

    @contextlib.contextmanager
    def lock() -> Iterator[bool]:
        asked.append("lock")
        yield True
        asked.append("unlock")

    def observe() -> dict[str, Any]:
        asked.append("observe")
        return {"cpu_mhz": 1234}

    progress: list[float] = []
    hooks = TimingHooks(lock=lock, observe=observe)
    # Enough batches of 1 for the scoring loop to pass a checkpoint (runner.CHECK_EVERY_S),
    # where it reports its progress.
    many = np.tile(inputs, (3000, 1, 1, 1))
    outcome = process.evaluate(
        model, many, replace(SPEC, batch_size=1), DEVICE, hooks=hooks, progress=progress.append
    )

    assert asked == ["lock", "observe", "observe", "unlock"]
    assert outcome.run.timing.exclusive
    assert outcome.run.timing.conditions["start"] == {"cpu_mhz": 1234}
    assert progress and all(0 <= p <= 1 for p in progress)


class _CountingGate:
    """A scoring gate that wants the device once, on its first question, and counts them."""

    def __init__(self) -> None:
        self.asked = 0
        self.gave_way = 0

    def due(self) -> bool:
        self.asked += 1
        return self.asked == 1

    def give_way(self, limit_s: float) -> float:
        self.gave_way += 1
        return 0.0


def test_the_model_process_gives_way_when_told_without_asking_before_every_batch(
    process: ModelProcess, model: bytes
) -> None:
    gate = _CountingGate()

    @contextlib.contextmanager
    def scoring() -> Iterator[_CountingGate]:
        yield gate

    many = np.random.default_rng(5).normal(size=(4000, 1, 8, 8)).astype(np.float32)
    spec = replace(SPEC, batch_size=1)  # 4,000 batches to score, each far shorter than 20 ms
    outcome = process.evaluate(model, many, spec, DEVICE, hooks=TimingHooks(scoring=scoring))

    assert len(outcome.run.preds) == 4000
    assert gate.gave_way == 1  # the one "due" answer was acted on
    # It asks again only every runner.CHECK_EVERY_S, not before each of the batches.
    assert 1 <= gate.asked < 4000 / 4


def test_the_run_reports_batch_is_profiled_in_the_predictions_scoring_turn(
    process: ModelProcess, model: bytes, inputs: np.ndarray
) -> None:
    turns: list[str] = []

    @contextlib.contextmanager
    def scoring() -> Iterator[_CountingGate]:
        turns.append("scoring")
        yield _CountingGate()
        turns.append("scored")

    @contextlib.contextmanager
    def lock() -> Iterator[bool]:
        turns.append("lock")
        yield True

    hooks = TimingHooks(scoring=scoring, lock=lock)
    outcome = process.evaluate(model, inputs, SPEC, DEVICE, hooks=hooks, report=True)

    assert outcome.report["providers"] and "error" not in outcome.report
    assert turns == ["scoring", "scored", "lock"]  # one turn for both, left before the timing


def test_a_model_that_hangs_while_loading_fails_at_the_time_limit(
    process: ModelProcess, model: bytes, inputs: np.ndarray
) -> None:
    with pytest.raises(EvaluationError, match="time limit of 1 s"):
        process.evaluate(
            model,
            inputs,
            replace(SPEC, time_limit_s=1),
            DEVICE,
            hooks=TimingHooks(),
            test_hook="import time; time.sleep(60)",
        )
    assert not process.alive()


def test_a_killed_model_process_is_reported_with_how_it_ended(
    process: ModelProcess, model: bytes, inputs: np.ndarray
) -> None:
    process.wait_ready()
    threading.Timer(0.5, os.kill, (process.pid, signal.SIGKILL)).start()
    with pytest.raises(ModelProcessDied, match="killed by signal SIGKILL") as died:
        process.evaluate(
            model, inputs, SPEC, DEVICE, hooks=TimingHooks(), test_hook="import time; time.sleep(5)"
        )
    assert died.value.returncode == -signal.SIGKILL


def test_the_model_process_holds_none_of_the_workers_environment(
    model: bytes, inputs: np.ndarray, monkeypatch: Any, tmp_path: Any
) -> None:
    monkeypatch.setenv("SECRET_KEY", "s3cret")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:s3cret@db/portal")
    process = ModelProcess(
        SandboxSettings(scratch_root=str(tmp_path), allow_test_hook=True), DEVICE
    )
    hook = "import os; raise RuntimeError('ENV ' + ' '.join(sorted(os.environ)) + ' END')"
    try:
        with pytest.raises(Exception, match="ENV ") as failed:
            process.evaluate(model, inputs, SPEC, DEVICE, hooks=TimingHooks(), test_hook=hook)
    finally:
        process.stop()
    names = set(str(failed.value).split("ENV ", 1)[1].split(" END", 1)[0].split())
    assert "PATH" in names and "TMPDIR" in names
    assert not names & {"SECRET_KEY", "DATABASE_URL"}, names
    assert "s3cret" not in str(failed.value)


def test_the_model_process_imports_the_onnxruntime_the_worker_found(
    model: bytes, inputs: np.ndarray, monkeypatch: Any, tmp_path: Any
) -> None:
    """A GPU host whose onnxruntime-gpu is on the worker's PYTHONPATH, beside another
    onnxruntime in the interpreter's own site-packages: the model must run on the worker's."""
    import importlib

    import onnxruntime

    site = tmp_path / "site"
    site.mkdir()
    (site / "onnxruntime").symlink_to(os.path.dirname(onnxruntime.__file__))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "onnxruntime")  # as if the worker had found it there first
    importlib.invalidate_caches()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # As the worker builds them (workers.sandboxing), after it found onnxruntime there.
    found = SandboxSettings(
        scratch_root=str(scratch), read_paths=default_read_paths(), allow_test_hook=True
    )
    process = ModelProcess(found, DEVICE)
    hook = "import onnxruntime; raise RuntimeError('FROM ' + onnxruntime.__file__ + ' END')"
    try:
        with pytest.raises(Exception, match="FROM ") as failed:
            process.evaluate(model, inputs, SPEC, DEVICE, hooks=TimingHooks(), test_hook=hook)
    finally:
        process.stop()
    imported = str(failed.value).split("FROM ", 1)[1].split(" END", 1)[0]
    assert imported == str(site / "onnxruntime" / "__init__.py")


def test_a_model_process_that_sends_what_is_not_a_message_fails_the_evaluation(
    process: ModelProcess, model: bytes, inputs: np.ndarray
) -> None:
    # fd 3 is the process's end of the channel (the first descriptor it opens, a copy of stdout).
    hook = "import os, struct, time; os.write(3, struct.pack('!Q', 5) + b'nope!'); time.sleep(30)"
    with pytest.raises(EvaluationError, match="broke the protocol while loading the model"):
        process.evaluate(model, inputs, SPEC, DEVICE, hooks=TimingHooks(), test_hook=hook)
    assert not process.alive()
