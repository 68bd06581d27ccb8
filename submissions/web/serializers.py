"""DRF serializers: shapes of the API's JSON. No logic beyond field mapping."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from rest_framework import serializers

from evaluation.sizes import mib_value
from submissions.boards.display import row_figures, submission_figures
from submissions.boards.ranking import KINDS
from submissions.boards.row import (
    COLUMNS,
    COSTS_COMPLETE_HELP,
    COSTS_INCOMPLETE_HELP,
    Column,
    LeaderboardRow,
)
from submissions.lifecycle.selectors import task_device_notice
from submissions.lifecycle.settled import WAIT_MAX_S
from submissions.models import Submission, Task


class TrackSerializer(serializers.Serializer):
    slug = serializers.SlugField(help_text="The leaderboard's ?track= for this board.")
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    kind = serializers.ChoiceField(choices=list(KINDS), help_text="Its ranking rule's kind.")


class TaskSerializer(serializers.ModelSerializer):
    tracks = TrackSerializer(
        many=True,
        read_only=True,
        help_text="The boards beside the main one, each ranking the same results by a rule of "
        "its own.",
    )
    batch_shape = serializers.ListField(child=serializers.IntegerField(), read_only=True)
    metric_label = serializers.CharField(read_only=True)
    higher_is_better = serializers.BooleanField(read_only=True)
    is_open = serializers.SerializerMethodField()
    device_class = serializers.CharField(source="device_class_slug", read_only=True)
    requires_gpu = serializers.BooleanField(read_only=True)
    max_model_mib = serializers.SerializerMethodField(
        help_text="max_model_bytes in MiB (2**20 bytes), as the operator set it."
    )
    device_notice = serializers.SerializerMethodField(
        help_text="Non-empty while no evaluation machine of the task's device class is online: "
        "uploads are accepted and wait, without counting against the quota until they start."
    )

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
            "metric_options",
            "max_model_bytes",
            "max_model_mib",
            "time_limit_s",
            "submissions_per_day",
            "submissions_total",
            "opens_at",
            "closes_at",
            "queued_per_user",
            "device_class",
            "requires_gpu",
            "device_notice",
            "is_open",
            "tracks",
        ]

    def get_is_open(self, task: Task) -> bool:
        return task.is_open()

    def get_max_model_mib(self, task: Task) -> float:
        return mib_value(task.max_model_bytes)

    def get_device_notice(self, task: Task) -> str:
        return task_device_notice(task=task)


RESULT_FIELDS = [
    "score",
    "metrics",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_mean_ms",
    "latency_spread",
    "latency_unstable",
    "latency_sessions",
    "latency_session_spread",
    "energy_per_sample_j",
    "average_power_w",
    "timing_exclusive",
    "throughput",
    "peak_memory_bytes",
    "provider",
    "device_name",
    "ort_version",
    "samples_evaluated",
]


# From inspection at upload (evaluation/costs.py), null where they could not be computed.
STATIC_COST_FIELDS = [
    "parameters",
    "flops",
    "macs",
    "activations",
    "costs_not_counted",
    "costs_complete",
    "costs_incomplete_reason",
]


class SubmissionSerializer(serializers.ModelSerializer):
    task: serializers.SlugRelatedField[Task] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    url = serializers.SerializerMethodField()
    notices = serializers.ListField(
        source="owner_notices",
        child=serializers.CharField(),
        read_only=True,
        help_text="Why it is not (or not yet) on the board, e.g. 'Disqualified: <reason>', "
        "'Hidden from the leaderboard by the organisers: <reason>', submitted after the freeze, "
        "being re-scored on a new dataset. Empty when nothing keeps it off.",
    )
    dataset_version = serializers.IntegerField(
        source="dataset_version.number",
        allow_null=True,
        read_only=True,
        help_text="The version of the task's dataset the result was scored on (1, 2, ...).",
    )
    scores_blind = serializers.SerializerMethodField(
        help_text="True while the task's board is blind: score and metrics are left out until "
        "the organisers reveal them."
    )
    task_withdrawn = serializers.SerializerMethodField(
        help_text="True while the organisers have withdrawn (hidden) the task: `task` is null, "
        "the results (score, metrics, latency, throughput, timing, dataset version) are left "
        "out and `notices` says why; the submission's own facts and status remain."
    )
    costs_complete = serializers.BooleanField(
        read_only=True, allow_null=True, help_text=COSTS_COMPLETE_HELP
    )
    costs_incomplete_reason = serializers.CharField(read_only=True, help_text=COSTS_INCOMPLETE_HELP)
    display = serializers.SerializerMethodField(
        help_text="The result's figures as the site writes them (units chosen, digits fixed, "
        "metric labels): metric_label, score, metrics (label -> value, the score's own metric "
        "left out), latency_p50, latency_spread, latency_session_spread, throughput, "
        "peak_memory, parameters, flops, energy_per_sample. Score and metrics are left out "
        "while the board is blind."
    )

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
            "hidden",
            "disqualified",
            "notices",
            "dataset_version",
            "progress",
            "created_at",
            "started_at",
            "finished_at",
            "attempts",
            "error_message",
            "selected",
            "scores_blind",
            "task_withdrawn",
            "model_info",
            *STATIC_COST_FIELDS,
            *RESULT_FIELDS,
            "score_private",
            "metrics_private",
            "batch_latencies_ms",
            "timing",
            "display",
        ]
        read_only_fields = fields
        # Private scores until the task reveals them; every score while its board is blind;
        # every result while the task is withdrawn.
        omitted_sometimes = ("score", "metrics", "score_private", "metrics_private")
        withheld_while_withdrawn = (
            *RESULT_FIELDS,
            "score_private",
            "metrics_private",
            "batch_latencies_ms",
            "timing",
            "dataset_version",
            "display",
        )

    # Per class (a subclass builds its own): see get_fields.
    _built_fields: ClassVar[dict[str, serializers.Field[Any, Any, Any, Any]] | None] = None

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        """ModelSerializer builds every field from the model again for each serializer: most of
        an upload's response time. Built once per class here; each serializer
        binds its own shallow copies (binding sets the copy's name, parent and source; nothing
        here depends on the request)."""
        built = type(self).__dict__.get("_built_fields")
        if built is None:
            built = super().get_fields()
            type(self)._built_fields = built
        return {name: copy.copy(field) for name, field in built.items()}

    def get_url(self, submission: Submission) -> str:
        return submission.get_absolute_url()

    def get_display(self, submission: Submission) -> dict[str, Any]:
        return submission_figures(submission, scores=not self.get_scores_blind(submission))

    def get_scores_blind(self, submission: Submission) -> bool:
        # Only owners read a submission through the API: the owner is the viewer.
        return not submission.task.scores_shown_to(submission.user)

    def get_task_withdrawn(self, submission: Submission) -> bool:
        # The viewer is the request's user (a teammate reads a team's submissions too), else
        # the owner.
        request = self.context.get("request")
        viewer = request.user if request is not None else submission.user
        return submission.task.withdrawn_for(viewer)

    def to_representation(self, instance: Submission) -> dict[str, Any]:
        data = super().to_representation(instance)
        hidden = ["score_private", "metrics_private"] if not instance.task.private_revealed else []
        if data["scores_blind"]:
            hidden = ["score", "metrics", "score_private", "metrics_private"]
        if data["task_withdrawn"]:
            hidden = list(self.Meta.withheld_while_withdrawn)
            data.update(task=None, notices=[Submission.TASK_WITHDRAWN_NOTICE])
        for name in hidden:
            data.pop(name, None)
        return data


class SubmissionDetailSerializer(SubmissionSerializer):
    """For the schema: one submission, with its place in the queue while queued."""

    queue_position = serializers.IntegerField(allow_null=True, read_only=True)
    run_report = serializers.JSONField(
        read_only=True,
        help_text="onnxruntime's warnings and log lines about the model, its nodes per execution "
        "provider and a profile of one batch; {} until evaluated.",
    )

    class Meta(SubmissionSerializer.Meta):
        fields = [*SubmissionSerializer.Meta.fields, "queue_position", "run_report"]
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


# The API's field for each type a board column's values may have (``board_row.Column.type``).
_ROW_FIELDS: dict[type, type[serializers.Field[Any, Any, Any, Any]]] = {
    int: serializers.IntegerField,
    float: serializers.FloatField,
    bool: serializers.BooleanField,
    str: serializers.CharField,
    datetime: serializers.DateTimeField,
    dict: serializers.DictField,
}


def _row_field(column: Column) -> serializers.Field[Any, Any, Any, Any]:
    options: dict[str, Any] = {"allow_null": column.null, "help_text": column.help or None}
    if column.choices:
        return serializers.ChoiceField(choices=list(column.choices), **options)
    return _ROW_FIELDS[column.type](**options)


class RowDisplaySerializer(serializers.Serializer):
    """For the schema: a board row's figures as the board page writes them (``row_figures``),
    in this order."""

    score = serializers.CharField()
    metrics = serializers.DictField(
        child=serializers.CharField(),
        help_text="Label -> value; the task's own metric is left out (it is the score).",
    )
    latency_p50 = serializers.CharField()
    latency_spread = serializers.CharField(help_text="'' when not measured.")
    latency_session_spread = serializers.CharField(
        help_text="How far the p50s of its timing sessions differ; '' when timed in one."
    )
    throughput = serializers.CharField()
    peak_memory = serializers.CharField()
    parameters = serializers.CharField()
    flops = serializers.CharField(help_text="'≥ n' when the count leaves nodes out.")
    energy_per_sample = serializers.CharField()
    remeasured = serializers.CharField(
        help_text="A finalist's re-measurement: 're-measured 5 sessions, ± 1.2 %, 28 Nov 10:02'; "
        "'' when not re-measured. latency_p50 is then the re-measured p50."
    )


ROW_DISPLAY_HELP = (
    "The row's figures as the board page writes them (units chosen, digits fixed, metric "
    "labels; '—' where there is none); the numbers themselves are in their own fields."
)


class LeaderboardRowSerializer(serializers.Serializer):
    """One board row: a field for each column of ``board_row.COLUMNS``, typed and described
    there, then ``display``. On the private board ``score`` and ``metrics`` are the private
    ones. ``context["metric"]``: the task's metric (else read from each row's task)."""

    columns: ClassVar[Sequence[Column]] = COLUMNS

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = {column.key: _row_field(column) for column in self.columns}
        fields["display"] = RowDisplaySerializer(help_text=ROW_DISPLAY_HELP)
        return fields

    def to_representation(self, instance: LeaderboardRow) -> dict[str, Any]:
        record = {column.key: column.value(instance) for column in self.columns}
        metric = self.context.get("metric") or instance.submission.task.metric
        record["display"] = row_figures(instance, metric=metric)
        return dict(super().to_representation(record))


def leaderboard_rows_data(rows: Sequence[LeaderboardRow], *, metric: str) -> list[dict[str, Any]]:
    """``LeaderboardRowSerializer(rows, many=True, context={"metric": metric}).data``, the same
    JSON, with each column's field built once for all the rows instead of a serializer's fields
    for each row."""
    fields = LeaderboardRowSerializer().fields
    columns = [(c.key, c.value, fields[c.key].to_representation) for c in COLUMNS]
    return [
        {key: None if (v := value(row)) is None else shown(v) for key, value, shown in columns}
        | {"display": row_figures(row, metric=metric)}
        for row in rows
    ]


class RankingSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=list(KINDS))
    description = serializers.CharField()
    device_class = serializers.CharField(help_text="Only latency timed on this class is ranked.")


class SubmissionListQuerySerializer(serializers.Serializer):
    """For the schema and the check: a page of your submissions (larger values are clamped)."""

    limit = serializers.IntegerField(min_value=1, required=False, help_text="At most 500.")
    offset = serializers.IntegerField(min_value=0, required=False)


class SubmissionWaitQuerySerializer(serializers.Serializer):
    wait = serializers.FloatField(
        min_value=0,
        max_value=WAIT_MAX_S,
        default=0,
        help_text=(
            f"Seconds (at most {WAIT_MAX_S}) to hold the answer until the submission is final "
            "(succeeded, failed or cancelled); it comes at once when it is final already, and "
            "may come at once when the server has no waiting slot free. 0: at once."
        ),
    )


class LeaderboardApiQuerySerializer(serializers.Serializer):
    board = serializers.ChoiceField(choices=["public", "private"], default="public")
    track = serializers.SlugField(
        required=False,
        default="",
        allow_blank=True,
        help_text="A track's slug (the task's ``tracks``); empty: the main board.",
    )
    page = serializers.IntegerField(min_value=1, max_value=1_000_000, default=1)
    page_size = serializers.IntegerField(min_value=1, max_value=500, default=50)


class LeaderboardSerializer(serializers.Serializer):
    """For the schema: the leaderboard response."""

    task = serializers.SlugField()
    metric = serializers.CharField()
    metric_label = serializers.CharField(help_text="The metric's name for people.")
    higher_is_better = serializers.BooleanField()
    board = serializers.CharField()
    track = serializers.CharField(
        allow_blank=True, help_text="The track's slug; empty: the task's main board."
    )
    tracks = TrackSerializer(many=True)
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pages = serializers.IntegerField()
    frozen_at = serializers.DateTimeField(allow_null=True)
    rescoring = serializers.IntegerField(
        help_text="Submissions being re-scored on the task's replaced dataset; only results on "
        "the current dataset are ranked."
    )
    finals = serializers.CharField(
        allow_blank=True,
        help_text="On a private board of finals, what it ranks (each participant's selected "
        "submissions); empty otherwise.",
    )
    ranking = RankingSerializer()
    rows = LeaderboardRowSerializer(many=True)
