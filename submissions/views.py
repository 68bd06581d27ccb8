"""Server-rendered pages. Thin: validate, call one service or selector, render."""

from __future__ import annotations

import csv
from typing import Any

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from portal.ratelimit import refused_page
from portal.throttles import upload_rate_hit
from submissions import selectors
from submissions.display import (
    best_score_chart,
    board_columns,
    failure_advice,
    latency_chart,
    leaderboard_csv_rows,
    leaderboard_rows_html,
)
from submissions.forms import LeaderboardQueryForm, UploadForm
from submissions.models import Submission, Task
from submissions.quotas import quota_get
from submissions.services import SubmissionRefused, submission_cancel, submission_create


def _visible_task(request: HttpRequest, slug: str) -> Task:
    try:
        return selectors.task_get_visible(slug=slug, user=request.user)
    except Task.DoesNotExist as exc:
        raise Http404("No such task.") from exc


def task_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "submissions/task_list.html",
        {"tasks": selectors.task_list_visible(user=request.user)},
    )


def _board_visible(request: HttpRequest, task: Task) -> bool:
    return task.leaderboard == Task.Leaderboard.PUBLIC or request.user.is_staff


def task_detail(request: HttpRequest, slug: str) -> HttpResponse:
    task = _visible_task(request, slug)
    query = LeaderboardQueryForm(request.GET)
    boards = selectors.leaderboard_boards(task=task, user=request.user)
    board = query.value("board", "public")
    board = board if board in boards else "public"
    context: dict[str, Any] = {"task": task, "boards": boards, "board": board}
    if _board_visible(request, task):
        context["page"] = selectors.leaderboard_page(
            task=task,
            board=board,
            user=request.user,
            sort=query.value("sort", "rank"),
            descending=query.value("dir", "asc") == "desc",
            page=query.value("page", 1),
        )
        page = context["page"]
        context["columns"] = board_columns(task=task, sort=page.sort, descending=page.descending)
        context["rows_html"] = leaderboard_rows_html(
            task=task, rows=page.listed, viewer_id=request.user.pk
        )
        records = selectors.leaderboard_best_over_time(task=task, board=board)
        context["chart"] = best_score_chart(records)
    return render(request, "submissions/task_detail.html", context)


def leaderboard_csv(request: HttpRequest, slug: str) -> HttpResponse:
    task = _visible_task(request, slug)
    if not _board_visible(request, task):
        raise Http404("This task's leaderboard is hidden.")
    board = LeaderboardQueryForm(request.GET).value("board", "public")
    if board not in selectors.leaderboard_boards(task=task, user=request.user):
        raise Http404("The private leaderboard is not revealed yet.")
    rows = selectors.leaderboard(task=task, board=board)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{task.slug}-{board}-leaderboard.csv"'
    csv.writer(response).writerows(leaderboard_csv_rows(task=task, rows=rows))
    return response


def _upload_page(
    request: HttpRequest, task: Task, form: UploadForm, refusal: str = "", status: int = 200
) -> HttpResponse:
    quota = quota_get(user=request.user, task=task)
    context = {"task": task, "form": form, "quota": quota, "refusal": refusal}
    return render(request, "submissions/upload.html", context, status=status)


@login_required
def task_upload(request: HttpRequest, slug: str) -> HttpResponse:
    task = _visible_task(request, slug)
    if request.method != "POST":
        return _upload_page(request, task, UploadForm())
    throttled = upload_rate_hit(user=request.user)  # before the body is read
    if throttled is not None:
        page = _upload_page(request, task, UploadForm(), refusal=throttled.message)
        return refused_page(page, throttled)
    form = UploadForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            submission = submission_create(
                user=request.user,
                task=task,
                upload=form.cleaned_data["file"],
                description=form.cleaned_data["description"],
            )
        except SubmissionRefused as exc:
            message = exc.message
            if exc.url:  # a duplicate: link to the first copy
                message = format_html('{} <a href="{}">See it</a>.', exc.message, exc.url)
            form.add_error("file" if exc.field == "file" else None, message)
        else:
            return redirect(submission)
    return _upload_page(request, task, form, status=400)


@login_required
def submission_list(request: HttpRequest) -> HttpResponse:
    submissions = selectors.submissions_of(user=request.user)
    return render(request, "submissions/submission_list.html", {"submissions": submissions})


@login_required
def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = selectors.submissions_of(user=request.user).filter(pk=pk).first()
    if submission is None:
        raise Http404("No such submission of yours.")
    position = selectors.submission_queue_position(submission=submission)
    return render(
        request,
        "submissions/submission_detail.html",
        {
            "submission": submission,
            "queue_position": position,
            "latency_chart": latency_chart(submission),
            "advice": failure_advice(submission) if submission.status == "failed" else "",
        },
    )


@login_required
@require_POST
def submission_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    submission = selectors.submissions_of(user=request.user).filter(pk=pk).first()
    if submission is None:
        raise Http404("No such submission of yours.")
    if submission_cancel(submission_id=pk, user=request.user):
        messages.success(
            request, f"Submission {pk} was cancelled; it does not count against your quota."
        )
    else:
        messages.info(request, f"Submission {pk} is already {submission.status}.")
    return redirect(submission)


@staff_member_required
def submission_model_download(request: HttpRequest, pk: int) -> FileResponse:
    """Operators only: the uploaded model file, streamed from storage (never a public URL)."""
    submission = get_object_or_404(Submission, pk=pk)
    return FileResponse(
        submission.model_file.open("rb"), as_attachment=True, filename=submission.original_name
    )
