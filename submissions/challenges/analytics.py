"""A phase's numbers for its hosts: submissions per day, participants and teams over time,
failures by cause, queue and evaluation times, and the best score over time. The admin draws
them (``submissions/admin/analytics.py``), the API returns them (``analytics_apis.py``).

Participants' submissions only: the organisers' baselines are not participation. A few
grouped queries per phase; durations and causes are reduced in Python from two columns each.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db.models import Count, Min, QuerySet
from django.db.models.functions import TruncDate

from submissions.boards.display import failure_cause
from submissions.challenges.registration import can_see
from submissions.lifecycle.selectors import ScoreRecord, leaderboard_best_over_time
from submissions.models import Submission, Task


@dataclass(frozen=True)
class Durations:
    """Seconds, over the submissions that have both ends."""

    count: int
    median_s: float | None
    p90_s: float | None
    max_s: float | None


@dataclass(frozen=True)
class DayCount:
    day: date
    submissions: int
    participants: int  # so far: who had submitted by the end of the day
    teams: int  # so far: the teams with a submission by the end of the day


@dataclass(frozen=True)
class PhaseAnalytics:
    task: Task
    days: list[DayCount]
    failures: list[tuple[str, int]]  # (cause, count), the most common first
    queue: Durations  # created → started
    evaluation: Durations  # started → finished
    best_score: list[ScoreRecord]  # the public board's steps

    @property
    def submissions(self) -> int:
        return sum(d.submissions for d in self.days)

    @property
    def participants(self) -> int:
        return self.days[-1].participants if self.days else 0

    @property
    def teams(self) -> int:
        return self.days[-1].teams if self.days else 0


def analytics_visible(*, task: Task, user: Any) -> bool:
    """Operators, and the hosts of the task's challenge (who can see it)."""
    if getattr(user, "is_staff", False):
        return True
    challenge = task.challenge
    if challenge is None or not getattr(user, "pk", None):
        return False
    return can_see(user=user, challenge=challenge) and challenge.hosts.filter(pk=user.pk).exists()


def phase_analytics(*, task: Task) -> PhaseAnalytics:
    entered = Submission.objects.filter(task=task, is_baseline=False)
    return PhaseAnalytics(
        task=task,
        days=_days(entered),
        failures=_failures(entered),
        queue=_durations(entered.values_list("created_at", "started_at")),
        evaluation=_durations(
            entered.filter(
                status__in=[Submission.Status.SUCCEEDED, Submission.Status.FAILED]
            ).values_list("started_at", "finished_at")
        ),
        best_score=leaderboard_best_over_time(task=task),
    )


def _days(entered: QuerySet[Submission]) -> list[DayCount]:
    per_day = dict(
        entered.order_by()  # grouped by day alone
        .annotate(day=TruncDate("created_at"))
        .values_list("day")
        .annotate(n=Count("pk"))
        .values_list("day", "n")
    )
    firsts = _first_days(entered.values_list("user_id"))
    team_firsts = _first_days(entered.filter(team__isnull=False).values_list("team_id"))
    days, participants, teams = [], 0, 0
    for day in sorted(per_day.keys() | firsts.keys() | team_firsts.keys()):
        participants += firsts.get(day, 0)
        teams += team_firsts.get(day, 0)
        days.append(DayCount(day, per_day.get(day, 0), participants, teams))
    return days


def _first_days(who: QuerySet[Any]) -> Counter[date]:
    """How many of ``who`` (user or team ids) made their first submission on each day."""
    grouped = who.order_by().annotate(first=Min(TruncDate("created_at")))
    firsts = grouped.values_list("first", flat=True)
    return Counter(firsts)


def _failures(entered: QuerySet[Submission]) -> list[tuple[str, int]]:
    failed = entered.filter(status=Submission.Status.FAILED)
    causes = Counter(
        failure_cause(message=message, by_system=by_system)
        for message, by_system in failed.values_list("error_message", "failed_by_system")
    )
    return sorted(causes.items(), key=lambda item: (-item[1], item[0]))


def _durations(pairs: Sequence[tuple[datetime | None, datetime | None]] | Any) -> Durations:
    seconds = sorted(
        (end - start).total_seconds()
        for start, end in pairs
        if start is not None and end is not None
    )
    if not seconds:
        return Durations(0, None, None, None)
    return Durations(
        len(seconds), _percentile(seconds, 0.5), _percentile(seconds, 0.9), seconds[-1]
    )


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, by linear interpolation between the two nearest."""
    at = q * (len(ordered) - 1)
    low, high = math.floor(at), math.ceil(at)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)
