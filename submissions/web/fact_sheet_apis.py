"""Your fact sheet on a task (a challenge's phase) through the API: read it, fill it in. The
rules are ``submissions/challenges/fact_sheets.py``."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plumbing.request_params import params_validated
from submissions.challenges.fact_sheets import fact_sheet_of, fact_sheet_save
from submissions.lifecycle import selectors
from submissions.models import FactSheet
from submissions.web.apis import NOT_FOUND


class FactSheetSerializer(serializers.ModelSerializer):
    missing = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Required fields still empty; [] when complete.",
    )

    class Meta:
        model = FactSheet
        fields = [
            "method_name",
            "description",
            "paper_url",
            "code_url",
            "training_data",
            "extra_data",
            "missing",
            "updated_at",
        ]
        read_only_fields = ["updated_at"]


class FactSheetApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: FactSheetSerializer, 404: NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        sheet = fact_sheet_of(user=request.user, task=task) or FactSheet(task=task)
        return Response(FactSheetSerializer(sheet).data)

    @extend_schema(
        request=FactSheetSerializer, responses={200: FactSheetSerializer, 404: NOT_FOUND}
    )
    def put(self, request: Request, slug: str) -> Response:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        values = params_validated(FactSheetSerializer, request.data)
        sheet = fact_sheet_save(user=request.user, task=task, values=values)
        return Response(FactSheetSerializer(sheet).data)
