"""A phase's analytics through the API, for its hosts and the operators: the numbers the admin
draws (``submissions/challenges/analytics.py``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plumbing.refusals import NotAllowed
from submissions.challenges.analytics import analytics_visible, phase_analytics
from submissions.lifecycle import selectors


class DurationsSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Submissions with both ends of this span.")
    median_s = serializers.FloatField(allow_null=True)
    p90_s = serializers.FloatField(allow_null=True)
    max_s = serializers.FloatField(allow_null=True)


class DaySerializer(serializers.Serializer):
    day = serializers.DateField()
    submissions = serializers.IntegerField(help_text="Made that day.")
    participants = serializers.IntegerField(help_text="Who had submitted by the day's end.")
    teams = serializers.IntegerField(help_text="Teams with a submission by the day's end.")


class FailureSerializer(serializers.Serializer):
    cause = serializers.CharField()
    count = serializers.IntegerField()


class BestScoreSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    score = serializers.FloatField()
    submission_id = serializers.IntegerField()


class AnalyticsSerializer(serializers.Serializer):
    task = serializers.SlugField()
    submissions = serializers.IntegerField()
    participants = serializers.IntegerField()
    teams = serializers.IntegerField()
    days = DaySerializer(many=True)
    failures = FailureSerializer(many=True, help_text="The most common cause first.")
    queue = DurationsSerializer(help_text="From upload to the start of its evaluation.")
    evaluation = DurationsSerializer(help_text="From the start of its evaluation to its end.")
    best_score = BestScoreSerializer(many=True, help_text="The public board's record steps.")


class TaskAnalyticsApi(APIView):
    """Submissions per day, participants and teams over time, failures by cause, queue and
    evaluation times and the best public score over time; the organisers' baselines left out.
    For operators and the hosts of the task's challenge."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses={
            200: AnalyticsSerializer,
            403: OpenApiResponse(description="Neither an operator nor a host of its challenge."),
            404: OpenApiResponse(description="No such task visible to you."),
        }
    )
    def get(self, request: Request, slug: str) -> Response:
        task = selectors.task_get_visible(slug=slug, user=request.user)
        if not analytics_visible(task=task, user=request.user):
            raise NotAllowed("Only operators and the challenge's hosts see a phase's analytics.")
        found = phase_analytics(task=task)
        data: dict[str, Any] = {
            "task": task.slug,
            "submissions": found.submissions,
            "participants": found.participants,
            "teams": found.teams,
            "days": found.days,
            "failures": [{"cause": cause, "count": n} for cause, n in found.failures],
            "queue": found.queue,
            "evaluation": found.evaluation,
            "best_score": found.best_score,
        }
        return Response(AnalyticsSerializer(data).data)
