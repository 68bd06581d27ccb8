"""The one retry rule (services.submission_retry_or_fail), whoever finds the attempt lost: the
job whose model process died, or recovery when a whole worker went silent."""

from __future__ import annotations

from typing import Any

import pytest

from submissions.lifecycle import services
from submissions.lifecycle.quotas import quota_get
from submissions.models import Submission
from tests.workers.fleet_support import fast_model, submit
from workers import recovery

pytestmark = pytest.mark.django_db(transaction=True)
DIED = "while running: it was killed by signal SIGKILL"  # as the job words it


def started(submission: Submission, worker: str) -> Submission:
    started = services.submission_start(submission_id=submission.pk, worker_name=worker)
    assert started is not None
    return started


def model_process_died(queue: Any, submission: Submission, worker: str) -> None:
    """What the job does when its model process was killed (OOM killer, segfault)."""
    services.submission_retry_or_fail(
        submission_id=submission.pk,
        cause=services.HORSE_DIED,
        worker_name=worker,
        detail=DIED,
    )


def test_a_model_process_that_dies_twice_fails_the_submission_with_every_attempt_in_the_log(
    queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=5)
    submission = submit(alice, task, fast_model())
    started(submission, "w1")
    model_process_died(queue, submission, "w1")
    assert Submission.objects.get(pk=submission.pk).status == "queued"
    started(submission, "w2")
    model_process_died(queue, submission, "w2")

    failed = Submission.objects.get(pk=submission.pk)
    assert failed.status == "failed" and failed.attempts == 2
    assert failed.error_message == services.HORSE_DIED.message
    assert failed.log.splitlines()[-2:] == [
        f"attempt 1: the evaluation process died ({DIED}); retrying.",
        f"attempt 2: the evaluation process died ({DIED}); giving up.",
    ]
    # the model itself brought its model process down twice: it counts like any failing model
    assert not failed.failed_by_system
    assert quota_get(user=alice, task=task).used_today == 1


def test_a_lost_worker_and_a_dead_model_process_share_one_attempt_count(
    queue: Any, alice: Any, make_task: Any, settings: Any
) -> None:
    """A model process death, then a lost worker: the second loss is the last allowed attempt."""
    settings.EVAL_HEARTBEAT_STALE_S = 1.0
    task = make_task(submissions_per_day=5)
    submission = submit(alice, task, fast_model())
    started(submission, "w1")
    model_process_died(queue, submission, "w1")
    started(submission, "gone")
    now = 1_000_000_000.0
    recovery.reconcile(clock=lambda: now)  # first seen unclaimed
    report = recovery.reconcile(clock=lambda: now + 2.0)

    assert report.failed == [submission.pk]
    failed = Submission.objects.get(pk=submission.pk)
    assert failed.error_message == services.WORKER_LOST.message
    assert failed.failed_by_system  # the worker's machine, not the model: not counted
    assert quota_get(user=alice, task=task).used_today == 0
    assert f"attempt 1: the evaluation process died ({DIED}); retrying." in failed.log
    assert "attempt 2: worker gone stopped responding (no heartbeat for 1 s); giving up." in (
        failed.log
    )


def test_a_late_report_of_a_dead_model_process_leaves_the_retry_running_elsewhere_alone(
    queue: Any, alice: Any, make_task: Any
) -> None:
    """Recovery already ran the submission again on another worker when the first worker
    reports its model process dead: that report must not requeue the new attempt."""
    submission = submit(alice, make_task(), fast_model())
    started(submission, "w1")
    Submission.objects.filter(pk=submission.pk).update(status="queued")  # as recovery's retry
    started(submission, "w2")

    model_process_died(queue, submission, "w1")

    running = Submission.objects.get(pk=submission.pk)
    assert running.status == "running" and running.worker_name == "w2"
    assert running.attempts == 2 and running.log == ""


def test_a_failure_adds_its_lines_to_the_log_after_the_earlier_attempts(
    queue: Any, alice: Any, make_task: Any
) -> None:
    submission = submit(alice, make_task(), fast_model())
    started(submission, "w1")
    Submission.objects.filter(pk=submission.pk).update(log="attempt 1: the first lines\n")

    assert services.submission_fail(
        submission_id=submission.pk, message="failed", log_text="Traceback: the second attempt\n"
    )

    assert Submission.objects.get(pk=submission.pk).log == (
        "attempt 1: the first lines\nTraceback: the second attempt\n"
    )
