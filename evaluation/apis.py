"""Fleet API: workers and their GPUs, queue statistics, and the Prometheus endpoint."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from prometheus_client import CONTENT_TYPE_LATEST
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation import fleet
from evaluation.prometheus import render_metrics

MAX_HISTORY = 2000


class WorkerListApi(APIView):
    """Every worker seen in the last day; hostnames and pids only for staff."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[OpenApiParameter("history", int, description="Samples of history per worker")],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        try:
            history = min(
                int(request.query_params.get("history", fleet.SPARKLINE_POINTS)), MAX_HISTORY
            )
        except ValueError:
            return Response({"history": ["Give a whole number of samples."]}, status=400)
        cards = fleet.worker_cards(history=max(history, 0))
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
