"""Re-measuring a task's finalists from the admin, at /admin/submissions/task/<id>/finalists/: a
form to start one (top N, sessions, device class; the task's settings by default) and the latest
campaigns, each finalist with its ranks and latency before and after
(``submissions/boards/finalists.py``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse

from evaluation import formats
from submissions.boards.cells import remeasured_text
from submissions.boards.finalists import (
    FinalistLine,
    FinalistsRefused,
    finalist_campaigns,
    finalist_report,
    finalists_remeasure,
)
from submissions.models import DeviceClass, FinalistCampaign, Task


class FinalistsForm(forms.Form):
    top = forms.IntegerField(min_value=1, max_value=1000, label="Top N of each board")
    sessions = forms.IntegerField(min_value=1, max_value=25, label="Timing sessions each")
    device_class = forms.ModelChoiceField(
        DeviceClass.objects.all(), to_field_name="slug", empty_label=None
    )


def _line(line: FinalistLine) -> dict[str, Any]:
    """One finalist as the report's table writes it (evaluation.formats)."""
    m = line.measurement
    before = f"{formats.latency(m.before_p50_ms)}"
    if m.before_sessions and m.before_sessions > 1:
        before += f" ({m.before_sessions} sessions, {formats.spread(m.before_spread)})"
    return {
        "name": line.name,
        "submission_id": m.submission_id,
        "status": m.get_status_display(),
        "error": m.error_message,
        "ranks": [
            (board, "–" if b is None else b, "–" if a is None else a) for board, b, a in line.ranks
        ],
        "moved": line.moved,
        "before": before,
        "after": formats.latency(m.latency_p50_ms) if m.latency_p50_ms is not None else "",
        "taken": remeasured_text(m),
    }


def task_finalists_view(
    model_admin: admin.ModelAdmin, request: HttpRequest, pk: int
) -> HttpResponse:
    task = get_object_or_404(Task.objects.select_related("device_class"), pk=pk)
    initial = {
        "top": task.finalists_top,
        "sessions": task.finalists_sessions,
        "device_class": task.device_class_id,
    }
    form = FinalistsForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            campaign = finalists_remeasure(
                task_id=task.pk,
                top=form.cleaned_data["top"],
                sessions=form.cleaned_data["sessions"],
                device_class=form.cleaned_data["device_class"].slug,
                user=request.user,
            )
        except FinalistsRefused as exc:
            model_admin.message_user(request, str(exc), messages.ERROR)
        else:
            started_message(model_admin, request, campaign)
            return HttpResponseRedirect(request.path)
    campaigns = [
        (c, [_line(line) for line in finalist_report(c)])
        for c in finalist_campaigns(task_ids=[task.pk])
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Finalists re-measured: {task.title}",
        "task": task,
        "form": form,
        "campaigns": campaigns,
        "opts": model_admin.model._meta,
    }
    return TemplateResponse(request, "admin/submissions/task_finalists.html", context)


def started_message(
    model_admin: admin.ModelAdmin, request: HttpRequest, campaign: FinalistCampaign
) -> None:
    count = campaign.measurements.count()
    url = reverse("admin:submissions_task_finalists", args=[campaign.task_id])
    model_admin.message_user(
        request,
        f"{campaign.task.slug}: {count} finalist{'s' if count != 1 else ''} queued for "
        f"re-measuring, {campaign.sessions} sessions each on {campaign.device_class_id}, one "
        f"after the other; they stay on the board meanwhile. Ranks before and after: {url}",
        messages.SUCCESS,
    )
