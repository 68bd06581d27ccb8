"""Shared setup for the challenge tests: a challenge whose phases are digits tasks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from submissions.models import Challenge, ChallengeRegistration, Task

HOUR = timedelta(hours=1)


def two_phase_challenge(make_task: Any, **fields: Any) -> tuple[Challenge, Task, Task]:
    """Phase 1 open now, phase 2 opening when phase 1 closes, a day later."""
    now = timezone.now()
    fields.setdefault("terms", "Be fair.")
    challenge = Challenge.objects.create(slug="digits-cup", title="Digits Cup", **fields)
    first = make_task(
        slug="digits-dev",
        title="Development",
        opens_at=now - HOUR,
        closes_at=now + 24 * HOUR,
        challenge=challenge,
        phase_order=1,
    )
    second = make_task(
        slug="digits-test",
        title="Test",
        opens_at=now + 24 * HOUR,
        closes_at=now + 48 * HOUR,
        challenge=challenge,
        phase_order=2,
    )
    return challenge, first, second


def registered(challenge: Challenge, user: Any) -> ChallengeRegistration:
    return ChallengeRegistration.objects.create(
        challenge=challenge, user=user, status="approved", terms_accepted_at=timezone.now()
    )
