"""The history of a task's hidden dataset: each file it has had, and which one is current.

A result records the version it was scored on (``Submission.dataset_version``), so the board can
show only results on the current data (``selectors._eligible``) and a worker's cache can serve
exactly the bytes a version names (``services.dataset_version_path``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class DatasetVersion(models.Model):
    """One dataset file a task has had. Rows are never changed once written: a replacement is a
    new version (``services.task_dataset_replace``)."""

    task = models.ForeignKey(
        "submissions.Task", on_delete=models.CASCADE, related_name="dataset_versions"
    )
    number = models.PositiveIntegerField(help_text="1 for the task's first dataset, then 2, ...")
    file = models.FileField(upload_to="datasets/", max_length=255)
    sha256 = models.CharField(max_length=64, blank=True)
    rows = models.PositiveIntegerField(null=True, blank=True)
    public_rows = models.PositiveIntegerField(null=True, blank=True)
    private_rows = models.PositiveIntegerField(null=True, blank=True)
    note = models.CharField(max_length=500, blank=True, help_text="What changed, for operators.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        ordering = ["task", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["task", "number"], name="one_number_per_dataset")
        ]

    def __str__(self) -> str:
        return f"{self.task_id} dataset v{self.number} ({self.sha256[:12]})"

    @property
    def label(self) -> str:
        return f"v{self.number}"
