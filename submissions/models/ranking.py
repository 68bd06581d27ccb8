"""A task's ranking rule as a row (set in the admin), its tracks (more boards of the same results,
each with a rule of its own), and the glue from rows to the pure ``submissions.boards.ranking``
module: a Submission's ``Measures`` and the task's ``Rule``.

A task without a rule row is ranked by its primary metric on its main board.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db import models

from submissions.boards import ranking

if TYPE_CHECKING:
    from submissions.models import Submission, Task


def validate_weights(value: Any) -> None:
    if not isinstance(value, dict):
        raise ValidationError('Weights are a JSON object, e.g. {"latency": 0.7, "flops": 0.3}.')


class RuleSettings(models.Model):
    """A ranking rule's settings, and how they become a pure ``ranking.Rule``: the task's own
    rule (``RankingRule``) and each of its tracks' (``Track``) are these."""

    task_id: int  # each concrete rule says how it belongs to its task
    kind = models.CharField(
        max_length=16,
        choices=[
            (ranking.PRIMARY, "Primary metric"),
            (ranking.CONSTRAINED, "Primary metric within budgets"),
            (ranking.MEASURE, "One measure, lowest first (latency, parameters, FLOPs, memory)"),
            (ranking.COMPOSITE, "Composite score relative to a baseline"),
        ],
        default=ranking.PRIMARY,
    )
    measure = models.CharField(
        max_length=16,
        blank=True,
        choices=[(m, ranking.MEASURES[m]) for m in ranking.RANKED_MEASURES],
        help_text="One-measure rules only: what entries are ranked on, lowest first "
        "(latency at the percentile below). Budgets and the minimum metric still apply.",
    )
    latency_percentile = models.CharField(
        max_length=4,
        choices=[(p, p) for p in ranking.PERCENTILES],
        default="p50",
        help_text="The per-batch latency the budget, a latency ranking and the composite's "
        "latency weight use.",
    )
    latency_budget_ms = models.FloatField(null=True, blank=True)
    metric_threshold = models.FloatField(
        null=True,
        blank=True,
        help_text="Entries must score at least this (at most, when lower is better).",
    )
    max_parameters = models.PositiveBigIntegerField(null=True, blank=True)
    max_flops = models.PositiveBigIntegerField(null=True, blank=True)
    max_peak_memory_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    max_energy_per_sample_j = models.FloatField(
        null=True,
        blank=True,
        help_text="Joules per sample, from a GPU's energy counter; entries without it are not "
        "ranked.",
    )
    weights = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_weights],
        help_text='Composite only: {"latency": 0.7, "flops": 0.15, "parameters": 0.15}; '
        "measures: score, latency, parameters, flops, peak_memory, energy. Each term is "
        "weight · exp(2 · value / baseline value) (baseline / value for a higher-is-better "
        "score); lower totals rank first.",
    )
    baseline = models.ForeignKey(
        "submissions.Submission",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Composite only: the submission of this task every ratio is relative to.",
    )

    class Meta:
        abstract = True

    def rule(self, task: Task, board: str) -> ranking.Rule:
        baseline = self.baseline
        return dataclasses.replace(
            self.rule_unbound(),
            higher_is_better=task.higher_is_better,
            metric=task.metric,
            device_class=task.device_class_slug,
            weights=dict(self.weights or {}) if self.kind == ranking.COMPOSITE else {},
            baseline=submission_measures(baseline, board) if baseline is not None else None,
        )

    def clean(self) -> None:
        if not isinstance(self.weights, dict):
            return  # the field's validator says why
        errors = ranking.rule_errors(self.rule_unbound())
        if self.kind == ranking.COMPOSITE and self.baseline_id is None:
            errors.append("A composite score needs a baseline submission.")
        if self.baseline is not None and self.baseline.task_id != self.task_id:
            errors.append("The baseline must be a submission of this task.")
        if errors:
            raise ValidationError(errors)

    def rule_unbound(self) -> ranking.Rule:
        """The rule's own settings, for validation before the task is known."""
        return ranking.Rule(
            kind=self.kind,
            percentile=self.latency_percentile,
            latency_budget_ms=self.latency_budget_ms,
            metric_threshold=self.metric_threshold,
            max_parameters=self.max_parameters,
            max_flops=self.max_flops,
            max_peak_memory_bytes=self.max_peak_memory_bytes,
            max_energy_per_sample_j=self.max_energy_per_sample_j,
            weights=dict(self.weights or {}),
            measure=self.measure,
        )


