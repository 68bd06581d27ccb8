"""What the operator's console does to rows, kept out of the admin classes so it can be tested
and reused. Re-run and cancel are the existing services; these set the leaderboard flags."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from submissions.leaderboard import leaderboard_rebuild, leaderboard_submissions_changed
from submissions.models import Submission, Task

SUBMISSION_FLAGS = ("hidden", "disqualified", "is_baseline")


def submission_flag_set(*, submission_ids: Iterable[int], flag: str, value: bool) -> list[int]:
    """Set one leaderboard flag; returns the ids that actually changed (for the admin log)."""
    if flag not in SUBMISSION_FLAGS:
        raise ValueError(f"Unknown submission flag {flag!r}.")
    with transaction.atomic():
        to_change = list(
            Submission.objects.select_for_update(no_key=True)
            .filter(pk__in=list(submission_ids))
            .exclude(**{flag: value})
            .values_list("pk", flat=True)
        )
        Submission.objects.filter(pk__in=to_change).update(**{flag: value})
        if flag != "is_baseline":  # a baseline is only a label; hiding moves the board
            leaderboard_submissions_changed(submission_ids=to_change)
    return to_change


def task_leaderboard_set(*, task_ids: Iterable[int], **fields: Any) -> list[int]:
    """Change the leaderboard state of tasks (public/hidden, frozen time, private revealed);
    returns the ids that changed."""
    allowed = {"leaderboard", "leaderboard_frozen_at", "private_revealed"}
    if not fields or set(fields) - allowed:
        raise ValueError(f"Only {sorted(allowed)} may be set here, not {sorted(fields)}.")
    with transaction.atomic():
        tasks = Task.objects.select_for_update(no_key=True).filter(pk__in=list(task_ids))
        changed = [
            t.pk for t in tasks if any(getattr(t, name) != value for name, value in fields.items())
        ]
        Task.objects.filter(pk__in=changed).update(**fields)
        if "leaderboard_frozen_at" in fields:  # the boards now stop at another time
            for task_id in changed:
                leaderboard_rebuild(task_id=task_id)
    return changed


def task_leaderboard_freeze(*, task_ids: Iterable[int]) -> list[int]:
    """Freeze now; a board already frozen keeps its earlier time."""
    with transaction.atomic():
        ids = list(
            Task.objects.select_for_update(no_key=True)
            .filter(pk__in=list(task_ids), leaderboard_frozen_at__isnull=True)
            .values_list("pk", flat=True)
        )
        Task.objects.filter(pk__in=ids).update(leaderboard_frozen_at=timezone.now())
        for task_id in ids:
            leaderboard_rebuild(task_id=task_id)
    return ids
