"""Fleet API: workers and their GPUs, queue statistics, and the Prometheus endpoint."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from prometheus_client import CONTENT_TYPE_LATEST
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plumbing.openapi import BAD_REQUEST
from plumbing.request_params import params_validated
from workers import fleet
from workers.prometheus import render_metrics

MAX_HISTORY = 2000


class WorkerListQuerySerializer(serializers.Serializer):
    history = serializers.IntegerField(
        min_value=0,
        max_value=MAX_HISTORY,
        default=fleet.SPARKLINE_POINTS,
        help_text="Samples of history per worker.",
    )


class WorkerListApi(APIView):
    """Every worker seen in the last day; hostnames and pids only for staff."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[WorkerListQuerySerializer],
        responses={200: OpenApiTypes.OBJECT, 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        query = params_validated(WorkerListQuerySerializer, request.query_params)
        cards = fleet.worker_cards(viewer=request.user, history=query["history"])
        staff = bool(request.user.is_staff)
        return Response({"workers": [card.as_dict(staff=staff) for card in cards]})


class QueueApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(fleet.queue_stats(user=request.user))


def _bearer_token(request: HttpRequest) -> str:
    header = request.headers.get("Authorization", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else ""


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format; ``Authorization: Bearer $EVAL_METRICS_TOKEN``."""
    expected = settings.EVAL_METRICS_TOKEN
    if not expected:
        raise Http404("Metrics are off: set EVAL_METRICS_TOKEN to turn them on.")
    if not hmac.compare_digest(_bearer_token(request).encode(), expected.encode()):
        response = HttpResponse("A valid bearer token is required.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(render_metrics(), content_type=CONTENT_TYPE_LATEST)
