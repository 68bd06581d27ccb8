from __future__ import annotations

from django.contrib import admin

from submissions.models import Submission, Task


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "title",
        "metric",
        "batch_size",
        "input_shape",
        "leaderboard",
        "is_hidden",
        "requires_gpu",
    ]
    prepopulated_fields = {"slug": ["title"]}
    search_fields = ["slug", "title"]


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "task",
        "user",
        "original_name",
        "status",
        "score",
        "provider",
        "worker_name",
        "created_at",
        "hidden",
        "disqualified",
        "is_baseline",
    ]
    list_filter = ["task", "status", "provider", "hidden", "disqualified", "is_baseline"]
    search_fields = ["user__username", "original_name", "sha256"]
    list_select_related = ["task", "user"]
    readonly_fields = [
        "sha256",
        "size_bytes",
        "model_info",
        "created_at",
        "started_at",
        "finished_at",
        "attempts",
        "job_id",
        "worker_name",
        "log",
    ]
