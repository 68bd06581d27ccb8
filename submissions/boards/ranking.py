"""A task's ranking rule, as pure code: which entries are ranked, in what order, and why the
others are not. No ORM: the read models (``submissions.boards.leaderboard``), the page, the CSV and
the
API all take their order and reasons from ``judge``; ``ranking_models`` turns rows into
``Measures`` and a ``Rule``.

Four kinds of rule:

- ``primary``: the primary metric, in its direction (what every board did before rules).
- ``constrained``: the primary metric, ranking only entries within the budgets (latency at a
  chosen percentile, a minimum metric, parameters, FLOPs, peak memory, energy per sample). The
  others are listed below the ranked ones with the reason.
- ``measure``: one measure other than the score (latency at a chosen percentile, parameters,
  FLOPs, peak memory, energy per sample), lowest first: a track of an efficiency challenge. The
  budgets of ``constrained`` apply (NTIRE ranks runtime only among entries above a PSNR
  threshold); an entry without the measure is not ranked.
- ``composite``: a weighted sum over chosen measures of ``exp(2 · value / baseline value)``
  (the NTIRE efficient super-resolution score), relative to a chosen baseline submission of the
  task. **Lower is better**; the baseline itself scores ``e² · Σ weights``. For a measure where
  higher is better (the primary metric when it is, e.g., accuracy) the ratio is inverted,
  ``baseline / value``, so beating the baseline always lowers the score. An entry missing a
  chosen measure, or a rule whose baseline misses one, is not ranked (the reason says which).
  The budgets of ``constrained`` apply to ``composite`` too (NTIRE keeps PSNR above a threshold).

Latency counts only when it was measured on the task's device class: an entry timed on another
class is not ranked by a rule that uses latency (a budget or a latency weight), and is marked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from evaluation.formats import metric_label
from evaluation.metrics import Direction

PRIMARY = "primary"
CONSTRAINED = "constrained"
COMPOSITE = "composite"
MEASURE = "measure"
KINDS = (PRIMARY, CONSTRAINED, MEASURE, COMPOSITE)
PERCENTILES = ("p50", "p90", "p95", "p99", "mean")
# Measures a composite may weigh; all but the score are lower-is-better.
MEASURES = {
    "score": "primary metric",
    "latency": "latency",
    "parameters": "parameters",
    "flops": "FLOPs",
    "peak_memory": "peak memory",
    "energy": "energy per sample",
}
# Measures a ``measure`` rule may rank on, lowest first: all but the score.
RANKED_MEASURES = tuple(m for m in MEASURES if m != "score")


@dataclass(frozen=True)
class Measures:
    """What a rule may look at for one submission on one board."""

    score: float | None
    latencies_ms: Mapping[str, float | None] = field(default_factory=dict)  # by percentile
    parameters: int | None = None
    flops: int | None = None
    peak_memory_bytes: int | None = None
    device_class: str | None = None  # where it was timed; None: not recorded (older entries)
    flops_incomplete: str = ""  # why the FLOPs leave nodes out (evaluation.costs); "" complete
    energy_per_sample_j: float | None = None  # the GPU's, where its energy counter exists

    def value(self, measure: str, percentile: str) -> float | None:
        """The measure, or None where it is missing; FLOPs that are a part count as missing."""
        if measure == "latency":
            return self.latencies_ms.get(percentile)
        if measure == "peak_memory":
            return _float(self.peak_memory_bytes)
        if measure == "energy":
            return self.energy_per_sample_j
        if measure == "flops" and self.flops_incomplete:
            return None
        return _float(getattr(self, measure))


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class Rule:
    kind: str = PRIMARY
    higher_is_better: bool = True
    metric: str = "score"  # the metric's name, for reasons
    device_class: str = ""  # the task's: latency measured elsewhere is not ranked on
    percentile: str = "p50"
    latency_budget_ms: float | None = None
    metric_threshold: float | None = None  # at least this good (at most, if lower is better)
    max_parameters: int | None = None
    max_flops: int | None = None
    max_peak_memory_bytes: int | None = None
    max_energy_per_sample_j: float | None = None
    weights: Mapping[str, float] = field(default_factory=dict)
    baseline: Measures | None = None
    measure: str = ""  # a ``measure`` rule's: one of RANKED_MEASURES

    @property
    def measure_label(self) -> str:
        """What a ``measure`` rule ranks on, as the page and the CSV say it."""
        if self.measure == "latency":
            return f"{self.percentile} latency"
        return MEASURES.get(self.measure, self.measure)

    @property
    def direction(self) -> Direction:
        return Direction(self.higher_is_better)

    @property
    def uses_latency(self) -> bool:
        """The rule looks at what the timing phase measured (latency, energy), which counts only
        on the task's device class."""
        if self.kind == PRIMARY:
            return False
        ranks_timed = self.kind == MEASURE and self.measure in ("latency", "energy")
        return (
            ranks_timed
            or self.latency_budget_ms is not None
            or self.max_energy_per_sample_j is not None
            or bool(self.weights.get("latency"))
            or bool(self.weights.get("energy"))
        )


