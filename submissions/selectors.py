"""Read-side queries: leaderboards, a user's submissions, visible tasks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from submissions.models import Submission, Task


def task_list_visible(*, user: Any) -> QuerySet[Task]:
    tasks = Task.objects.all()
    return tasks if getattr(user, "is_staff", False) else tasks.visible()


def task_get_visible(*, slug: str, user: Any) -> Task:
    return task_list_visible(user=user).get(slug=slug)


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int
    submission: Submission
    entries: int


def _score_order(task: Task, field: str) -> Any:
    return F(field).desc() if task.higher_is_better else F(field).asc()


def leaderboard(*, task: Task) -> list[LeaderboardRow]:
    """The best visible, succeeded submission per user, ranked in the metric's direction.

    Ties go to the earlier submission. One query whatever the number of submissions: a window
    numbers each user's submissions best-first and only the first of each is kept.
    """
    best_first = [_score_order(task, "score"), F("created_at").asc(), F("id").asc()]
    ranked = (
        Submission.objects.on_leaderboard()
        .filter(task=task)
        .select_related("user")
        .annotate(
            user_rank=Window(RowNumber(), partition_by=[F("user_id")], order_by=best_first),
            entries=Window(Count("id"), partition_by=[F("user_id")]),
        )
    )
    best = ranked.filter(user_rank=1).order_by(*best_first)
    return [
        LeaderboardRow(rank=index + 1, submission=row, entries=row.entries)
        for index, row in enumerate(best)
    ]


def submissions_of(*, user: Any, task: Task | None = None) -> QuerySet[Submission]:
    submissions = Submission.objects.for_user(user).select_related("task")
    return submissions.filter(task=task) if task is not None else submissions


def submission_queue_position(*, submission: Submission) -> int | None:
    """1 for the next submission to start; None unless queued. Counted in the database, which
    is the truth even when Redis was lost and the queue is being rebuilt."""
    if submission.status != Submission.Status.QUEUED:
        return None
    ahead = Submission.objects.filter(status=Submission.Status.QUEUED).filter(
        Q(created_at__lt=submission.created_at)
        | Q(created_at=submission.created_at, id__lt=submission.id)
    )
    return ahead.count() + 1
