"""Final-submission selection: each participant chooses up to ``Task.final_selections`` of their
submissions for the private board (the page, the list form and the API call these).

Every change takes a row lock on the participant (the same lock an upload takes), so concurrent
selections by one participant run one after the other and the limit holds: twenty parallel
requests against a limit of two leave exactly two selected. Selections are refused once the
task closes, so the private board seen then is final. Who selected nothing is ranked on their
best N by public score (``selectors.board_eligible``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from plumbing.refusals import Refused
from submissions.boards.leaderboard import leaderboard_selection_changed
from submissions.challenges.fact_sheets import fact_sheet_check
from submissions.lifecycle.quotas import entrant_submissions, team_id_of
from submissions.lifecycle.selectors import NOT_YOURS
from submissions.models import Submission, Task, Team


class SelectionRefused(Refused):
    """A final that cannot be selected or unselected now, and why."""


def _check_task(task: Task) -> None:
    if not task.final_selections:
        raise SelectionRefused(
            f"Task '{task.slug}' takes no selection of finals: its private board ranks each "
            "participant's best submission."
        )
    if task.closes_at is not None and task.has_closed():
        raise SelectionRefused(
            f"Task '{task.slug}' closed at {timezone.localtime(task.closes_at):%Y-%m-%d %H:%M}; "
            "final selections can no longer change."
        )


def _check_selectable(submission: Submission) -> None:
    if submission.status != Submission.Status.SUCCEEDED:
        raise SelectionRefused(
            f"Only a submission that succeeded can be a final; #{submission.pk} is "
            f"{submission.status}."
        )


def _locked(user: Any, task: Task) -> list[Submission]:
    """Lock the participant and their team (serialising selections, as uploads are), then read
    the submissions they choose among: their team's, or their own made alone."""
    get_user_model().objects.select_for_update(no_key=True).get(pk=user.pk)
    team_id = team_id_of(user=user, task=task)
    if team_id is not None:
        Team.objects.select_for_update(no_key=True).filter(pk=team_id).first()
    return list(entrant_submissions(user=user, task=task).select_related("task"))


def _check_limit(task: Task, chosen: Collection[int]) -> None:
    n = task.final_selections
    if len(chosen) > n:
        which = ", ".join(f"#{pk}" for pk in sorted(chosen))
        raise SelectionRefused(
            f"At most {n} final submission{'s' if n != 1 else ''} per participant or team on "
            f"'{task.slug}' ({which} asked for); unselect one first."
        )


def final_selection_replace(
    *, user: Any, task: Task, submission_ids: Collection[int]
) -> list[Submission]:
    """Make exactly ``submission_ids`` (the participant's own, of ``task``) their finals; the
    finals, in id order."""
    with transaction.atomic():
        task = Task.objects.get(pk=task.pk)
        _check_task(task)
        mine = {s.pk: s for s in _locked(user, task)}
        wanted = set(submission_ids)
        unknown = wanted - mine.keys()
        if unknown:
            raise SelectionRefused(f"No submission #{min(unknown)} of yours on '{task.slug}'.")
        if wanted:
            fact_sheet_check(user=user, task=task)  # where the phase requires one
        for pk in sorted(wanted):
            if not mine[pk].selected:
                _check_selectable(mine[pk])
        _check_limit(task, wanted)
        changed = [s for s in mine.values() if s.selected != (s.pk in wanted)]
        for s in changed:
            s.selected = s.pk in wanted
        if changed:
            Submission.objects.bulk_update(changed, ["selected"])
            leaderboard_selection_changed(task_id=task.pk, user_id=user.pk)
    return [mine[pk] for pk in sorted(wanted)]


def submission_select(*, user: Any, submission_id: int, selected: bool = True) -> Submission:
    """Select (or unselect) one of the participant's submissions as a final."""
    with transaction.atomic():
        found = Submission.objects.for_user(user).select_related("task").filter(pk=submission_id)
        submission = found.first()
        if submission is None:
            raise Submission.DoesNotExist(NOT_YOURS)
        task = submission.task
        if task.withdrawn_for(user):  # refused without naming it (_check_task would)
            raise SelectionRefused(
                f"Submission {submission_id}'s task has been withdrawn by the organisers: its "
                "finals do not change while it is withdrawn."
            )
        _check_task(task)
        mine = {s.pk: s for s in _locked(user, task)}
        if submission_id not in mine:  # a former team's submission: no longer theirs to choose
            raise Submission.DoesNotExist(NOT_YOURS)
        submission = mine[submission_id]
        chosen = {pk for pk, s in mine.items() if s.selected}
        if selected and submission_id not in chosen:
            fact_sheet_check(user=user, task=task)  # where the phase requires one
            _check_selectable(submission)
            _check_limit(task, chosen | {submission_id})
        if submission.selected != selected:
            submission.selected = selected
            submission.save(update_fields=["selected"])
            leaderboard_selection_changed(task_id=task.pk, user_id=user.pk)
        return submission
