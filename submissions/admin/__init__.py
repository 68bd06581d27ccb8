"""The operator's console: tasks (dataset checked on upload, leaderboard state), submissions
(filters, re-run, cancel, hide, disqualify, baseline), and the live worker list.

Every action writes a LogEntry per row it changed (Django logs form saves itself), so the
admin's history says who did what to which submission and when.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from evaluation import formats
from plumbing.refusal_responses import attempt
from submissions.admin.analytics import task_analytics_view
from submissions.admin.datasets import dataset_summary_read
from submissions.admin.finalists import started_message, task_finalists_view
from submissions.admin.forms import AdminUploadForm, TaskAdminForm
from submissions.admin.rule_forms import RULE_FIELDS, RankingRuleForm, TrackForm
from submissions.admin.services import (
    RETIME_TOP,
    baseline_create,
    leaderboard_top_retime,
    submission_flag_set,
    task_leaderboard_freeze,
    task_leaderboard_set,
)
from submissions.admin.workers import worker_rows
from submissions.boards.cache import board_changes
from submissions.boards.finalists import FinalistsRefused, finalists_remeasure
from submissions.boards.leaderboard import (
    leaderboard_rebuild,
    leaderboard_submissions_changed,
    leaderboard_user_refresh,
)
from submissions.lifecycle.services import submission_cancel, submission_rerun
from submissions.models import DeviceClass, Submission, Task
from submissions.models.ranking import RankingRule, Track
from submissions.models.task_files import TaskFile
from submissions.tasks.datasets import task_dataset_replace
from submissions.tasks.files import task_file_save


def _log_each(
    model_admin: admin.ModelAdmin, request: HttpRequest, objects: list[Any], message: str
) -> None:
    for obj in objects:
        model_admin.log_change(request, obj, message)


def _moment(at: Any) -> str:
    """A date and time as the admin's lists show them: short, in the site's time zone."""
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M")


# What an operator's flag action did, as the message after it says.
FLAG_WORDS = {
    ("hidden", True): "Hidden from the leaderboard",
    ("hidden", False): "Shown on the leaderboard again",
    ("disqualified", True): "Disqualified",
    ("disqualified", False): "Disqualification lifted",
    ("is_baseline", True): "Marked as baselines",
    ("is_baseline", False): "No longer baselines",
}


def _report(
    model_admin: admin.ModelAdmin, request: HttpRequest, done: int, asked: int, what: str
) -> None:
    level = messages.SUCCESS if done else messages.WARNING
    skipped = asked - done
    extra = f"; {skipped} already so or not eligible" if skipped else ""
    model_admin.message_user(request, f"{what}: {done} of {asked}{extra}.", level)


@admin.register(DeviceClass)
class DeviceClassAdmin(admin.ModelAdmin):
    """Operators define the hardware classes tasks are timed on; a class in use cannot be
    deleted (its tasks protect it). Workers read the classes when they start."""

    list_display = ["slug", "name", "requires_gpu", "gpu_name_contains", "timing_sessions"]
    search_fields = ["slug", "name"]


class RankingRuleInline(admin.StackedInline):
    """The task's ranking rule (none: the primary metric). Saving re-ranks the boards."""

    model = RankingRule
    form = RankingRuleForm
    max_num = 1
    can_delete = True
    raw_id_fields = ["baseline"]
    verbose_name = "ranking rule"
    # The rule's fields (rule_forms.RULE_FIELDS), the weights' boxes in two rows before the
    # baseline they are relative to.
    fields = [
        *RULE_FIELDS[:-1],
        ("weight_score", "weight_latency", "weight_energy"),
        ("weight_parameters", "weight_flops", "weight_peak_memory"),
        RULE_FIELDS[-1],
    ]


class TrackInline(admin.StackedInline):
    """More boards of the same results (an efficiency track beside the main one), each with a
    ranking rule of its own; saving re-ranks every board of the task."""

    model = Track
    form = TrackForm
    extra = 0
    raw_id_fields = ["baseline"]
    fields = [("name", "slug", "position"), "description", *RankingRuleInline.fields]


# Task fields whose change re-ranks every entry: direction, cut-off time, whose latency counts.
RERANKING_FIELDS = {"metric", "leaderboard_frozen_at", "device_class", "final_selections"}


