"""A task's published files (its data section) for the API and the ``oep download`` client.

The same rule as the task page: whoever may see the task sees its public files (operators also
see drafts), never the hidden dataset (``TaskFileQuerySet.servable``). The download goes through
the API too, so a token works where the page's session does not.
"""

from __future__ import annotations

from django.http import FileResponse, Http404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from submissions.lifecycle import selectors
from submissions.models.task_files import TaskFile
from submissions.web.apis import NOT_FOUND


class TaskFileSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField(source="filename", help_text="The file's name on disk.")
    title = serializers.CharField()
    description = serializers.CharField()
    size = serializers.IntegerField(source="size_bytes")
    sha256 = serializers.CharField()
    url = serializers.SerializerMethodField(help_text="Where to download it (this API).")

    def get_url(self, task_file: TaskFile) -> str:
        return reverse("api-task-file", kwargs={"slug": task_file.task.slug, "pk": task_file.pk})


class TaskFileListApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses={200: TaskFileSerializer(many=True), 404: NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        files = selectors.task_files_listed(task=task, user=request.user).select_related("task")
        return Response(TaskFileSerializer(files, many=True).data)


class TaskFileDownloadApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY),
            404: NOT_FOUND,
        }
    )
    def get(self, request: Request, slug: str, pk: int) -> FileResponse:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        task_file = selectors.task_files_listed(task=task, user=request.user).filter(pk=pk).first()
        if task_file is None:
            raise Http404("No such file on this task.")
        return FileResponse(
            task_file.file.open("rb"),
            as_attachment=True,
            filename=task_file.filename,
            content_type="application/octet-stream",
        )
