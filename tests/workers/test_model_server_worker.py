"""A worker's model process server (EVAL_MODEL_SERVER, evaluation.model_server), in real worker
processes: its model processes are forked by the server, a model process killed under a job is
retried and then failed as one started directly would be, a server that dies is given up for
direct starts, the setting turns it off, and nothing the worker started outlives it."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import onnx
import psutil
import pytest

from submissions.lifecycle import services
from submissions.models import Submission
from tests.workers.fleet_support import (
    fast_model,
    final,
    horse_gone,
    start_worker,
    submit,
    wait_for,
)
from tests.workers.test_start_ahead import model_process_of, servers_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
_ = start_worker

HANG_HOOK = """
import time
if b"hang-me" in model_bytes:
    open("hanging", "w").close()  # in its scratch directory: the test sees the job has it
    time.sleep(600)
"""
GIVEN_UP = "model process server given up"


def _parent(pid: int) -> int:
    return psutil.Process(pid).ppid()


def test_the_worker_forks_its_model_processes_from_its_server(
    start_worker: Any, alice: Any, make_task: Any
) -> None:
    worker = start_worker("forks")
    spare = wait_for("a model process", lambda: model_process_of(worker.pid), 60, [worker])
    assert servers_of(worker.pid) == [_parent(spare)]

    done = submit(alice, make_task(submissions_per_day=10), fast_model())
    scored = wait_for("scored", lambda: final(done), 60, [worker])
    assert scored.status == Submission.Status.SUCCEEDED, scored.error_message
    assert horse_gone(spare)


def test_a_model_process_killed_twice_fails_with_the_retry_message(
    start_worker: Any, alice: Any, make_task: Any
) -> None:
    worker = start_worker("killed", EVAL_SANDBOX_TEST_HOOK=HANG_HOOK)
    model = onnx.load_from_string(fast_model())
    model.doc_string = "hang-me"
    submission = submit(alice, make_task(time_limit_s=120), model.SerializeToString())
    scratch = Path(tempfile.gettempdir()) / "portal-models-killed"
    for attempt in (1, 2):
        hanging = wait_for(f"attempt {attempt} hanging", lambda: _hanging(scratch), 90, [worker])
        os.kill(hanging, signal.SIGKILL)
        wait_for("it gone", lambda pid=hanging: horse_gone(pid), 10, [worker])

    failed = wait_for("failed", lambda: final(submission), 60, [worker])
    assert failed.status == Submission.Status.FAILED and failed.attempts == 2
    assert failed.error_message == services.HORSE_DIED.message
    assert "killed by signal SIGKILL" in failed.log, failed.log


def _hanging(scratch: Path) -> int | None:
    """The model process whose job hangs: the one whose scratch directory has the hook's file."""
    for process in psutil.process_iter():
        try:
            cwd = Path(process.cwd())
        except (psutil.Error, OSError):
            continue
        if cwd.parent == scratch and (cwd / "hanging").exists() and process.status() != "zombie":
            return process.pid
    return None


def test_a_worker_whose_server_died_starts_its_model_processes_itself(
    start_worker: Any, alice: Any, make_task: Any
) -> None:
    worker = start_worker("fallback")
    wait_for("a model process", lambda: model_process_of(worker.pid), 60, [worker])
    (server,) = servers_of(worker.pid)
    os.kill(server, signal.SIGKILL)

    task = make_task(submissions_per_day=10)
    for _ in range(2):
        done = submit(alice, task, fast_model())
        scored = wait_for("scored", lambda: final(done), 60, [worker])  # noqa: B023
        assert scored.status == Submission.Status.SUCCEEDED, scored.error_message
    spare = wait_for("a model process", lambda: model_process_of(worker.pid), 60, [worker])
    assert _parent(spare) == worker.pid and servers_of(worker.pid) == []
    assert worker.log_path.read_text().count(GIVEN_UP) == 1, worker.log()


def test_the_setting_turns_the_server_off(start_worker: Any, alice: Any, make_task: Any) -> None:
    worker = start_worker("no-server", EVAL_MODEL_SERVER="0")
    spare = wait_for("a model process", lambda: model_process_of(worker.pid), 60, [worker])
    assert _parent(spare) == worker.pid and servers_of(worker.pid) == []

    done = submit(alice, make_task(submissions_per_day=10), fast_model())
    scored = wait_for("scored", lambda: final(done), 60, [worker])
    assert scored.status == Submission.Status.SUCCEEDED, scored.error_message
    assert GIVEN_UP not in worker.log_path.read_text()


def test_nothing_the_worker_started_outlives_its_stop(start_worker: Any) -> None:
    worker = start_worker("stops")
    spare = wait_for("a model process", lambda: model_process_of(worker.pid), 60, [worker])
    (server,) = servers_of(worker.pid)

    worker.stop()  # SIGTERM: the worker's own teardown

    assert worker.process.returncode is not None
    assert wait_for("all gone", lambda: horse_gone(spare) and horse_gone(server), 10, [worker])
    assert not (Path(tempfile.gettempdir()) / "portal-models-stops").exists()
