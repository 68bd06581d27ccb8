"""Workflows over challenges: registering (alone or as a team), the operator's decision on a
registration, and moving to the next phase with each participant's entries carried over."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction
from django.utils import timezone

from plumbing.refusals import NotAllowed, Refused
from submissions.boards.row import BOARD_PUBLIC
from submissions.challenges.registration import can_see, registrations_of
from submissions.challenges.selectors import challenge_phases, phase_to_advance
from submissions.lifecycle.services import submission_carry
from submissions.models import (
    Challenge,
    ChallengeRegistration,
    LeaderboardEntry,
    Submission,
    Task,
    Team,
)

Status = ChallengeRegistration.Status


class RegistrationRefused(Refused):
    """A registration that cannot be made, and why."""


def _check_team(*, user: Any, challenge: Challenge, team_id: int) -> Team:
    team = Team.objects.filter(pk=team_id, task__challenge=challenge).first()
    if team is None:
        raise RegistrationRefused("That team is not a team of this challenge.", field="team")
    if not team.memberships.filter(user=user).exists():
        raise RegistrationRefused("Only a member of a team can register it.", field="team")
    # The e-mail rule holds for everyone the registration speaks for.
    for member in team.members.all():
        if not challenge.email_allowed(member):
            raise NotAllowed(
                f"{member.username}'s e-mail address is not at a domain this challenge admits."
            )
    return team


def challenge_register(
    *, user: Any, challenge_id: int, accept_terms: bool, team_id: int | None = None
) -> ChallengeRegistration:
    """Register ``user`` (with ``team_id``: their team, every member with them) for a
    challenge, its terms accepted. Approved at once unless the challenge asks the operators to
    approve. Registering again returns the registration there is."""
    with transaction.atomic():
        challenge = Challenge.objects.select_for_update().get(pk=challenge_id)
        if not can_see(user=user, challenge=challenge):
            raise Challenge.DoesNotExist(f"No challenge '{challenge.slug}'.")
        if not accept_terms:
            raise RegistrationRefused(
                "You must accept the challenge's terms to register.", field="accept_terms"
            )
        if not challenge.email_allowed(user):
            raise NotAllowed(
                "Your e-mail address is not at a domain this challenge admits; ask the "
                "organisers for an invitation."
            )
        team = _check_team(user=user, challenge=challenge, team_id=team_id) if team_id else None
        existing = registrations_of(user=user, challenge=challenge).filter(team=team).first()
        if existing is not None:
            return existing
        return ChallengeRegistration.objects.create(
            challenge=challenge,
            user=user,
            team=team,
            terms_accepted_at=timezone.now(),
            status=Status.PENDING if challenge.requires_approval else Status.APPROVED,
        )


def registrations_decide(*, registration_ids: list[int], approve: bool) -> int:
    """The operator approves (or rejects) registrations; returns how many changed."""
    status = Status.APPROVED if approve else Status.REJECTED
    with transaction.atomic():
        return (
            ChallengeRegistration.objects.filter(pk__in=registration_ids)
            .exclude(status=status)
            .update(status=status, decided_at=timezone.now())
        )


@dataclass(frozen=True)
class PhaseAdvanced:
    source: Task
    target: Task
    carried: int  # submissions queued on the target phase


def _to_carry(source: Task, carry: Literal["best", "selected"]) -> list[Submission]:
    """Each entrant's best (their public board entries: on the main board and on each track,
    whose best may be another model, e.g. the fastest); with "selected", their selected finals
    instead, where they selected any."""
    entries = LeaderboardEntry.objects.filter(task=source, board=BOARD_PUBLIC, baseline=False)
    best = Submission.objects.filter(pk__in=entries.values("submission_id"))
    if carry == "best":
        return list(best.order_by("pk"))
    selected = list(Submission.objects.filter(task=source, selected=True).on_leaderboard())
    chose = {(s.team_id, s.user_id if s.team_id is None else None) for s in selected}
    rest = [s for s in best if (s.team_id, s.user_id if s.team_id is None else None) not in chose]
    return sorted([*selected, *rest], key=lambda s: s.pk)


def challenge_phase_advance(
    *, challenge_id: int, carry: Literal["best", "selected"] = "best"
) -> PhaseAdvanced:
    """Carry each participant's best (or selected) submissions from the phase being left (the
    last one that has closed, else the one open now) to the next phase, to be scored on its
    data without costing quota. Submissions carried there already are not carried twice."""
    with transaction.atomic():
        challenge = Challenge.objects.select_for_update().get(pk=challenge_id)
        source = phase_to_advance(challenge_phases(challenge=challenge))
        phases = list(challenge_phases(challenge=challenge))
        if source is None or source == phases[-1]:
            raise Refused(f"The challenge '{challenge.title}' has no next phase to move to.")
        target = phases[phases.index(source) + 1]
        done = set(
            Submission.objects.filter(task=target, carried_from__isnull=False).values_list(
                "carried_from_id", flat=True
            )
        )
        chosen = [s for s in _to_carry(source, carry) if s.pk not in done]
        for submission in chosen:
            submission_carry(submission=submission, task=target)
    return PhaseAdvanced(source, target, len(chosen))


def challenge_phases_set(*, challenge_id: int, task_ids: list[int]) -> None:
    """Make exactly these tasks the challenge's phases: new ones go after the phases there are
    (in the order of their opening), tasks left out go back to being tasks on their own."""
    with transaction.atomic():
        challenge = Challenge.objects.select_for_update().get(pk=challenge_id)
        Task.objects.filter(challenge=challenge).exclude(pk__in=task_ids).update(
            challenge=None, phase_order=0
        )
        kept = list(challenge_phases(challenge=challenge))
        new = Task.objects.filter(pk__in=task_ids).exclude(challenge=challenge)
        last = max((t.phase_order for t in kept), default=0)
        for offset, task in enumerate(new.order_by("opens_at", "pk"), start=1):
            Task.objects.filter(pk=task.pk).update(challenge=challenge, phase_order=last + offset)
