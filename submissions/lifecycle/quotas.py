"""What counts against a user's submission quota on a task, and how much is left. A member of a
team shares the team's quota: every member's upload counts against it (``entrant_submissions``).

Counted: every stored submission whose evaluation has started, except cancelled ones and those
failed by the system (worker lost, our error). A model that fails on its own counts. Refused
uploads leave no row, so they cannot count.

A submission still waiting for its first start (for a free worker, or for a device class with no
worker online) does not count yet: ``waiting`` holds its place, so an upload is still refused when
used + waiting reaches the quota, and cancelling a waiting submission gives its place back. It is
counted on the day it was uploaded once it starts.

A re-score (the task's dataset was replaced: ``dataset_services.task_dataset_replace``) is the
operator's doing, not a new submission: it stays counted as the submission it was, and neither
holds a waiting place nor counts against the queued-at-once limit. A submission carried over
from a challenge's previous phase (``submission_carry``) is not counted at all on its new phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from submissions.models import Submission, Task, Team, TeamMembership

DAY = timedelta(days=1)
TeamId = int | Literal["look up"] | None  # "look up": the caller has not looked it up


def team_id_of(*, user: Any, task: Task) -> int | None:
    """The id of ``user``'s team on ``task``; None: they enter alone."""
    memberships = TeamMembership.objects.filter(task_id=_pk(task), user_id=_pk(user))
    team_id: int | None = memberships.values_list("team_id", flat=True).first()
    return team_id


def _pk(row: Any) -> Any:
    """A row's primary key, given the row or the key (as a queryset filter takes either)."""
    return getattr(row, "pk", row)


def entrant_submissions(
    *, user: Any, task: Task, team_id: TeamId = "look up"
) -> QuerySet[Submission]:
    """The submissions of whom ``user`` uploads for on ``task``: their team's (every member's),
    or, alone, their own made outside any team. ``team_id``: theirs, when the caller knows it."""
    if team_id == "look up":
        team_id = team_id_of(user=user, task=task)
    if team_id is not None:
        return Submission.objects.filter(team_id=team_id)
    return Submission.objects.filter(user=user, task=task, team__isnull=True)


# Started or waiting to start: what a quota or the duplicate check looks at (cancelled and
# system-failed submissions are not, nor those carried over from a challenge's previous phase:
# the operator's doing). One definition, for a queryset and inside an aggregate.
COUNTED = (
    ~Q(status=Submission.Status.CANCELLED)
    & ~Q(failed_by_system=True)
    & Q(carried_from__isnull=True)
)


def submissions_counted(
    *, user: Any, task: Task, team_id: TeamId = "look up"
) -> QuerySet[Submission]:
    """The entrant's submissions that ``COUNTED`` keeps."""
    return entrant_submissions(user=user, task=task, team_id=team_id).filter(COUNTED)


RESCORE = Q(priority=Submission.RESCORE_PRIORITY)
WAITING = Q(status=Submission.Status.QUEUED, attempts=0) & ~RESCORE
# Queued or running for the entrant, not counting the operator's re-scores: the queued limit.
ACTIVE = Q(status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING]) & ~RESCORE


@dataclass(frozen=True)
class Quota:
    per_day: int
    used_today: int  # started in the last 24 hours (by upload time)
    total: int | None
    used_total: int
    next_slot_at: datetime | None  # when the oldest submission of the last 24 h stops counting
    waiting: int = 0  # queued, never started: not counted (yet), but holding a place
    waiting_today: int = 0  # of those, uploaded in the last 24 hours
    team: str = ""  # the team whose quota this is; "": the user's own
    active: int = 0  # queued or running now, re-scores aside: for the queued limit

    @property
    def left_today(self) -> int:
        return max(0, self.per_day - self.used_today - self.waiting_today)

    @property
    def left_total(self) -> int | None:
        if self.total is None:
            return None
        return max(0, self.total - self.used_total - self.waiting)

    @property
    def left(self) -> int:
        """Submissions the user may still make right now."""
        return self.left_today if self.left_total is None else min(self.left_today, self.left_total)

    def refusal(self) -> str | None:
        waiting = (
            f" {self.waiting} of yours {'is' if self.waiting == 1 else 'are'} still waiting to "
            "start; a submission counts once it starts, and cancelling it gives its place back."
            if self.waiting
            else ""
        )
        who, whose = (f"Your team {self.team} has", "its") if self.team else ("You have", "your")
        if self.left_total == 0:
            return f"{who} used all {self.total} submissions for this task.{waiting}"
        if self.left_today == 0:
            when = f" at {self.next_slot_at:%Y-%m-%d %H:%M} UTC" if self.next_slot_at else ""
            return (
                f"{who} used {whose} {self.per_day} submissions for the last 24 hours; "
                f"the next one is possible{when}.{waiting}"
            )
        return None


def quota_get(
    *, user: Any, task: Task, now: datetime | None = None, team_id: TeamId = "look up"
) -> Quota:
    """All counts and the next free slot in one query (and the team's name, in a team).
    ``team_id``: the user's team on the task, when the caller has looked it up already."""
    if team_id == "look up":
        team_id = team_id_of(user=user, task=task)
    counts = _counts(user=user, task=task, team_id=team_id, now=now)
    return _quota(task, team_id, counts)


def quota_and_duplicate(
    *, user: Any, task: Task, team_id: int | None, sha256: str
) -> tuple[Quota, int | None]:
    """For an upload, in the same one read: the quota, and the entrant's first counted
    submission of the same file (its id; None: the file is new to them). Ids grow with upload
    order, so the smallest is the first."""
    counts = _counts(user=user, task=task, team_id=team_id, sha256=sha256)
    return _quota(task, team_id, counts), counts["duplicate"]


def _counts(
    *,
    user: Any,
    task: Task,
    team_id: int | None,
    now: datetime | None = None,
    sha256: str | None = None,
) -> dict[str, Any]:
    """One read of the entrant's submissions: the counts over those a quota looks at
    (``COUNTED``, as filters), the ones queued or running for the upload's queued limit, and
    with ``sha256`` the entrant's first counted submission of that file (``duplicate``)."""
    entrant = entrant_submissions(user=user, task=task, team_id=team_id)
    more = {}
    if sha256 is not None:  # the entrant's first counted submission of this file
        more["duplicate"] = Min("id", filter=COUNTED & Q(sha256=sha256))
    recent = COUNTED & Q(created_at__gte=(now or timezone.now()) - DAY)
    return entrant.aggregate(
        total=Count("id", filter=COUNTED & ~WAITING),
        today=Count("id", filter=recent & ~WAITING),
        waiting=Count("id", filter=COUNTED & WAITING),
        waiting_today=Count("id", filter=recent & WAITING),
        oldest_today=Min("created_at", filter=recent),
        active=Count("id", filter=ACTIVE),
        **more,
    )


def _quota(task: Task, team_id: int | None, counts: dict[str, Any]) -> Quota:
    oldest = counts["oldest_today"]
    return Quota(
        per_day=task.submissions_per_day,
        used_today=counts["today"],
        total=task.submissions_total,
        used_total=counts["total"],
        next_slot_at=oldest + DAY if oldest is not None else None,
        waiting=counts["waiting"],
        waiting_today=counts["waiting_today"],
        team=_team_name(team_id),
        active=counts["active"],
    )


def _team_name(team_id: int | None) -> str:
    if team_id is None:
        return ""
    return Team.objects.filter(pk=team_id).values_list("name", flat=True).first() or ""
