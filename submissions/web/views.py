"""Server-rendered pages. Thin: validate, call one service or selector, render. A refusal is
shown by ``plumbing.refusal_responses.attempt``; a lookup that finds nothing is a 404
(``or_404``)."""

from __future__ import annotations

import csv
from typing import Any

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.cache import get_conditional_response
from django.views.decorators.http import require_POST

from plumbing.ratelimit import refused_page
from plumbing.refusal_responses import attempt, or_404
from plumbing.refusals import Unavailable
from plumbing.throttles import upload_rate_hit
from submissions.boards.cache import board_version
from submissions.boards.display import (
    failure_advice,
    latency_chart,
    leaderboard_csv_rows,
    run_report_rows,
    submission_figures,
    timing_facts,
)
from submissions.boards.pages import (
    PUBLIC_CONTROL,
    PublicAnswer,
    board_cache_control,
    board_etag,
    board_fragments,
    public_answer,
    public_answer_keep,
    public_answer_key,
)
from submissions.challenges.selectors import challenge_announcements
from submissions.lifecycle import selectors
from submissions.lifecycle.finals import final_selection_replace, submission_select
from submissions.lifecycle.quotas import quota_get
from submissions.lifecycle.services import submission_cancel, submission_create
from submissions.models import Submission, Task, Track
from submissions.tasks.markup import markdown_html
from submissions.tasks.pages import evaluation_facts, export_snippet, task_timeline
from submissions.web.forms import FinalSelectionForm, LeaderboardQueryForm, UploadForm


def visible_task(request: HttpRequest, slug: str) -> Task:
    return or_404(lambda: selectors.task_get_visible(slug=slug, user=request.user))


def _own_submission(request: HttpRequest, pk: int) -> Submission:
    return or_404(lambda: selectors.submission_get_own(user=request.user, pk=pk))


def task_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "submissions/task_list.html",
        {"cards": selectors.task_cards(user=request.user), "now": timezone.now()},
    )


TASK_PAGE = "submissions/task_detail.html"
PHASE_ANNOUNCEMENTS = 3  # the newest of the challenge's, on each phase's page


def task_detail(request: HttpRequest, slug: str) -> HttpResponse:
    query = LeaderboardQueryForm(request.GET)
    # A message is for this viewer alone: its page is neither answered from nor kept for others.
    shown_to_anyone = not messages.get_messages(request)
    kept_at = public_answer_key(request, "page", slug, query.values()) if shown_to_anyone else None
    kept = public_answer(kept_at)
    if kept is not None:
        return _public_page(request, kept)
    task = visible_task(request, slug)
    version = board_version(task_id=task.pk)  # before anything is read for the answer
    boards = selectors.leaderboard_boards(task=task, user=request.user)
    board = query.value("board", "public")
    board = board if board in boards else "public"
    refusal = selectors.leaderboard_refusal(task=task, user=request.user)
    tracks = selectors.leaderboard_tracks(task=task)
    track = _track_or_main(task, query.value("track", ""))
    news = challenge_announcements(challenge_id=task.challenge_id, limit=PHASE_ANNOUNCEMENTS)
    context: dict[str, Any] = {
        "task": task, "boards": boards, "board": board, "refusal": refusal,
        "tracks": tracks, "track": track, "announcements": news,
        "counts": selectors.task_counts(task=task),
        "task_files": list(selectors.task_files_listed(task=task, user=request.user)),
    }  # fmt: skip
    if refusal:
        return render(request, TASK_PAGE, {**context, **_task_tabs(task)})
    context["rescoring"] = selectors.task_rescoring_count(task=task)
    sort, descending = query.value("sort", "rank"), query.value("dir", "asc") == "desc"
    page = query.value("page", 1)
    slug = track.slug if track is not None else ""
    state = (board, slug, sort, descending, page, request.user.pk, boards, context["rescoring"])
    etag = board_etag(
        task, "page", *state, context["counts"], [f.pk for f in context["task_files"]],
        [(a.pk, a.title, a.body) for a in news],
    )  # fmt: skip
    # A poller's unchanged page: 304 before any rendering.
    if shown_to_anyone:
        unchanged = get_conditional_response(request, etag=etag)
        if unchanged is not None:
            return unchanged
    context.update(_task_tabs(task))
    context.update(
        board_fragments(
            task=task, board=board, user=request.user, sort=sort,
            descending=descending, page=page, track=track,
        )
    )  # fmt: skip
    shown = render_to_string(TASK_PAGE, context, request)
    control = board_cache_control(task=task, board=board, user=request.user)
    if shown_to_anyone and control.startswith("public"):
        public_answer_keep(kept_at, PublicAnswer(task.pk, version, etag, shown))
    else:
        control = "private, no-cache"
    return HttpResponse(shown, headers={"ETag": etag, "Cache-Control": control})


