"""The metrics a task can be ranked by, as pure numpy functions (no Django).

Every metric is a ``Metric`` whose ``fn(predictions, targets)`` returns a python float. Metrics come
in families (classification, regression, depth); an evaluation reports the whole family of its
task's primary metric through ``compute_family``.

Depth and classification work per element in float32 (regression in float64) and every sum is
accumulated pairwise or in float64, so that sums over millions of pixels do not drift. Bad input
raises ``ValueError`` with a message a submitter can act on; non-finite predictions are refused
rather than scored, because a NaN score cannot be ranked and is not valid JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MetricFn = Callable[[np.ndarray, np.ndarray], float]

# Depth predictions are clipped up to this before any metric: log and the ratios p/t, t/p need a
# positive prediction, and a network may emit zero or negative depth. Monodepth2's KITTI evaluation
# clips the same way (to its MIN_DEPTH) and, like it, we apply the clipped depth to every metric so
# the seven numbers all describe the same depth map.
MIN_PREDICTED_DEPTH = 1e-3

DEPTH_KEYS = ("abs_rel", "sq_rel", "depth_rmse", "rmse_log", "delta1", "delta2", "delta3")


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
class Metric:
    key: str
    label: str
    higher_is_better: bool
    family: str
    fn: MetricFn

    @property
    def direction(self) -> Direction:
        return Direction(self.higher_is_better)


# --- shared validation -------------------------------------------------------------------------


def _shape_error(predictions: np.ndarray, targets: np.ndarray, expected: str = "") -> ValueError:
    message = f"predictions have shape {predictions.shape} but targets have shape {targets.shape}"
    return ValueError(f"{message}; {expected}" if expected else message)


def _as_numeric(name: str, values: np.ndarray) -> np.ndarray:
    array = np.asarray(values)
    if not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    if array.size == 0:
        raise ValueError(f"{name} are empty (shape {array.shape}); there is nothing to score")
    return array


# --- classification ----------------------------------------------------------------------------


def _classification_inputs(
    predictions: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    scores = _as_numeric("predictions", predictions)
    labels = _as_numeric("targets", targets)
    if scores.ndim != 2 or labels.ndim != 1 or scores.shape[0] != labels.shape[0]:
        raise _shape_error(
            scores, labels, "classification expects predictions (N, C) and targets (N,)"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"targets must be integer class ids, got dtype {labels.dtype}")
    n_classes = scores.shape[1]
    if labels.min() < 0 or labels.max() >= n_classes:
        raise ValueError(
            f"targets must be class ids in [0, {n_classes}) for predictions with {n_classes} "
            f"classes, got values from {labels.min()} to {labels.max()}"
        )
    # NaN has no place in a ranking of scores; +/-inf logits do, so only NaN is refused.
    if np.isnan(scores).any():
        raise ValueError("predictions contain NaN scores")
    return scores, labels


def _target_rank(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each target's 0-based position when its row is sorted by descending score.

    Ties go to the lower class index, as ``np.argmax`` does, so rank 0 agrees with top-1 accuracy.
    """
    target_scores = scores[np.arange(len(labels)), labels][:, None]
    higher = (scores > target_scores).sum(axis=1)
    tied_before = ((scores == target_scores) & (np.arange(scores.shape[1]) < labels[:, None])).sum(
        axis=1
    )
    rank: np.ndarray = higher + tied_before
    return rank


def _macro_f1(scores: np.ndarray, labels: np.ndarray, hits: np.ndarray) -> float:
    """Unweighted mean F1 over the classes seen in targets or predictions.

    Matches sklearn's ``f1_score(average="macro")``: a class that is neither a target nor predicted
    is left out rather than counted as F1 = 0. ``hits``: the samples whose argmax is the target.
    """
    n_classes = scores.shape[1]
    true_positives = np.bincount(labels[hits], minlength=n_classes)
    # 2TP + FP + FN is (times predicted) + (times a target), which is > 0 exactly for seen classes.
    predicted = np.argmax(scores, axis=1)
    denominator = np.bincount(predicted, minlength=n_classes) + np.bincount(
        labels, minlength=n_classes
    )
    seen = denominator > 0
    return float(np.mean(2.0 * true_positives[seen] / denominator[seen]))


