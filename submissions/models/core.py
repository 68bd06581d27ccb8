"""Tasks and submissions: the source of truth (Redis only ever holds rebuildable queue state)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from evaluation.costs import SHAPES_INFERRED, StaticCosts, incomplete_reason
from evaluation.metrics import Direction, get_metric, metric_choices
from evaluation.spec import ONNX_TYPE_FOR_DTYPE, TaskSpec
from evaluation.timing import TimingProtocol
from submissions.models.teams import Team


def default_timing_protocol() -> TimingProtocol:
    """The timing protocol of a task that sets none of its own (EVAL_TIMING_* settings)."""
    return TimingProtocol(
        min_time_s=settings.EVAL_TIMING_MIN_TIME_S,
        min_batches=settings.EVAL_TIMING_MIN_BATCHES,
        max_time_s=settings.EVAL_TIMING_MAX_TIME_S,
        passes=settings.EVAL_TIMING_PASSES,
        unstable_spread=settings.EVAL_TIMING_UNSTABLE_SPREAD,
        lock_wait_s=settings.EVAL_TIMING_LOCK_WAIT_S,
        precision=settings.EVAL_TIMING_PRECISION,
    )


def validate_timing_config(value: Any) -> None:
    if not isinstance(value, dict):
        raise ValidationError('Timing settings are a JSON object, e.g. {"min_time_s": 2}.')
    try:
        TimingProtocol.from_config(value, default_timing_protocol())
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc


class DeviceClass(models.Model):
    """Hardware a task is timed on. Each class has its own queue (queueing/queues.py), so a
    submission only reaches a worker of that class. ``cpu`` and ``gpu`` are seeded; operators add
    classes such as ``a40`` that a CUDA worker serves when its GPU's name contains
    ``gpu_name_contains`` (or when it is started with ``EVAL_DEVICE_CLASSES``)."""

    CPU = "cpu"
    GPU = "gpu"

    slug = models.SlugField(max_length=32, unique=True)
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    requires_gpu = models.BooleanField(
        default=True, help_text="Submissions fail unless the CUDA execution provider runs them."
    )
    gpu_name_contains = models.CharField(
        max_length=100,
        blank=True,
        help_text="CUDA workers whose GPU name contains this text (any case) serve this class, "
        "e.g. 'A40'. Empty: only workers started with EVAL_DEVICE_CLASSES naming it.",
    )
    max_off_gpu_share = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="GPU classes: refuse a model whose operators placed off the GPU (onnxruntime has "
        "no CUDA kernel for them) take more than this share of a profiled batch, e.g. 0.1. "
        "Empty: no limit. Shape computations onnxruntime moves to the CPU on purpose cost "
        "next to nothing.",
    )
    timing_sessions = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(9)],
        help_text="Fresh sessions (each in its own process, with its own warm-up) each model is "
        "timed in; its latency is the median of theirs. A GPU's algorithm choices differ "
        "between sessions; a CPU's timing does not need more than one.",
    )

    class Meta:
        ordering = ["slug"]
        verbose_name_plural = "device classes"

    def __str__(self) -> str:
        return self.name


class TaskQuerySet(models.QuerySet["Task"]):
    def visible(self) -> TaskQuerySet:
        return self.filter(is_hidden=False)

    def open(self, now: Any = None) -> TaskQuerySet:
        """Tasks taking submissions now: the query form of ``Task.is_open``."""
        now = now or timezone.now()
        return self.filter(
            Q(opens_at__isnull=True) | Q(opens_at__lte=now),
            Q(closes_at__isnull=True) | Q(closes_at__gt=now),
        )


class Task(models.Model):
    class Leaderboard(models.TextChoices):
        PUBLIC = "public", "Public"
        # Participants see status, errors and timing but no score (their own included) until
        # the operator reveals the board by making it public.
        BLIND = "blind", "Blind (no scores until revealed)"
        HIDDEN = "hidden", "Hidden"

    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    batch_size = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    input_shape = models.JSONField(help_text="Per-sample input shape, e.g. [3, 224, 224].")
    input_dtype = models.CharField(
        max_length=16, choices=[(k, k) for k in ONNX_TYPE_FOR_DTYPE], default="float32"
    )
    output_shape = models.JSONField(help_text="Per-sample output shape, e.g. [1000].")
    # Callable choices: the registry, with any installed package's metrics, is read when the
    # choice is shown or checked, so adding a metric needs no migration.
    metric = models.CharField(max_length=32, choices=metric_choices)
    metric_options = models.JSONField(
        default=dict,
        blank=True,
        help_text='Settings of the metric, e.g. {"ignore_index": 255} or {"crop_border": 2}; '
        "the metric's help lists each family's. Unset ones take their defaults.",
    )
    dataset = models.FileField(
        upload_to="datasets/", help_text="Hidden .npz: inputs, targets, split."
    )
    max_model_bytes = models.PositiveBigIntegerField(default=200 * 1024 * 1024)
    time_limit_s = models.PositiveIntegerField(default=600, validators=[MinValueValidator(1)])
    submissions_per_day = models.PositiveIntegerField(default=10)
    submissions_total = models.PositiveIntegerField(null=True, blank=True)
    opens_at = models.DateTimeField(null=True, blank=True)
    closes_at = models.DateTimeField(null=True, blank=True)
    leaderboard = models.CharField(max_length=8, choices=Leaderboard.choices, default="public")
    leaderboard_frozen_at = models.DateTimeField(null=True, blank=True)
    private_revealed = models.BooleanField(default=False)
    final_selections = models.PositiveSmallIntegerField(
        default=0,
        help_text="How many final submissions each participant may select for the private "
        "board; a participant who selects none is ranked on their best N by public score. "
        "0: the private board ranks every submission (each participant's best).",
    )
    device_class = models.ForeignKey(
        DeviceClass,
        to_field="slug",
        on_delete=models.PROTECT,
        default=DeviceClass.CPU,
        related_name="tasks",
        help_text="The hardware submissions are timed on; only workers of this class take them.",
    )
    queued_per_user = models.PositiveIntegerField(
        default=5,
        validators=[MinValueValidator(1)],
        help_text="How many submissions one entrant (a user alone, or a team) may have queued or "
        "running at once.",
    )
    timing = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_timing_config],
        help_text='Timing protocol overrides, e.g. {"min_time_s": 2, "passes": 7}; keys: '
        "min_time_s, min_batches, max_time_s, passes, unstable_spread, lock_wait_s, precision, "
        "unstable_session_spread. "
        "Unset keys take the EVAL_TIMING_* defaults.",
    )
    is_hidden = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    max_team_size = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1)],
        help_text="Most participants in one team; 1: no teams, everyone enters alone.",
    )
    team_merge_deadline = models.DateTimeField(
        null=True,
        blank=True,
        help_text="After this, team membership is frozen (no joining, leaving or merging). "
        "Empty: until the task closes.",
    )
    # The task page's tabs, in Markdown (rendered by submissions/tasks/markup.py: no raw HTML).
    overview = models.TextField(blank=True, help_text="Markdown; the description when empty.")
    rules = models.TextField(blank=True, help_text="Markdown.")
    evaluation_notes = models.TextField(
        blank=True, help_text="Markdown, shown under the evaluation facts the portal lists."
    )
    timeline_notes = models.TextField(
        blank=True, help_text="Markdown, shown under the dates on the timeline."
    )
    private_reveal_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When private scores are announced to be revealed (shown on the timeline); "
        "the reveal itself is the 'Reveal private scores' action.",
    )
    # The dataset results are ranked on; its history is in ``dataset_versions``. Null only for a
    # task that was never given a version (the worker then reads ``dataset`` as it is).
    current_dataset = models.ForeignKey(
        "submissions.DatasetVersion",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        editable=False,
    )
    # A phase of this challenge, in ``phase_order``; None: a task on its own, as ever.
    challenge = models.ForeignKey(
        "submissions.Challenge",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="phases",
    )
    phase_order = models.PositiveSmallIntegerField(default=0, help_text="Phases run in this order.")
    finalists_top = models.PositiveSmallIntegerField(
        default=10,
        validators=[MinValueValidator(1)],
        help_text="Re-measuring finalists: the top N ranked entries of each board (public and "
        "private, main and tracks) are re-timed, their union once each.",
    )
    finalists_sessions = models.PositiveSmallIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(25)],
        help_text="Re-measuring finalists: the fresh timing sessions each one is timed in.",
    )
    remeasure_finalists_at_close = models.BooleanField(
        default=False,
        help_text="Re-measure the finalists on the task's device class once it closes (the "
        "workers' periodic recovery starts it); the admin action does it at any time.",
    )
    requires_fact_sheet = models.BooleanField(
        default=False,
        help_text="Finals can be selected only by an entrant whose fact sheet is complete "
        "(method name, code link, training data, extra data yes/no).",
    )

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("task-detail", args=[self.slug])

    @property
    def batch_shape(self) -> list[int]:
        return [self.batch_size, *self.input_shape]

    @property
    def metric_label(self) -> str:
        return get_metric(self.metric).label

    @property
    def direction(self) -> Direction:
        """Which of two scores on this task is better (its metric's direction)."""
        return get_metric(self.metric).direction

    @property
    def higher_is_better(self) -> bool:
        return self.direction.higher_is_better

    @property
    def requires_gpu(self) -> bool:
        return self.device_class.requires_gpu

    @property
    def device_class_slug(self) -> str:
        """Without a query: the foreign key holds the class's slug (``to_field``)."""
        return str(self.device_class_id)

    def withdrawn_for(self, user: Any) -> bool:
        """Whether this task is withdrawn as far as this viewer is concerned: hidden by the
        operators, and the viewer is not one of them. Who submitted to it before it was hidden
        still sees that the submission exists (their upload, counted in their history) and its
        status, but not the task's title, slug or page, nor the submission's results, until the
        task is shown again. Pages, the API and e-mails ask this one rule."""
        return self.is_hidden and not bool(getattr(user, "is_staff", False))

    def scores_shown_to(self, user: Any) -> bool:
        """Whether this viewer may see scores of this task (their own included): not while its
        board is blind, except to operators."""
        return self.leaderboard != Task.Leaderboard.BLIND or bool(getattr(user, "is_staff", False))

    def teams_frozen(self, now: Any = None) -> bool:
        """Past the merge deadline (or closed, without one): membership no longer changes."""
        deadline = self.team_merge_deadline or self.closes_at
        return deadline is not None and (now or timezone.now()) >= deadline

    def has_closed(self, now: Any = None) -> bool:
        """Past its closing time: no uploads, and final selections no longer change."""
        return self.closes_at is not None and (now or timezone.now()) >= self.closes_at

    def opens_later(self, now: Any = None) -> bool:
        """Not open yet, as opposed to closed: its opening time is still ahead."""
        return bool(self.opens_at and (now or timezone.now()) < self.opens_at)

    def is_open(self, now: Any = None) -> bool:
        now = now or timezone.now()
        if self.opens_at and now < self.opens_at:
            return False
        return not (self.closes_at and now >= self.closes_at)

    def spec(self) -> TaskSpec:
        return TaskSpec(
            batch_size=self.batch_size,
            input_shape=tuple(int(d) for d in self.input_shape),
            input_dtype=self.input_dtype,
            output_shape=tuple(int(d) for d in self.output_shape),
            metric=self.metric,
            max_model_bytes=self.max_model_bytes,
            time_limit_s=float(self.time_limit_s),
            requires_gpu=self.requires_gpu,
            timing=self.timing_protocol(),
            metric_options=dict(self.metric_options or {}),
        )

    def timing_protocol(self) -> TimingProtocol:
        return TimingProtocol.from_config(self.timing or {}, default_timing_protocol())


class SubmissionQuerySet(models.QuerySet["Submission"]):
    def for_user(self, user: Any) -> SubmissionQuerySet:
        """What ``user`` may see as theirs: their own uploads and every one of their teams'.
        ``Submission.belongs_to`` is the same rule for one row already read."""
        teams = Team.objects.filter(memberships__user=user).values("pk")
        return self.filter(Q(user=user) | Q(team__in=teams))

    def on_leaderboard(self) -> SubmissionQuerySet:
        return self.filter(
            status=Submission.Status.SUCCEEDED,
            hidden=False,
            disqualified=False,
            score__isnull=False,
        )


class Submission(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    FINAL_STATUSES = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)
    # What a participant is told instead of a withdrawn task's name and results
    # (``Task.withdrawn_for``): on the list, the submission's page and in the API.
    TASK_WITHDRAWN_NOTICE = (
        "The organisers have withdrawn this task. Your submission stays in your list, but the "
        "task's name and page and this submission's results are not shown while it is withdrawn."
    )

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submissions"
    )
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="submissions")
    model_file = models.FileField(upload_to="models/%Y/%m/")
    sha256 = models.CharField(max_length=64, db_index=True)
    size_bytes = models.PositiveBigIntegerField()
    original_name = models.CharField(max_length=255)
    description = models.CharField(max_length=500, blank=True)
    model_info = models.JSONField(default=dict, blank=True, help_text="What inspection found.")
    # Static costs at the task's batch shape, from inspection (evaluation/costs.py); null where
    # they could not be computed (model_info["costs_unavailable"] says why).
    parameters = models.PositiveBigIntegerField(null=True, blank=True)
    flops = models.PositiveBigIntegerField(null=True, blank=True)
    macs = models.PositiveBigIntegerField(null=True, blank=True)
    activations = models.PositiveBigIntegerField(null=True, blank=True)
    costs_not_counted = models.JSONField(
        null=True,
        blank=True,
        help_text='{"ops": {op type: nodes}, "unknown_shapes": n, "shapes_from": "inference" or '
        '"run"}',
    )

    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    progress = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # 1, then one more per operator re-run: a run reaches one final status, notified once.
    runs = models.PositiveIntegerField(default=1)
    job_id = models.CharField(max_length=64, blank=True)
    worker_name = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True, help_text="Shown to the submitter.")
    log = models.TextField(blank=True, help_text="Operators only.")
    failed_by_system = models.BooleanField(
        default=False, help_text="Failed through no fault of the model (worker lost, our error)."
    )

    hidden = models.BooleanField(default=False)
    hidden_reason = models.CharField(max_length=500, blank=True, help_text="Shown to the owner.")
    disqualified = models.BooleanField(default=False)
    disqualified_reason = models.CharField(
        max_length=500, blank=True, help_text="Shown to the owner."
    )
    is_baseline = models.BooleanField(default=False)
    # Chosen by its owner as one of the task's final submissions (Task.final_selections).
    selected = models.BooleanField(default=False)
    # Higher starts first (submissions/lifecycle/turns.py): operator re-runs above the users'
    # uploads (0),
    # re-scores on a replaced dataset below them.
    priority = models.SmallIntegerField(default=0)
    RESCORE_PRIORITY = -10
    # The dataset version the result was scored on (set with the result, by the job).
    dataset_version = models.ForeignKey(
        "submissions.DatasetVersion",
        on_delete=models.RESTRICT,
        null=True,
        blank=True,
        related_name="results",
        editable=False,
    )
    display_name = models.CharField(
        max_length=100,
        blank=True,
        help_text="Shown on the leaderboard instead of the owner's username (baselines).",
    )
    # The team it counts for; None: its uploader entered alone. Moves with its uploader when
    # they join, leave or are removed from a team (submissions/teams/services.py).
    team = models.ForeignKey(
        "submissions.Team",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="submissions",
    )

    # The previous phase's submission this one carries over (challenge_phase_advance): the same
    # model, scored on this phase's data, costing no quota and marked "carried" on the board.
    carried_from = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="carried_to",
        editable=False,
    )

    # Result: written once, in one transaction, when the evaluation succeeds.
    score = models.FloatField(null=True, blank=True, help_text="Primary metric on the public rows.")
    score_private = models.FloatField(null=True, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    metrics_private = models.JSONField(default=dict, blank=True)
    # Per batch, from the timing phase (evaluation/timing.py), in ms to full float precision.
    latency_p50_ms = models.FloatField(null=True, blank=True)
    latency_p90_ms = models.FloatField(null=True, blank=True)
    latency_p95_ms = models.FloatField(null=True, blank=True)
    latency_p99_ms = models.FloatField(null=True, blank=True)
    latency_mean_ms = models.FloatField(null=True, blank=True)
    latency_spread = models.FloatField(
        null=True, blank=True, help_text="Relative IQR of the timing passes' medians (0.02 = 2 %)."
    )
    latency_unstable = models.BooleanField(default=False)
    latency_sessions = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Fresh sessions timed; the latencies are their medians."
    )
    latency_session_spread = models.FloatField(
        null=True,
        blank=True,
        help_text="(max - min) / median of the sessions' p50s (0.02 = 2 %); empty for one.",
    )
    energy_per_sample_j = models.FloatField(
        null=True,
        blank=True,
        help_text="The GPU's energy over the timed passes per sample, idle power included "
        "(NVML's energy counter); empty where the device has none.",
    )
    average_power_w = models.FloatField(
        null=True, blank=True, help_text="The GPU's average power over the timed passes."
    )
    timing_exclusive = models.BooleanField(
        null=True, blank=True, help_text="Timed holding the device's lock (False: without)."
    )
    timing = models.JSONField(
        default=dict, blank=True, help_text="Timing protocol, passes and device conditions."
    )
    throughput = models.FloatField(null=True, blank=True, help_text="Samples per second.")
    peak_memory_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    provider = models.CharField(max_length=64, blank=True)
    device_name = models.CharField(max_length=200, blank=True)
    ort_version = models.CharField(max_length=32, blank=True)
    samples_evaluated = models.PositiveIntegerField(null=True, blank=True)
    batch_latencies_ms = models.JSONField(default=list, blank=True)
    # Its latest re-measurement as a finalist on the task's device class: ranks in place of the
    # latencies above (``submissions.models.ranking.submission_measures``).
    remeasurement = models.ForeignKey(
        "submissions.FinalistMeasurement",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        editable=False,
    )
    run_report = models.JSONField(
        default=dict,
        blank=True,
        help_text="For the submitter: onnxruntime's warnings and log lines about the model, its "
        "nodes per execution provider and a profile of one batch (evaluation/run_report.py).",
    )

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["task", "status", "score"]),
            models.Index(fields=["user", "task", "created_at"]),
            # The upload reads an entrant's submissions once, through submission_quota_idx: the
            # quota and waiting-limit counts and the duplicate check in one aggregate (team_id
            # and sha256 come from the table). submission_duplicate_idx, which served the
            # duplicate check when it was a query of its own, was dropped (0019): nothing read
            # it, and every upload's INSERT maintained it.
            models.Index(
                fields=["user", "task", "status"],
                include=["created_at", "attempts", "failed_by_system", "priority"],
                name="submission_quota_idx",
            ),
            # Fair turns (submissions/lifecycle/turns.py): an entrant's latest start, looked up
            # once per
            # queued submission before every job; newest first, it is the first row of the index.
            models.Index(
                fields=["user", "-started_at"],
                condition=Q(started_at__isnull=False),
                name="submission_user_started_idx",
            ),
            models.Index(
                fields=["team", "-started_at"],
                condition=Q(team__isnull=False, started_at__isnull=False),
                name="submission_team_started_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.original_name} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("submission-detail", args=[self.pk])

    def belongs_to(self, user: Any) -> bool:
        """``SubmissionQuerySet.for_user``'s rule for this row: the user's own upload, or one of
        a team they are in (the one query, only for a team's row that is not theirs)."""
        if not getattr(user, "is_authenticated", False):
            return False
        if self.user_id == user.pk:
            return True
        if self.team_id is None:
            return False
        return Team.objects.filter(pk=self.team_id, memberships__user_id=user.pk).exists()

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL_STATUSES

    @property
    def is_rescore(self) -> bool:
        """Queued again by a dataset replacement (``services.task_dataset_replace``)."""
        return self.priority == self.RESCORE_PRIORITY

    def owner_notices(self) -> list[str]:
        """Why this submission is not (or not yet) on the board, as its owner is told on the
        submission page, the list and the API; [] when nothing keeps it off."""
        notices = []
        if self.disqualified:
            notices.append(f"Disqualified: {self.disqualified_reason or 'no reason given'}")
        if self.hidden:
            reason = f": {self.hidden_reason}" if self.hidden_reason else ""
            notices.append(f"Hidden from the leaderboard by the organisers{reason}")
        frozen = self.task.leaderboard_frozen_at
        if frozen is not None and self.created_at > frozen:
            notices.append(
                f"Submitted after the leaderboard froze ({frozen:%Y-%m-%d %H:%M} UTC): "
                "not on the board."
            )
        if self.status in (self.Status.QUEUED, self.Status.RUNNING) and self.carried_from_id:
            notices.append("Carried over from the previous phase; being scored on this one.")
        elif self.status in (self.Status.QUEUED, self.Status.RUNNING) and self.is_rescore:
            notices.append("Being re-scored on the task's new dataset.")
        elif self.status == self.Status.SUCCEEDED and not self.on_current_dataset:
            notices.append(
                "Scored on an earlier version of the task's dataset: not on the board until "
                "it is re-scored."
            )
        return notices

    @property
    def on_current_dataset(self) -> bool:
        return self.dataset_version_id == self.task.current_dataset_id

    @property
    def board_name(self) -> str:
        """Who the board says made this entry: a baseline's display name, the team's name, else
        the username (a participant alone)."""
        if self.display_name:
            return self.display_name
        team = self.team
        return team.name if team is not None else self.user.username

    def set_static_costs(self, costs: StaticCosts | None) -> None:
        """Copy inspection's costs onto this row (not saved); None leaves them unknown."""
        if costs is None:
            return
        for name, value in self.static_cost_columns(costs).items():
            setattr(self, name, value)

    @staticmethod
    def static_cost_columns(costs: StaticCosts) -> dict[str, Any]:
        """The columns that hold ``costs``, by field name: inspection's, or a run's."""
        return {
            "parameters": costs.parameters,
            "macs": costs.macs,
            "flops": costs.flops,
            "activations": costs.activations,
            "costs_not_counted": {
                "ops": dict(costs.not_counted),
                "unknown_shapes": costs.unknown_shapes,
                "shapes_from": costs.shapes_from,
            },
        }

    @property
    def costs_incomplete_reason(self) -> str:
        """Why the MACs and FLOPs leave nodes out (``evaluation.costs``); "" when complete."""
        return incomplete_reason((self.costs_not_counted or {}).get("ops") or {})

    @property
    def costs_complete(self) -> bool | None:
        """Whether the MACs and FLOPs count every node that multiply-accumulates; None: no
        costs at all (``model_info["costs_unavailable"]`` says why)."""
        return None if self.flops is None else not self.costs_incomplete_reason

    @property
    def costs_shapes_from(self) -> str:
        """Where the costs' shapes came from: the graph alone, or a run at the batch shape."""
        return str((self.costs_not_counted or {}).get("shapes_from") or SHAPES_INFERRED)


# The API schema names this choice set (settings.SPECTACULAR_SETTINGS, ENUM_NAME_OVERRIDES), which
# reaches one class deep into a module.
SubmissionStatus = Submission.Status
