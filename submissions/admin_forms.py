"""The operator's task form: the dataset .npz is checked against the task before it is saved,
so a task can never point workers at data they would fail on."""

from __future__ import annotations

import zipfile
from typing import Any

import numpy as np
from django import forms
from django.core.exceptions import ValidationError

from evaluation.metrics import get_metric
from submissions.models import Task

SPLIT_VALUES = {"public", "private"}


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


def _check_targets(targets: np.ndarray, *, rows: int, metric: str, output_shape: list[int]) -> None:
    if len(targets) != rows:
        raise ValidationError(f"'targets' has {len(targets)} rows but 'inputs' has {rows}.")
    if get_metric(metric).family == "classification":
        if targets.ndim != 1 or not np.issubdtype(targets.dtype, np.integer):
            raise ValidationError("'targets' must be one integer class label per row.")
        classes = int(output_shape[-1]) if output_shape else 0
        if targets.size and (targets.min() < 0 or targets.max() >= classes):
            raise ValidationError(f"'targets' has labels outside 0..{classes - 1}.")
        return
    if list(targets.shape[1:]) != [int(d) for d in output_shape]:
        raise ValidationError(
            f"'targets' has per-sample shape {list(targets.shape[1:])} but the task's output "
            f"is {list(output_shape)}."
        )
    if not np.issubdtype(targets.dtype, np.floating):
        raise ValidationError(f"'targets' must be floating point, not {targets.dtype}.")


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


def dataset_validate(
    upload: Any, *, input_shape: list[int], dtype: str, metric: str, output_shape: list[int]
) -> int:
    """Check a task dataset against the task; returns the number of rows."""
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
    _check_targets(arrays["targets"], rows=len(inputs), metric=metric, output_shape=output_shape)
    if "split" in arrays:
        _check_split(arrays["split"], rows=len(inputs))
    return len(inputs)


class TaskAdminForm(forms.ModelForm):
    class Meta:
        model = Task
        fields = [
            "title",
            "slug",
            "description",
            "is_hidden",
            "dataset",
            "batch_size",
            "input_shape",
            "input_dtype",
            "output_shape",
            "metric",
            "max_model_bytes",
            "time_limit_s",
            "submissions_per_day",
            "submissions_total",
            "requires_gpu",
            "opens_at",
            "closes_at",
            "leaderboard",
            "leaderboard_frozen_at",
            "private_revealed",
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        dataset = cleaned.get("dataset")
        changed = "dataset" in self.changed_data or any(
            name in self.changed_data
            for name in ("input_shape", "input_dtype", "output_shape", "metric")
        )
        needed = ("input_shape", "input_dtype", "output_shape", "metric")
        if dataset and changed and all(cleaned.get(name) is not None for name in needed):
            try:
                dataset_validate(
                    dataset,
                    input_shape=cleaned["input_shape"],
                    dtype=cleaned["input_dtype"],
                    metric=cleaned["metric"],
                    output_shape=cleaned["output_shape"],
                )
            except ValidationError as exc:
                self.add_error("dataset", exc)
        return cleaned
