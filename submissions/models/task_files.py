"""Files operators publish on a task page (training rows, a starter script): the "data" section.

Never the hidden dataset: that is ``Task.dataset``, stored under ``datasets/``; task files live
under ``task-files/`` and only rows whose file is there are ever served (``TaskFileQuerySet``).
"""

from __future__ import annotations

import hashlib
import posixpath
from typing import Any

from django.db import models

TASK_FILES_DIR = "task-files/"
_CHUNK = 1024 * 1024


def task_file_path(instance: TaskFile, filename: str) -> str:
    return f"{TASK_FILES_DIR}{instance.task.slug}/{posixpath.basename(filename)}"


class TaskFileQuerySet(models.QuerySet["TaskFile"]):
    def servable(self) -> TaskFileQuerySet:
        """Rows whose file is a published file, whatever a row's path was set to by hand
        (``task-files/../datasets/...`` would be inside the storage, so ".." is refused too)."""
        return self.filter(file__startswith=TASK_FILES_DIR).exclude(file__contains="..")

    def listed_for(self, user: Any) -> TaskFileQuerySet:
        """What a visitor of the task page sees: public files; operators also see drafts."""
        files = self.servable()
        return files if getattr(user, "is_staff", False) else files.filter(public=True)


class TaskFile(models.Model):
    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="files")
    title = models.CharField(max_length=200)
    description = models.CharField(max_length=500, blank=True)
    file = models.FileField(upload_to=task_file_path, max_length=255)
    size_bytes = models.PositiveBigIntegerField(default=0, editable=False)
    sha256 = models.CharField(max_length=64, blank=True, editable=False)
    public = models.BooleanField(
        default=True, help_text="Listed and downloadable by everyone who can see the task."
    )
    position = models.PositiveSmallIntegerField(default=0, help_text="Order on the page.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TaskFileQuerySet.as_manager()

    class Meta:
        ordering = ["position", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["task", "title"], name="task_file_title_unique")
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def filename(self) -> str:
        return posixpath.basename(self.file.name or "")

    def record_digest(self) -> None:
        """Set size and sha256 from the file's bytes (not saved), reading it in chunks."""
        digest, size = hashlib.sha256(), 0
        self.file.open("rb")
        try:
            self.file.seek(0)
            for chunk in self.file.chunks(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
        finally:
            self.file.seek(0)
        self.sha256, self.size_bytes = digest.hexdigest(), size