def _public_page(request: HttpRequest, kept: PublicAnswer) -> HttpResponse:
    """The page kept for anonymous readers (``public_answer``), or a 304 when it is theirs."""
    unchanged = get_conditional_response(request, etag=kept.etag)
    if unchanged is not None:
        return unchanged
    return HttpResponse(kept.content, headers={"ETag": kept.etag, "Cache-Control": PUBLIC_CONTROL})


def _track_or_main(task: Task, slug: str) -> Track | None:
    """The page's track: an unknown one (an old link) falls back to the main board."""
    try:
        return selectors.leaderboard_track(task=task, slug=slug)
    except Track.DoesNotExist:
        return None


def _task_tabs(task: Task) -> dict[str, Any]:
    """The task page's tabs: operators' Markdown, facts, timeline and the data section."""
    return {
        "overview_html": markdown_html(task.overview or task.description),
        "rules_html": markdown_html(task.rules),
        "evaluation_html": markdown_html(task.evaluation_notes),
        "timeline_html": markdown_html(task.timeline_notes),
        "evaluation_facts": evaluation_facts(task),
        "timeline": task_timeline(task),
        "export_snippet": export_snippet(task),
    }


def task_file_download(request: HttpRequest, slug: str, pk: int) -> FileResponse:
    """A published file of a task, streamed from storage, to whoever may see the task."""
    task = visible_task(request, slug)
    task_file = selectors.task_files_listed(task=task, user=request.user).filter(pk=pk).first()
    if task_file is None:
        raise Http404("No such file on this task.")
    return FileResponse(task_file.file.open("rb"), as_attachment=True, filename=task_file.filename)


def leaderboard_csv(request: HttpRequest, slug: str) -> HttpResponse:
    task = visible_task(request, slug)
    refusal = selectors.leaderboard_refusal(task=task, user=request.user)
    if refusal:
        raise Http404(refusal)
    query = LeaderboardQueryForm(request.GET)
    board = query.value("board", "public")
    if board not in selectors.leaderboard_boards(task=task, user=request.user):
        raise Http404("The private leaderboard is not revealed yet.")
    track = or_404(lambda: selectors.leaderboard_track(task=task, slug=query.value("track", "")))
    etag = board_etag(task, "csv", board, track.slug if track is not None else "")
    unchanged = get_conditional_response(request, etag=etag)
    if unchanged is not None:
        return unchanged
    rows = selectors.leaderboard(task=task, board=board, track=track)
    rule = selectors.leaderboard_rule(task=task, board=board, track=track)
    name = f"{task.slug}-{track.slug}" if track is not None else task.slug
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["ETag"] = etag
    response["Cache-Control"] = "private, no-cache"
    response["Content-Disposition"] = f'attachment; filename="{name}-{board}-leaderboard.csv"'
    csv.writer(response).writerows(leaderboard_csv_rows(task=task, rule=rule, rows=rows))
    return response