@dataclass(frozen=True)
class Verdict:
    ranked: bool
    value: float | None  # what the board ranks on: the score, or the composite
    rank_key: float  # ascending is best first; unranked entries are listed by their score
    reason: str = ""  # why not ranked


def rule_errors(rule: Rule) -> list[str]:
    """What makes a rule unusable, worded for the operator; [] when it is fine."""
    errors = []
    if rule.kind not in KINDS:
        errors.append(f"Unknown rule {rule.kind!r}; choose one of {', '.join(KINDS)}.")
    if rule.percentile not in PERCENTILES:
        errors.append(f"Unknown percentile {rule.percentile!r}; one of {', '.join(PERCENTILES)}.")
    budgets = [
        rule.latency_budget_ms,
        rule.metric_threshold,
        rule.max_parameters,
        rule.max_flops,
        rule.max_peak_memory_bytes,
        rule.max_energy_per_sample_j,
    ]
    if rule.kind == PRIMARY and any(b is not None for b in budgets):
        errors.append("Budgets apply to the constrained and composite rules; clear them first.")
    if rule.kind == CONSTRAINED and all(b is None for b in budgets):
        errors.append("A constrained rule needs at least one budget or a minimum metric.")
    unknown = sorted(set(rule.weights) - set(MEASURES))
    if unknown:
        errors.append(f"Unknown measures {', '.join(unknown)}; use {', '.join(MEASURES)}.")
    if any(not isinstance(w, int | float) or w < 0 for w in rule.weights.values()):
        errors.append("Weights are numbers ≥ 0.")
    if rule.kind == COMPOSITE and not any(rule.weights.values()):
        errors.append('A composite needs weights, e.g. {"latency": 0.7, "flops": 0.15, ...}.')
    if rule.kind != COMPOSITE and rule.weights:
        errors.append("Weights apply to the composite rule only; clear them first.")
    if rule.kind == MEASURE and rule.measure not in RANKED_MEASURES:
        errors.append(f"Choose the measure to rank on: one of {', '.join(RANKED_MEASURES)}.")
    if rule.kind != MEASURE and rule.measure:
        errors.append("The ranked measure applies to the one-measure rule only; clear it first.")
    return errors


def timed_elsewhere(rule: Rule, measures: Measures) -> bool:
    """Timed on a device class other than the task's (marked on the board)."""
    return bool(
        rule.device_class and measures.device_class and measures.device_class != rule.device_class
    )


def _number(value: float) -> str:
    return f"{value:,.6g}"


def _budget_reasons(rule: Rule, m: Measures) -> list[str]:
    reasons = []
    if rule.latency_budget_ms is not None:
        latency = m.latencies_ms.get(rule.percentile)
        if latency is None:
            reasons.append(f"no {rule.percentile} latency measured")
        elif latency > rule.latency_budget_ms:
            reasons.append(
                f"{rule.percentile} latency {_number(latency)} ms is over the "
                f"{_number(rule.latency_budget_ms)} ms budget"
            )
    threshold = rule.metric_threshold
    if threshold is not None and m.score is not None and rule.direction.beats(threshold, m.score):
        side = "below the minimum" if rule.higher_is_better else "above the maximum"
        reasons.append(
            f"{metric_label(rule.metric)} {_number(m.score)} is {side} {_number(threshold)}"
        )
    for name, value, budget in (
        ("parameters", m.parameters, rule.max_parameters),
        ("FLOPs", m.flops, rule.max_flops),
        ("peak memory (bytes)", m.peak_memory_bytes, rule.max_peak_memory_bytes),
    ):
        if budget is None:
            continue
        if name == "FLOPs" and m.flops_incomplete:
            reasons.append(f"FLOPs not counted in full: {m.flops_incomplete}")
        elif value is None:
            reasons.append(f"{name} not measured")
        elif value > budget:
            reasons.append(f"{name} {value:,} over the budget of {budget:,}")
    energy, energy_budget = m.energy_per_sample_j, rule.max_energy_per_sample_j
    if energy_budget is not None:
        if energy is None:
            reasons.append("energy per sample not measured")
        elif energy > energy_budget:
            reasons.append(
                f"energy per sample {_number(energy)} J is over the {_number(energy_budget)} J "
                "budget"
            )
    return reasons


