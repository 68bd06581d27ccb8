"""Fact sheets: what each entry of a phase is (method, code, data), saved by the participant
alone or by any member for their team, required complete before finals are selected where the
phase says so, and exported by the operator."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from plumbing.refusals import Refused
from submissions.boards.cache import board_changes
from submissions.lifecycle.quotas import team_id_of
from submissions.models import FactSheet, Task

# The fields a participant fills in, in the export's order.
FIELDS = ("method_name", "description", "paper_url", "code_url", "training_data", "extra_data")
LABELS = {
    "method_name": "method name",
    "code_url": "code link",
    "training_data": "training data",
    "extra_data": "extra data (yes or no)",
}


class FactSheetRefused(Refused):
    """A final refused for want of a complete fact sheet."""


def fact_sheet_of(*, user: Any, task: Task) -> FactSheet | None:
    """The sheet that speaks for ``user`` on ``task``: their team's, or their own alone."""
    team_id = team_id_of(user=user, task=task)
    sheets = FactSheet.objects.filter(task=task)
    if team_id is not None:
        return sheets.filter(team_id=team_id).first()
    return sheets.filter(user=user, team__isnull=True).first()


def fact_sheet_save(*, user: Any, task: Task, values: dict[str, Any]) -> FactSheet:
    """Create or update the entrant's sheet with ``values`` (any of ``FIELDS``)."""
    with transaction.atomic():
        team_id = team_id_of(user=user, task=task)
        lookup = {"team_id": team_id} if team_id is not None else {"user": user, "team": None}
        sheet = FactSheet.objects.select_for_update().filter(task=task, **lookup).first()
        sheet = sheet or FactSheet(task=task, team_id=team_id)
        sheet.user = user
        for name in FIELDS:
            if name in values:
                setattr(sheet, name, values[name])
        sheet.full_clean()
        sheet.save()
        board_changes(task_id=task.pk)  # the board shows the method and links
        return sheet


def fact_sheet_check(*, user: Any, task: Task) -> None:
    """Refuse a final on a phase that requires a complete fact sheet, naming what is missing."""
    if not task.requires_fact_sheet:
        return
    sheet = fact_sheet_of(user=user, task=task)
    missing = sheet.missing if sheet is not None else list(FactSheet.REQUIRED)
    if missing:
        what = ", ".join(LABELS[m] for m in missing)
        raise FactSheetRefused(
            f"'{task.slug}' counts finals only with a complete fact sheet; yours lacks: {what}. "
            f"Fill it in at /tasks/{task.slug}/fact-sheet/."
        )


def fact_sheet_rows(sheets: Iterable[FactSheet]) -> list[list[Any]]:
    """The operator's export: a header, then one row per sheet."""
    rows: list[list[Any]] = [["task", "entrant", "team", *FIELDS, "complete", "updated_at"]]
    for s in sheets:
        extra = "" if s.extra_data is None else ("yes" if s.extra_data else "no")
        values = [getattr(s, f) for f in FIELDS[:-1]] + [extra]
        entrant = s.team.name if s.team else s.user.username
        team = "yes" if s.team else ""
        complete = "yes" if not s.missing else "no"
        rows.append([s.task.slug, entrant, team, *values, complete, s.updated_at.isoformat()])
    return rows
