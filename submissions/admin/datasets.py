"""A task's dataset .npz checked against the task before it is saved (the shapes, the dtype,
what the metric's family reads from 'targets', the split), and its summary for the operator."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError

from evaluation.metrics import get_metric, metric_families, options_resolve

SPLIT_VALUES = {"public", "private"}


# What each metric family reads from the dataset's 'targets' (evaluation/metrics.py).
TARGET_FORMATS = {
    "classification": "integer class labels, shape [N], each in 0..C-1 where the output "
    "shape is [C]",
    "regression": "floats of shape [N, *output shape], all finite",
    "depth": "floats of shape [N, *output shape] (e.g. [N, H, W] for output [H, W]); only "
    "pixels whose target is positive and finite are scored (an image with none is skipped)",
    "segmentation": "integer labels of shape [N, H, W] for output [C, H, W] (C class scores "
    "per pixel), each in 0..C-1 or the ignore label",
    "restoration": "images of shape [N, *output shape] (e.g. [N, 3, H, W]), all finite, white "
    "at the data range",
}
# An installed package's metric reads what its package says.
OTHER_TARGETS = "what the metric's package documents"


def _options_help(family: str) -> str:
    metric = get_metric(metric_families()[family][0])
    if not metric.options:
        return ""
    listed = "; ".join(
        f"{name} ({json.dumps(option.default)}): {option.help}"
        for name, option in metric.options.items()
    )
    return f" Options: {listed}."


def metric_help() -> str:
    lines = [
        f"{family} ({', '.join(keys)}): 'targets' are "
        f"{TARGET_FORMATS.get(family, OTHER_TARGETS)}.{_options_help(family)}"
        for family, keys in metric_families().items()
    ]
    return " ".join(lines)


def _load_npz(upload: Any) -> dict[str, np.ndarray]:
    upload.seek(0)
    try:
        with np.load(upload, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise ValidationError(f"Not a readable .npz file without pickled objects: {exc}") from exc
    finally:
        upload.seek(0)


def _check_inputs(inputs: np.ndarray, *, input_shape: list[int], dtype: str) -> None:
    if list(inputs.shape[1:]) != [int(d) for d in input_shape]:
        raise ValidationError(
            f"'inputs' has per-sample shape {list(inputs.shape[1:])} but the task says "
            f"{list(input_shape)}."
        )
    if inputs.dtype != np.dtype(dtype):
        raise ValidationError(f"'inputs' has dtype {inputs.dtype} but the task says {dtype}.")


def _ignore_label(metric: str, options: dict[str, Any]) -> int | None:
    """The label a segmentation task does not score, else None."""
    metric_ = get_metric(metric)
    if metric_.family != "segmentation":
        return None
    return int(options_resolve(metric_, options)["ignore_index"])


def _check_pixel_labels(targets: np.ndarray, *, output_shape: list[int], ignore: int) -> None:
    if list(targets.shape[1:]) != [int(d) for d in output_shape[1:]]:
        raise ValidationError(
            f"'targets' has per-sample shape {list(targets.shape[1:])}; an output of "
            f"{list(output_shape)} needs labels of {list(output_shape[1:])}."
        )
    if not np.issubdtype(targets.dtype, np.integer):
        raise ValidationError(f"'targets' must be integer class labels, not {targets.dtype}.")
    labels = targets[targets != ignore]
    classes = int(output_shape[0])
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise ValidationError(
            f"'targets' has labels outside 0..{classes - 1} other than the ignore label {ignore}."
        )


def _check_targets(
    targets: np.ndarray,
    *,
    rows: int,
    metric: str,
    output_shape: list[int],
    options: dict[str, Any],
) -> None:
    if len(targets) != rows:
        raise ValidationError(f"'targets' has {len(targets)} rows but 'inputs' has {rows}.")
    family = get_metric(metric).family
    if family == "classification":
        if targets.ndim != 1 or not np.issubdtype(targets.dtype, np.integer):
            raise ValidationError("'targets' must be one integer class label per row.")
        classes = int(output_shape[-1]) if output_shape else 0
        if targets.size and (targets.min() < 0 or targets.max() >= classes):
            raise ValidationError(f"'targets' has labels outside 0..{classes - 1}.")
        return
    if family == "segmentation":
        ignore = _ignore_label(metric, options)
        _check_pixel_labels(targets, output_shape=output_shape, ignore=int(ignore or 0))
        return
    if family not in TARGET_FORMATS:
        return  # an installed package's metric checks its targets when it scores
    if list(targets.shape[1:]) != [int(d) for d in output_shape]:
        raise ValidationError(
            f"'targets' has per-sample shape {list(targets.shape[1:])} but the task's output "
            f"is {list(output_shape)}."
        )
    if not np.issubdtype(targets.dtype, np.floating):
        raise ValidationError(f"'targets' must be floating point, not {targets.dtype}.")
    finite = np.isfinite(targets)
    if family in ("regression", "restoration") and not finite.all():
        raise ValidationError(
            f"'targets' contain NaN or infinite values; {family} needs all finite."
        )
    if family == "depth" and not (finite & (targets > 0)).any():
        raise ValidationError("'targets' have no positive finite depth anywhere: nothing to score.")


def _check_split(split: np.ndarray, *, rows: int) -> None:
    if split.shape != (rows,):
        raise ValidationError(f"'split' must have one entry per row ({rows}), not {split.shape}.")
    if split.dtype.kind not in "US":
        raise ValidationError("'split' must hold the strings 'public' and 'private'.")
    values = set(split.astype(str).tolist())
    if not values <= SPLIT_VALUES:
        raise ValidationError(
            f"'split' may only say public or private, not {sorted(values - SPLIT_VALUES)}."
        )
    if "public" not in values:
        raise ValidationError("'split' has no public rows: the public leaderboard would be empty.")


@dataclass(frozen=True)
class DatasetSummary:
    """What an operator checks after an upload: how many rows, how they split, what they hold."""

    rows: int
    public: int
    private: int
    inputs: str  # e.g. "[1, 8, 8] float32"
    # "1000 classes declared, 62 present (labels 22..997)" or "per-sample [8, 8] float32"
    targets: str

    def __str__(self) -> str:
        split = f"{self.public} public, {self.private} private"
        return f"{self.rows} rows ({split}); inputs {self.inputs}; targets: {self.targets}."


def _classes_described(targets: np.ndarray, *, declared: int) -> str:
    """How many classes the task declares (its output shape) beside how many the labels use:
    a 1000-class task whose test rows hold 62 labels must not read as a 62-class task."""
    labels = np.unique(targets)
    if not labels.size:
        return f"{declared} classes declared, none present"
    return (
        f"{declared} classes declared, {len(labels)} present "
        f"(labels {labels.min()}..{labels.max()})"
    )


def dataset_summarize(
    arrays: dict[str, np.ndarray],
    *,
    metric: str,
    output_shape: list[int],
    options: dict[str, Any] | None = None,
) -> DatasetSummary:
    inputs, targets = arrays["inputs"], arrays["targets"]
    rows = len(inputs)
    split = arrays.get("split")
    public = rows if split is None else int((split.astype(str) == "public").sum())
    family = get_metric(metric).family
    ignore = _ignore_label(metric, options or {})
    if family == "classification" and output_shape:
        described = _classes_described(targets, declared=int(output_shape[-1]))
    elif family == "segmentation" and output_shape:
        labelled = targets[targets != ignore]
        described = _classes_described(labelled, declared=int(output_shape[0]))
        described += f" per pixel, label {ignore} not scored"
    else:
        described = f"per-sample {list(targets.shape[1:])} {targets.dtype}"
    return DatasetSummary(
        rows, public, rows - public, f"{list(inputs.shape[1:])} {inputs.dtype}", described
    )


def dataset_summary_read(
    file: Any, *, metric: str, output_shape: list[int], options: dict[str, Any]
) -> str:
    """The summary of a stored dataset for the task's change page; a reason, never an error."""
    try:
        with file.open("rb") as stored:
            arrays = _load_npz(stored)
            summary = dataset_summarize(
                arrays, metric=metric, output_shape=output_shape, options=options
            )
            return str(summary)
    except (ValidationError, OSError, KeyError, ValueError) as exc:
        return f"Could not read the dataset: {exc}"


def dataset_validate(
    upload: Any,
    *,
    input_shape: list[int],
    dtype: str,
    metric: str,
    output_shape: list[int],
    options: dict[str, Any] | None = None,
) -> DatasetSummary:
    """Check a task dataset against the task; returns its summary."""
    arrays = _load_npz(upload)
    missing = {"inputs", "targets"} - arrays.keys()
    if missing:
        raise ValidationError(
            f"The .npz lacks {', '.join(sorted(missing))}; it has {sorted(arrays)}."
        )
    extra = arrays.keys() - {"inputs", "targets", "split"}
    if extra:
        raise ValidationError(f"Unexpected arrays in the .npz: {sorted(extra)}.")
    inputs = arrays["inputs"]
    if inputs.ndim < 1 or len(inputs) == 0:
        raise ValidationError("'inputs' has no rows.")
    _check_inputs(inputs, input_shape=input_shape, dtype=dtype)
    _check_targets(
        arrays["targets"],
        rows=len(inputs),
        metric=metric,
        output_shape=output_shape,
        options=options or {},
    )
    if "split" in arrays:
        _check_split(arrays["split"], rows=len(inputs))
    return dataset_summarize(arrays, metric=metric, output_shape=output_shape, options=options)