def _term(rule: Rule, measure: str, weight: float, m: Measures) -> tuple[float | None, str]:
    """One weighted ``exp(2 · ratio)`` term, or None and the reason it cannot be computed."""
    label = MEASURES[measure] if measure != "score" else metric_label(rule.metric)
    value = m.value(measure, rule.percentile)
    base = rule.baseline.value(measure, rule.percentile) if rule.baseline else None
    if measure == "flops" and m.flops_incomplete:
        return None, f"FLOPs not counted in full: {m.flops_incomplete}"
    if value is None:
        return None, f"no {label} measured"
    if base is None or base <= 0:
        return None, f"the baseline has no usable {label}"
    higher_better = measure == "score" and rule.higher_is_better
    if higher_better and value <= 0:
        return None, f"{label} {_number(value)} cannot be compared to the baseline"
    ratio = base / value if higher_better else value / base
    return weight * math.exp(min(2.0 * ratio, 700.0)), ""  # past e^700 a float overflows


def composite(rule: Rule, m: Measures) -> tuple[float | None, str]:
    """The composite score (lower is better), or None and why it cannot be computed."""
    if rule.baseline is None:
        return None, "no baseline submission is chosen for the composite score"
    total = 0.0
    for measure, weight in sorted(rule.weights.items()):
        if not weight:
            continue
        term, reason = _term(rule, measure, weight, m)
        if term is None:
            return None, reason
        total += term
    return total, ""


def _measured(rule: Rule, m: Measures) -> tuple[float | None, str]:
    """A ``measure`` rule's value, or None and why it is missing."""
    if rule.measure == "flops" and m.flops_incomplete:
        return None, f"FLOPs not counted in full: {m.flops_incomplete}"
    value = m.value(rule.measure, rule.percentile)
    return (value, "") if value is not None else (None, f"no {rule.measure_label} measured")


def judge(rule: Rule, m: Measures) -> Verdict:
    """Where one submission stands under the rule. ``m.score`` is never None on a board."""
    score = m.score if m.score is not None else math.nan
    by_score = rule.direction.rank_key(score)
    reasons = [] if rule.kind == PRIMARY else _budget_reasons(rule, m)
    if rule.uses_latency and timed_elsewhere(rule, m):
        reasons.insert(0, f"timed on {m.device_class}, not the task's {rule.device_class}")
    value: float | None = score
    if rule.kind in (COMPOSITE, MEASURE):
        value, why = composite(rule, m) if rule.kind == COMPOSITE else _measured(rule, m)
        if value is None:
            reasons.append(why)
    if reasons:
        return Verdict(False, value, by_score, "; ".join(reasons))
    rank_key = value if rule.kind in (COMPOSITE, MEASURE) and value is not None else by_score
    return Verdict(True, value, rank_key)


def pareto_front(points: Sequence[tuple[float, float]], *, direction: Direction) -> list[int]:
    """Indices of the (latency, score) points no other point beats on both (faster or as fast,
    and as good or better, one strictly), fastest first."""
    order = sorted(
        range(len(points)), key=lambda i: (points[i][0], direction.rank_key(points[i][1]))
    )
    front: list[int] = []
    best = math.inf
    for i in order:
        key = direction.rank_key(points[i][1])
        if key < best:
            front.append(i)
            best = key
    return front


def describe(rule: Rule) -> str:
    """The rule in one sentence, for the page, the CSV header and the API."""
    direction = rule.direction.word
    if rule.kind == PRIMARY:
        return f"Ranked by {metric_label(rule.metric)} ({direction} is better)."
    budgets = _budget_sentence(rule)
    if rule.kind == CONSTRAINED:
        metric = metric_label(rule.metric)
        return f"Ranked by {metric} ({direction} is better) among entries with {budgets}."
    if rule.kind == MEASURE:
        among = f" among entries with {budgets}" if budgets != "no budget" else ""
        return f"Ranked by {rule.measure_label} (lower is better){among}."
    terms = " + ".join(
        f"{w:g}·exp(2·{MEASURES[k] if k != 'score' else metric_label(rule.metric)} ratio)"
        for k, w in sorted(rule.weights.items())
        if w
    )
    within = f", among entries with {budgets}" if budgets != "no budget" else ""
    return (
        f"Ranked by the composite score {terms}, each ratio relative to the baseline "
        f"(inverted where higher is better); lower is better{within}."
    )


def _budget_sentence(rule: Rule) -> str:
    parts = []
    if rule.latency_budget_ms is not None:
        parts.append(f"{rule.percentile} latency ≤ {_number(rule.latency_budget_ms)} ms")
    if rule.metric_threshold is not None:
        sign = "≥" if rule.higher_is_better else "≤"
        parts.append(f"{metric_label(rule.metric)} {sign} {_number(rule.metric_threshold)}")
    for name, budget in (
        ("parameters", rule.max_parameters),
        ("FLOPs", rule.max_flops),
        ("peak memory bytes", rule.max_peak_memory_bytes),
    ):
        if budget is not None:
            parts.append(f"{name} ≤ {budget:,}")
    if rule.max_energy_per_sample_j is not None:
        parts.append(f"energy per sample ≤ {_number(rule.max_energy_per_sample_j)} J")
    return ", ".join(parts) or "no budget"
