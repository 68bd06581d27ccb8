"""The worker runs each job itself, the model in a model process of its own
(workers/sandboxing.py): while idle it starts the next one and lets it warm up. One model per
model process, replaced after each job; it dies with its worker; a cancel that lands before the
job starts wins; the worker keeps its database connection from job to job. Real worker
processes on the test Redis and database (see fleet_support)."""

from __future__ import annotations

from typing import Any

import psutil
import pytest
from django.db import connection
from rq.exceptions import StopRequested

from evaluation.sandbox import ModelProcess
from queueing import heartbeat
from submissions.lifecycle import services
from submissions.models import Submission
from tests.workers.fleet_support import (
    fast_model,
    final,
    horse_gone,
    online_workers,
    row,
    start_worker,
    submit,
    wait_for,
)
from workers import sandboxing
from workers.device import device_config
from workers.worker import EvaluationWorker

_ = start_worker  # a fixture, used by name


def model_process_of(worker_pid: int) -> int | None:
    """The worker's one model process while it is idle: the one started ahead, a child of its
    model process server (EVAL_MODEL_SERVER) or of the worker itself."""
    live = [
        p.pid
        for p in _live_children(worker_pid, "evaluation.model_process")
        + [c for s in servers_of(worker_pid) for c in _live_children(s, "evaluation.model_server")]
    ]
    return live[0] if len(live) == 1 else None


def servers_of(worker_pid: int) -> list[int]:
    """The worker's model process servers (one at most)."""
    return [p.pid for p in _live_children(worker_pid, "evaluation.model_server")]


def _live_children(pid: int, command: str) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    return [c for c in children if c.status() != psutil.STATUS_ZOMBIE and command in c.cmdline()]


@pytest.mark.django_db(transaction=True)
def test_a_model_process_started_ahead_runs_one_model_and_is_replaced_after_it(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    worker = start_worker("ahead-a")
    wait_for("the worker online", lambda: "ahead-a" in online_workers(queue), 60, [worker])
    first = wait_for("a model process", lambda: model_process_of(worker.pid), 30, [worker])
    task = make_task(submissions_per_day=10)

    done = submit(alice, task, fast_model())
    scored = wait_for("scored", lambda: final(done), 60, [worker])
    assert scored.status == Submission.Status.SUCCEEDED, scored.error_message
    assert horse_gone(first)  # the process that ran it ended
    second = wait_for("the next model process", lambda: model_process_of(worker.pid), 30, [worker])
    assert second != first

    again = submit(alice, task, fast_model())
    assert wait_for("scored", lambda: final(again), 60, [worker]).status == "succeeded"
    assert horse_gone(second)


@pytest.mark.django_db(transaction=True)
def test_a_model_process_dies_with_its_worker(start_worker: Any, queue: Any) -> None:
    worker = start_worker("ahead-b")
    waiting = wait_for("a model process", lambda: model_process_of(worker.pid), 60, [worker])
    servers = servers_of(worker.pid)
    worker.kill()  # SIGKILL: no teardown runs, only the kernel's parent-death signal
    wait_for("the model process gone", lambda: horse_gone(waiting), 10, [worker])
    wait_for("its server gone", lambda: all(map(horse_gone, servers)), 10, [worker])


@pytest.mark.django_db(transaction=True)
def test_a_cancel_that_lands_before_the_job_starts_wins(
    start_worker: Any, queue: Any, alice: Any, make_task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = make_task(submissions_per_day=10)
    submission = submit(alice, task, fast_model())
    # The cancel flips the row while its job stays queued, as when the worker has already taken
    # the job: it must not run the model.
    monkeypatch.setattr(services, "_stop_job", lambda job_id: None)
    assert services.submission_cancel(submission_id=submission.pk, user=alice)
    assert queue.count == 1

    worker = start_worker("ahead-c")
    wait_for("the job taken", lambda: queue.count == 0, 60, [worker])
    job = wait_for("the job done", lambda: queue.fetch_job(submission.job_id).latest_result(), 60)
    assert str(job.return_value).startswith("skipped")
    current = Submission.objects.get(pk=submission.pk)
    assert current.status == Submission.Status.CANCELLED and current.score is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("ahead", [True, False], ids=["started-ahead", "started-per-job"])
def test_a_burst_scores_every_model_on_the_workers_one_database_connection(
    run_worker: Any, queue: Any, alice: Any, make_task: Any, settings: Any, ahead: bool
) -> None:
    """The worker (this process: a burst worker) runs its jobs itself: one database
    connection, kept from job to job, and no model process left once it ends."""
    settings.EVAL_START_AHEAD = ahead
    task = make_task(submissions_per_day=10)
    submissions = [submit(alice, task, fast_model()) for _ in range(3)]
    connection.ensure_connection()
    before = connection.connection

    run_worker()

    assert connection.connection is before
    rows = list(Submission.objects.filter(pk__in=[s.pk for s in submissions]))
    assert [r.status for r in rows] == ["succeeded"] * 3, [r.error_message for r in rows]
    assert model_process_of(psutil.Process().pid) is None
    assert servers_of(psutil.Process().pid) == []


@pytest.mark.django_db(transaction=True)
def test_the_worker_is_shown_busy_with_a_submission_before_its_job_claims_it(
    queue: Any, alice: Any, make_task: Any, monkeypatch: Any
) -> None:
    """Recovery must find the owner of a claim busy with it: the worker publishes that before
    the job claims the submission, and "stopped" when it ends."""
    task = make_task(submissions_per_day=10)
    submissions = [submit(alice, task, fast_model()) for _ in range(2)]
    published: list[tuple[str, int | None, int | None]] = []
    publish = heartbeat.publish

    def recording(connection: Any, state: Any, **kwargs: Any) -> None:
        claimed = Submission.objects.filter(status="running").count()
        published.append((state.state, state.submission_id, claimed))
        publish(connection, state, **kwargs)

    monkeypatch.setattr(heartbeat, "publish", recording)
    EvaluationWorker([queue], connection=queue.connection, name="announces").work(
        burst=True, with_scheduler=False
    )

    assert [row(s).status for s in submissions] == ["succeeded"] * 2
    busy = [(sid, claimed) for state, sid, claimed in published if state == "busy"]
    assert {sid for sid, _ in busy} == {s.pk for s in submissions}
    first_of_each = {sid: claimed for sid, claimed in reversed(busy)}
    assert set(first_of_each.values()) == {0}  # announced before its claim
    assert published[-1][0] == "stopped"


def test_a_stop_request_while_the_next_model_process_warms_up_stops_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """rq's handler raises StopRequested wherever an idle worker is, the warm-up included: it
    goes through (the worker stops), and the half-started model process is stopped with it."""
    started: list[ModelProcess] = []
    real_wait_ready = ModelProcess.wait_ready

    def asked_to_stop(self: ModelProcess, *args: Any, **kwargs: Any) -> Any:
        started.append(self)
        raise StopRequested()

    monkeypatch.setattr(ModelProcess, "wait_ready", asked_to_stop)
    with pytest.raises(StopRequested):
        sandboxing.prepare_ahead(device_config("stopping"))
    assert len(started) == 1 and not started[0].alive()
    monkeypatch.setattr(ModelProcess, "wait_ready", real_wait_ready)
    assert sandboxing.running_pid() is None
    sandboxing.prepare_ahead(device_config("stopping"))  # the next start is a fresh one
    sandboxing.stop_spare()
