"""Publishing files on a task page, for the admin's inline and for seed_demo alike."""

from __future__ import annotations

from django.core.files.base import ContentFile, File
from django.db import transaction

from submissions.models import Task
from submissions.models.task_files import TaskFile


@transaction.atomic
def task_file_save(*, task_file: TaskFile) -> TaskFile:
    """Store ``task_file`` with the size and sha256 of its current bytes."""
    task_file.record_digest()
    task_file.save()
    return task_file


@transaction.atomic
def task_file_publish(
    *,
    task: Task,
    title: str,
    filename: str,
    content: bytes | File,
    description: str = "",
    public: bool = True,
    position: int = 0,
) -> TaskFile:
    """Publish a file on ``task``'s page under ``title``; a title already published is kept as
    it is (so seeding twice publishes nothing twice)."""
    existing = TaskFile.objects.filter(task=task, title=title).first()
    if existing is not None:
        return existing
    task_file = TaskFile(
        task=task, title=title, description=description, public=public, position=position
    )
    body = ContentFile(content) if isinstance(content, bytes) else content
    task_file.file.save(filename, body, save=False)
    return task_file_save(task_file=task_file)
