"""The worker claims a job's submission and saves its result (workers.jobs.Claim): a work horse
on its way to a success opens no database connection, and every fallback still ends the
submission. Real burst workers (this process) forking real horses on the test Redis and database.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import DatabaseError, connection

from submissions.lifecycle import services
from submissions.models import Submission
from tests.workers.fleet_support import fast_model, nan_classifier, submit
from workers import jobs
from workers.worker import EvaluationWorker


@pytest.fixture(params=[True, False], ids=["ready-horse", "forked-per-job"])
def horses(request: pytest.FixtureRequest, settings: Any) -> bool:
    """Both ways a worker gets a horse: its ready horse, or rq's fork once the job is taken."""
    settings.EVAL_READY_HORSE = request.param
    return bool(request.param)


def _unreachable_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on a new connection to the database fails (in this process and in every process
    forked from it); the connection open already stays open and usable."""
    connection.ensure_connection()
    if connection.vendor == "sqlite":
        monkeypatch.setitem(connection.settings_dict, "NAME", "/nonexistent-directory/x.sqlite3")
    else:
        monkeypatch.setitem(connection.settings_dict, "PORT", "1")


@pytest.mark.django_db(transaction=True)
def test_a_horse_scores_a_model_without_a_database_connection_of_its_own(
    run_worker: Any,
    queue: Any,
    alice: Any,
    make_task: Any,
    horses: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its horses cannot reach the database at all here, yet every model is scored: the worker
    claimed each submission and saved each result on its own connection."""
    task = make_task(submissions_per_day=10)
    submissions = [submit(alice, task, fast_model()) for _ in range(3)]
    _unreachable_database(monkeypatch)

    worker = run_worker()

    rows = list(Submission.objects.filter(pk__in=[s.pk for s in submissions]))
    assert [r.status for r in rows] == ["succeeded"] * 3, [r.error_message for r in rows]
    assert all(r.worker_name == worker.name and r.score is not None for r in rows)
    assert all(r.attempts == 1 for r in rows)  # claimed once, by the worker
    assert worker.fleet_state.jobs_done == 3


@pytest.mark.django_db(transaction=True)
def test_a_horse_still_records_its_models_failure_itself(
    run_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    """A failure is rare and carries the horse's own traceback: the horse opens a connection and
    writes it, as before, and sends no result."""
    task = make_task(submissions_per_day=10)
    broken = submit(alice, task, nan_classifier())

    worker = run_worker()

    row = Submission.objects.get(pk=broken.pk)
    assert row.status == Submission.Status.FAILED
    assert "NaN or infinity" in row.error_message
    assert worker.fleet_state.jobs_failed == 1 and worker.fleet_state.jobs_done == 0


@pytest.mark.django_db(transaction=True)
def test_when_the_workers_claim_fails_the_horse_claims_and_saves_as_before(
    run_worker: Any,
    queue: Any,
    alice: Any,
    make_task: Any,
    horses: bool,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    task = make_task(submissions_per_day=10)
    submission = submit(alice, task, fast_model())
    worker_pid = os.getpid()
    start = services.submission_start

    def refused_in_the_worker(**kwargs: Any) -> Any:
        if os.getpid() == worker_pid:
            raise DatabaseError("connection lost")
        return start(**kwargs)

    monkeypatch.setattr(services, "submission_start", refused_in_the_worker)

    run_worker()

    row = Submission.objects.get(pk=submission.pk)
    assert row.status == Submission.Status.SUCCEEDED, row.error_message
    assert row.attempts == 1
    assert "left to the horse" in caplog.text


class _Unpicklable:
    @staticmethod
    def dumps(value: Any) -> bytes:
        raise TypeError("cannot pickle this result")


@pytest.mark.django_db(transaction=True)
def test_a_result_that_cannot_go_to_the_worker_is_saved_by_the_horse(
    run_worker: Any, queue: Any, alice: Any, make_task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = make_task(submissions_per_day=10)
    submission = submit(alice, task, fast_model())
    monkeypatch.setattr(jobs, "pickle", _Unpicklable)  # in the horse: its result will not go

    worker = run_worker()

    row = Submission.objects.get(pk=submission.pk)
    assert row.status == Submission.Status.SUCCEEDED, row.error_message
    assert row.score is not None
    assert worker.fleet_state.jobs_done == 1  # counted from the row, which the horse wrote


def _no_pidfd(pid: int) -> int:
    raise OSError(38, "Function not implemented")  # ENOSYS: a kernel before Linux 5.3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "waitid-polling"])
def test_the_score_is_saved_while_the_horse_still_finishes_its_job(
    run_worker: Any,
    queue: Any,
    alice: Any,
    make_task: Any,
    horses: bool,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    pidfd: bool,
) -> None:
    """The submitter's wait ends when the worker has the result, not once the horse has done
    rq's bookkeeping and exited: here the horse, in rq's success handling, waits up to 20 s for
    the row to say succeeded, and notes whether it did. Without pidfds the worker watches the
    horse by polling, without reaping it."""
    if not pidfd:
        monkeypatch.setattr(os, "pidfd_open", _no_pidfd)
    task = make_task(submissions_per_day=10)
    submission = submit(alice, task, fast_model())
    seen = tmp_path / "seen"
    handle_job_success = EvaluationWorker.handle_job_success

    def waiting_for_the_row(self: Any, *args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status = Submission.objects.get(pk=submission.pk).status
            if status == Submission.Status.SUCCEEDED:
                break
            time.sleep(0.02)
        seen.write_text(status)
        connection.close()  # the horse's own, opened for this check only
        return handle_job_success(self, *args, **kwargs)

    monkeypatch.setattr(EvaluationWorker, "handle_job_success", waiting_for_the_row)

    run_worker()

    assert seen.read_text() == Submission.Status.SUCCEEDED
    assert Submission.objects.get(pk=submission.pk).status == Submission.Status.SUCCEEDED
