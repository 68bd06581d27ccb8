"""What counts against a user's submission quota on a task, and how much is left.

Counted: every stored submission except cancelled ones and those failed by the system (worker
lost, our error). A model that fails on its own counts. Refused uploads leave no row, so they
cannot count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from submissions.models import Submission, Task

DAY = timedelta(days=1)


def submissions_counted(*, user: Any, task: Task) -> QuerySet[Submission]:
    return (
        Submission.objects.filter(user=user, task=task)
        .exclude(status=Submission.Status.CANCELLED)
        .exclude(failed_by_system=True)
    )


@dataclass(frozen=True)
class Quota:
    per_day: int
    used_today: int
    total: int | None
    used_total: int
    next_slot_at: datetime | None  # when the oldest submission of the last 24 h stops counting

    @property
    def left_today(self) -> int:
        return max(0, self.per_day - self.used_today)

    @property
    def left_total(self) -> int | None:
        return None if self.total is None else max(0, self.total - self.used_total)

    @property
    def left(self) -> int:
        """Submissions the user may still make right now."""
        return self.left_today if self.left_total is None else min(self.left_today, self.left_total)

    def refusal(self) -> str | None:
        if self.left_total == 0:
            return f"You have used all {self.total} submissions for this task."
        if self.left_today == 0:
            when = f" at {self.next_slot_at:%Y-%m-%d %H:%M} UTC" if self.next_slot_at else ""
            return (
                f"You have used your {self.per_day} submissions for the last 24 hours; "
                f"the next one is possible{when}."
            )
        return None


def quota_get(*, user: Any, task: Task, now: datetime | None = None) -> Quota:
    """Both counts and the next free slot in one query."""
    since = (now or timezone.now()) - DAY
    recent = Q(created_at__gte=since)
    counts = submissions_counted(user=user, task=task).aggregate(
        total=Count("id"),
        today=Count("id", filter=recent),
        oldest_today=Min("created_at", filter=recent),
    )
    oldest = counts["oldest_today"]
    return Quota(
        per_day=task.submissions_per_day,
        used_today=counts["today"],
        total=task.submissions_total,
        used_total=counts["total"],
        next_slot_at=oldest + DAY if oldest is not None else None,
    )