def classification_metrics(predictions: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """Top-1, top-5 and macro F1 from one validation and one ranking of the scores (in their own
    dtype: float32 logits are compared, never converted)."""
    scores, labels = _classification_inputs(predictions, targets)
    rank = _target_rank(scores, labels)
    hits = rank < 1  # rank 0 is the argmax, ties to the lower class index as np.argmax
    return {
        "accuracy": float(np.mean(hits)),
        "top5_accuracy": float(np.mean(rank < 5)),
        "macro_f1": _macro_f1(scores, labels, hits),
    }


def accuracy(predictions: np.ndarray, targets: np.ndarray) -> float:
    scores, labels = _classification_inputs(predictions, targets)
    return float(np.mean(_target_rank(scores, labels) < 1))


def top5_accuracy(predictions: np.ndarray, targets: np.ndarray) -> float:
    """Fraction of samples whose target is among the 5 highest scores.

    With fewer than 5 classes every class is in the top 5, so the value is 1.0.
    """
    scores, labels = _classification_inputs(predictions, targets)
    return float(np.mean(_target_rank(scores, labels) < 5))


def macro_f1(predictions: np.ndarray, targets: np.ndarray) -> float:
    scores, labels = _classification_inputs(predictions, targets)
    return _macro_f1(scores, labels, _target_rank(scores, labels) < 1)


# --- regression --------------------------------------------------------------------------------


def _regression_errors(predictions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    values = _as_numeric("predictions", predictions)
    expected = _as_numeric("targets", targets)
    if values.shape != expected.shape:
        raise _shape_error(values, expected, "regression expects both to have the same shape")
    if not np.isfinite(values).all():
        raise ValueError("predictions contain NaN or infinite values")
    if not np.isfinite(expected).all():
        raise ValueError("targets contain NaN or infinite values")
    return values.astype(np.float64) - expected.astype(np.float64)


def mse(predictions: np.ndarray, targets: np.ndarray) -> float:
    return float(np.mean(np.square(_regression_errors(predictions, targets))))


def mae(predictions: np.ndarray, targets: np.ndarray) -> float:
    return float(np.mean(np.abs(_regression_errors(predictions, targets))))


def rmse(predictions: np.ndarray, targets: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(_regression_errors(predictions, targets)))))


# --- depth -------------------------------------------------------------------------------------


