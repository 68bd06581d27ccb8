"""Server-rendered pages. Thin: validate, call one service or selector, render."""

from __future__ import annotations

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
from submissions.forms import UploadForm
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


def task_detail(request: HttpRequest, slug: str) -> HttpResponse:
    task = _visible_task(request, slug)
    board_visible = task.leaderboard == Task.Leaderboard.PUBLIC or request.user.is_staff
    rows = selectors.leaderboard(task=task) if board_visible else []
    return render(
        request,
        "submissions/task_detail.html",
        {"task": task, "rows": rows, "board_visible": board_visible, "form": UploadForm()},
    )


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
        {"submission": submission, "queue_position": position},
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
