"""The metrics a task can be ranked by, as pure numpy functions (no Django).

Every metric is a ``Metric`` whose ``fn(predictions, targets, **options)`` returns a python float.
Metrics come in families (classification, regression, depth, segmentation, restoration, and one
per installed package's metric); an evaluation reports the whole family of its task's primary
metric through ``compute_family``. The registry (``registry.py``) owns each metric's short label
and direction: every page, the API and the CLI read them from it.

Bad input raises ``ValueError`` with a message a submitter can act on; non-finite predictions are
refused rather than scored, because a NaN score cannot be ranked and is not valid JSON.
"""

from __future__ import annotations

from evaluation.metrics.base import (
    Direction,
    Metric,
    MetricFn,
    Option,
    options_resolve,
    options_text,
)
from evaluation.metrics.classification import (
    accuracy,
    classification_metrics,
    macro_f1,
    top5_accuracy,
)
from evaluation.metrics.depth import DEPTH_KEYS, MIN_PREDICTED_DEPTH, depth_metrics
from evaluation.metrics.registry import (
    BUILT_IN,
    ENTRY_POINT_GROUP,
    MetricPluginError,
    all_metrics,
    compute_family,
    get_metric,
    metric_choices,
    metric_families,
    registry_reload,
)
from evaluation.metrics.regression import mae, mse, rmse
from evaluation.metrics.restoration import restoration_metrics
from evaluation.metrics.segmentation import segmentation_metrics

__all__ = [
    "BUILT_IN",
    "DEPTH_KEYS",
    "ENTRY_POINT_GROUP",
    "MIN_PREDICTED_DEPTH",
    "Direction",
    "Metric",
    "MetricFn",
    "MetricPluginError",
    "Option",
    "accuracy",
    "all_metrics",
    "classification_metrics",
    "compute_family",
    "depth_metrics",
    "get_metric",
    "macro_f1",
    "mae",
    "metric_choices",
    "metric_families",
    "mse",
    "options_resolve",
    "options_text",
    "registry_reload",
    "restoration_metrics",
    "rmse",
    "segmentation_metrics",
    "top5_accuracy",
]
