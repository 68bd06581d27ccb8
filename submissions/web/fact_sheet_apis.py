"""Your fact sheet on a task (a challenge's phase) through the API: read it, fill it in. The
rules are ``submissions/challenges/fact_sheets.py``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import models
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plumbing.openapi import BAD_REQUEST
from plumbing.request_params import params_validated
from submissions.challenges.fact_sheets import fact_sheet_of, fact_sheet_save
from submissions.lifecycle import selectors
from submissions.models import FactSheet
from submissions.web.apis import NOT_FOUND


class StrictBooleanField(serializers.BooleanField):
    """true or false (or null where allowed) and nothing else: DRF's own also takes "yes", 1
    and "on", which the schema (a JSON boolean) does not promise."""

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)
        raise AssertionError  # fail() raises


def _strictly_text(field: serializers.CharField, data: Any) -> None:
    if not isinstance(data, str):  # DRF's own would take 12 as "12"; the schema says string
        field.fail("invalid")


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data: Any) -> str:
        _strictly_text(self, data)
        return str(super().to_internal_value(data))


class StrictURLField(serializers.URLField):
    def to_internal_value(self, data: Any) -> str:
        _strictly_text(self, data)
        return str(super().to_internal_value(data))


class FactSheetSerializer(serializers.ModelSerializer):
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
        models.URLField: StrictURLField,
    }
    extra_data = StrictBooleanField(
        required=False, allow_null=True, help_text="Data beyond the published training rows."
    )
    missing = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Required fields still empty; [] when complete.",
    )
    updated_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="Null: never saved."
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


class FactSheetApi(APIView):
    permission_classes = [IsAuthenticated]
    parser_classes = [JSONParser]  # extra_data is a JSON boolean, never the string "true"

    @extend_schema(responses={200: FactSheetSerializer, 404: NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        sheet = fact_sheet_of(user=request.user, task=task) or FactSheet(task=task)
        return Response(FactSheetSerializer(sheet).data)

    @extend_schema(
        request=FactSheetSerializer,
        responses={200: FactSheetSerializer, 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def put(self, request: Request, slug: str) -> Response:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        if not isinstance(request.data, Mapping):  # a JSON number or list: no sheet at all
            raise ValidationError({"non_field_errors": ["Send the fact sheet as a JSON object."]})
        values = params_validated(FactSheetSerializer, request.data)
        sheet = fact_sheet_save(user=request.user, task=task, values=values)
        return Response(FactSheetSerializer(sheet).data)
