"""The ranking rule as pure code (submissions/boards/ranking.py): orders, budgets, the composite
score
against hand-computed values, what happens when a measure is missing, the Pareto front."""

from __future__ import annotations

import math

import pytest

from evaluation.metrics import Direction
from submissions.boards import ranking
from submissions.boards.ranking import Measures, Rule, judge, pareto_front, rule_errors

FAST_WEAK = Measures(0.70, {"p50": 1.0, "p95": 1.5}, parameters=1_000, flops=10_000)
SLOW_STRONG = Measures(0.95, {"p50": 40.0, "p95": 50.0}, parameters=1_000_000, flops=9_000_000)
BASELINE = Measures(0.80, {"p50": 10.0, "p95": 12.0}, parameters=10_000, flops=100_000)
NTIRE = {"latency": 0.7, "flops": 0.15, "parameters": 0.15}


def order(rule: Rule, **entries: Measures) -> list[tuple[str, bool]]:
    verdicts = {name: judge(rule, m) for name, m in entries.items()}
    ranked = sorted(verdicts, key=lambda n: (not verdicts[n].ranked, verdicts[n].rank_key))
    return [(name, verdicts[name].ranked) for name in ranked]


def test_primary_metric_puts_the_strong_model_first_whatever_its_speed() -> None:
    rule = Rule(higher_is_better=True, metric="accuracy")
    assert order(rule, fast=FAST_WEAK, slow=SLOW_STRONG) == [("slow", True), ("fast", True)]
    lower = Rule(higher_is_better=False, metric="mse")
    assert order(lower, fast=FAST_WEAK, slow=SLOW_STRONG) == [("fast", True), ("slow", True)]


def test_a_latency_budget_ranks_the_fast_model_and_lists_the_slow_one_with_its_reason() -> None:
    rule = Rule(kind=ranking.CONSTRAINED, percentile="p95", latency_budget_ms=10.0)
    assert order(rule, fast=FAST_WEAK, slow=SLOW_STRONG) == [("fast", True), ("slow", False)]
    assert judge(rule, SLOW_STRONG).reason == "p95 latency 50 ms is over the 10 ms budget"


def test_every_budget_that_is_broken_is_named() -> None:
    rule = Rule(
        kind=ranking.CONSTRAINED,
        metric="accuracy",
        metric_threshold=0.9,
        max_parameters=5_000,
        max_flops=1_000_000,
        max_peak_memory_bytes=1024,
    )
    fast = judge(rule, FAST_WEAK)
    assert not fast.ranked
    assert "Top-1 accuracy 0.7 is below the minimum 0.9" in fast.reason
    assert "peak memory (bytes) not measured" in fast.reason  # missing: not ranked, said why
    slow = judge(rule, SLOW_STRONG)
    assert "parameters 1,000,000 over the budget of 5,000" in slow.reason
    assert "FLOPs 9,000,000 over the budget of 1,000,000" in slow.reason
    assert "accuracy" not in slow.reason
    mse = Rule(kind=ranking.CONSTRAINED, higher_is_better=False, metric="mse", metric_threshold=0.8)
    assert "Mean squared error 0.95 is above the maximum 0.8" in judge(mse, SLOW_STRONG).reason


def test_the_composite_equals_the_hand_computed_ntire_score_and_lower_ranks_first() -> None:
    rule = Rule(kind=ranking.COMPOSITE, weights=NTIRE, baseline=BASELINE)
    fast = judge(rule, FAST_WEAK)
    # latency 1/10, FLOPs 10,000/100,000, parameters 1,000/10,000 of the baseline's
    assert fast.value == pytest.approx(0.7 * math.exp(0.2) + 0.15 * math.exp(0.2) * 2)
    slow = judge(rule, SLOW_STRONG)
    expected = 0.7 * math.exp(2 * 4.0) + 0.15 * math.exp(2 * 90.0) + 0.15 * math.exp(2 * 100.0)
    assert slow.value == pytest.approx(expected)
    assert judge(rule, BASELINE).value == pytest.approx(math.exp(2) * 1.0)  # e² · Σ weights
    assert order(rule, fast=FAST_WEAK, slow=SLOW_STRONG) == [("fast", True), ("slow", True)]


def test_a_higher_is_better_score_in_the_composite_is_inverted_so_better_lowers_it() -> None:
    rule = Rule(kind=ranking.COMPOSITE, weights={"score": 1.0}, baseline=BASELINE)
    assert judge(rule, SLOW_STRONG).value == pytest.approx(math.exp(2 * 0.80 / 0.95))
    assert order(rule, fast=FAST_WEAK, slow=SLOW_STRONG) == [("slow", True), ("fast", True)]
    lower = Rule(
        kind=ranking.COMPOSITE, higher_is_better=False, weights={"score": 1.0}, baseline=BASELINE
    )
    assert judge(lower, SLOW_STRONG).value == pytest.approx(math.exp(2 * 0.95 / 0.80))


