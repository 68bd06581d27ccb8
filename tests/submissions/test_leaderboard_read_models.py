"""The kept leaderboard (entries and chart records) always equals the board computed from the
submissions, through every path that moves a submission on or off it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from evaluation.runner import EvalResult
from submissions.admin.services import (
    submission_flag_set,
    task_leaderboard_freeze,
    task_leaderboard_set,
)
from submissions.boards.leaderboard import leaderboard_differences, leaderboard_user_refresh
from submissions.lifecycle.selectors import (
    best_rows_computed,
    leaderboard,
    leaderboard_best_over_time,
    records_computed,
)
from submissions.lifecycle.services import submission_rerun, submission_start, submission_succeed
from submissions.models import Submission
from submissions.models.boards import LeaderboardPending
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db


def assert_in_step(task: Any) -> None:
    task.refresh_from_db()
    for board in ("public", "private"):
        kept = [
            (r.rank, r.submission.pk, r.score, r.entries)
            for r in leaderboard(task=task, board=board)
        ]
        computed = [
            (i + 1, s.pk, getattr(s, "score" if board == "public" else "score_private"), s.entries)
            for i, s in enumerate(best_rows_computed(task=task, board=board))
        ]
        assert kept == computed, board
        steps = leaderboard_best_over_time(task=task, board=board)
        assert steps == records_computed(task=task, board=board), board
    assert leaderboard_differences(task_id=task.pk) == []  # every kept field, both boards


def boards_refreshed() -> bool:
    """Whether every result's board refresh has run: it runs right after the result commits
    (``leaderboard.leaderboard_drain``), so a test that saw a submission scored by a live worker
    waits for this before it reads the board."""
    return not LeaderboardPending.objects.exists()


def running(task: Any, user: Any, **fields: Any) -> Submission:
    return Submission.objects.create(
        task=task, user=user, sha256="0" * 64, size_bytes=1, original_name="m.onnx",
        status="running", **fields,
    )  # fmt: skip


def result(score: float) -> EvalResult:
    return EvalResult(
        score=score, score_private=score / 2, metrics={"accuracy": score}, metrics_private={},
        latency_p50_ms=1.0, latency_p95_ms=1.0, latency_p99_ms=1.0, throughput=10.0,
        provider="CPUExecutionProvider", device_name="cpu", ort_version="1", samples_evaluated=1,
    )  # fmt: skip


def test_a_result_written_by_the_service_appears_and_a_rerun_removes_it(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    scored(task, bob, 0.5)
    pending = running(task, alice)
    assert [r.submission.user.username for r in leaderboard(task=task)] == ["bob"]
    assert submission_succeed(submission_id=pending.pk, result=result(0.9))
    assert [r.submission.user.username for r in leaderboard(task=task)] == ["alice", "bob"]
    assert [s.score for s in leaderboard_best_over_time(task=task)] == [0.5, 0.9]
    assert_in_step(task)
    assert submission_rerun(submission_id=pending.pk)
    assert [r.submission.user.username for r in leaderboard(task=task)] == ["bob"]
    assert_in_step(task)
    assert submission_start(submission_id=pending.pk, worker_name="w") is not None
    assert submission_succeed(submission_id=pending.pk, result=result(0.3))
    assert [r.score for r in leaderboard(task=task)] == [0.5, 0.3]
    assert_in_step(task)


def test_a_late_finishing_earlier_submission_rewrites_the_chart(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    now = timezone.now()
    slow = running(task, alice, created_at=now - timedelta(hours=2))
    scored(task, bob, 0.8, created_at=now - timedelta(hours=1))
    submission_succeed(submission_id=slow.pk, result=result(0.9))  # made first, done last
    assert [(s.score, s.username) for s in leaderboard_best_over_time(task=task)] == [
        (0.9, "alice")
    ]
    assert_in_step(task)


def test_flags_freezes_and_deletes_keep_the_board_in_step(
    make_task: Any, alice: Any, bob: Any, operator: Any
) -> None:
    task = make_task()
    now = timezone.now()
    a1 = scored(task, alice, 0.9, score_private=0.2, created_at=now - timedelta(days=3))
    scored(task, alice, 0.7, score_private=0.8, created_at=now - timedelta(days=2))
    b1 = scored(task, bob, 0.8, score_private=0.5, created_at=now - timedelta(days=1))
    scored(task, operator, 0.95, created_at=now)
    assert_in_step(task)
    submission_flag_set(submission_ids=[a1.pk], flag="hidden", value=True, reason="copied")
    assert_in_step(task)
    submission_flag_set(
        submission_ids=[b1.pk], flag="disqualified", value=True, reason="two accounts"
    )
    assert_in_step(task)
    task_leaderboard_set(task_ids=[task.pk], leaderboard_frozen_at=now - timedelta(hours=12))
    assert_in_step(task)
    assert [r.submission.user.username for r in leaderboard(task=task)] == ["alice"]
    task_leaderboard_set(task_ids=[task.pk], leaderboard_frozen_at=None)
    task_leaderboard_freeze(task_ids=[task.pk])
    assert_in_step(task)
    submission_flag_set(submission_ids=[a1.pk], flag="hidden", value=False)
    assert_in_step(task)
    Submission.objects.filter(pk=a1.pk).delete()
    leaderboard_user_refresh(task_id=task.pk, user_id=alice.pk)
    assert_in_step(task)
    assert [r.submission.user.username for r in leaderboard(task=task)] == ["operator", "alice"]
