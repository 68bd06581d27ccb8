"""A success on PostgreSQL is one statement (``services._succeed_in_one_statement``: the UPDATE,
the board's pending row and the notification as data-modifying WITH queries); it must write
exactly what the ORM's transaction writes (``services._succeed_in_a_transaction``, SQLite's
path), and a second call must change nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from evaluation.runner import EvalResult
from submissions import services
from submissions.leaderboard_models import LeaderboardPending
from submissions.models import Notification, Submission
from tests.submissions.notify_support import running

pytestmark = pytest.mark.django_db


def every_field_set() -> EvalResult:
    """A result with no field left at its default, so that a column either path forgot shows."""
    return EvalResult(
        score=0.8125, score_private=0.75, metrics={"accuracy": 0.8125, "f1": 0.5},
        metrics_private={"accuracy": 0.75}, latency_p50_ms=1.25, latency_p95_ms=2.5,
        latency_p99_ms=3.75, throughput=812.5, provider="CUDAExecutionProvider",
        device_name="NVIDIA H100 80GB HBM3", ort_version="1.23.2", samples_evaluated=1000,
        batch_latencies_ms=[1.0, 1.25, 1.5], peak_memory_bytes=123_456_789, latency_p90_ms=2.0,
        latency_mean_ms=1.3, latency_spread=0.04, latency_unstable=True, timing_exclusive=True,
        timing={"protocol": {"min_batches": 5}, "batches": 12, "clock": "cuda-events"},
    )  # fmt: skip


def test_the_one_statement_writes_what_the_orm_transaction_writes(
    make_task: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the one statement is PostgreSQL's; SQLite takes the ORM's transaction")
    task = make_task()
    one, orm = running(task, alice), running(task, alice)
    version = task.current_dataset_id
    values = services._success_values(every_field_set(), version)

    with django_capture_on_commit_callbacks(execute=False) as one_enqueues:
        assert services._succeed_in_one_statement(one.pk, values) == task.pk
    with django_capture_on_commit_callbacks(execute=False) as orm_enqueues:
        assert services._succeed_in_a_transaction(orm.pk, values, None) == task.pk

    columns = [*values, "runs", "attempts", "worker_name", "task_id"]
    written = Submission.objects.filter(pk__in=[one.pk, orm.pk]).order_by("pk")
    row_one, row_orm = written.values(*columns)
    assert row_one == row_orm
    assert row_one["status"] == "succeeded" and row_one["timing"]["batches"] == 12
    assert row_one["batch_latencies_ms"] == [1.0, 1.25, 1.5]
    owed = LeaderboardPending.objects.filter(task=task).order_by("submission_id")
    assert list(owed.values_list("submission_id", flat=True)) == [one.pk, orm.pk]
    recorded = Notification.objects.filter(submission__in=[one, orm]).order_by("submission_id")
    note_one, note_orm = recorded.values("run", "status", "dispatched_at", "email")
    assert note_one == note_orm
    assert note_one == {"run": 1, "status": "succeeded", "dispatched_at": None, "email": ""}
    assert len(one_enqueues) == len(orm_enqueues) == 1  # the delivery job, after the commit

    with django_capture_on_commit_callbacks(execute=False) as again:
        assert services._succeed_in_one_statement(one.pk, values) is None  # not running now
    assert not again
    assert LeaderboardPending.objects.filter(submission=one).count() == 1
    assert Notification.objects.filter(submission=one).count() == 1


def test_a_success_whose_run_was_already_notified_records_no_second_notification(
    make_task: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """The notification's insert skips a conflict with the run's existing row (one per run), and
    the success still stands, its board refresh owed."""
    task = make_task()
    submission = running(task, alice)
    Notification.objects.create(submission=submission, run=1, status="succeeded")
    with django_capture_on_commit_callbacks(execute=False) as enqueued:
        assert services.submission_succeed(
            submission_id=submission.pk, result=every_field_set(), drain=False
        )
    assert not enqueued
    assert Submission.objects.get(pk=submission.pk).status == "succeeded"
    assert Notification.objects.filter(submission=submission).count() == 1
    assert LeaderboardPending.objects.filter(submission=submission).exists()
