"""Tasks and submissions: the source of truth (Redis only ever holds rebuildable queue state)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from evaluation.metrics import get_metric, metric_choices
from evaluation.spec import ONNX_TYPE_FOR_DTYPE, TaskSpec


class TaskQuerySet(models.QuerySet["Task"]):
    def visible(self) -> TaskQuerySet:
        return self.filter(is_hidden=False)


class Task(models.Model):
    class Leaderboard(models.TextChoices):
        PUBLIC = "public", "Public"
        HIDDEN = "hidden", "Hidden"

    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    batch_size = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    input_shape = models.JSONField(help_text="Per-sample input shape, e.g. [3, 224, 224].")
    input_dtype = models.CharField(
        max_length=16, choices=[(k, k) for k in ONNX_TYPE_FOR_DTYPE], default="float32"
    )
    output_shape = models.JSONField(help_text="Per-sample output shape, e.g. [1000].")
    metric = models.CharField(max_length=32, choices=metric_choices())
    dataset = models.FileField(
        upload_to="datasets/", help_text="Hidden .npz: inputs, targets, split."
    )
    max_model_bytes = models.PositiveBigIntegerField(default=200 * 1024 * 1024)
    time_limit_s = models.PositiveIntegerField(default=600, validators=[MinValueValidator(1)])
    submissions_per_day = models.PositiveIntegerField(default=10)
    submissions_total = models.PositiveIntegerField(null=True, blank=True)
    opens_at = models.DateTimeField(null=True, blank=True)
    closes_at = models.DateTimeField(null=True, blank=True)
    leaderboard = models.CharField(max_length=8, choices=Leaderboard.choices, default="public")
    leaderboard_frozen_at = models.DateTimeField(null=True, blank=True)
    private_revealed = models.BooleanField(default=False)
    requires_gpu = models.BooleanField(default=False)
    is_hidden = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("task-detail", args=[self.slug])

    @property
    def batch_shape(self) -> list[int]:
        return [self.batch_size, *self.input_shape]

    @property
    def metric_label(self) -> str:
        return get_metric(self.metric).label

    @property
    def higher_is_better(self) -> bool:
        return get_metric(self.metric).higher_is_better

    def is_open(self, now: Any = None) -> bool:
        now = now or timezone.now()
        if self.opens_at and now < self.opens_at:
            return False
        return not (self.closes_at and now >= self.closes_at)

    def spec(self) -> TaskSpec:
        return TaskSpec(
            batch_size=self.batch_size,
            input_shape=tuple(int(d) for d in self.input_shape),
            input_dtype=self.input_dtype,
            output_shape=tuple(int(d) for d in self.output_shape),
            metric=self.metric,
            max_model_bytes=self.max_model_bytes,
            time_limit_s=float(self.time_limit_s),
            requires_gpu=self.requires_gpu,
        )


class SubmissionQuerySet(models.QuerySet["Submission"]):
    def for_user(self, user: Any) -> SubmissionQuerySet:
        return self.filter(user=user)

    def on_leaderboard(self) -> SubmissionQuerySet:
        return self.filter(
            status=Submission.Status.SUCCEEDED,
            hidden=False,
            disqualified=False,
            score__isnull=False,
        )


class Submission(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINAL_STATUSES = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submissions"
    )
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="submissions")
    model_file = models.FileField(upload_to="models/%Y/%m/")
    sha256 = models.CharField(max_length=64, db_index=True)
    size_bytes = models.PositiveBigIntegerField()
    original_name = models.CharField(max_length=255)
    description = models.CharField(max_length=500, blank=True)
    model_info = models.JSONField(default=dict, blank=True, help_text="What inspection found.")

    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    progress = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    job_id = models.CharField(max_length=64, blank=True)
    worker_name = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True, help_text="Shown to the submitter.")
    log = models.TextField(blank=True, help_text="Operators only.")
    failed_by_system = models.BooleanField(
        default=False, help_text="Failed through no fault of the model (worker lost, our error)."
    )

    hidden = models.BooleanField(default=False)
    disqualified = models.BooleanField(default=False)
    is_baseline = models.BooleanField(default=False)

    # Result: written once, in one transaction, when the evaluation succeeds.
    score = models.FloatField(null=True, blank=True, help_text="Primary metric on the public rows.")
    score_private = models.FloatField(null=True, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    metrics_private = models.JSONField(default=dict, blank=True)
    latency_p50_ms = models.FloatField(null=True, blank=True)
    latency_p95_ms = models.FloatField(null=True, blank=True)
    latency_p99_ms = models.FloatField(null=True, blank=True)
    throughput = models.FloatField(null=True, blank=True, help_text="Samples per second.")
    peak_memory_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    provider = models.CharField(max_length=64, blank=True)
    device_name = models.CharField(max_length=200, blank=True)
    ort_version = models.CharField(max_length=32, blank=True)
    samples_evaluated = models.PositiveIntegerField(null=True, blank=True)
    batch_latencies_ms = models.JSONField(default=list, blank=True)

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["task", "status", "score"]),
            models.Index(fields=["user", "task", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.original_name} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("submission-detail", args=[self.pk])

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL_STATUSES


# Leaderboard read models live in their own module (issue 6); imported so Django registers them.
from submissions.leaderboard_models import LeaderboardEntry, LeaderboardRecord  # noqa: E402, F401
