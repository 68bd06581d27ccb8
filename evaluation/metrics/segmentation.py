"""Segmentation (dense classification): mean IoU and pixel accuracy from one confusion matrix.

Predictions are per-pixel class scores (N, C, H, W) (the predicted class is the argmax, ties to
the lower index as ``np.argmax``); targets are integer labels (N, H, W) in 0..C-1, or the task's
ignore label (255 by default, as VOC and Cityscapes use), whose pixels are not scored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation.metrics.base import Option, as_numeric, shape_error

SEGMENTATION_OPTIONS = {
    "ignore_index": Option(
        255, "a target label whose pixels are not scored (-1: every pixel is scored)", minimum=-1
    ),
    "miou_all_declared": Option(
        False,
        "mean IoU over every declared class (a class in neither the targets nor the "
        "predictions, 0/0, is left out) instead of the classes present in the targets",
    ),
}


def _segmentation_inputs(
    predictions: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    scores = as_numeric("predictions", predictions)
    labels = as_numeric("targets", targets)
    if scores.ndim < 3 or labels.shape != (scores.shape[0], *scores.shape[2:]):
        raise shape_error(
            scores, labels, "segmentation expects predictions (N, C, H, W) and targets (N, H, W)"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"targets must be integer class ids, got dtype {labels.dtype}")
    if np.isnan(scores).any():
        raise ValueError("predictions contain NaN scores")
    return scores, labels


def confusion_matrix(
    predicted: np.ndarray, labels: np.ndarray, n_classes: int, ignore_index: int
) -> np.ndarray:
    """(C, C) pixel counts, row: the target class, column: the predicted one."""
    scored = labels != ignore_index
    truth = labels[scored].astype(np.int64)
    if truth.size and (truth.min() < 0 or truth.max() >= n_classes):
        raise ValueError(
            f"targets must be class ids in [0, {n_classes}) or the ignore label {ignore_index}, "
            f"got values from {truth.min()} to {truth.max()}"
        )
    cells = truth * n_classes + predicted[scored]
    counts: np.ndarray = np.bincount(cells, minlength=n_classes * n_classes)
    return counts.reshape(n_classes, n_classes)


def segmentation_metrics(
    predictions: np.ndarray,
    targets: np.ndarray,
    *,
    ignore_index: int = 255,
    miou_all_declared: bool = False,
) -> dict[str, float]:
    """Mean IoU (TP / (TP + FP + FN) per class, then the unweighted mean) and pixel accuracy
    over the scored pixels of the whole set, as mmsegmentation and torchmetrics accumulate them
    (one confusion matrix over every image, not a mean of per-image scores)."""
    scores, labels = _segmentation_inputs(predictions, targets)
    n_classes = scores.shape[1]
    matrix = confusion_matrix(np.argmax(scores, axis=1), labels, n_classes, ignore_index)
    scored = matrix.sum()
    if scored == 0:
        raise ValueError(f"targets have no scored pixel (every one is {ignore_index})")
    hits = np.diag(matrix)
    in_targets = matrix.sum(axis=1)
    union = in_targets + matrix.sum(axis=0) - hits
    counted = union > 0 if miou_all_declared else in_targets > 0
    return {
        "miou": float(np.mean(hits[counted] / union[counted])),
        "pixel_accuracy": float(hits.sum() / scored),
    }


def miou(predictions: np.ndarray, targets: np.ndarray, **options: Any) -> float:
    return segmentation_metrics(predictions, targets, **options)["miou"]


def pixel_accuracy(predictions: np.ndarray, targets: np.ndarray, **options: Any) -> float:
    return segmentation_metrics(predictions, targets, **options)["pixel_accuracy"]