def test_a_missing_measure_leaves_the_entry_unranked_and_says_which() -> None:
    rule = Rule(kind=ranking.COMPOSITE, weights=NTIRE, baseline=BASELINE, percentile="p95")
    untimed = Measures(0.9, {}, parameters=1, flops=1)
    verdict = judge(rule, untimed)
    assert not verdict.ranked and verdict.value is None
    assert verdict.reason == "no latency measured"
    no_flops = Rule(kind=ranking.COMPOSITE, weights=NTIRE, baseline=Measures(0.8, {"p50": 1.0}))
    assert judge(no_flops, FAST_WEAK).reason == "the baseline has no usable FLOPs"
    orphan = Rule(kind=ranking.COMPOSITE, weights=NTIRE, baseline=None)
    assert "no baseline submission" in judge(orphan, FAST_WEAK).reason
    # unranked entries still list best metric first below the ranked ones
    assert judge(orphan, SLOW_STRONG).rank_key < judge(orphan, FAST_WEAK).rank_key


def test_latency_from_another_device_class_is_not_ranked_on_but_the_metric_still_is() -> None:
    on_gpu = Measures(0.99, {"p50": 0.5, "p95": 0.6}, device_class="gpu")
    budget = Rule(kind=ranking.CONSTRAINED, device_class="cpu", latency_budget_ms=10.0)
    assert judge(budget, on_gpu).reason == "timed on gpu, not the task's cpu"
    primary = Rule(device_class="cpu")
    assert judge(primary, on_gpu).ranked and ranking.timed_elsewhere(primary, on_gpu)
    unrecorded = Measures(0.9, {"p50": 0.5}, device_class=None)  # timed before conditions
    assert judge(budget, unrecorded).ranked


def test_the_pareto_front_keeps_only_entries_nothing_beats_on_both_speed_and_score() -> None:
    points = [(1.0, 0.70), (40.0, 0.95), (10.0, 0.80), (20.0, 0.75), (10.0, 0.60)]
    assert pareto_front(points, direction=Direction(True)) == [0, 2, 1]
    assert pareto_front(points, direction=Direction(False)) == [0, 4]  # lower is better: 0.60


def test_unusable_rules_are_refused_with_what_to_change() -> None:
    assert rule_errors(Rule(kind=ranking.COMPOSITE, weights=NTIRE)) == []
    assert "needs at least one budget" in rule_errors(Rule(kind=ranking.CONSTRAINED))[0]
    assert "composite needs weights" in rule_errors(Rule(kind=ranking.COMPOSITE))[0]
    assert (
        "Unknown measures speed"
        in rule_errors(Rule(kind=ranking.COMPOSITE, weights={"speed": 1.0}))[0]
    )
    assert "Budgets apply" in rule_errors(Rule(latency_budget_ms=1.0))[0]
    assert "Unknown percentile 'p42'" in rule_errors(Rule(percentile="p42"))[0]


def test_energy_per_sample_is_a_budget_and_a_composite_term_like_latency() -> None:
    frugal = Measures(0.90, {"p50": 5.0}, energy_per_sample_j=0.010)
    hungry = Measures(0.95, {"p50": 4.0}, energy_per_sample_j=0.040)
    unmeasured = Measures(0.99, {"p50": 3.0})  # a GPU without the counter, or a CPU
    budget = Rule(kind=ranking.CONSTRAINED, max_energy_per_sample_j=0.02)
    assert order(budget, frugal=frugal, hungry=hungry, none=unmeasured) == [
        ("frugal", True),
        ("none", False),
        ("hungry", False),
    ]
    assert judge(budget, hungry).reason == "energy per sample 0.04 J is over the 0.02 J budget"
    assert judge(budget, unmeasured).reason == "energy per sample not measured"
    assert "energy per sample ≤ 0.02 J" in ranking.describe(budget)

    energy = Rule(kind=ranking.COMPOSITE, weights={"energy": 1.0}, baseline=frugal)
    assert judge(energy, hungry).value == pytest.approx(math.exp(2 * 4.0))
    assert judge(energy, frugal).rank_key < judge(energy, hungry).rank_key
    elsewhere = Measures(0.9, {"p50": 5.0}, device_class="a40", energy_per_sample_j=0.01)
    on_h200 = Rule(kind=ranking.CONSTRAINED, device_class="h200", max_energy_per_sample_j=1.0)
    assert not judge(on_h200, elsewhere).ranked  # measured on another device class


def test_an_efficiency_track_can_rank_on_energy_per_sample_alone() -> None:
    frugal = Measures(0.90, {"p50": 5.0}, energy_per_sample_j=0.010)
    hungry = Measures(0.95, {"p50": 4.0}, energy_per_sample_j=0.040)
    unmeasured = Measures(0.99, {"p50": 3.0})
    rule = Rule(kind=ranking.MEASURE, measure="energy")
    assert order(rule, hungry=hungry, none=unmeasured, frugal=frugal) == [
        ("frugal", True),
        ("hungry", True),
        ("none", False),
    ]
    assert rule.uses_latency  # measured by the timing phase: on the task's device class only
