"""Regression: mean squared, mean absolute and root mean squared error, in float64."""

from __future__ import annotations

import numpy as np

from evaluation.metrics.base import as_numeric, shape_error


def _regression_errors(predictions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    values = as_numeric("predictions", predictions)
    expected = as_numeric("targets", targets)
    if values.shape != expected.shape:
        raise shape_error(values, expected, "regression expects both to have the same shape")
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
