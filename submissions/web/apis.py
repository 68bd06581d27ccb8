"""REST API views. Each validates input, calls one service or selector, serializes the result.
Refusals and lookups that find nothing propagate: ``plumbing.refusal_responses`` answers them."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.utils.cache import get_conditional_response
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plumbing.openapi import BAD_REQUEST
from plumbing.pagination import BoundedLimitOffsetPagination
from plumbing.refusals import Refused
from plumbing.request_params import params_validated
from submissions.boards.cache import board_version
from submissions.boards.pages import (
    PUBLIC_CONTROL,
    PublicAnswer,
    board_cache_control,
    board_cached,
    board_state,
    public_answer,
    public_answer_keep,
    public_answer_key,
)
from submissions.boards.ranking import describe
from submissions.lifecycle import selectors
from submissions.lifecycle.finals import submission_select
from submissions.lifecycle.services import SubmissionRefused, submission_cancel, submission_create
from submissions.lifecycle.settled import submission_settled_wait
from submissions.models import Task
from submissions.web.serializers import (
    LeaderboardApiQuerySerializer,
    LeaderboardSerializer,
    PaginatedSubmissionSerializer,
    SubmissionCreateSerializer,
    SubmissionDetailSerializer,
    SubmissionListQuerySerializer,
    SubmissionSerializer,
    SubmissionWaitQuerySerializer,
    TaskSerializer,
    TrackSerializer,
    leaderboard_rows_data,
)

NOT_FOUND = OpenApiResponse(description="No such task or submission visible to you.")
INSPECTIONS_BUSY = OpenApiResponse(
    description="Every upload inspection slot stayed taken: nothing was kept; upload again "
    "after Retry-After seconds ({detail: why})."
)
SELECTION_REFUSED = OpenApiResponse(
    description="The selection cannot change: the task takes no finals or has closed, the "
    "submission did not succeed, or the limit is reached ({detail: why})."
)


def _upload_task(slug: str, user: Any) -> Task:
    """The task an upload names: one this user cannot see is refused as an unknown one."""
    try:
        return selectors.task_get_for_upload(slug=slug, user=user)
    except Task.DoesNotExist:
        raise SubmissionRefused("task", f"No task '{slug}'.") from None


class TaskListApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses=TaskSerializer(many=True))
    def get(self, request: Request) -> Response:
        tasks = selectors.task_list_visible(user=request.user).prefetch_related("tracks")
        return Response(TaskSerializer(tasks, many=True).data)


class TaskDetailApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses={200: TaskSerializer, 404: NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        return Response(TaskSerializer(task).data)


class LeaderboardApi(APIView):
    """One page of the board (``page``, ``page_size`` up to 500, ``board``=public|private,
    ``track``=a track's slug, or empty for the main board)."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[LeaderboardApiQuerySerializer],
        responses={200: LeaderboardSerializer, 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        query = params_validated(LeaderboardApiQuerySerializer, request.query_params)
        kept_at = public_answer_key(request, "api", slug, sorted(query.items()))
        kept = public_answer(kept_at)
        if kept is not None:
            return _public_board(request, kept)
        task = selectors.task_get_visible(slug=slug, user=request.user)
        version = board_version(task_id=task.pk)  # before anything is read for the answer
        refusal = selectors.leaderboard_refusal(task=task, user=request.user)
        if refusal:
            raise Http404(refusal)
        if query["board"] not in selectors.leaderboard_boards(task=task, user=request.user):
            raise Http404("The private leaderboard is not revealed yet.")
        selectors.leaderboard_track(task=task, slug=query["track"])  # 404 for an unknown one
        rescoring = selectors.task_rescoring_count(task=task)
        state = board_state(task, "api", sorted(query.items()), rescoring)
        etag = f'"{state}"'
        if get_conditional_response(request, etag=etag) is not None:
            return Response(status=304, headers={"ETag": etag})
        data = board_cached(state, lambda: _board(task, query, rescoring))
        control = board_cache_control(task=task, board=query["board"], user=request.user)
        if control.startswith("public"):
            public_answer_keep(kept_at, PublicAnswer(task.pk, version, etag, data))
        return Response(data, headers={"ETag": etag, "Cache-Control": control})


def _public_board(request: Request, kept: PublicAnswer) -> Response:
    """The board kept for anonymous readers (``public_answer``), or a 304 when it is theirs."""
    if get_conditional_response(request, etag=kept.etag) is not None:
        return Response(status=304, headers={"ETag": kept.etag})
    return Response(kept.content, headers={"ETag": kept.etag, "Cache-Control": PUBLIC_CONTROL})


def _board(task: Task, query: dict[str, Any], rescoring: int) -> dict[str, Any]:
    """The leaderboard API's answer, the same for every viewer allowed to see it: kept per board
    version and query (``board_cached``)."""
    track = selectors.leaderboard_track(task=task, slug=query["track"])
    page = selectors.leaderboard_page(task=task, **{**query, "track": track})
    rule = selectors.leaderboard_rule(task=task, board=page.board, track=track)
    return {
        "task": task.slug,
        "metric": task.metric,
        "metric_label": task.metric_label,
        "higher_is_better": task.higher_is_better,
        "board": page.board,
        "track": query["track"],
        "tracks": TrackSerializer(selectors.leaderboard_tracks(task=task), many=True).data,
        "frozen_at": page.frozen_at,
        "rescoring": rescoring,
        "finals": selectors.final_selection_text(task=task, board=page.board),
        "count": page.total,
        "page": page.page,
        "pages": page.pages,
        "ranking": {
            "kind": rule.kind,
            "description": describe(rule),
            "device_class": rule.device_class,
        },
        "rows": leaderboard_rows_data(page.rows, metric=task.metric),
    }


class SubmissionListApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [MultiPartParser, FormParser]
    throttle_scope = "uploads"  # POSTs share the per-user upload limit with the web form

    @extend_schema(
        operation_id="submissions_list",
        responses={200: PaginatedSubmissionSerializer, 400: BAD_REQUEST},
        parameters=[SubmissionListQuerySerializer],
    )
    def get(self, request: Request) -> Response:
        params_validated(SubmissionListQuerySerializer, request.query_params)
        paginator = BoundedLimitOffsetPagination()
        page = paginator.paginate_queryset(
            selectors.submissions_of(user=request.user), request, view=self
        )
        data = SubmissionSerializer(page, many=True, context={"request": request}).data
        return paginator.get_paginated_response(data)

    @extend_schema(
        request={"multipart/form-data": SubmissionCreateSerializer},
        responses={201: SubmissionSerializer, 400: BAD_REQUEST, 503: INSPECTIONS_BUSY},
    )
    def post(self, request: Request) -> Response:
        form = params_validated(SubmissionCreateSerializer, request.data)
        task = _upload_task(form["task"], request.user)
        submission = submission_create(
            user=request.user, task=task, upload=form["file"], description=form["description"]
        )
        data = SubmissionSerializer(submission, context={"request": request}).data
        data["notice"] = selectors.task_device_notice(task=task)  # "" while a worker is online
        return Response(data, status=status.HTTP_201_CREATED)


class SubmissionDetailApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[SubmissionWaitQuerySerializer],
        responses={200: SubmissionDetailSerializer, 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request: Request, pk: int) -> Response:
        wait_s = params_validated(SubmissionWaitQuerySerializer, request.query_params)["wait"]
        submission = selectors.submission_get_own(user=request.user, pk=pk)
        waited = wait_s and not submission.is_final
        if waited and submission_settled_wait(submission_id=pk, seconds=wait_s):
            submission = selectors.submission_get_own(user=request.user, pk=pk)  # as it is now
        data = SubmissionSerializer(submission, context={"request": request}).data
        place = selectors.submission_queue_place(submission=submission)
        data["queue_position"] = place["position"] if place else None
        data["queue"] = place
        if "display" in data:  # withheld with every result while the task is withdrawn
            data["run_report"] = submission.run_report or {}
        return Response(data)


class SubmissionCancelApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        request=None,
        responses={
            200: SubmissionSerializer,
            404: NOT_FOUND,
            409: OpenApiResponse(description="Not queued or running any more."),
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        submission = selectors.submission_get_own(user=request.user, pk=pk)
        if not submission_cancel(submission_id=submission.pk, user=request.user):
            raise Refused(
                f"Submission {pk} is {submission.status}; only queued or running submissions "
                "can be cancelled."
            )
        submission.refresh_from_db()
        return Response(SubmissionSerializer(submission, context={"request": request}).data)


class SubmissionSelectApi(APIView):
    """Select (POST) or unselect (DELETE) one of your submissions as a final for the private
    board, up to the task's ``final_selections``; refused once the task closes."""

    permission_classes = [IsAuthenticated]

    def _set(self, request: Request, pk: int, selected: bool) -> Response:
        submission = submission_select(user=request.user, submission_id=pk, selected=selected)
        return Response(SubmissionSerializer(submission, context={"request": request}).data)

    @extend_schema(
        operation_id="submissions_select",
        request=None,
        responses={200: SubmissionSerializer, 404: NOT_FOUND, 409: SELECTION_REFUSED},
    )
    def post(self, request: Request, pk: int) -> Response:
        return self._set(request, pk, True)

    @extend_schema(
        operation_id="submissions_unselect",
        request=None,
        responses={200: SubmissionSerializer, 404: NOT_FOUND, 409: SELECTION_REFUSED},
    )
    def delete(self, request: Request, pk: int) -> Response:
        return self._set(request, pk, False)
