"""Support for the fleet tests: real worker processes, a slow real model, waiting helpers.

Workers are started exactly as in production (``manage.py rqworker evaluation --worker-class
workers.worker.EvaluationWorker``), pointed at the pytest-django test database and the test
Redis database, with short heartbeat and recovery intervals so the tests finish in seconds.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from django.conf import settings
from django.db import connection
from onnx import TensorProto, helper, numpy_helper

from queueing import heartbeat
from submissions.lifecycle.services import submission_create
from submissions.models import Submission
from tests.builders import finish, linear_classifier
from tests.conftest import onnx_upload
from tests.workers.batch_recorder import RECORDING_HOOK
from workers.worker import worker_command

BASE_DIR = Path(settings.BASE_DIR)
FAST_FLEET_ENV = {
    "EVAL_HEARTBEAT_INTERVAL_S": "0.5",
    "EVAL_HEARTBEAT_STALE_S": "3",
    "EVAL_RECOVERY_INTERVAL_S": "1",
    "EVAL_WARMUP_RUNS": "0",
    "EVAL_INTRA_OP_THREADS": "1",
    "EVAL_TIMING_MIN_TIME_S": "0.01",
    "EVAL_TIMING_MIN_BATCHES": "4",
    "EVAL_TIMING_PASSES": "2",
    "EVAL_TIMING_PRECISION": "0",
}


def slow_classifier(iterations: int, classes: int = 10) -> bytes:
    """A real model that takes its time: a Loop of ``iterations`` small MatMuls per batch.

    logits = flatten(x) @ W + sum(loop state); the loop state stays zero, so the scores are
    those of the linear part, and each batch costs about ``iterations`` operator calls.
    """
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", classes])
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("MatMul", ["state_in", "M"], ["state_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("state_in", TensorProto.FLOAT, [1, classes]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("state_out", TensorProto.FLOAT, [1, classes]),
        ],
    )
    nodes = [
        helper.make_node("Loop", ["trips", "cond", "state0"], ["state"], body=body),
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "state"], ["output"]),
    ]
    init = [
        numpy_helper.from_array(np.array(iterations, dtype=np.int64), "trips"),
        numpy_helper.from_array(np.array(True), "cond"),
        numpy_helper.from_array(np.zeros((1, classes), np.float32), "state0"),
        numpy_helper.from_array(np.eye(classes, dtype=np.float32), "M"),
        numpy_helper.from_array(rng.normal(size=(64, classes)).astype(np.float32), "W"),
    ]
    return finish(helper.make_graph(nodes, "slow", [x], [y], init))


def database_url() -> str:
    """The URL of the database this test runs on (pytest-django's test database)."""
    s = connection.settings_dict
    if s["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] or ""
    if s.get("PASSWORD"):
        auth += f":{s['PASSWORD']}"
    return f"postgres://{auth}@{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """kill -9: no clean shutdown, no death registered, exactly like a lost machine."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(FAST_FLEET_ENV)
    env.update(
        DATABASE_URL=database_url(),
        DATABASE_CONN_MAX_AGE="0",
        REDIS_URL=settings.REDIS_URL,
        MEDIA_ROOT=str(settings.MEDIA_ROOT),
        EVAL_CACHE_DIR=str(settings.EVAL_CACHE_DIR),
        EVAL_DEVICE="cpu",
        SECRET_KEY=env.get("SECRET_KEY") or "insecure-test-only-key",
        PYTHONUNBUFFERED="1",
        BOARD_CACHE_NAMESPACE=settings.BOARD_CACHE_NAMESPACE,
    )
    env.update(extra or {})
    return env


@pytest.fixture
def start_worker(
    transactional_db: Any, queue: Any, tmp_path: Path, settings: Any
) -> Iterator[Callable]:
    """Start real worker processes; every one still running is stopped after the test.

    This test process reads heartbeats and runs recovery with the same short intervals.
    """
    settings.EVAL_HEARTBEAT_INTERVAL_S = float(FAST_FLEET_ENV["EVAL_HEARTBEAT_INTERVAL_S"])
    settings.EVAL_HEARTBEAT_STALE_S = float(FAST_FLEET_ENV["EVAL_HEARTBEAT_STALE_S"])
    settings.EVAL_RECOVERY_INTERVAL_S = float(FAST_FLEET_ENV["EVAL_RECOVERY_INTERVAL_S"])
    started: list[WorkerProcess] = []

    def start(name: str, record_batches: bool = False, **extra: str) -> WorkerProcess:
        """``record_batches``: the worker's log says when each batch ran (batch_recorder)."""
        log_path = tmp_path / f"{name}.log"
        command = worker_command(name)
        if record_batches:
            extra = {"EVAL_SANDBOX_TEST_HOOK": RECORDING_HOOK, **extra}
        with log_path.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=BASE_DIR, env=worker_env(extra), stdout=out, stderr=subprocess.STDOUT
            )
        worker = WorkerProcess(name=name, process=process, log_path=log_path)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()  # no clean shutdown: its model processes' scratch goes here, not in it
        shutil.rmtree(Path(tempfile.gettempdir()) / f"portal-models-{worker.name}", True)


def wait_for(
    what: str, check: Callable[[], Any], timeout: float, workers: list[WorkerProcess] = ()
) -> Any:
    """Poll ``check`` until it returns something truthy; fail with the workers' logs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    logs = "\n".join(f"--- {w.name} ---\n{w.log()}" for w in workers)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}\n{logs}")


_model_seeds = itertools.count(1_000)


def fast_model(seed: int | None = None) -> bytes:
    """A small linear classifier; a fresh one per call unless seeded, because the same file
    twice for the same task is refused as a duplicate."""
    rng = np.random.default_rng(next(_model_seeds) if seed is None else seed)
    return linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))


def submit(user: Any, task: Any, model: bytes) -> Submission:
    return submission_create(user=user, task=task, upload=onnx_upload(model))


def row(submission: Submission) -> Submission:
    return Submission.objects.get(pk=submission.pk)


def final(submission: Submission) -> Submission | None:
    current = row(submission)
    return current if current.is_final else None


def online_workers(queue: Any) -> dict[str, heartbeat.WorkerState]:
    return {s.name: s for s in heartbeat.read_states(queue.connection) if heartbeat.is_online(s)}


def running_on(submission: Submission, worker: str, queue: Any) -> heartbeat.WorkerState | None:
    """The worker's heartbeat once its job is evaluating the submission (progress > 0)."""
    current = row(submission)
    state = online_workers(queue).get(worker)
    if current.status == "running" and current.progress > 0 and state and state.horse_pid:
        return state
    return None


def horse_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def nan_classifier(classes: int = 10) -> bytes:
    """Passes inspection, fails evaluation: sqrt of a negative score is NaN (non-finite)."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", classes])
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["mm"]),
        helper.make_node("Sqrt", ["mm"], ["output"]),
    ]
    weights = numpy_helper.from_array(-np.ones((64, classes), np.float32), "W")
    return finish(helper.make_graph(nodes, "nan", [x], [y], [weights]))
