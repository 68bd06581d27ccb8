"""Reading challenges: the ones a viewer may see, their phases in order, and where the timeline
stands (the current phase is the one open now, by its task's opens_at/closes_at)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from submissions.challenges.registration import can_see, registrations_of, speaks_for
from submissions.models import Announcement, Challenge, ChallengeRegistration, Task


def challenge_list_visible(*, user: Any) -> QuerySet[Challenge]:
    """Public challenges, and the private ones this viewer may see (``can_see``), as one lazy
    query: the task list filters by it without a query of its own."""
    challenges = Challenge.objects.all()
    if getattr(user, "is_staff", False):
        return challenges
    if not getattr(user, "pk", None):
        return challenges.filter(visibility=Challenge.Visibility.PUBLIC)
    mine = ChallengeRegistration.objects.filter(speaks_for(user))
    seen = (
        Q(visibility=Challenge.Visibility.PUBLIC)
        | Q(pk__in=Challenge.hosts.through.objects.filter(user=user).values("challenge_id"))
        | Q(pk__in=mine.values("challenge_id"))
    )
    email = (user.email or "").strip()
    if email:  # a whole line of the invitation list, as ``Challenge.is_invited`` reads it
        seen |= Q(invited_emails__iregex=rf"(^|\n)\s*{re.escape(email)}\s*(\r?\n|$)")
    return challenges.filter(seen)


def challenge_get_visible(*, slug: str, user: Any) -> Challenge:
    """The challenge ``slug`` if this viewer may see it; else ``Challenge.DoesNotExist``, so a
    private challenge is a 404 like one that does not exist."""
    challenge = Challenge.objects.filter(slug=slug).first()
    if challenge is None or not can_see(user=user, challenge=challenge):
        raise Challenge.DoesNotExist(f"No challenge '{slug}'.")
    return challenge


def challenge_phases(*, challenge: Challenge) -> QuerySet[Task]:
    """Its phases in order; hidden tasks included (the operator hides a phase's board, not the
    phase)."""
    return Task.objects.filter(challenge=challenge).order_by("phase_order", "opens_at", "pk")


@dataclass(frozen=True)
class Phase:
    number: int  # 1, 2, ... in order
    task: Task
    state: str  # "upcoming", "current" or "closed"


def challenge_timeline(*, challenge: Challenge, now: Any = None) -> list[Phase]:
    now = now or timezone.now()

    def state(task: Task) -> str:
        if task.opens_later(now):
            return "upcoming"
        return "closed" if task.has_closed(now) else "current"

    phases = challenge_phases(challenge=challenge).select_related("device_class")
    phases = phases.prefetch_related("tracks")  # each phase's boards are linked
    return [Phase(i + 1, task, state(task)) for i, task in enumerate(phases)]


def phase_to_advance(phases: Sequence[Task] | QuerySet[Task], now: Any = None) -> Task | None:
    """The phase an advance leaves: the last that has closed, else the last that has opened
    (an operator moving on early); None before the first opens."""
    now = now or timezone.now()
    phases = list(phases)
    closed = [t for t in phases if t.has_closed(now)]
    if closed:
        return closed[-1]
    opened = [t for t in phases if not t.opens_later(now)]
    return opened[-1] if opened else None


def registration_of(*, user: Any, challenge: Challenge) -> ChallengeRegistration | None:
    """The registration that speaks for ``user``, an approved one first; None: not registered."""
    found: ChallengeRegistration | None = (
        registrations_of(user=user, challenge=challenge)
        .order_by("status")  # "approved" sorts before "pending" and "rejected"
        .first()
    )
    return found


def challenge_announcements(
    *, challenge_id: int | None, limit: int | None = None
) -> list[Announcement]:
    """The challenge's announcements, newest first (the ``limit`` newest); none for a task
    outside a challenge (``challenge_id`` None)."""
    if challenge_id is None:
        return []
    found = Announcement.objects.filter(challenge_id=challenge_id).order_by("-posted_at", "-pk")
    return list(found[:limit] if limit is not None else found)
