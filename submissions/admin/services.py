"""What the operator's console does to rows, kept out of the admin classes so it can be tested
and reused. Re-run and cancel are the existing services; these set the leaderboard flags."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from django.core.files import File
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone
from django.utils.text import get_valid_filename

from submissions.boards.cache import board_changes
from submissions.boards.leaderboard import leaderboard_rebuild, leaderboard_submissions_changed
from submissions.lifecycle.selectors import BOARD_PRIVATE, BOARD_PUBLIC, leaderboard
from submissions.lifecycle.services import submission_create, submission_rerun
from submissions.models import Submission, Task

SUBMISSION_FLAGS = ("hidden", "disqualified", "is_baseline")


# Flags an operator sets for a reason the submission's owner is shown (Submission.owner_notices).
REASONED_FLAGS = ("hidden", "disqualified")


def submission_flag_set(
    *, submission_ids: Iterable[int], flag: str, value: bool, reason: str = ""
) -> list[int]:
    """Set one leaderboard flag; returns the ids that actually changed (for the admin log).
    Hiding and disqualifying take a reason, kept for the owner to read; lifting them clears it."""
    if flag not in SUBMISSION_FLAGS:
        raise ValueError(f"Unknown submission flag {flag!r}.")
    fields: dict[str, Any] = {flag: value}
    if flag in REASONED_FLAGS:
        reason = reason.strip()[:500] if value else ""
        if value and not reason:
            raise ValueError(f"Say why: the owner is shown the reason a submission is {flag}.")
        fields[f"{flag}_reason"] = reason
    with transaction.atomic():
        rows = Submission.objects.select_for_update(no_key=True).filter(pk__in=list(submission_ids))
        # NOT (flag AND reason): a row already so, for the same reason, is left alone
        to_change = list(rows.exclude(**fields).values_list("pk", flat=True))
        Submission.objects.filter(pk__in=to_change).update(**fields)
        # Every flag moves the board: a baseline is a row of its own, not part of its owner's.
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
        for task_id in changed:
            if "leaderboard_frozen_at" in fields:  # the boards now stop at another time
                leaderboard_rebuild(task_id=task_id)
            board_changes(task_id=task_id)  # shown or not, revealed or not: every board's page
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


RETIME_TOP = 10


def leaderboard_top_retime(*, task_id: int, count: int = RETIME_TOP) -> list[int]:
    """Before the reveal: re-run the top ``count`` ranked entries of the board that will be
    revealed (private when the task has private scores), so their latency is timed again, one
    after the other, at re-run priority ahead of the participants' turns. Each leaves the board
    while it runs and comes back with its new numbers. Returns the re-queued submission ids."""
    with transaction.atomic():
        task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
        rows = leaderboard(task=task, board=BOARD_PRIVATE) or leaderboard(
            task=task, board=BOARD_PUBLIC
        )
        top = [row.submission.pk for row in rows if row.ranked][:count]
        return [pk for pk in top if submission_rerun(submission_id=pk)]


def baseline_create(
    *, user: Any, task: Task, upload: UploadedFile, display_name: str, description: str = ""
) -> Submission:
    """An operator's upload from the admin, through the participants' upload service (same
    checks, same queue); with a display name it is a baseline, a board row of its own."""
    with transaction.atomic():
        submission = submission_create(user=user, task=task, upload=upload, description=description)
        if display_name:
            submission.display_name, submission.is_baseline = display_name[:100], True
            submission.save(update_fields=["display_name", "is_baseline"])
    return submission


# A dataset uploaded with a task form that failed elsewhere waits here, named by a token the
# form carries in a hidden field, so the operator need not upload it again.
PENDING_DIR = "datasets/pending"
_TOKEN = re.compile(r"^[0-9a-f]{32}/[-\w.]+$")


def _dataset_storage() -> Any:
    return Task._meta.get_field("dataset").storage  # type: ignore[union-attr]


def dataset_pending_save(upload: UploadedFile) -> str:
    """Keep an uploaded dataset for the next attempt; returns the token naming it."""
    token = f"{uuid.uuid4().hex}/{get_valid_filename(PurePosixPath(upload.name or 'data').name)}"
    upload.seek(0)
    _dataset_storage().save(f"{PENDING_DIR}/{token}", upload)
    upload.seek(0)
    return token


def dataset_pending_open(token: str) -> File | None:
    """The kept dataset named by ``token`` (marked ``kept``), or None for a token that names
    nothing (expired, discarded, or not one of ours)."""
    storage = _dataset_storage()
    path = f"{PENDING_DIR}/{token}"
    if not isinstance(token, str) or not _TOKEN.match(token) or not storage.exists(path):
        return None
    kept = File(storage.open(path, "rb"), name=PurePosixPath(token).name)
    kept.kept = True  # type: ignore[attr-defined]
    return kept


def dataset_pending_discard(token: str) -> None:
    if isinstance(token, str) and _TOKEN.match(token):
        _dataset_storage().delete(f"{PENDING_DIR}/{token}")