def _depth_inputs(predictions: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    depths = _as_numeric("predictions", predictions)
    truth = _as_numeric("targets", targets)
    if depths.shape != truth.shape or depths.ndim < 2:
        raise _shape_error(depths, truth, "depth expects the same shape (N, H, W) or (N, ...)")
    return depths.reshape(len(depths), -1), truth.reshape(len(truth), -1)


# Images are scored in blocks of about this many pixels through scratch buffers allocated once:
# the buffers stay in the CPU's cache, and no block allocates or faults in fresh pages.
DEPTH_BLOCK_PIXELS = 1 << 18
_DELTA_THRESHOLDS = tuple(np.float32(1.25**k) for k in (1, 2, 3))
_ONE = np.float32(1)


def _row_counts(mask: np.ndarray) -> np.ndarray:
    """True values per row; for a few long rows one count per row is several times faster than
    numpy's count along an axis (which sums through a cast to integers)."""
    if len(mask) <= 64:
        return np.array([np.count_nonzero(row) for row in mask])
    return np.count_nonzero(mask, axis=1)


class _Scratch:
    """Reusable float32 and bool buffers for blocks of ``rows`` images of ``pixels`` each."""

    def __init__(self, rows: int, pixels: int) -> None:
        self.t, self.p, self.a, self.b = (np.empty((rows, pixels), np.float32) for _ in range(4))
        self.mask = np.empty((rows, pixels), bool)


def _depth_block_sums(depths: np.ndarray, truth: np.ndarray, scratch: _Scratch) -> np.ndarray:
    """Per image of the block: its valid-pixel count, then the sums behind the seven metrics.

    Elementwise work is float32; invalid pixels are set to p = t = 1, which adds 0 to every error
    sum and 1 to every delta count (taken off again). Every error is written through the ratio
    q = p/t, so that one division serves all seven. Sums are numpy's pairwise float32 sums along
    the image (error grows with log n, not n), then float64.
    """
    rows, pixels = truth.shape
    t, p, a, b, mask = (
        x[:rows] for x in (scratch.t, scratch.p, scratch.a, scratch.b, scratch.mask)
    )
    out = np.empty((rows, 8))
    np.greater(truth, 0, out=mask)  # False for NaN
    mask &= truth != np.inf
    invalid = pixels - _row_counts(mask)
    out[:, 0] = pixels - invalid
    np.maximum(depths, np.float32(MIN_PREDICTED_DEPTH), out=p, casting="unsafe")
    if invalid.any():
        np.logical_not(mask, out=mask)
        np.copyto(t, truth, casting="unsafe")
        np.copyto(t, _ONE, where=mask)
        np.copyto(p, _ONE, where=mask)
    elif truth.dtype == np.float32:
        t = truth  # read only below
    else:
        np.copyto(t, truth, casting="unsafe")
    if not np.isfinite(p).all():  # np.maximum kept NaN
        raise ValueError("predictions contain NaN or infinite values at valid target pixels")
    np.divide(p, t, out=a)  # q
    np.subtract(a, _ONE, out=b)  # q - 1
    np.multiply(t, b, out=p)  # t (q - 1) = p - t; t may be the caller's array
    scratch_t = scratch.t[:rows]
    np.multiply(p, b, out=scratch_t)  # (p - t)^2 / t
    out[:, 2] = scratch_t.sum(axis=1)
    np.multiply(p, p, out=p)  # (p - t)^2
    out[:, 3] = p.sum(axis=1)
    np.abs(b, out=b)  # |p - t| / t
    out[:, 1] = b.sum(axis=1)
    np.log(a, out=b)
    np.multiply(b, b, out=b)  # (log p - log t)^2
    out[:, 4] = b.sum(axis=1)
    np.reciprocal(a, out=b)
    np.maximum(a, b, out=a)  # max(p/t, t/p)
    for column, threshold in enumerate(_DELTA_THRESHOLDS, start=5):
        np.less(a, threshold, out=mask)
        out[:, column] = _row_counts(mask) - invalid
    return out


def depth_metrics(predictions: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """All depth metrics: per image over its valid pixels (target finite and > 0), then averaged
    over the images that have any, as the KITTI / Monodepth2 evaluation does.

    Computed in float32 a block of images at a time; agrees with a float64 per-pixel reference to
    about 1e-6 relative.
    """
    depths, truth = _depth_inputs(predictions, targets)
    per_block = max(1, min(len(truth), DEPTH_BLOCK_PIXELS // max(1, truth.shape[1])))
    scratch = _Scratch(per_block, truth.shape[1])
    sums = np.concatenate(
        [
            _depth_block_sums(depths[i : i + per_block], truth[i : i + per_block], scratch)
            for i in range(0, len(truth), per_block)
        ]
    )
    counts, sums = sums[:, 0], sums[:, 1:]
    scored = counts > 0
    if not scored.any():
        raise ValueError("targets have no valid depth pixels (finite and > 0) in any sample")
    per_image = sums[scored] / counts[scored, None]
    per_image[:, 2:4] = np.sqrt(per_image[:, 2:4])  # depth_rmse, rmse_log
    means = per_image.mean(axis=0)
    return {key: float(value) for key, value in zip(DEPTH_KEYS, means, strict=True)}


def _depth_metric(key: str) -> MetricFn:
    def fn(predictions: np.ndarray, targets: np.ndarray) -> float:
        return depth_metrics(predictions, targets)[key]

    fn.__name__ = key
    return fn


# --- registry ----------------------------------------------------------------------------------

_ALL = (
    Metric("accuracy", "Top-1 accuracy", True, "classification", accuracy),
    Metric("top5_accuracy", "Top-5 accuracy", True, "classification", top5_accuracy),
    Metric("macro_f1", "Macro F1", True, "classification", macro_f1),
    Metric("mse", "Mean squared error", False, "regression", mse),
    Metric("mae", "Mean absolute error", False, "regression", mae),
    Metric("rmse", "Root mean squared error", False, "regression", rmse),
    Metric("abs_rel", "Abs. relative error", False, "depth", _depth_metric("abs_rel")),
    Metric("sq_rel", "Sq. relative error", False, "depth", _depth_metric("sq_rel")),
    Metric("depth_rmse", "Depth RMSE", False, "depth", _depth_metric("depth_rmse")),
    Metric("rmse_log", "RMSE (log)", False, "depth", _depth_metric("rmse_log")),
    Metric("delta1", "δ < 1.25", True, "depth", _depth_metric("delta1")),
    Metric("delta2", "δ < 1.25²", True, "depth", _depth_metric("delta2")),
    Metric("delta3", "δ < 1.25³", True, "depth", _depth_metric("delta3")),
)

METRICS: dict[str, Metric] = {metric.key: metric for metric in _ALL}

FAMILIES: dict[str, tuple[str, ...]] = {
    family: tuple(metric.key for metric in _ALL if metric.family == family)
    for family in dict.fromkeys(metric.family for metric in _ALL)
}


def get_metric(key: str) -> Metric:
    try:
        return METRICS[key]
    except KeyError:
        raise KeyError(f"unknown metric {key!r}; valid keys are {', '.join(METRICS)}") from None


def metric_choices() -> list[tuple[str, str]]:
    return [(metric.key, metric.label) for metric in _ALL]


def compute_family(key: str, predictions: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """Every metric in the family of ``key``, in display order, as python floats."""
    family = get_metric(key).family
    # One validation and one pass per family; calling each fn would repeat them per metric.
    if family == "depth":
        return depth_metrics(predictions, targets)
    if family == "classification":
        return classification_metrics(predictions, targets)
    return {name: METRICS[name].fn(predictions, targets) for name in FAMILIES[family]}
