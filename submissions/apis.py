"""REST API views. Each validates input, calls one service or selector, serializes the result."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.pagination import BoundedLimitOffsetPagination
from submissions import selectors
from submissions.api_serializers import (
    LeaderboardApiQuerySerializer,
    LeaderboardRowSerializer,
    LeaderboardSerializer,
    PaginatedSubmissionSerializer,
    SubmissionCreateSerializer,
    SubmissionDetailSerializer,
    SubmissionSerializer,
    TaskSerializer,
)
from submissions.models import Task
from submissions.services import SubmissionRefused, submission_cancel, submission_create

NOT_FOUND = OpenApiResponse(description="No such task or submission visible to you.")
THROTTLED = OpenApiResponse(description="Too many requests; see the Retry-After header.")


def _visible_task(slug: str, user: Any) -> Task:
    try:
        return selectors.task_get_visible(slug=slug, user=user)
    except Task.DoesNotExist as exc:
        raise Http404(f"No task '{slug}'.") from exc


class TaskListApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses=TaskSerializer(many=True))
    def get(self, request: Request) -> Response:
        tasks = selectors.task_list_visible(user=request.user)
        return Response(TaskSerializer(tasks, many=True).data)


class TaskDetailApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses={200: TaskSerializer, 404: NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        return Response(TaskSerializer(_visible_task(slug, request.user)).data)


class LeaderboardApi(APIView):
    """One page of the board (``page``, ``page_size`` up to 500, ``board``=public|private)."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[LeaderboardApiQuerySerializer],
        responses={200: LeaderboardSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        task = _visible_task(slug, request.user)
        if task.leaderboard == Task.Leaderboard.HIDDEN and not request.user.is_staff:
            raise Http404("This task's leaderboard is hidden.")
        query = LeaderboardApiQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        if query.validated_data["board"] not in selectors.leaderboard_boards(
            task=task, user=request.user
        ):
            raise Http404("The private leaderboard is not revealed yet.")
        page = selectors.leaderboard_page(task=task, **query.validated_data)
        return Response(
            {
                "task": task.slug,
                "metric": task.metric,
                "higher_is_better": task.higher_is_better,
                "board": page.board,
                "frozen_at": page.frozen_at,
                "count": page.total,
                "page": page.page,
                "pages": page.pages,
                "rows": LeaderboardRowSerializer(page.rows, many=True).data,
            }
        )


class SubmissionListApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [MultiPartParser, FormParser]
    throttle_scope = "uploads"  # POSTs share the per-user upload limit with the web form

    @extend_schema(
        operation_id="submissions_list",
        responses=PaginatedSubmissionSerializer,
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
    )
    def get(self, request: Request) -> Response:
        paginator = BoundedLimitOffsetPagination()
        page = paginator.paginate_queryset(
            selectors.submissions_of(user=request.user), request, view=self
        )
        return paginator.get_paginated_response(SubmissionSerializer(page, many=True).data)

    @extend_schema(
        request={"multipart/form-data": SubmissionCreateSerializer},
        responses={
            201: SubmissionSerializer,
            400: OpenApiResponse(description="Refused: {field: [why]}"),
            404: NOT_FOUND,
            429: THROTTLED,
        },
    )
    def post(self, request: Request) -> Response:
        form = SubmissionCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        task = _visible_task(form.validated_data["task"], request.user)
        try:
            submission = submission_create(
                user=request.user,
                task=task,
                upload=form.validated_data["file"],
                description=form.validated_data["description"],
            )
        except SubmissionRefused as exc:
            return Response({exc.field: [exc.message]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(SubmissionSerializer(submission).data, status=status.HTTP_201_CREATED)


class SubmissionDetailApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: SubmissionDetailSerializer, 404: NOT_FOUND})
    def get(self, request: Request, pk: int) -> Response:
        submission = selectors.submissions_of(user=request.user).filter(pk=pk).first()
        if submission is None:
            raise Http404("No such submission of yours.")
        data = SubmissionSerializer(submission).data
        data["queue_position"] = selectors.submission_queue_position(submission=submission)
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
        submission = selectors.submissions_of(user=request.user).filter(pk=pk).first()
        if submission is None:
            raise Http404("No such submission of yours.")
        if not submission_cancel(submission_id=submission.pk, user=request.user):
            return Response(
                {
                    "detail": f"Submission {pk} is {submission.status}; only queued or running "
                    "submissions can be cancelled."
                },
                status=status.HTTP_409_CONFLICT,
            )
        submission.refresh_from_db()
        return Response(SubmissionSerializer(submission).data)
