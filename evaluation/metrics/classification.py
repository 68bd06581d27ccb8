"""Classification: top-1, top-5 and macro F1 from one ranking of the class scores."""

from __future__ import annotations

import numpy as np

from evaluation.metrics.base import as_numeric, shape_error


def _classification_inputs(
    predictions: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    scores = as_numeric("predictions", predictions)
    labels = as_numeric("targets", targets)
    if scores.ndim != 2 or labels.ndim != 1 or scores.shape[0] != labels.shape[0]:
        raise shape_error(
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
