"""Restarts: a worker killed with SIGKILL comes back under its name at once, and its submission
runs again within seconds, not minutes.

Real ``manage.py rqworker`` processes on the real test Redis and database (see fleet_support);
``benchmarks/kill_recovery.py`` measures the same with production intervals, ten times.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from queueing import heartbeat
from queueing.heartbeat import WorkerState
from submissions.models import Submission
from tests.workers.fleet_support import (
    fast_model,
    final,
    online_workers,
    row,
    running_on,
    slow_classifier,
    start_worker,
    submit,
    wait_for,
)
from workers.recovery import reconcile
from workers.registration import dead_registration, process_alive

_ = start_worker  # a fixture, used by name
SLOW_ITERATIONS = 400_000  # about 0.7 s per batch of 16 on one core of this machine; 7 batches


def registered_pid(queue: Any, name: str) -> int | None:
    raw = queue.connection.hget(f"rq:worker:{name}", "pid")
    return int(raw) if raw else None


def state(pid: int, *, age: float, stopped: bool = False) -> WorkerState:
    return WorkerState(
        name="w", host="other-host", pid=pid, state="stopped" if stopped else "idle",
        device="cpu", started_at=0.0, last_heartbeat=time.time() - age,
    )  # fmt: skip


def test_a_registration_is_dead_only_on_proof(settings: Any) -> None:
    settings.EVAL_HEARTBEAT_STALE_S = 15
    here = {"hostname": "gpu-host-1", "pid": "4242"}
    alive = {4242}

    def pid_alive(pid: int) -> bool:
        return pid in alive

    assert dead_registration(here, None, host="gpu-host-1", pid=77, pid_alive=pid_alive) is None
    alive.clear()
    assert dead_registration(here, None, host="gpu-host-1", pid=77, pid_alive=pid_alive) == (
        "its process 4242 on gpu-host-1 is gone"
    )
    # A container restarted by Docker: same hostname, and the worker is pid 1 again.
    one = {"hostname": "c0ffee", "pid": "1"}
    assert (
        dead_registration(one, None, host="c0ffee", pid=1)
        == "its pid 1 on c0ffee is now this process"
    )
    # Another host: only a stale or stopped heartbeat of that very process proves it.
    there = {"hostname": "other-host", "pid": "9"}
    assert dead_registration(there, None, host="gpu-host-1") is None
    assert dead_registration(there, state(9, age=2), host="gpu-host-1") is None
    assert dead_registration(there, state(8, age=99), host="gpu-host-1") is None
    assert dead_registration(there, state(9, age=20), host="gpu-host-1").startswith("no heartbeat")
    assert dead_registration(there, state(9, age=1, stopped=True), host="gpu-host-1")


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_worker_restarted_under_its_name_after_kill_9_starts_at_once(
    start_worker: Any, queue: Any
) -> None:
    first = start_worker("phoenix")
    wait_for(
        "phoenix registered", lambda: registered_pid(queue, "phoenix") == first.pid, 60, [first]
    )
    first.kill()

    second = start_worker("phoenix")

    # rq used to refuse the name ("There exists an active worker named 'phoenix' already")
    # until the dead registration expired, about 8 minutes later.
    wait_for("phoenix again", lambda: registered_pid(queue, "phoenix") == second.pid, 60, [second])
    assert second.process.poll() is None
    assert "clearing its previous registration: its process" in second.log()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_worker_restarted_after_kill_9_runs_its_submission_again_at_once(
    start_worker: Any, queue: Any, alice: Any, make_task: Any, settings: Any
) -> None:
    # Heartbeats stale only after a minute: only the restart itself can prove the first death.
    settings.EVAL_HEARTBEAT_STALE_S = 60.0
    task = make_task(time_limit_s=120)
    first = start_worker("phoenix", EVAL_HEARTBEAT_STALE_S="60")
    submission = submit(alice, task, slow_classifier(SLOW_ITERATIONS))
    wait_for("phoenix evaluating", lambda: running_on(submission, "phoenix", queue), 90, [first])
    first.kill()

    second = start_worker("phoenix", EVAL_HEARTBEAT_STALE_S="60")

    def running_again() -> bool:
        current = row(submission)
        return current.attempts == 2 and current.status in ("running", "succeeded")

    wait_for("the submission running again", running_again, 30, [second])
    done = wait_for("the submission to finish", lambda: final(submission), 120, [second])
    assert done.status == "succeeded" and done.worker_name == "phoenix"


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_after_kill_9_a_peer_runs_the_submission_again_within_30_s(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    # The short mode of benchmarks/kill_recovery.py (fleet intervals: stale 3 s, recovery 1 s).
    task = make_task(time_limit_s=120)
    workers = {"peer-a": start_worker("peer-a"), "peer-b": start_worker("peer-b")}
    wait_for("both online", lambda: len(online_workers(queue)) == 2, 60, list(workers.values()))
    submission = submit(alice, task, slow_classifier(SLOW_ITERATIONS))
    busy = wait_for(
        "one evaluating",
        lambda: running_on(submission, "peer-a", queue) or running_on(submission, "peer-b", queue),
        90,
        list(workers.values()),
    )
    workers[busy.name].kill()

    wait_for("running again", lambda: row(submission).attempts == 2, 30, [*workers.values()])
    done = wait_for("the submission to finish", lambda: final(submission), 120, [*workers.values()])
    assert done.status == "succeeded" and done.worker_name != busy.name


def running_submission(user: Any, task: Any, worker: str, started: float) -> Submission:
    submission = submit(user, task, fast_model())
    Submission.objects.filter(pk=submission.pk).update(
        status="running",
        attempts=1,
        worker_name=worker,
        started_at=datetime.fromtimestamp(started, tz=UTC),
    )
    return submission


def heartbeat_of(queue: Any, name: str, *, started_at: float, age: float = 0.0) -> None:
    state = WorkerState(
        name=name, host="h", pid=1, state="idle", device="cpu", started_at=started_at
    )
    heartbeat.publish(queue.connection, state)
    queue.connection.hset(heartbeat.worker_key(name), "last_heartbeat", time.time() - age)


@pytest.mark.django_db(transaction=True)
def test_recovery_retries_at_once_what_a_stale_or_restarted_worker_provably_lost(
    queue: Any, alice: Any, make_task: Any, settings: Any
) -> None:
    settings.EVAL_HEARTBEAT_STALE_S = 15.0
    task = make_task(submissions_per_day=100)
    now = time.time()
    heartbeat_of(queue, "went-silent", started_at=now - 600, age=16)
    heartbeat_of(queue, "restarted", started_at=now - 5)  # online, but younger than its job
    heartbeat_of(queue, "alive-idle", started_at=now - 600)
    silent = running_submission(alice, task, "went-silent", now - 60)
    restarted = running_submission(alice, task, "restarted", now - 60)
    unknown = running_submission(alice, task, "no-heartbeat-at-all", now - 60)
    idle = running_submission(alice, task, "alive-idle", now - 60)

    report = reconcile()

    # Before, every unclaimed submission waited one more stale period (15 s) as a suspect.
    assert sorted(report.retried) == sorted([silent.pk, restarted.pk])
    # No heartbeat at all (Redis lost?) or an unclaiming live worker: wait and see, as before.
    assert sorted(report.suspects) == sorted([unknown.pk, idle.pk])


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_second_worker_under_a_live_workers_name_is_refused_and_touches_nothing(
    start_worker: Any, queue: Any
) -> None:
    from workers.worker import EvaluationWorker

    live = start_worker("twin")
    # Registered with rq, then its first heartbeat published: both, before the impostor comes
    # (asking for the registration alone raced the heartbeat on a loaded box).
    wait_for(
        "twin registered and online",
        lambda: registered_pid(queue, "twin") == live.pid and "twin" in online_workers(queue),
        60,
        [live],
    )
    scratch = Path(tempfile.gettempdir()) / "portal-models-twin"
    wait_for(
        "twin's model process started ahead",
        lambda: scratch.exists() and any(scratch.iterdir()),
        30,
        [live],
    )
    impostor = EvaluationWorker([queue], connection=queue.connection, name="twin")

    with pytest.raises(ValueError, match="There exists an active worker named 'twin' already"):
        impostor.work(burst=True, with_scheduler=False)

    assert registered_pid(queue, "twin") == live.pid
    twin = online_workers(queue)["twin"]
    assert twin.pid == live.pid and twin.state == "idle"  # its heartbeat was not overwritten
    assert any(scratch.iterdir())  # nor its model process's scratch directory removed


def test_a_killed_worker_not_yet_reaped_counts_as_gone() -> None:
    """``kill -9`` leaves a zombie until the parent waits for it: its pid still exists, but no
    worker runs there, and a restart under its name must not be refused for it."""
    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert psutil.pid_exists(child)  # what was asked before, and said "alive"
        assert not process_alive(child)
        fields = {"hostname": "here", "pid": str(child)}
        assert dead_registration(fields, None, host="here") == (
            f"its process {child} on here is gone"
        )
    finally:
        os.waitpid(child, 0)
    assert process_alive(os.getpid())
    assert not process_alive(child)  # reaped: no such process
