"""The operator's console: tasks (dataset checked on upload, leaderboard state), submissions
(filters, re-run, cancel, hide, disqualify, baseline), and the live worker list.

Every action writes a LogEntry per row it changed (Django logs form saves itself), so the
admin's history says who did what to which submission and when.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from submissions.admin_forms import TaskAdminForm
from submissions.admin_services import (
    submission_flag_set,
    task_leaderboard_freeze,
    task_leaderboard_set,
)
from submissions.admin_workers import worker_rows
from submissions.leaderboard import (
    leaderboard_rebuild,
    leaderboard_submissions_changed,
    leaderboard_user_refresh,
)
from submissions.models import Submission, Task
from submissions.services import submission_cancel, submission_rerun


def _log_each(
    model_admin: admin.ModelAdmin, request: HttpRequest, objects: list[Any], message: str
) -> None:
    for obj in objects:
        model_admin.log_change(request, obj, message)


def _report(
    model_admin: admin.ModelAdmin, request: HttpRequest, done: int, asked: int, what: str
) -> None:
    level = messages.SUCCESS if done else messages.WARNING
    skipped = asked - done
    extra = f"; {skipped} already so or not eligible" if skipped else ""
    model_admin.message_user(request, f"{what}: {done} of {asked}{extra}.", level)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    form = TaskAdminForm
    list_display = [
        "slug",
        "title",
        "metric",
        "batch_size",
        "input_shape",
        "opens_at",
        "closes_at",
        "leaderboard",
        "leaderboard_frozen_at",
        "private_revealed",
        "is_hidden",
        "requires_gpu",
    ]
    list_filter = ["leaderboard", "private_revealed", "is_hidden", "requires_gpu", "metric"]
    prepopulated_fields = {"slug": ["title"]}
    search_fields = ["slug", "title"]
    fieldsets = [
        (None, {"fields": ["title", "slug", "description", "is_hidden"]}),
        (
            "Data and shape",
            {
                "fields": [
                    "dataset",
                    "batch_size",
                    "input_shape",
                    "input_dtype",
                    "output_shape",
                    "metric",
                ],
                "description": "The dataset .npz needs 'inputs' [N, *input shape] of the input "
                "dtype, 'targets' (class labels, or [N, *output shape] floats) and optionally "
                "'split' ('public'/'private' per row). It is checked when you save.",
            },
        ),
        (
            "Limits",
            {
                "fields": [
                    "max_model_bytes",
                    "time_limit_s",
                    "submissions_per_day",
                    "submissions_total",
                    "requires_gpu",
                ]
            },
        ),
        ("Dates", {"fields": ["opens_at", "closes_at"]}),
        (
            "Leaderboard",
            {"fields": ["leaderboard", "leaderboard_frozen_at", "private_revealed"]},
        ),
    ]

    def save_model(self, request: HttpRequest, obj: Task, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change and {"metric", "leaderboard_frozen_at"} & set(form.changed_data):
            leaderboard_rebuild(task_id=obj.pk)  # ranking direction or cut-off time moved

    actions = [
        "reveal_private",
        "conceal_private",
        "freeze_board",
        "unfreeze_board",
        "publish_board",
        "hide_board",
    ]

    def _apply(
        self, request: HttpRequest, queryset: QuerySet[Task], what: str, apply: Callable[..., Any]
    ) -> None:
        ids = apply(task_ids=list(queryset.values_list("pk", flat=True)))
        _log_each(self, request, list(Task.objects.filter(pk__in=ids)), what)
        _report(self, request, len(ids), queryset.count(), what)

    @admin.action(description="Reveal private scores")
    def reveal_private(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        apply = lambda task_ids: task_leaderboard_set(task_ids=task_ids, private_revealed=True)  # noqa: E731
        self._apply(request, queryset, "Private scores revealed", apply)

    @admin.action(description="Conceal private scores")
    def conceal_private(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        apply = lambda task_ids: task_leaderboard_set(task_ids=task_ids, private_revealed=False)  # noqa: E731
        self._apply(request, queryset, "Private scores concealed", apply)

    @admin.action(description="Freeze the leaderboard now")
    def freeze_board(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        self._apply(request, queryset, "Leaderboard frozen", task_leaderboard_freeze)

    @admin.action(description="Unfreeze the leaderboard")
    def unfreeze_board(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        apply = lambda task_ids: task_leaderboard_set(task_ids=task_ids, leaderboard_frozen_at=None)  # noqa: E731
        self._apply(request, queryset, "Leaderboard unfrozen", apply)

    @admin.action(description="Make the leaderboard public")
    def publish_board(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        apply = lambda task_ids: task_leaderboard_set(task_ids=task_ids, leaderboard="public")  # noqa: E731
        self._apply(request, queryset, "Leaderboard made public", apply)

    @admin.action(description="Hide the leaderboard")
    def hide_board(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        apply = lambda task_ids: task_leaderboard_set(task_ids=task_ids, leaderboard="hidden")  # noqa: E731
        self._apply(request, queryset, "Leaderboard hidden", apply)


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    change_list_template = "admin/submissions/submission/change_list.html"
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
    list_filter = [
        "task",
        "status",
        ("user", admin.RelatedOnlyFieldListFilter),
        "provider",
        "hidden",
        "disqualified",
        "is_baseline",
        "failed_by_system",
    ]
    search_fields = ["user__username", "original_name", "sha256"]
    list_select_related = ["task", "user"]
    date_hierarchy = "created_at"
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
    actions = [
        "rerun",
        "cancel",
        "hide",
        "unhide",
        "disqualify",
        "requalify",
        "mark_baseline",
        "unmark_baseline",
    ]

    def save_model(self, request: HttpRequest, obj: Submission, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        leaderboard_submissions_changed(submission_ids=[obj.pk])

    def delete_model(self, request: HttpRequest, obj: Submission) -> None:
        task_id, user_id = obj.task_id, obj.user_id
        super().delete_model(request, obj)
        leaderboard_user_refresh(task_id=task_id, user_id=user_id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        owners = set(queryset.values_list("task_id", "user_id"))
        super().delete_queryset(request, queryset)
        for task_id, user_id in owners:
            leaderboard_user_refresh(task_id=task_id, user_id=user_id)

    @admin.action(description="Re-run selected submissions")
    def rerun(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        done = [s for s in queryset if submission_rerun(submission_id=s.pk)]
        _log_each(self, request, done, "Re-run by operator")
        _report(self, request, len(done), queryset.count(), "Queued for re-run")

    @admin.action(description="Cancel selected submissions")
    def cancel(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        done = [s for s in queryset if submission_cancel(submission_id=s.pk, user=request.user)]
        _log_each(self, request, done, "Cancelled by operator")
        _report(self, request, len(done), queryset.count(), "Cancelled")

    def _flag(
        self, request: HttpRequest, queryset: QuerySet[Submission], flag: str, value: bool
    ) -> None:
        ids = submission_flag_set(
            submission_ids=list(queryset.values_list("pk", flat=True)), flag=flag, value=value
        )
        what = f"Set {flag} to {value}"
        _log_each(self, request, list(Submission.objects.filter(pk__in=ids)), what)
        _report(self, request, len(ids), queryset.count(), what)

    @admin.action(description="Hide from the leaderboard")
    def hide(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        self._flag(request, queryset, "hidden", True)

    @admin.action(description="Show on the leaderboard again")
    def unhide(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        self._flag(request, queryset, "hidden", False)

    @admin.action(description="Disqualify")
    def disqualify(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        self._flag(request, queryset, "disqualified", True)

    @admin.action(description="Lift disqualification")
    def requalify(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        self._flag(request, queryset, "disqualified", False)

    @admin.action(description="Mark as baseline")
    def mark_baseline(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        self._flag(request, queryset, "is_baseline", True)

    @admin.action(description="Unmark as baseline")
    def unmark_baseline(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        self._flag(request, queryset, "is_baseline", False)

    def get_urls(self) -> list[URLPattern]:
        workers = path(
            "workers/",
            self.admin_site.admin_view(self.workers_view),
            name="submissions_submission_workers",
        )
        return [workers, *super().get_urls()]

    def workers_view(self, request: HttpRequest) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "title": "Evaluation workers",
            "workers": worker_rows(),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/submissions/workers.html", context)
