"""Keeping the leaderboard read models (LeaderboardEntry, LeaderboardRecord) in step with the
submissions. Every change that can move a submission on or off a board calls one of these in
the same transaction: a result written, a re-run, an operator's flag, a freeze, a metric change.

The rows are always recomputed from Submission with the same window query the selectors define
(``selectors.leaderboard_computed``), never patched by hand, so a refresh cannot drift from it.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from submissions.leaderboard_models import LeaderboardEntry, LeaderboardRecord
from submissions.models import Submission, Task
from submissions.selectors import (
    BOARDS,
    best_rows_computed,
    records_computed,
    score_field,
)


def _rank_key(task: Task, score: float) -> float:
    return -score if task.higher_is_better else score


def _refresh_entries(task: Task, board: str, user_ids: list[int] | None) -> None:
    rows = best_rows_computed(task=task, board=board, user_ids=user_ids)
    stale = LeaderboardEntry.objects.filter(task=task, board=board)
    if user_ids is not None:
        stale = stale.filter(user_id__in=user_ids)
    stale.delete()
    field = score_field(board)
    LeaderboardEntry.objects.bulk_create(
        [
            LeaderboardEntry(
                task=task,
                board=board,
                user_id=row.user_id,
                submission=row,
                score=getattr(row, field),
                rank_key=_rank_key(task, getattr(row, field)),
                created_at=row.created_at,
                entries=row.entries,  # type: ignore[attr-defined]
                last_submitted_at=row.last_submitted_at,  # type: ignore[attr-defined]
                latency_p50_ms=row.latency_p50_ms,
                throughput=row.throughput,
                device_name=row.device_name,
            )
            for row in rows
        ],
        batch_size=2000,
    )


def _rebuild_records(task: Task, board: str) -> None:
    LeaderboardRecord.objects.filter(task=task, board=board).delete()
    LeaderboardRecord.objects.bulk_create(
        [
            LeaderboardRecord(
                task=task,
                board=board,
                submission_id=r.submission_id,
                score=r.score,
                at=r.at,
                username=r.username,
            )
            for r in records_computed(task=task, board=board)
        ]
    )


def leaderboard_rebuild(*, task_id: int) -> None:
    """Recompute every entry and record of a task: after a freeze, a metric change, or repair."""
    with transaction.atomic():
        task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
        for board in BOARDS:
            _refresh_entries(task, board, None)
            _rebuild_records(task, board)


def _eligible_now(task: Task, s: Submission) -> bool:
    frozen = task.leaderboard_frozen_at
    return (
        s.status == Submission.Status.SUCCEEDED
        and not (s.hidden or s.disqualified)
        and s.score is not None
        and (frozen is None or s.created_at <= frozen)
    )


def _changes_records(task: Task, board: str, submission: Submission) -> bool:
    """Whether the chart's steps may change: the submission is a step now, or would be one."""
    if LeaderboardRecord.objects.filter(task=task, board=board, submission=submission).exists():
        return True
    score = getattr(submission, score_field(board))
    if score is None or not _eligible_now(task, submission):
        return False
    before = (
        LeaderboardRecord.objects.filter(task=task, board=board, at__lte=submission.created_at)
        .order_by("-at", "-id")
        .values_list("score", flat=True)
        .first()
    )
    return before is None or (score > before if task.higher_is_better else score < before)


def leaderboard_submissions_changed(*, submission_ids: Iterable[int]) -> None:
    """Refresh the entries of the submissions' owners, and the chart when it may have moved."""
    with transaction.atomic():
        submissions = list(Submission.objects.filter(pk__in=list(submission_ids)))
        for task_id in sorted({s.task_id for s in submissions}):
            # Lock the task: concurrent refreshes of one board run one after the other. NO KEY
            # UPDATE lets uploads go on inserting submissions (their FK takes KEY SHARE).
            task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
            mine = [s for s in submissions if s.task_id == task_id]
            users = sorted({s.user_id for s in mine})
            for board in BOARDS:
                _refresh_entries(task, board, users)
                if any(_changes_records(task, board, s) for s in mine):
                    _rebuild_records(task, board)


def leaderboard_user_refresh(*, task_id: int, user_id: int) -> None:
    """After a submission was deleted: its owner's next best moves up; the chart is rebuilt
    since the deleted row may have been one of its steps."""
    with transaction.atomic():
        task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
        for board in BOARDS:
            _refresh_entries(task, board, [user_id])
            _rebuild_records(task, board)
