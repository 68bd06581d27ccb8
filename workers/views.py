"""Fleet pages: the workers page and the worker-cards fragment it refreshes."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from submissions.lifecycle import selectors
from submissions.models import Task
from workers import fleet


def workers_page(request: HttpRequest) -> HttpResponse:
    return render(request, "workers/workers.html", {"queue": fleet.queue_stats(user=request.user)})


def worker_cards_fragment(request: HttpRequest) -> HttpResponse:
    """The cards alone, for workers.js; ``?task=slug`` judges them against that task."""
    task = None
    slug = request.GET.get("task")
    if slug:
        try:
            task = selectors.task_get_visible(slug=slug, user=request.user)
        except Task.DoesNotExist:
            task = None
    return render(request, "workers/partials/worker_cards.html", {"task": task})
