"""The metrics a task can be ranked by, as pure numpy functions (no Django).

Every metric is a ``Metric`` whose ``fn(predictions, targets)`` returns a python float. Metrics come
in families (classification, regression, depth); an evaluation reports the whole family of its
task's primary metric through ``compute_family``.

Values are computed in float64 whatever the input dtype, so that sums over millions of pixels do not
drift. Bad input raises ``ValueError`` with a message a submitter can act on; non-finite predictions
are refused rather than scored, because a NaN score cannot be ranked and is not valid JSON.
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
class Metric:
    key: str
    label: str
    higher_is_better: bool
    family: str
    fn: MetricFn


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
    """Unweighted mean F1 over the classes seen in targets or predictions.

    Matches sklearn's ``f1_score(average="macro")``: a class that is neither a target nor predicted
    is left out rather than counted as F1 = 0.
    """
    scores, labels = _classification_inputs(predictions, targets)
    predicted = np.argmax(scores, axis=1)
    n_classes = scores.shape[1]
    true_positives = np.bincount(labels[predicted == labels], minlength=n_classes)
    # 2TP + FP + FN is (times predicted) + (times a target), which is > 0 exactly for seen classes.
    denominator = np.bincount(predicted, minlength=n_classes) + np.bincount(
        labels, minlength=n_classes
    )
    seen = denominator > 0
    return float(np.mean(2.0 * true_positives[seen] / denominator[seen]))


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


def _image_errors(depths: np.ndarray, truth: np.ndarray) -> np.ndarray | None:
    """One flattened image's seven metrics in DEPTH_KEYS order; None if it has no valid pixel."""
    valid = np.isfinite(truth) & (truth > 0)
    if not valid.any():
        return None
    t = truth[valid].astype(np.float64)
    p = depths[valid].astype(np.float64)
    if not np.isfinite(p).all():
        raise ValueError("predictions contain NaN or infinite values at valid target pixels")
    p = np.maximum(p, MIN_PREDICTED_DEPTH)
    squared = np.square(p - t)
    ratio = np.maximum(p / t, t / p)
    return np.array(
        [
            np.mean(np.abs(p - t) / t),
            np.mean(squared / t),
            np.sqrt(np.mean(squared)),
            np.sqrt(np.mean(np.square(np.log(p) - np.log(t)))),
            np.mean(ratio < 1.25),
            np.mean(ratio < 1.25**2),
            np.mean(ratio < 1.25**3),
        ]
    )


def depth_metrics(predictions: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """All depth metrics: per image over its valid pixels (target finite and > 0), then averaged
    over the images that have any, as the KITTI / Monodepth2 evaluation does.

    One image at a time keeps float64 temporaries to one image's size on large validation sets.
    """
    depths, truth = _depth_inputs(predictions, targets)
    per_image = [_image_errors(depths[i], truth[i]) for i in range(len(truth))]
    scored = [errors for errors in per_image if errors is not None]
    if not scored:
        raise ValueError("targets have no valid depth pixels (finite and > 0) in any sample")
    means = np.mean(np.stack(scored), axis=0)
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
    if family == "depth":
        # One pass over the images yields all seven; calling each fn would repeat it seven times.
        return depth_metrics(predictions, targets)
    return {name: METRICS[name].fn(predictions, targets) for name in FAMILIES[family]}


def is_better(key: str, a: float, b: float) -> bool:
    """Whether score ``a`` is strictly better than ``b`` for metric ``key``."""
    return a > b if get_metric(key).higher_is_better else a < b
