"""DRF serializers: shapes of the API's JSON. No logic beyond field mapping."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from submissions.models import Submission, Task


class TaskSerializer(serializers.ModelSerializer):
    batch_shape = serializers.ListField(child=serializers.IntegerField(), read_only=True)
    metric_label = serializers.CharField(read_only=True)
    higher_is_better = serializers.BooleanField(read_only=True)
    is_open = serializers.SerializerMethodField()

    class Meta:
        model = Task
        fields = [
            "slug",
            "title",
            "description",
            "batch_size",
            "input_shape",
            "input_dtype",
            "batch_shape",
            "output_shape",
            "metric",
            "metric_label",
            "higher_is_better",
            "max_model_bytes",
            "time_limit_s",
            "submissions_per_day",
            "submissions_total",
            "opens_at",
            "closes_at",
            "requires_gpu",
            "is_open",
        ]

    def get_is_open(self, task: Task) -> bool:
        return task.is_open()


RESULT_FIELDS = [
    "score",
    "metrics",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "throughput",
    "provider",
    "device_name",
    "ort_version",
    "samples_evaluated",
]


class SubmissionSerializer(serializers.ModelSerializer):
    task: serializers.SlugRelatedField[Task] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    url = serializers.SerializerMethodField()

    class Meta:
        model = Submission
        fields = [
            "id",
            "url",
            "task",
            "original_name",
            "description",
            "sha256",
            "size_bytes",
            "status",
            "progress",
            "created_at",
            "started_at",
            "finished_at",
            "attempts",
            "error_message",
            "model_info",
            *RESULT_FIELDS,
            "score_private",
            "metrics_private",
            "batch_latencies_ms",
        ]
        read_only_fields = fields

    def get_url(self, submission: Submission) -> str:
        return submission.get_absolute_url()

    def to_representation(self, instance: Submission) -> dict[str, Any]:
        data = super().to_representation(instance)
        if not instance.task.private_revealed:  # private scores stay hidden until revealed
            data.pop("score_private")
            data.pop("metrics_private")
        return data


class SubmissionDetailSerializer(SubmissionSerializer):
    """For the schema: one submission, with its place in the queue while queued."""

    queue_position = serializers.IntegerField(allow_null=True, read_only=True)

    class Meta(SubmissionSerializer.Meta):
        fields = [*SubmissionSerializer.Meta.fields, "queue_position"]
        read_only_fields = fields


class PaginatedSubmissionSerializer(serializers.Serializer):
    """For the schema: a page of LimitOffsetPagination."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = SubmissionSerializer(many=True)


class SubmissionCreateSerializer(serializers.Serializer):
    task = serializers.SlugField()
    file = serializers.FileField(allow_empty_file=True)
    description = serializers.CharField(
        required=False, allow_blank=True, max_length=500, default=""
    )


class LeaderboardRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    user = serializers.CharField(source="submission.user.username")
    submission_id = serializers.IntegerField(source="submission.id")
    score = serializers.FloatField()  # the public or private score, by the board asked for
    metrics = serializers.DictField(source="submission.metrics")
    latency_p50_ms = serializers.FloatField(source="submission.latency_p50_ms")
    throughput = serializers.FloatField(source="submission.throughput")
    provider = serializers.CharField(source="submission.provider")
    device_name = serializers.CharField(source="submission.device_name")
    is_baseline = serializers.BooleanField(source="submission.is_baseline")
    entries = serializers.IntegerField()
    submitted_at = serializers.DateTimeField(source="submission.created_at")
    last_submitted_at = serializers.DateTimeField()


class LeaderboardApiQuerySerializer(serializers.Serializer):
    board = serializers.ChoiceField(choices=["public", "private"], default="public")
    page = serializers.IntegerField(min_value=1, max_value=1_000_000, default=1)
    page_size = serializers.IntegerField(min_value=1, max_value=500, default=50)


class LeaderboardSerializer(serializers.Serializer):
    """For the schema: the leaderboard response."""

    task = serializers.SlugField()
    metric = serializers.CharField()
    higher_is_better = serializers.BooleanField()
    board = serializers.CharField()
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pages = serializers.IntegerField()
    frozen_at = serializers.DateTimeField(allow_null=True)
    rows = LeaderboardRowSerializer(many=True)
