"""A phase's analytics in the admin: its numbers (``submissions/challenges/analytics.py``) drawn
with the project's own SVG charts, at /admin/submissions/task/<id>/analytics/."""

from __future__ import annotations

from datetime import datetime, time
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils import timezone

from evaluation import formats
from submissions.boards.charts import Chart, step_chart, time_chart
from submissions.boards.display import best_score_chart
from submissions.challenges.analytics import DayCount, Durations, phase_analytics
from submissions.models import Task


def _at(day: Any) -> float:
    return timezone.make_aware(datetime.combine(day, time())).timestamp()


def _days_chart(days: list[DayCount], value: str, what: str) -> Chart | None:
    """A count per day: a line for the day's own, steps for a running total ("so far")."""
    xs = [_at(d.day) for d in days]
    ys = [float(getattr(d, value)) for d in days]
    labels = [f"{d.day:%Y-%m-%d}: {getattr(d, value):,} {what}" for d in days]
    ends = (f"{days[0].day:%Y-%m-%d}", f"{days[-1].day:%Y-%m-%d}") if days else ("", "")
    chart = time_chart if value == "submissions" else step_chart
    return chart(xs, ys, labels, ends)


def _svg(chart: Chart, kind: str, label: str) -> str:
    return render_to_string("partials/chart.html", {"chart": chart, "kind": kind, "label": label})


def _seconds(value: float | None) -> str:
    return formats.NONE if value is None else f"{value:,.1f} s"


def _times(name: str, d: Durations) -> dict[str, str]:
    return {
        "name": name,
        "count": f"{d.count:,}",
        "median": _seconds(d.median_s),
        "p90": _seconds(d.p90_s),
        "max": _seconds(d.max_s),
    }


def task_analytics_view(
    model_admin: admin.ModelAdmin, request: HttpRequest, pk: int
) -> HttpResponse:
    task = get_object_or_404(Task, pk=pk)
    found = phase_analytics(task=task)
    days = found.days
    charts = [
        ("Submissions per day", "line", _days_chart(days, "submissions", "submissions")),
        ("Participants so far", "step", _days_chart(days, "participants", "participants")),
        ("Teams so far", "step", _days_chart(days, "teams", "teams")),
        (
            f"Best {task.metric_label} over time (public split)",
            "step",
            best_score_chart(found.best_score),
        ),
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Analytics: {task.title}",
        "task": task,
        "found": found,
        "charts": [(title, _svg(chart, kind, title)) for title, kind, chart in charts if chart],
        "times": [
            _times("Queue (upload → start)", found.queue),
            _times("Evaluation (start → end)", found.evaluation),
        ],
        "opts": model_admin.model._meta,
    }
    return TemplateResponse(request, "admin/submissions/task_analytics.html", context)
