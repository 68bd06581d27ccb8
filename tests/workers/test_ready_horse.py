"""The ready work horse (workers/ready_horse.py): forked and warmed up while its worker is
idle, it still runs exactly one model per process and is replaced after each job; it dies with its
worker, and a cancel that lands before it starts the model wins. Real worker processes on the test
Redis and database (see fleet_support)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import psutil
import pytest
from django.db import connection

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
from workers import ready_horse
from workers.device import DeviceChoice
from workers.worker import EvaluationWorker

_ = start_worker  # a fixture, used by name


def ready_horse_of(worker_pid: int) -> int | None:
    """The worker's one child while it is idle: its ready horse."""
    try:
        children = psutil.Process(worker_pid).children()
    except psutil.NoSuchProcess:
        return None
    live = [c.pid for c in children if c.status() != psutil.STATUS_ZOMBIE]
    return live[0] if len(live) == 1 else None


@pytest.mark.django_db(transaction=True)
def test_a_ready_horse_runs_one_job_and_is_replaced_after_it(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    worker = start_worker("ready-a")
    wait_for("the worker online", lambda: "ready-a" in online_workers(queue), 60, [worker])
    first = wait_for("a ready horse", lambda: ready_horse_of(worker.pid), 30, [worker])
    task = make_task(submissions_per_day=10)

    done = submit(alice, task, fast_model())
    scored = wait_for("scored", lambda: final(done), 60, [worker])
    assert scored.status == Submission.Status.SUCCEEDED, scored.error_message
    assert horse_gone(first)  # the horse that ran it exited
    second = wait_for("the next ready horse", lambda: ready_horse_of(worker.pid), 30, [worker])
    assert second != first

    again = submit(alice, task, fast_model())
    assert wait_for("scored", lambda: final(again), 60, [worker]).status == "succeeded"
    assert horse_gone(second)


@pytest.mark.django_db(transaction=True)
def test_a_ready_horse_dies_with_its_worker(start_worker: Any, queue: Any) -> None:
    worker = start_worker("ready-b")
    horse = wait_for("a ready horse", lambda: ready_horse_of(worker.pid), 60, [worker])
    worker.kill()  # SIGKILL: no teardown runs, only the kernel's parent-death signal
    wait_for("the ready horse gone", lambda: horse_gone(horse), 10, [worker])


@pytest.mark.django_db(transaction=True)
def test_a_cancel_that_reaches_a_ready_horse_before_it_starts_wins(
    start_worker: Any, queue: Any, alice: Any, make_task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = make_task(submissions_per_day=10)
    submission = submit(alice, task, fast_model())
    # The cancel flips the row while its job stays queued, as when the worker has already taken
    # the job and handed it to the ready horse: the horse must not run the model.
    monkeypatch.setattr(services, "_stop_job", lambda job_id: None)
    assert services.submission_cancel(submission_id=submission.pk, user=alice)
    assert queue.count == 1

    worker = start_worker("ready-c")
    wait_for("the job taken", lambda: queue.count == 0, 60, [worker])
    job = wait_for("the job done", lambda: queue.fetch_job(submission.job_id).latest_result(), 60)
    assert str(job.return_value).startswith("skipped")
    current = Submission.objects.get(pk=submission.pk)
    assert current.status == Submission.Status.CANCELLED and current.score is None
    wait_for("a new ready horse", lambda: ready_horse_of(worker.pid), 30, [worker])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("ready", [True, False], ids=["ready-horse", "forked-per-job"])
def test_the_worker_keeps_its_database_connection_while_its_horses_use_their_own(
    run_worker: Any, queue: Any, alice: Any, make_task: Any, settings: Any, ready: bool
) -> None:
    """The worker (this process: a burst worker) forks a horse per job; each horse leaves the
    inherited connection alone (opening its own only to record a failure or progress), so the
    worker's stays open and usable: the worker claims and saves on it."""
    settings.EVAL_READY_HORSE = ready
    task = make_task(submissions_per_day=10)
    submissions = [submit(alice, task, fast_model()) for _ in range(3)]
    connection.ensure_connection()
    before = connection.connection

    run_worker()

    assert connection.connection is before  # not closed and opened again around each fork
    rows = list(Submission.objects.filter(pk__in=[s.pk for s in submissions]))
    assert [r.status for r in rows] == ["succeeded"] * 3, [r.error_message for r in rows]


@pytest.mark.django_db(transaction=True)
def test_a_ready_horse_found_dead_at_the_hand_over_is_replaced_and_the_new_horse_announced(
    queue: Any, alice: Any, make_task: Any, settings: Any, monkeypatch: Any
) -> None:
    """A ready horse found dead at the hand-over is never announced: the worker's claim goes
    out without a horse (with rq's preparation), then the horse rq forks for the same job is
    announced, and the job runs in it."""
    settings.EVAL_READY_HORSE = True
    task = make_task(submissions_per_day=10)
    submission = submit(alice, task, fast_model())
    worker = EvaluationWorker([queue], connection=queue.connection, name="ready-dead")
    published: list[tuple[str, int | None]] = []
    killed: list[int] = []
    execute_job = worker.execute_job
    publish_into = heartbeat.publish_into

    def recording_publish_into(pipe: Any, state: Any, **kwargs: Any) -> None:
        published.append((state.state, state.horse_pid))
        publish_into(pipe, state, **kwargs)

    def execute_job_after_the_ready_horse_died(job: Any, job_queue: Any) -> None:
        ready = worker._ready
        assert ready is not None  # warmed up while the worker dequeued
        os.kill(ready.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while psutil.Process(ready.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the ready horse did not die"
            time.sleep(0.01)
        killed.append(ready.pid)
        published.clear()
        execute_job(job, job_queue)

    monkeypatch.setattr(heartbeat, "publish_into", recording_publish_into)
    worker.execute_job = execute_job_after_the_ready_horse_died  # type: ignore[method-assign,assignment]
    worker.work(burst=True, with_scheduler=False)

    assert row(submission).status == Submission.Status.SUCCEEDED
    [dead] = killed
    busy = [pid for state, pid in published if state == "busy"]
    assert dead not in busy
    assert busy[0] is None  # the claim, before any horse has the job
    assert busy[-1] is not None and horse_gone(busy[-1])  # then rq's fork, which ran it
    assert len(set(busy)) == 2
    last_busy = max(i for i, (state, _) in enumerate(published) if state == "busy")
    assert published[last_busy + 1] == ("idle", None)  # the job over: no horse is named


@pytest.mark.django_db(transaction=True)
def test_a_cpu_worker_with_jobs_waiting_forks_each_horse_after_its_claim(
    queue: Any, alice: Any, make_task: Any, settings: Any
) -> None:
    """The first job of a burst goes to the ready horse forked while the worker was idle; while
    jobs still wait, a CPU worker forks each next horse after its claim, as rq does; once the
    queue is empty it forks a ready horse again (and stops it when the burst worker ends)."""
    settings.EVAL_READY_HORSE = True
    task = make_task(submissions_per_day=10)
    submissions = [submit(alice, task, fast_model()) for _ in range(3)]
    worker = EvaluationWorker([queue], connection=queue.connection, name="burst-cpu")
    ways: list[str] = []
    readies: list[int] = []
    hand_over, ensure = worker._hand_to_ready_horse, worker._ensure_ready_horse

    def recording_hand_over(job: Any, job_queue: Any) -> bool:
        handed = hand_over(job, job_queue)  # the real hand-over, or False without a ready horse
        ways.append("ready horse" if handed else "forked after the claim")
        return handed

    def recording_ensure() -> None:
        ensure()
        if worker._ready is not None and worker._ready.pid not in readies:
            readies.append(worker._ready.pid)

    worker._hand_to_ready_horse = recording_hand_over  # type: ignore[method-assign]
    worker._ensure_ready_horse = recording_ensure  # type: ignore[method-assign]
    worker.work(burst=True, with_scheduler=False)

    rows = [row(s) for s in submissions]
    assert [r.status for r in rows] == ["succeeded"] * 3, [r.error_message for r in rows]
    assert ways == ["ready horse", "forked after the claim", "forked after the claim"]
    assert len(readies) == 2  # before the first job, and after the last, with the queue empty
    assert all(horse_gone(pid) for pid in readies)


@pytest.mark.django_db(transaction=True)
def test_a_gpu_worker_keeps_its_ready_horse_while_jobs_wait(queue: Any, settings: Any) -> None:
    """A GPU worker's ready horse warms CUDA up ahead of its job, so it is forked with jobs
    waiting too. (The device choice is set as start_device sets it after a passing CUDA
    self-test; this machine has no GPU, so the horse itself warms up on the CPU.)"""
    settings.EVAL_READY_HORSE = True
    cpu = EvaluationWorker([queue], connection=queue.connection, name="waits-cpu")
    gpu = EvaluationWorker([queue], connection=queue.connection, name="waits-gpu")
    gpu.device_choice = DeviceChoice(use_cuda=True)
    try:
        cpu._job_waits = True
        cpu._ensure_ready_horse()
        assert cpu._ready is None
        cpu._ensure_ready_horse()  # once: the dequeue after it may have found the queue empty
        assert cpu._ready is not None
        gpu._job_waits = True
        gpu._ensure_ready_horse()
        assert gpu._ready is not None
    finally:
        for worker in (cpu, gpu):
            if worker._ready is not None:
                ready_horse.stop(worker._ready)  # ends and reaps it
                assert horse_gone(worker._ready.pid)
