"""The metrics a task may be ranked by: the built-in ones, then those a host's installed
packages register under the ``onnx_eval_portal.metrics`` entry point group (docs/operations.md,
"A metric of your own"), so a host adds a metric without editing the project.

Each entry point's name is the metric's key and its object an ``evaluation.metrics.Metric``.
Plugins are read once, on first use; a broken one stops whatever asked (the portal, a worker)
with a message naming it, rather than leaving its tasks unscorable later.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from evaluation.metrics.base import Metric, options_resolve
from evaluation.metrics.classification import (
    accuracy,
    classification_metrics,
    macro_f1,
    top5_accuracy,
)
from evaluation.metrics.depth import depth_metric, depth_metrics
from evaluation.metrics.regression import mae, mse, rmse
from evaluation.metrics.restoration import RESTORATION_OPTIONS, psnr, restoration_metrics, ssim
from evaluation.metrics.segmentation import (
    SEGMENTATION_OPTIONS,
    miou,
    pixel_accuracy,
    segmentation_metrics,
)

ENTRY_POINT_GROUP = "onnx_eval_portal.metrics"
_KEY = re.compile(r"[a-z][a-z0-9_]{0,31}")  # it is stored in Task.metric, 32 characters

BUILT_IN = (
    Metric("accuracy", "Top-1 accuracy", True, "classification", accuracy),
    Metric("top5_accuracy", "Top-5 accuracy", True, "classification", top5_accuracy),
    Metric("macro_f1", "Macro F1", True, "classification", macro_f1),
    Metric("mse", "Mean squared error", False, "regression", mse),
    Metric("mae", "Mean absolute error", False, "regression", mae),
    Metric("rmse", "Root mean squared error", False, "regression", rmse),
    Metric("abs_rel", "Abs. relative error", False, "depth", depth_metric("abs_rel")),
    Metric("sq_rel", "Sq. relative error", False, "depth", depth_metric("sq_rel")),
    Metric("depth_rmse", "Depth RMSE", False, "depth", depth_metric("depth_rmse")),
    Metric("rmse_log", "RMSE (log)", False, "depth", depth_metric("rmse_log")),
    Metric("delta1", "δ < 1.25", True, "depth", depth_metric("delta1")),
    Metric("delta2", "δ < 1.25²", True, "depth", depth_metric("delta2")),
    Metric("delta3", "δ < 1.25³", True, "depth", depth_metric("delta3")),
    Metric("miou", "Mean IoU", True, "segmentation", miou, SEGMENTATION_OPTIONS),
    Metric(
        "pixel_accuracy",
        "Pixel accuracy",
        True,
        "segmentation",
        pixel_accuracy,
        SEGMENTATION_OPTIONS,
    ),
    Metric("psnr", "PSNR in dB", True, "restoration", psnr, RESTORATION_OPTIONS),
    Metric("ssim", "SSIM", True, "restoration", ssim, RESTORATION_OPTIONS),
)
BUILT_IN_FAMILIES = frozenset(metric.family for metric in BUILT_IN)

# One validation and one pass per family; calling each metric's fn would repeat them.
_FAMILY_FNS: dict[str, Any] = {
    "classification": classification_metrics,
    "depth": depth_metrics,
    "segmentation": segmentation_metrics,
    "restoration": restoration_metrics,
}


class MetricPluginError(RuntimeError):
    """An installed package's metric entry point that cannot be used, and why."""


def _plugin(entry: importlib.metadata.EntryPoint, taken: Mapping[str, Metric]) -> Metric:
    dist = entry.dist.name if entry.dist else "an unknown distribution"
    where = f"metric entry point {entry.name} = {entry.value} (from {dist})"
    try:
        metric = entry.load()
    except Exception as exc:  # whatever its import raises, say whose it is
        raise MetricPluginError(f"{where} cannot be loaded: {exc!r}") from exc
    if not isinstance(metric, Metric):
        raise MetricPluginError(f"{where} is a {type(metric).__name__}, not a Metric")
    if metric.key != entry.name or not _KEY.fullmatch(metric.key):
        raise MetricPluginError(
            f"{where} has key {metric.key!r}: the key must be the entry point's name, lower "
            "case letters, digits and _, at most 32 characters"
        )
    if metric.key in taken:
        raise MetricPluginError(f"{where}: the key {metric.key!r} is taken")
    if metric.family in BUILT_IN_FAMILIES:
        raise MetricPluginError(f"{where}: the family {metric.family!r} is a built-in one")
    return metric


@functools.cache
def _registry() -> dict[str, Metric]:
    registry = {metric.key: metric for metric in BUILT_IN}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        registry[entry.name] = _plugin(entry, registry)
    return registry


def registry_reload() -> None:
    """Read the installed packages' metrics again (after installing or removing one)."""
    _registry.cache_clear()


def all_metrics() -> dict[str, Metric]:
    """Every metric by key: the built-in ones, then the installed packages', in display order."""
    return dict(_registry())


def metric_families() -> dict[str, tuple[str, ...]]:
    """Each family's metric keys, in display order."""
    families: dict[str, tuple[str, ...]] = {}
    for metric in _registry().values():
        families[metric.family] = (*families.get(metric.family, ()), metric.key)
    return families


def get_metric(key: str) -> Metric:
    try:
        return _registry()[key]
    except KeyError:
        valid = ", ".join(_registry())
        raise KeyError(f"unknown metric {key!r}; valid keys are {valid}") from None


def metric_choices() -> list[tuple[str, str]]:
    """The admin's metric choice: key and "Label (key, higher is better)" (a callable, so a
    newly installed metric needs no migration)."""
    return [(metric.key, metric.choice_label) for metric in _registry().values()]


def compute_family(
    key: str,
    predictions: np.ndarray,
    targets: np.ndarray,
    options: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    """Every metric in the family of ``key``, in display order, as python floats; ``options``:
    the task's settings of its metric (``Metric.options``), the defaults where absent."""
    metric = get_metric(key)
    settings = options_resolve(metric, options)
    if metric.family in _FAMILY_FNS:
        scores: dict[str, float] = _FAMILY_FNS[metric.family](predictions, targets, **settings)
        return scores
    members = [get_metric(name) for name in metric_families()[metric.family]]
    return {
        member.key: float(
            member.fn(
                predictions, targets, **{k: v for k, v in settings.items() if k in member.options}
            )
        )
        for member in members
    }