def _upload_page(
    request: HttpRequest, task: Task, form: UploadForm, refusal: str = "", status: int = 200
) -> HttpResponse:
    quota = quota_get(user=request.user, task=task)
    notice = selectors.task_device_notice(task=task)
    context = {
        "task": task,
        "form": form,
        "quota": quota,
        "refusal": refusal,
        "device_notice": notice,
    }
    return render(request, "submissions/upload.html", context, status=status)


@login_required
def task_upload(request: HttpRequest, slug: str) -> HttpResponse:
    task = visible_task(request, slug)
    if request.method != "POST":
        return _upload_page(request, task, UploadForm())
    throttled = upload_rate_hit(user=request.user)  # before the body is read
    if throttled is not None:
        page = _upload_page(request, task, UploadForm(), refusal=throttled.message)
        return refused_page(page, throttled)
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _upload_page(request, task, form, status=400)
    fields = form.cleaned_data
    try:
        submission = attempt(
            request,
            lambda: submission_create(
                user=request.user,
                task=task,
                upload=fields["file"],
                description=fields["description"],
            ),
            form=form,
        )
    except Unavailable as busy:  # the API's 503, as a page keeping what was typed
        page = _upload_page(request, task, form, refusal=busy.message, status=503)
        page["Retry-After"] = str(busy.retry_after_s)
        return page
    if submission is None:
        return _upload_page(request, task, form, status=400)
    notice = selectors.task_device_notice(task=task)
    if notice:
        messages.info(request, notice)
    return redirect(submission)


@login_required
def submission_list(request: HttpRequest) -> HttpResponse:
    submissions = list(selectors.submissions_of(user=request.user))
    for s in submissions:  # a blind task's scores are not shown, the owner's own included
        s.scores_shown = s.task.scores_shown_to(request.user)  # type: ignore[attr-defined]
        s.task_withdrawn = s.task.withdrawn_for(request.user)  # type: ignore[attr-defined]
    finals = selectors.final_choices(user=request.user)
    context = {"submissions": submissions, "finals": finals}
    return render(request, "submissions/submission_list.html", context)


@login_required
@require_POST
def final_selection_view(request: HttpRequest, slug: str) -> HttpResponse:
    """The "My submissions" form: exactly the ticked submissions become the task's finals."""
    task = visible_task(request, slug)
    form = FinalSelectionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Tick the submissions to select, by their numbers.")
        return redirect("submission-list")
    chosen = form.cleaned_data["final"]
    finals = attempt(
        request,
        lambda: final_selection_replace(user=request.user, task=task, submission_ids=chosen),
    )
    if finals is not None:
        messages.success(request, f"Your finals for {task.title} are saved.")
    return redirect("submission-list")


@login_required
@require_POST
def submission_select_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The submission page's checkbox: count this submission as a final, or not."""
    selected = request.POST.get("selected") == "on"
    submission = attempt(
        request, lambda: submission_select(user=request.user, submission_id=pk, selected=selected)
    )
    if submission is None:
        return redirect("submission-detail", pk=pk)
    word = "is now one of your finals" if submission.selected else "is not one of your finals"
    messages.success(request, f"Submission {pk} {word}.")
    return redirect(submission)


@login_required
def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _own_submission(request, pk)
    place = selectors.submission_queue_place(submission=submission)
    scores_shown = submission.task.scores_shown_to(request.user)
    return render(
        request,
        "submissions/submission_detail.html",
        {
            "submission": submission,
            "queue_position": place["position"] if place else None,
            "queue_place": place,
            "latency_chart": latency_chart(submission),
            "timing_facts": timing_facts(submission),
            "advice": failure_advice(submission) if submission.status == "failed" else "",
            "scores_shown": scores_shown,
            "figures": submission_figures(submission, scores=scores_shown),
            "run_report": submission.run_report or {},
            "run_report_rows": run_report_rows(submission),
            "task_withdrawn": submission.task.withdrawn_for(request.user),
        },
    )


@login_required
@require_POST
def submission_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _own_submission(request, pk)
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
