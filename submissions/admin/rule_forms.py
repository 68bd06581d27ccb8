"""The ranking rule's admin forms (the task's own rule, and each track's): a composite's weights as
one number box per measure, instead of a JSON object typed by hand."""

from __future__ import annotations

from typing import Any

from django import forms

from submissions.boards.ranking import MEASURES
from submissions.models import RankingRule, Track


def _weight_field(measure: str, name: str) -> forms.FloatField:
    return forms.FloatField(
        required=False,
        min_value=0,
        label=f"Weight of {name}",
        help_text="Composite rules only; empty or 0: not weighed.",
    )


# The rule's own fields, on the task's rule and on each track.
RULE_FIELDS = [
    "kind",
    "measure",
    "latency_percentile",
    "latency_budget_ms",
    "metric_threshold",
    "max_parameters",
    "max_flops",
    "max_peak_memory_bytes",
    "max_energy_per_sample_j",
    "baseline",
]


class RuleSettingsForm(forms.ModelForm):
    """A rule's fields, the weights as boxes; each concrete form names its model."""

    weight_score = _weight_field("score", MEASURES["score"])
    weight_latency = _weight_field("latency", MEASURES["latency"])
    weight_parameters = _weight_field("parameters", MEASURES["parameters"])
    weight_flops = _weight_field("flops", MEASURES["flops"])
    weight_peak_memory = _weight_field("peak_memory", MEASURES["peak_memory"])
    weight_energy = _weight_field("energy", MEASURES["energy"])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for measure in MEASURES:
            self.fields[f"weight_{measure}"].initial = (self.instance.weights or {}).get(measure)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        self.instance.weights = {
            measure: cleaned[f"weight_{measure}"]
            for measure in MEASURES
            if cleaned.get(f"weight_{measure}")
        }
        return cleaned


class RankingRuleForm(RuleSettingsForm):
    class Meta:
        model = RankingRule
        fields = RULE_FIELDS


class TrackForm(RuleSettingsForm):
    class Meta:
        model = Track
        fields = ["name", "slug", "description", "position", *RULE_FIELDS]
