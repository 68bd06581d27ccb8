"""How many submissions a user has left on a task, for the API (the upload page shows the same)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from submissions.lifecycle import selectors
from submissions.lifecycle.quotas import quota_get
from submissions.web.apis import NOT_FOUND


class QuotaSerializer(serializers.Serializer):
    per_day = serializers.IntegerField(help_text="Submissions allowed in any 24 hours.")
    used_today = serializers.IntegerField(
        help_text="Counted (started) submissions uploaded in the last 24 hours."
    )
    left_today = serializers.IntegerField()
    total = serializers.IntegerField(allow_null=True, help_text="Lifetime limit, null if none.")
    used_total = serializers.IntegerField()
    left_total = serializers.IntegerField(allow_null=True)
    waiting = serializers.IntegerField(
        help_text="Queued submissions not started yet: not counted until they start, but they "
        "hold their place against the limits."
    )
    waiting_today = serializers.IntegerField(help_text="Of the waiting ones, the last 24 hours'.")
    left = serializers.IntegerField(help_text="Submissions possible right now.")
    next_slot_at = serializers.DateTimeField(
        allow_null=True, help_text="When the oldest counted submission of the last 24 h expires."
    )


class TaskQuotaApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: QuotaSerializer, 404: NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        return Response(QuotaSerializer(quota_get(user=request.user, task=task)).data)
