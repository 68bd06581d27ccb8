"""Finalists re-measured: a task's top entries timed again over more sessions on one device class
(``submissions.boards.finalists``). A ``FinalistCampaign`` is one such re-measurement, with the
ranks before and after; a ``FinalistMeasurement`` is one finalist's figures in it. Timing only:
scores never change, and the entry stays on its board throughout."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class FinalistCampaign(models.Model):
    """One re-measurement of a task's finalists: the union of the top ``top`` ranked entries of
    each of its boards (public and private, main and tracks), each timed in ``sessions`` fresh
    sessions by one worker of ``device_class``, one finalist after the other (one rq job)."""

    class Trigger(models.TextChoices):
        ADMIN = "admin", "Admin action"
        CLOSE = "close", "Task closed"
        COMMAND = "command", "Management command"

    task = models.ForeignKey(
        "submissions.Task", on_delete=models.CASCADE, related_name="finalist_campaigns"
    )
    device_class = models.ForeignKey(
        "submissions.DeviceClass", to_field="slug", on_delete=models.PROTECT, related_name="+"
    )
    top = models.PositiveSmallIntegerField(validators=[MinValueValidator(1)])
    sessions = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(25)]
    )
    trigger = models.CharField(max_length=8, choices=Trigger.choices, default=Trigger.ADMIN)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    job_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # {board key: {submission id: rank}} of the ranked entries, board keys as
    # ``finalists.board_key`` writes them ("public", "private", "public/efficiency", ...).
    ranks_before = models.JSONField(default=dict)
    ranks_after = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.task_id}: top {self.top} on {self.device_class_id}, campaign {self.pk}"

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


class FinalistMeasurement(models.Model):
    """One finalist's re-measurement: the median of its sessions' figures, their spread, and the
    figure it ranked on before. Ranks in place of the evaluation's own timing when taken on the
    task's device class (``Submission.remeasurement``)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    campaign = models.ForeignKey(
        FinalistCampaign, on_delete=models.CASCADE, related_name="measurements"
    )
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="finalist_measurements"
    )
    position = models.PositiveSmallIntegerField(help_text="Timed in this order, best first.")
    device_class = models.ForeignKey(
        "submissions.DeviceClass", to_field="slug", on_delete=models.PROTECT, related_name="+"
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    error_message = models.TextField(blank=True)
    worker_name = models.CharField(max_length=200, blank=True)
    sessions = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Sessions timed.")
    # The medians of the sessions' figures, per batch in ms.
    latency_p50_ms = models.FloatField(null=True, blank=True)
    latency_p90_ms = models.FloatField(null=True, blank=True)
    latency_p95_ms = models.FloatField(null=True, blank=True)
    latency_p99_ms = models.FloatField(null=True, blank=True)
    latency_mean_ms = models.FloatField(null=True, blank=True)
    session_p50s_ms = models.JSONField(default=list, blank=True)
    session_spread = models.FloatField(
        null=True, blank=True, help_text="(max - min) / median of the sessions' p50s."
    )
    unstable = models.BooleanField(default=False)
    energy_per_sample_j = models.FloatField(null=True, blank=True)
    device_name = models.CharField(max_length=200, blank=True)
    taken_at = models.DateTimeField(null=True, blank=True)
    # What the entry ranked on when the campaign began: its latest re-measurement's, else its
    # evaluation's.
    before_p50_ms = models.FloatField(null=True, blank=True)
    before_spread = models.FloatField(null=True, blank=True)
    before_sessions = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["campaign", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "submission"], name="one_measurement_per_finalist"
            )
        ]

    def __str__(self) -> str:
        return f"submission {self.submission_id} on {self.device_class_id}: {self.status}"

    @property
    def latencies_ms(self) -> dict[str, float | None]:
        """By percentile, as ``ranking.Measures`` takes them."""
        return {p: getattr(self, f"latency_{p}_ms") for p in ("p50", "p90", "p95", "p99", "mean")}