class RankingRule(RuleSettings):
    """How one task's boards are ordered. Saving it through the admin re-ranks the read models
    in the same transaction (``TaskAdmin.save_related`` → ``leaderboard_rebuild``)."""

    task = models.OneToOneField(
        "submissions.Task", on_delete=models.CASCADE, related_name="ranking_rule"
    )

    def __str__(self) -> str:
        return f"{self.task_id}: {self.kind}"


class Track(RuleSettings):
    """Another board of a task (a phase): the same results ranked by a rule of its own, e.g. an
    efficiency track beside the main one. Each track has its own read models (public and
    private), kept and rebuilt with the task's main board (``submissions.boards.leaderboard``)."""

    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="tracks")
    name = models.CharField(max_length=60, help_text="The board's tab, e.g. 'Efficiency'.")
    slug = models.SlugField(max_length=40, help_text="In the board's links: ?track=<slug>.")
    description = models.CharField(max_length=300, blank=True)
    position = models.PositiveSmallIntegerField(default=1, help_text="Tabs go in this order.")

    class Meta:
        ordering = ["task", "position", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["task", "slug"], name="one_track_slug_per_task")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


def submission_measures(s: Submission, board: str) -> ranking.Measures:
    """What a rule sees of a submission on a board (the private board ranks its private score).

    Which latency ranks: a finalist's latest re-measurement (``s.remeasurement``, kept only for
    one taken on the task's device class) when it has one, else its evaluation's own timing.
    Energy likewise, where the re-measurement read it. Load ``remeasurement`` with the rows
    (``select_related``): this function runs once per row of a board."""
    conditions = (s.timing or {}).get("conditions") or {}
    latencies = {p: getattr(s, f"latency_{p}_ms") for p in ranking.PERCENTILES}
    device_class, energy = conditions.get("device_class") or None, s.energy_per_sample_j
    again = s.remeasurement if s.remeasurement_id is not None else None
    if again is not None:
        latencies, device_class = again.latencies_ms, again.device_class_id
        energy = again.energy_per_sample_j if again.energy_per_sample_j is not None else energy
    return ranking.Measures(
        score=s.score_private if board == "private" else s.score,
        latencies_ms=latencies,
        parameters=s.parameters,
        flops=s.flops,
        peak_memory_bytes=s.peak_memory_bytes,
        device_class=device_class,
        flops_incomplete=s.costs_incomplete_reason,
        energy_per_sample_j=energy,
    )


def task_rule(task: Task, board: str) -> ranking.Rule:
    """The task's rule on a board (one query: the rule and its baseline)."""
    return rule_on(task_rule_row(task), task, board)


def task_rule_row(task: Task) -> RankingRule | None:
    """The task's rule with its baseline (one query); None: the primary metric."""
    return RankingRule.objects.filter(task=task).select_related("baseline").first()


def task_tracks(task: Task) -> list[Track]:
    """The task's tracks in tab order, with their baselines (one query)."""
    return list(Track.objects.filter(task=task).select_related("baseline"))


def rule_on(row: RankingRule | None, task: Task, board: str) -> ranking.Rule:
    """The rule ``row`` (from ``task_rule_row``) on one board: both boards from one query."""
    if row is None:
        return ranking.Rule(
            higher_is_better=task.higher_is_better,
            metric=task.metric,
            device_class=task.device_class_slug,
        )
    return row.rule(task, board)
