"""Tracks: more boards of a task's results, each ranked by a rule of its own. The admin adds them
on the task's page (``TrackInline``, re-ranked by ``TaskAdmin.save_related``); the demo and
scripts call ``track_create``."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from submissions.boards.leaderboard import leaderboard_rebuild
from submissions.models import Track


def track_create(
    *, task_id: int, name: str, slug: str, description: str = "", position: int = 1, **rule: Any
) -> Track:
    """A new track of the task with the rule fields ``rule`` (``RuleSettings``'), validated,
    and the task's boards rebuilt with it, in one transaction."""
    with transaction.atomic():
        track = Track(
            task_id=task_id, name=name, slug=slug, description=description, position=position
        )
        for field, value in rule.items():
            setattr(track, field, value)
        track.full_clean()
        track.save()
        leaderboard_rebuild(task_id=task_id)
        return track
