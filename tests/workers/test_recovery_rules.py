"""workers/recovery.py rule by rule, on the real test database and Redis, without workers.

Workers are represented by the heartbeats they would publish (queueing/heartbeat.py). Time is
a clock the test moves (recovery takes it as an argument): nothing here sleeps.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.utils import timezone

from queueing import heartbeat
from submissions.lifecycle.services import WORKER_LOST, submission_create
from submissions.models import Submission
from tests.conftest import onnx_upload
from tests.workers.fleet_support import fast_model
from workers import recovery
from workers.recovery import reconcile, reconcile_if_due

pytestmark = pytest.mark.django_db(transaction=True)
STALE_S = 1.0


@pytest.fixture(autouse=True)
def _fast(settings: Any) -> None:
    settings.EVAL_HEARTBEAT_STALE_S = STALE_S


class Clock:
    """Seconds since the epoch, moved on by the test instead of by waiting."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def task(make_task: Any) -> Any:
    return make_task(submissions_per_day=100)


def submitted(user: Any, task: Any, **fields: Any) -> Submission:
    """A real upload (enqueued on commit), then put in the given state as a worker would."""
    submission = submission_create(user=user, task=task, upload=onnx_upload(fast_model()))
    if fields:
        Submission.objects.filter(pk=submission.pk).update(**fields)
    return Submission.objects.get(pk=submission.pk)


def running(user: Any, task: Any, attempts: int = 1) -> Submission:
    return submitted(
        user,
        task,
        status="running",
        attempts=attempts,
        started_at=timezone.now(),
        worker_name="gone-worker",
    )


def claim(queue: Any, name: str, submission: Submission | None, clock: Clock) -> None:
    heartbeat.publish(
        queue.connection,
        heartbeat.WorkerState(
            name=name,
            host="h",
            pid=1,
            state="busy" if submission else "idle",
            device="cpu",
            started_at=time.time(),
            submission_id=submission.pk if submission else None,
        ),
        now=clock(),
    )


def test_a_queued_submission_whose_job_vanished_is_enqueued_again(
    queue: Any, alice: Any, task: Any
) -> None:
    lost = submitted(alice, task)
    kept = submitted(alice, task)
    queue.connection.delete(f"rq:job:{lost.job_id}")
    queue.connection.lrem(queue.key, 0, lost.job_id)

    report = reconcile()

    assert report.enqueued == [lost.pk]
    assert queue.count == 2
    assert Submission.objects.get(pk=lost.pk).job_id != lost.job_id
    assert Submission.objects.get(pk=kept.pk).job_id == kept.job_id  # never a second job


def test_a_job_taken_off_the_queue_by_a_live_worker_is_left_alone(
    queue: Any, alice: Any, task: Any
) -> None:
    submission = submitted(alice, task)
    # rq moves a dequeued job to its intermediate list before marking it started
    queue.connection.lmove(queue.key, queue.intermediate_queue_key)

    assert reconcile().enqueued == []
    assert queue.count == 0
    assert Submission.objects.get(pk=submission.pk).job_id == submission.job_id


def test_a_running_submission_nobody_claims_is_retried_only_after_the_stale_period(
    queue: Any, alice: Any, task: Any, clock: Clock
) -> None:
    submission = running(alice, task)

    first = reconcile(clock=clock)
    assert first.suspects == [submission.pk] and not first.changed
    clock.advance(STALE_S * 0.9)
    assert reconcile(clock=clock).suspects == [submission.pk]
    assert Submission.objects.get(pk=submission.pk).status == "running"
    clock.advance(STALE_S * 0.2)
    second = reconcile(clock=clock)

    assert second.retried == [submission.pk]
    retried = Submission.objects.get(pk=submission.pk)
    assert retried.status == "queued" and retried.attempts == 1 and retried.progress == 0
    assert "gone-worker stopped responding" in retried.log
    assert queue.count == 2  # the original job and the retry; the first to start wins


def test_a_running_submission_its_worker_still_claims_is_never_touched(
    queue: Any, alice: Any, task: Any, clock: Clock
) -> None:
    submission = running(alice, task)
    for _ in range(3):
        claim(queue, "alive", submission, clock)
        assert not reconcile(clock=clock).suspects
        clock.advance(STALE_S * 0.6)

    assert Submission.objects.get(pk=submission.pk).status == "running"


def test_a_second_loss_fails_the_submission_as_not_the_models_fault(
    queue: Any, alice: Any, task: Any, clock: Clock
) -> None:
    submission = running(alice, task, attempts=2)
    Submission.objects.filter(pk=submission.pk).update(log="attempt 1: first lines\n")
    reconcile(clock=clock)
    clock.advance(STALE_S + 0.1)

    assert reconcile(clock=clock).failed == [submission.pk]

    failed = Submission.objects.get(pk=submission.pk)
    assert failed.status == "failed" and failed.error_message == WORKER_LOST.message
    assert failed.failed_by_system and failed.score is None
    assert failed.log.startswith("attempt 1: first lines\n")  # the earlier attempt is kept
    assert "attempt 2: worker gone-worker stopped responding" in failed.log


def test_a_submission_that_moved_on_meanwhile_is_not_retried(
    queue: Any, alice: Any, task: Any, clock: Clock
) -> None:
    submission = running(alice, task)
    reconcile(clock=clock)
    # its worker finished it just before the second look
    Submission.objects.filter(pk=submission.pk).update(status="succeeded", score=0.5)
    clock.advance(STALE_S + 0.1)

    report = reconcile(clock=clock)

    assert not report.changed
    done = Submission.objects.get(pk=submission.pk)
    assert done.status == "succeeded" and done.score == 0.5


def test_final_submissions_are_never_touched(
    queue: Any, alice: Any, task: Any, clock: Clock
) -> None:
    finals = [submitted(alice, task, status=s) for s in ("succeeded", "failed", "cancelled")]
    queue.connection.flushdb()

    reconcile(clock=clock)
    clock.advance(STALE_S + 0.1)
    reconcile(clock=clock)

    assert [Submission.objects.get(pk=s.pk).status for s in finals] == [
        "succeeded",
        "failed",
        "cancelled",
    ]
    assert queue.count == 0


def test_only_one_periodic_recovery_runs_per_interval(queue: Any, settings: Any) -> None:
    settings.EVAL_RECOVERY_INTERVAL_S = 60

    assert reconcile_if_due(queue.connection) is not None
    assert reconcile_if_due(queue.connection) is None


def test_a_recovery_already_running_elsewhere_is_not_run_twice(queue: Any) -> None:
    lock = queue.connection.lock(recovery.LOCK_KEY, timeout=10)
    assert lock.acquire(blocking=False)

    assert reconcile(blocking=False).skipped
    lock.release()


def test_a_queued_submission_never_enqueued_gets_a_job_after_a_grace_period(
    queue: Any, alice: Any, task: Any, clock: Clock
) -> None:
    submission = submitted(alice, task, job_id="")  # as if Redis was down at upload time
    queue.empty()

    assert reconcile(clock=clock).enqueued == []  # it may be between its commit and its enqueue
    clock.advance(recovery.UNJOBBED_GRACE_S * 0.9)
    assert reconcile(clock=clock).enqueued == []
    clock.advance(recovery.UNJOBBED_GRACE_S * 0.2)
    assert reconcile(clock=clock).enqueued == [submission.pk]

    assert queue.count == 1
    assert Submission.objects.get(pk=submission.pk).job_id == queue.job_ids[0]
