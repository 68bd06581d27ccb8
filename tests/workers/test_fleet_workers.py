"""The fleet with real worker processes, real Redis and the real test database.

Each test starts ``manage.py rqworker ... --worker-class workers.worker.EvaluationWorker``
subprocesses (heartbeat 0.5 s, stale after 3 s, recovery every 1 s) and kills them for real.
"""

from __future__ import annotations

import os
import signal
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from submissions.lifecycle.services import WORKER_LOST, submission_rerun
from tests.workers.fleet_support import (
    fast_model,
    final,
    horse_gone,
    online_workers,
    row,
    running_on,
    slow_classifier,
    start_worker,
    submit,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
_ = start_worker  # a fixture, used by name
SLOW_ITERATIONS = 400_000  # about 0.7 s per batch of 16 on one core of this machine; 7 batches


def test_two_workers_drain_one_queue_without_evaluating_anything_twice(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=100)
    workers = [start_worker("drain-a"), start_worker("drain-b")]
    wait_for("both workers online", lambda: len(online_workers(queue)) == 2, 60, workers)

    submissions = [submit(alice, task, fast_model(i)) for i in range(16)]

    def all_final() -> bool:
        return all(final(s) for s in submissions)

    wait_for("all 16 submissions final", all_final, 180, workers)
    rows = [row(s) for s in submissions]
    assert {r.status for r in rows} == {"succeeded"}
    assert all(r.attempts == 1 for r in rows)  # each was started exactly once
    assert {r.worker_name for r in rows} == {"drain-a", "drain-b"}

    def all_counted_and_idle() -> bool:  # a job refreshes the board after its result
        states = online_workers(queue).values()
        return sum(s.jobs_done for s in states) == 16 and all(s.state == "idle" for s in states)

    wait_for("heartbeats counting every job, both idle", all_counted_and_idle, 10, workers)


def test_a_worker_killed_mid_evaluation_has_its_submission_rerun_to_success(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(time_limit_s=120)
    first = start_worker("kill-a")
    submission = submit(alice, task, slow_classifier(SLOW_ITERATIONS))
    state = wait_for(
        "kill-a evaluating", lambda: running_on(submission, "kill-a", queue), 90, [first]
    )

    first.kill()  # kill -9 the worker process itself
    wait_for("the model process to die with its worker", lambda: horse_gone(state.horse_pid), 10)
    assert row(submission).status == "running"  # nothing has noticed yet
    second = start_worker("kill-b")

    done = wait_for("the submission to finish", lambda: final(submission), 120, [first, second])
    assert done.status == "succeeded", done.error_message
    assert done.attempts == 2 and done.worker_name == "kill-b"
    assert "kill-a stopped responding" in done.log
    assert done.score is not None and done.samples_evaluated == 100


def test_a_model_process_killed_alone_is_retried_by_its_own_worker(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(time_limit_s=120)
    worker = start_worker("oom-a")
    submission = submit(alice, task, slow_classifier(SLOW_ITERATIONS))
    state = wait_for("evaluating", lambda: running_on(submission, "oom-a", queue), 90, [worker])

    os.kill(state.horse_pid, signal.SIGKILL)  # what the kernel's OOM killer does

    done = wait_for("the submission to finish", lambda: final(submission), 120, [worker])
    assert done.status == "succeeded", done.error_message
    assert done.attempts == 2 and done.worker_name == "oom-a"
    assert (
        "the evaluation process died (while running the model: it was killed by signal SIGKILL);"
        " retrying" in done.log
    )
    assert worker.process.poll() is None  # the worker itself kept serving


def test_a_submission_whose_worker_is_killed_twice_fails_with_a_plain_message(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(time_limit_s=120)
    submission = submit(alice, task, slow_classifier(SLOW_ITERATIONS))
    for attempt, name in enumerate(["twice-a", "twice-b"], start=1):
        # twice-b's own periodic recovery finds twice-a's submission unclaimed and retries it.
        worker = start_worker(name)
        wait_for(
            f"{name} evaluating", lambda n=name: running_on(submission, n, queue), 90, [worker]
        )
        assert row(submission).attempts == attempt
        worker.kill()

    wait_for("twice-b shown offline", lambda: "twice-b" not in online_workers(queue), 15)
    out = StringIO()
    call_command("reconcile", stdout=out)  # no worker left: the operator's command decides

    done = row(submission)
    assert done.status == "failed", out.getvalue()
    assert done.error_message == WORKER_LOST.message
    assert done.failed_by_system and done.score is None
    assert "failed 1 running" in out.getvalue()


def test_cancelling_a_running_evaluation_stops_its_model_process_and_keeps_the_worker_serving(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(time_limit_s=120)
    worker = start_worker("cancel-a")
    submission = submit(alice, task, slow_classifier(SLOW_ITERATIONS))
    state = wait_for("evaluating", lambda: running_on(submission, "cancel-a", queue), 90, [worker])
    client = APIClient()
    client.force_authenticate(alice)

    response = client.post(f"/api/submissions/{submission.pk}/cancel/")

    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    wait_for("the model process to be killed", lambda: horse_gone(state.horse_pid), 20, [worker])
    wait_for("the worker idle", lambda: online_workers(queue)["cancel-a"].state == "idle", 20)
    again = client.post(f"/api/submissions/{submission.pk}/cancel/")
    assert again.status_code == 409  # idempotent: nothing changes the second time
    cancelled = row(submission)
    assert cancelled.status == "cancelled" and cancelled.score is None
    assert cancelled.attempts == 1

    after = submit(alice, task, fast_model())
    assert wait_for("the next submission", lambda: final(after), 60, [worker]).status == (
        "succeeded"
    )
    assert row(submission).status == "cancelled"  # recovery left it alone


def test_an_operator_rerun_is_evaluated_again_and_rerunning_twice_changes_nothing(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task()
    worker = start_worker("rerun-a")
    submission = submit(alice, task, fast_model())
    first = wait_for("first run", lambda: final(submission), 60, [worker])
    assert first.status == "succeeded"

    assert submission_rerun(submission_id=submission.pk) is True
    assert submission_rerun(submission_id=submission.pk) is False  # already queued again

    again = wait_for("re-run", lambda: final(submission), 60, [worker])
    assert again.status == "succeeded" and again.attempts == 1
    assert again.score == first.score
    assert again.finished_at > first.finished_at
