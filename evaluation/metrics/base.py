"""What every metric is: a ``Metric`` (key, short label, direction, family, function and the
options a task may set), the ``Direction`` that decides which of two scores is better, and the
input checks the families share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# ``fn(predictions, targets, **options)`` returns a python float; ``options`` are the metric's
# declared ``Option``s, each given (the task's value or its default).
MetricFn = Callable[..., float]
OptionValue = bool | int | float


@dataclass(frozen=True)
class Direction:
    """Which of two scores is better: the one rule that boards, charts, budgets, sorts and
    their wording all follow. A metric's direction comes from the registry
    (``get_metric(key).direction``); a tie is never better."""

    higher_is_better: bool

    def beats(self, score: float, other: float) -> bool:
        """Whether ``score`` is strictly better than ``other``."""
        return score > other if self.higher_is_better else score < other

    def rank_key(self, score: float) -> float:
        """Sorts scores best first, ascending: ``beats(a, b)`` exactly when
        ``rank_key(a) < rank_key(b)``."""
        return -score if self.higher_is_better else score

    @property
    def best_first_descending(self) -> bool:
        """Whether best first is descending order (an SQL ``ORDER BY``, a running ``MAX``)."""
        return self.higher_is_better

    @property
    def word(self) -> str:
        """As in "higher is better"."""
        return "higher" if self.higher_is_better else "lower"

    @property
    def arrow(self) -> str:
        """The way better scores go, for a column's header."""
        return "↑" if self.higher_is_better else "↓"


@dataclass(frozen=True)
class Option:
    """A setting a task may give its metric (the task's ``metric_options``): its default, which
    also fixes its type (bool, int or float), what it means, and the least value allowed."""

    default: OptionValue
    help: str
    minimum: float | None = None


@dataclass(frozen=True)
class Metric:
    """One metric. ``label`` is the short name every page shows (the registry owns it);
    metrics of one ``family`` are computed and reported together."""

    key: str
    label: str
    higher_is_better: bool
    family: str
    fn: MetricFn
    options: Mapping[str, Option] = field(default_factory=dict)

    @property
    def direction(self) -> Direction:
        return Direction(self.higher_is_better)

    @property
    def choice_label(self) -> str:
        """How the admin's metric choice lists it: "PSNR (psnr, higher is better)"."""
        return f"{self.label} ({self.key}, {self.direction.word} is better)"


# --- shared validation -------------------------------------------------------------------------


def shape_error(predictions: np.ndarray, targets: np.ndarray, expected: str = "") -> ValueError:
    message = f"predictions have shape {predictions.shape} but targets have shape {targets.shape}"
    return ValueError(f"{message}; {expected}" if expected else message)


def as_numeric(name: str, values: np.ndarray) -> np.ndarray:
    array = np.asarray(values)
    if not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    if array.size == 0:
        raise ValueError(f"{name} are empty (shape {array.shape}); there is nothing to score")
    return array


def _option_value(key: str, name: str, option: Option, value: Any) -> OptionValue:
    kind = type(option.default)
    # bool is an int to Python; a task's JSON says true/false or a number, never both.
    fits = (
        isinstance(value, bool)
        if kind is bool
        else (
            not isinstance(value, bool) and isinstance(value, int if kind is int else (int, float))
        )
    )
    if not fits:
        wanted = {bool: "true or false", int: "a whole number", float: "a number"}[kind]
        raise ValueError(f"{key}'s option {name!r} must be {wanted}, not {value!r}")
    if option.minimum is not None and value < option.minimum:
        raise ValueError(f"{key}'s option {name!r} must be at least {option.minimum:g}")
    return value  # type: ignore[no-any-return]  # checked above


def options_text(metric: Metric, given: Mapping[str, Any] | None) -> str:
    """Every option as it applies, for a participant: "crop_border 2 · y_channel true"; empty
    for a metric without options."""
    resolved = options_resolve(metric, given)
    shown = {True: "true", False: "false"}
    return " · ".join(
        f"{name} {shown[value] if isinstance(value, bool) else f'{value:g}'}"
        for name, value in resolved.items()
    )


def options_resolve(metric: Metric, given: Mapping[str, Any] | None) -> dict[str, OptionValue]:
    """Every option of ``metric``: the task's value where it gives one, else the default;
    ValueError naming what is wrong with a value or a key the metric does not take."""
    given = given or {}
    unknown = sorted(set(given) - set(metric.options))
    if unknown:
        takes = ", ".join(metric.options) or "none"
        raise ValueError(f"{metric.key} has no option {unknown[0]!r}; its options: {takes}")
    return {
        name: _option_value(metric.key, name, option, given[name])
        if name in given
        else option.default
        for name, option in metric.options.items()
    }
