"""Replacing a task's dataset: record the new file as a version, make it current, and (if the
operator asks) re-score every ranked submission on it.

The board ranks only results scored on the current version (``selectors._eligible``), so after a
replacement the old results leave it at once; a re-score brings each back as its new result comes
in. Re-scores queue behind the participants' own uploads (``Submission.RESCORE_PRIORITY``, the
lowest in the fair order of submissions/lifecycle/turns.py) and are not charged to quotas
(submissions/lifecycle/quotas.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max

from submissions.boards.leaderboard import leaderboard_rebuild
from submissions.lifecycle.services import submissions_requeue
from submissions.models import DatasetVersion, Submission, Task
from submissions.tasks.dataset_facts import dataset_facts


@dataclass(frozen=True)
class DatasetReplaced:
    version: DatasetVersion
    created: bool  # False: the file is the current version's bytes, nothing changed
    rescored: int  # submissions queued for re-scoring


def _record_version(task: Task, *, note: str, user: Any) -> tuple[DatasetVersion, bool]:
    with task.dataset.open("rb") as stored:
        facts = dataset_facts(stored)
    current = task.current_dataset
    if current is not None and current.sha256 == facts.sha256:
        return current, False
    last = task.dataset_versions.aggregate(last=Max("number"))["last"] or 0
    version = DatasetVersion.objects.create(
        task=task,
        number=last + 1,
        file=task.dataset.name,
        sha256=facts.sha256,
        rows=facts.rows,
        public_rows=facts.public_rows,
        private_rows=facts.private_rows,
        note=note[:500],
        created_by=user if getattr(user, "pk", None) else None,
    )
    Task.objects.filter(pk=task.pk).update(current_dataset=version)
    return version, True


def task_dataset_replace(
    *, task_id: int, rescore: bool = False, note: str = "", user: Any = None
) -> DatasetReplaced:
    """Record the file the task's ``dataset`` now holds as its current version (the admin saved
    it there), take every result on an earlier version off the boards, and with ``rescore``
    queue every ranked submission again on the new data. The same bytes again change nothing."""
    with transaction.atomic():
        task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
        version, created = _record_version(task, note=note, user=user)
        if created:
            leaderboard_rebuild(task_id=task_id)
        rescored = task_rescore(task_id=task_id) if rescore else 0
    return DatasetReplaced(version, created, rescored)


def task_rescore(*, task_id: int) -> int:
    """Queue again every submission that would rank but for its dataset version: succeeded,
    neither hidden nor disqualified, scored on an earlier version. Returns how many."""
    with transaction.atomic():
        task = Task.objects.select_for_update(no_key=True).get(pk=task_id)
        stale = (
            Submission.objects.filter(
                task=task, status=Submission.Status.SUCCEEDED, hidden=False, disqualified=False
            )
            .exclude(dataset_version_id=task.current_dataset_id)
            .values_list("pk", flat=True)
        )
        # They are off the board already (their version is not current): nothing to refresh.
        return submissions_requeue(
            submission_ids=list(stale),
            statuses=[Submission.Status.SUCCEEDED],
            priority=Submission.RESCORE_PRIORITY,
        )