class TaskFileInline(admin.StackedInline):
    """The task page's data section. Size and sha256 are read from the file when it is saved.
    Stacked: as a table its seven columns made the task's page three screens wide."""

    model = TaskFile
    extra = 0
    fields = ["title", "file", "description", "public", "position", "size_bytes", "sha256"]
    readonly_fields = ["size_bytes", "sha256"]


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    form = TaskAdminForm
    inlines = [RankingRuleInline, TrackInline, TaskFileInline]
    # What an operator scans for; shapes and the other dates are on the task's page. Twelve
    # columns did not fit a laptop.
    list_display = [
        "slug",
        "title",
        "metric_shown",
        "closes",
        "leaderboard",
        "is_hidden",
        "device_class",
    ]
    list_filter = ["leaderboard", "private_revealed", "is_hidden", "device_class", "metric"]
    prepopulated_fields = {"slug": ["title"]}
    search_fields = ["slug", "title"]
    fieldsets = [
        (None, {"fields": ["title", "slug", "description", "is_hidden"]}),
        (
            "Data and shape",
            {
                "fields": [
                    "dataset",
                    "dataset_note",
                    "rescore",
                    "current_dataset_summary",
                    "dataset_pending",
                    "dataset_summary",
                    "batch_size",
                    "input_shape",
                    "input_dtype",
                    "output_shape",
                    "metric",
                    "metric_options",
                ],
                "description": "The dataset .npz needs 'inputs' [N, *input shape] of the input "
                "dtype, 'targets' (what the metric reads: see the metric's help) and optionally "
                "'split' ('public'/'private' per row). It is checked when you save; a file "
                "uploaded with a form that fails elsewhere is kept for the next try.",
            },
        ),
        (
            "Limits",
            {
                "fields": [
                    "max_model_mb",
                    "time_limit_s",
                    "submissions_per_day",
                    "submissions_total",
                    "queued_per_user",
                    "device_class",
                ]
            },
        ),
        (
            "Timing",
            {
                "fields": [
                    ("timing_min_time_s", "timing_min_batches", "timing_max_time_s"),
                    ("timing_passes", "timing_unstable_spread", "timing_lock_wait_s"),
                    ("timing_precision", "timing_unstable_session_spread"),
                ],
                "description": "How models are timed after scoring; a box left empty takes "
                "the worker's EVAL_TIMING_* default, shown in it.",
            },
        ),
        ("Dates", {"fields": ["opens_at", "closes_at", "private_reveal_at"]}),
        (
            "Task page",
            {
                "fields": ["overview", "rules", "evaluation_notes", "timeline_notes"],
                "description": "Markdown for the page's tabs; raw HTML is shown as text. Files "
                "for the page's data section are below.",
            },
        ),
        (
            "Leaderboard",
            {
                "fields": [
                    "leaderboard",
                    "leaderboard_frozen_at",
                    "private_revealed",
                    "final_selections",
                    "analytics",
                ]
            },
        ),
        ("Teams", {"fields": ["max_team_size", "team_merge_deadline"]}),
        (
            "Finalists re-measured",
            {
                "fields": [
                    ("finalists_top", "finalists_sessions"),
                    "remeasure_finalists_at_close",
                    "finalists",
                ]
            },
        ),
    ]

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        if formset.model is not TaskFile:
            return super().save_formset(request, form, formset, change)
        for task_file in formset.save(commit=False):
            task_file_save(task_file=task_file)
        for task_file in formset.deleted_objects:
            task_file.delete()
        formset.save_m2m()

    readonly_fields = ["current_dataset_summary", "dataset_summary", "analytics", "finalists"]

    @admin.display(description="Analytics")
    def analytics(self, task: Task) -> str:
        if not task.pk:
            return "Shown once the task is saved."
        url = reverse("admin:submissions_task_analytics", args=[task.pk])
        return format_html('<a href="{}">Submissions, participants, failures and times</a>', url)

    @admin.display(description="Re-measurements")
    def finalists(self, task: Task) -> str:
        if not task.pk:
            return "Shown once the task is saved."
        url = reverse("admin:submissions_task_finalists", args=[task.pk])
        return format_html('<a href="{}">Re-measure the finalists; ranks before and after</a>', url)

    @admin.display(description="Closes", ordering="closes_at")
    def closes(self, task: Task) -> str:
        return _moment(task.closes_at) if task.closes_at else "–"

    @admin.display(description="Metric", ordering="metric")
    def metric_shown(self, task: Task) -> str:
        return formats.metric_label(task.metric)

    @admin.display(description="Dataset versions")
    def current_dataset_summary(self, task: Task) -> str:
        versions = list(task.dataset_versions.all()[:5]) if task.pk else []
        if not versions:
            return "None yet: the dataset you save becomes version 1."
        return "; ".join(
            f"{v.label}{' (current)' if v.pk == task.current_dataset_id else ''}: "
            f"{v.rows} rows ({v.public_rows} public, {v.private_rows} private), "
            f"sha256 {v.sha256[:12]}, {v.created_at:%Y-%m-%d %H:%M}"
            + (f", {v.note}" if v.note else "")
            for v in versions
        )

    @admin.display(description="Dataset summary")
    def dataset_summary(self, task: Task) -> str:
        if not task.pk or not task.dataset:
            return "Shown once a dataset is saved."
        return dataset_summary_read(
            task.dataset,
            metric=task.metric,
            output_shape=list(task.output_shape or []),
            options=dict(task.metric_options or {}),
        )

    def save_model(self, request: HttpRequest, obj: Task, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        board_changes(task_id=obj.pk)  # its page, kept for anonymous readers, shows the edit
        form.dataset_pending_done()
        if form.summary is not None:
            self.message_user(request, f"Dataset checked: {form.summary}", messages.INFO)

    def get_urls(self) -> list[URLPattern]:
        dataset = path(
            "<int:pk>/dataset/",
            self.admin_site.admin_view(self.dataset_view),
            name="submissions_task_dataset",
        )
        analytics = path(
            "<int:pk>/analytics/",
            self.admin_site.admin_view(partial(task_analytics_view, self)),
            name="submissions_task_analytics",
        )
        finalists = path(
            "<int:pk>/finalists/",
            self.admin_site.admin_view(partial(task_finalists_view, self)),
            name="submissions_task_finalists",
        )
        return [dataset, analytics, finalists, *super().get_urls()]

    def dataset_view(self, request: HttpRequest, pk: int) -> FileResponse:
        """Staff only (admin_view): the task's dataset, streamed from storage."""
        task = get_object_or_404(Task, pk=pk)
        name = (task.dataset.name or "dataset.npz").rsplit("/", 1)[-1]
        return FileResponse(task.dataset.open("rb"), as_attachment=True, filename=name)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        if not change or "dataset" in form.changed_data:
            replaced = task_dataset_replace(
                task_id=form.instance.pk,
                rescore=change and form.cleaned_data.get("rescore", False),
                note=form.cleaned_data.get("dataset_note", ""),
                user=request.user,
            )
            if change and replaced.created:
                self.message_user(
                    request,
                    f"Dataset {replaced.version.label} is current; {replaced.rescored} "
                    "submission(s) queued for re-scoring on it.",
                )
        rule_changed = any(formset.has_changed() for formset in formsets)
        if change and (rule_changed or RERANKING_FIELDS & set(form.changed_data)):
            # Inside the admin's transaction: the rule and the re-ranked boards commit together.
            leaderboard_rebuild(task_id=form.instance.pk)

    actions = [
        "remeasure_finalists",
        "retime_top",
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

    @admin.action(description=f"Re-time the top {RETIME_TOP} entries (before the reveal)")
    def retime_top(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        done = [pk for task in queryset for pk in leaderboard_top_retime(task_id=task.pk)]
        submissions = list(Submission.objects.filter(pk__in=done))
        _log_each(self, request, submissions, "Re-timed before the reveal")
        self.message_user(
            request,
            f"Queued {len(done)} top entr{'y' if len(done) == 1 else 'ies'} for re-timing "
            "at re-run priority; each leaves the board until its new result is in.",
            messages.SUCCESS if done else messages.WARNING,
        )

    @admin.action(description="Re-measure finalists (timing only; they stay on the board)")
    def remeasure_finalists(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        """With each task's own settings; its finalists page chooses others."""
        for task in queryset:
            try:
                campaign = finalists_remeasure(task_id=task.pk, user=request.user)
            except FinalistsRefused as exc:
                self.message_user(request, str(exc), messages.WARNING)
                continue
            self.log_change(request, task, f"Finalists re-measured (campaign {campaign.pk})")
            started_message(self, request, campaign)

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
    # What an operator decides on first (status, score, flags), then whose; the file, provider
    # and worker are on the submission's own page. Thirteen columns did not fit a laptop.
    list_display = ["id", "status", "score_shown", "flags", "task_slug", "entrant", "submitted"]
    list_display_links = ["id"]
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
    # Everything else is the upload's or the worker's: shown, never typed over by hand.
    # Hiding and disqualifying go through their actions, which ask the reason the owner is shown.
    EDITABLE = ("description", "display_name", "is_baseline")
    exclude = ["model_file"]  # storage's /media/ link is dead: model_download links instead

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        names = [f.name for f in Submission._meta.concrete_fields if f.name not in self.EDITABLE]
        return ["model_download", *(n for n in names if n not in ("id", "model_file"))]

    @admin.display(description="Score", ordering="score")
    def score_shown(self, submission: Submission) -> str:
        return formats.score(submission.score)

    @admin.display(description="Flags")
    def flags(self, submission: Submission) -> str:
        on = [
            ("hidden", submission.hidden),
            ("disqualified", submission.disqualified),
            ("baseline", submission.is_baseline),
            ("system failure", submission.failed_by_system),
        ]
        return ", ".join(name for name, flag in on if flag) or "–"

    @admin.display(description="Task", ordering="task__slug")
    def task_slug(self, submission: Submission) -> str:
        return submission.task.slug

    @admin.display(description="Submitted", ordering="created_at")
    def submitted(self, submission: Submission) -> str:
        return _moment(submission.created_at)

    @admin.display(description="Entrant", ordering="user__username")
    def entrant(self, submission: Submission) -> str:
        name = submission.user.username
        return f"{submission.display_name} ({name})" if submission.display_name else name

    @admin.display(description="Model file")
    def model_download(self, submission: Submission) -> str:
        if not submission.pk or not submission.model_file:
            return "–"
        url = reverse("submission-model", args=[submission.pk])
        return format_html('<a href="{}">{}</a>', url, submission.original_name)

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: Any = None) -> Any:
        """ "Add submission" is an upload through the participants' service: see upload_view."""
        return redirect("admin:submissions_submission_upload")

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
        self,
        request: HttpRequest,
        queryset: QuerySet[Submission],
        flag: str,
        value: bool,
        reason: str = "",
    ) -> None:
        ids = submission_flag_set(
            submission_ids=list(queryset.values_list("pk", flat=True)),
            flag=flag,
            value=value,
            reason=reason,
        )
        what = f"Set {flag} to {value}"
        logged = what + (f": {reason.strip()}" if reason.strip() else "")
        _log_each(self, request, list(Submission.objects.filter(pk__in=ids)), logged)
        # the message names the change in words, and which rows: the list's Flags column shows it
        changed = ", ".join(f"#{pk}" for pk in sorted(ids)[:10]) + (" …" if len(ids) > 10 else "")
        said = FLAG_WORDS[flag, value] + (f" ({changed})" if ids else "")
        _report(self, request, len(ids), queryset.count(), said)

    def _flag_with_reason(
        self, request: HttpRequest, queryset: QuerySet[Submission], flag: str, action: str
    ) -> TemplateResponse | None:
        """An intermediate page asks for the reason (the owners read it); applied once given."""
        reason = request.POST.get("reason", "").strip()
        if "apply" in request.POST and reason:
            self._flag(request, queryset, flag, True, reason)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": f"Why {'hide' if flag == 'hidden' else 'disqualify'} "
            f"{queryset.count()} submission(s)?",
            "opts": self.model._meta,
            "queryset": queryset,
            "action": action,
            "flag": flag,
            "reason": reason,
            "missing": "apply" in request.POST,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/submissions/submission/reason.html", context)

    @admin.action(description="Hide from the leaderboard (asks why)")
    def hide(self, request: HttpRequest, queryset: QuerySet[Submission]) -> TemplateResponse | None:
        return self._flag_with_reason(request, queryset, "hidden", "hide")

    @admin.action(description="Show on the leaderboard again")
    def unhide(self, request: HttpRequest, queryset: QuerySet[Submission]) -> None:
        self._flag(request, queryset, "hidden", False)

    @admin.action(description="Disqualify (asks why)")
    def disqualify(
        self, request: HttpRequest, queryset: QuerySet[Submission]
    ) -> TemplateResponse | None:
        return self._flag_with_reason(request, queryset, "disqualified", "disqualify")

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
        upload = path(
            "upload/",
            self.admin_site.admin_view(self.upload_view),
            name="submissions_submission_upload",
        )
        return [workers, upload, *super().get_urls()]

    def upload_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = AdminUploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            fields = form.cleaned_data
            submission = attempt(
                request,
                lambda: baseline_create(
                    user=request.user,
                    task=fields["task"],
                    upload=fields["file"],
                    display_name=fields["display_name"],
                    description=fields["description"],
                ),
                form=form,
            )
            if submission is not None:
                self.log_addition(request, submission, "Uploaded in the admin")
                self.message_user(request, f"Queued {submission}.", messages.SUCCESS)
                url = reverse("admin:submissions_submission_change", args=[submission.pk])
                return HttpResponseRedirect(url)
        context = {
            **self.admin_site.each_context(request),
            "title": "Upload a model",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/submissions/submission/upload.html", context)

    def workers_view(self, request: HttpRequest) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "title": "Evaluation workers",
            "workers": worker_rows(),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/submissions/workers.html", context)


# Notifications' admin (issue 15) lives beside it; imported so the admin registers it.
from submissions.admin import announcements as announcement_admin  # noqa: E402, F401
from submissions.admin import challenges as challenge_admin  # noqa: E402, F401
from submissions.admin import fact_sheets as fact_sheet_admin  # noqa: E402, F401
from submissions.admin import notifications as notification_admin  # noqa: E402, F401
from submissions.admin import teams as team_admin  # noqa: E402, F401
