"""A success (``services.submission_succeed``): every column of the result written in one
transaction with its board refresh owed and its one notification; a second call, or a success
after a cancel, changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from evaluation.costs import SHAPES_OBSERVED, StaticCosts
from evaluation.runner import EvalResult
from submissions.lifecycle import services
from submissions.models import Notification, Submission
from submissions.models.boards import LeaderboardPending
from tests.submissions.notify_support import result, running

pytestmark = pytest.mark.django_db


def every_field_set() -> EvalResult:
    """A result with no field left at its default, so that a column the success forgot shows."""
    return EvalResult(
        score=0.8125, score_private=0.75, metrics={"accuracy": 0.8125, "f1": 0.5},
        metrics_private={"accuracy": 0.75}, latency_p50_ms=1.25, latency_p95_ms=2.5,
        latency_p99_ms=3.75, throughput=812.5, provider="CUDAExecutionProvider",
        device_name="NVIDIA H100 80GB HBM3", ort_version="1.23.2", samples_evaluated=1000,
        batch_latencies_ms=[1.0, 1.25, 1.5], peak_memory_bytes=123_456_789, latency_p90_ms=2.0,
        latency_mean_ms=1.3, latency_spread=0.04, latency_unstable=True, timing_exclusive=True,
        timing={"protocol": {"min_batches": 5}, "batches": 12, "clock": "cuda-events"},
        costs=StaticCosts(
            parameters=650, macs=640, flops=1290, activations=74, not_counted=(("Einsum", 1),),
            unknown_shapes=0, shapes_from=SHAPES_OBSERVED,
        ),
    )  # fmt: skip


def after_commit(callbacks: list[Any]) -> list[str]:
    """Who registered each of ``callbacks``."""
    return [c.__qualname__.split(".")[0] for c in callbacks]


def test_a_success_writes_every_column_of_its_result_once(
    make_task: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    task = make_task()
    submission = running(task, alice)
    given = every_field_set()
    written = services._success_values(given, task.current_dataset_id)

    with django_capture_on_commit_callbacks(execute=False) as enqueued:
        assert services.submission_succeed(
            submission_id=submission.pk,
            result=given,
            dataset_version_id=task.current_dataset_id,
            drain=False,  # the board refresh stays owed, as a job leaves it to its worker
        )

    row = Submission.objects.values(*written).get(pk=submission.pk)
    assert row.pop("finished_at") is not None
    assert row == {k: v for k, v in written.items() if k != "finished_at"}
    assert row["status"] == "succeeded" and row["macs"] == 640 and row["flops"] == 1290
    assert row["costs_not_counted"]["shapes_from"] == SHAPES_OBSERVED
    # after the commit: its waiters woken (settled), then the notification's delivery job
    assert after_commit(enqueued) == ["_became_final", "notification_record"]
    note = Notification.objects.values("run", "status", "dispatched_at", "email").get()
    assert LeaderboardPending.objects.filter(submission=submission, task=task).exists()
    assert note == {"run": 1, "status": "succeeded", "dispatched_at": None, "email": ""}

    with django_capture_on_commit_callbacks(execute=False) as again:
        assert not services.submission_succeed(submission_id=submission.pk, result=result(0.1))
    assert not again
    assert Submission.objects.get(pk=submission.pk).score == 0.8125
    assert Notification.objects.filter(submission=submission).count() == 1


def test_a_success_that_a_cancel_beat_changes_nothing(make_task: Any, alice: Any) -> None:
    submission = running(make_task(), alice)
    assert services.submission_cancel(submission_id=submission.pk, user=alice)

    assert not services.submission_succeed(submission_id=submission.pk, result=result(0.9))

    row = Submission.objects.get(pk=submission.pk)
    assert row.status == "cancelled" and row.score is None
    assert not LeaderboardPending.objects.filter(submission=submission).exists()
    assert list(Notification.objects.values_list("status", flat=True)) == ["cancelled"]


def test_a_success_whose_run_was_already_notified_records_no_second_notification(
    make_task: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """One notification per run (a unique constraint): the success still stands, its board
    refresh owed."""
    task = make_task()
    submission = running(task, alice)
    Notification.objects.create(submission=submission, run=1, status="succeeded")
    with django_capture_on_commit_callbacks(execute=False) as enqueued:
        assert services.submission_succeed(
            submission_id=submission.pk, result=every_field_set(), drain=False
        )
    assert after_commit(enqueued) == ["_became_final"]  # waiters woken; no delivery job
    assert Submission.objects.get(pk=submission.pk).status == "succeeded"
    assert Notification.objects.filter(submission=submission).count() == 1
    assert LeaderboardPending.objects.filter(submission=submission, task=task).exists()
