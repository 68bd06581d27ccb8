"""Who may see a challenge and who may submit to its phases: the one owner of those rules, asked
by the challenge pages, the API and the upload (``submission_create``).

A user counts as registered when an approved registration names them, or names a team they are
a member of (teams are per phase: a team of any of the challenge's phases). A private challenge
is visible only to operators, its hosts, invited e-mail addresses and registered users (a
pending registration included: they have accepted the terms and wait for approval).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from plumbing.refusals import NotAllowed
from submissions.models import Challenge, ChallengeRegistration, Task, TeamMembership

APPROVED = ChallengeRegistration.Status.APPROVED


class RegistrationRequired(NotAllowed):
    """An upload to a phase by someone not (yet) registered for its challenge."""


def speaks_for(user: Any) -> Q:
    """Which registrations speak for a signed-in ``user``, of any challenge: their own made
    alone, and those of the teams they are in now (not one they made for a team they left)."""
    return Q(user=user, team__isnull=True) | Q(team__memberships__user=user)


def registrations_of(*, user: Any, challenge: Challenge) -> QuerySet[ChallengeRegistration]:
    """The registrations that speak for ``user`` (``speaks_for``) on ``challenge``."""
    if not getattr(user, "pk", None):
        return ChallengeRegistration.objects.none()
    return ChallengeRegistration.objects.filter(challenge=challenge).filter(speaks_for(user))


def is_registered(*, user: Any, challenge: Challenge) -> bool:
    return registrations_of(user=user, challenge=challenge).filter(status=APPROVED).exists()


def registered_users(*, challenge: Challenge) -> QuerySet[Any]:
    """Every user who counts as registered (``is_registered``): approved alone, or a member of
    an approved team; each once."""
    approved = ChallengeRegistration.objects.filter(challenge=challenge, status=APPROVED)
    alone = approved.filter(team__isnull=True).values("user_id")
    teams = approved.filter(team__isnull=False).values("team_id")
    users = get_user_model().objects.filter(
        Q(pk__in=alone) | Q(pk__in=TeamMembership.objects.filter(team__in=teams).values("user_id"))
    )
    return users.order_by("pk")


def can_see(*, user: Any, challenge: Challenge) -> bool:
    if not challenge.is_private or getattr(user, "is_staff", False):
        return True
    if not getattr(user, "pk", None):
        return False
    return (
        challenge.is_invited(user)
        or challenge.hosts.filter(pk=user.pk).exists()
        or registrations_of(user=user, challenge=challenge).exists()
    )


def registration_check(*, user: Any, task: Task) -> None:
    """Refuse an upload to a phase of a challenge its uploader is not registered for, saying
    what to do; a task without a challenge takes uploads as ever."""
    if task.challenge_id is None:
        return
    challenge = Challenge.objects.get(pk=task.challenge_id)
    if is_registered(user=user, challenge=challenge):
        return
    url = challenge.get_absolute_url()
    # "pending" sorts before "rejected": a pending registration is the one to speak of
    mine = registrations_of(user=user, challenge=challenge).order_by("status")
    status = mine.values_list("status", flat=True).first()
    if status == ChallengeRegistration.Status.PENDING:
        raise RegistrationRequired(
            f"Your registration for the challenge '{challenge.title}' is waiting for the "
            "organisers' approval; you can submit once it is approved.",
            url=url,
        )
    if status is not None:  # rejected
        raise RegistrationRequired(
            f"Your registration for the challenge '{challenge.title}' was not approved.", url=url
        )
    raise RegistrationRequired(
        f"This task is a phase of the challenge '{challenge.title}': register for the challenge "
        f"and accept its terms before submitting ({url}).",
        url=url,
    )
