"""The operator's task form: the dataset .npz is checked against the task before it is saved
(``datasets.py``), so a task can never point workers at data they would fail on. Nothing typed
into it can fail with a 500: shapes are parsed here (``ShapeField``), sizes are typed in MiB, and
a dataset that was uploaded with a form that failed elsewhere is kept for the next attempt."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse

from evaluation.metrics import get_metric, metric_choices, options_resolve
from evaluation.sizes import MIB
from evaluation.timing import TimingProtocol
from submissions.admin.datasets import DatasetSummary, dataset_validate, metric_help
from submissions.admin.services import (
    dataset_pending_discard,
    dataset_pending_open,
    dataset_pending_save,
)
from submissions.models import Task
from submissions.models.core import default_timing_protocol

MAX_DIMENSIONS = 8
MAX_DIMENSION = 2**31 - 1  # what ONNX runtimes index with; a larger dimension is a typo


def _shown(value: Any) -> str:
    text = json.dumps(value)  # as the operator would type it
    return text if len(text) <= 40 else f"{text[:37]}..."


def shape_parse(raw: Any, *, example: str) -> list[int]:
    """A shape typed by an operator as a list of positive integers, or a ValidationError
    saying what is wrong with it. ``raw``: the form's text, or an already parsed value."""
    hint = f"Write it as a list of positive whole numbers, e.g. {example}."
    if isinstance(raw, str):
        if not raw.strip():
            raise ValidationError(f"The shape is empty. {hint}")
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            raise ValidationError(f"{_shown(raw)} is not a list. {hint}") from None
    if not isinstance(raw, list):
        raise ValidationError(f"{_shown(raw)} is not a list. {hint}")
    if not raw:
        raise ValidationError(f"The shape needs at least one dimension. {hint}")
    if len(raw) > MAX_DIMENSIONS:
        raise ValidationError(f"{len(raw)} dimensions; at most {MAX_DIMENSIONS} are allowed.")
    for position, dim in enumerate(raw, start=1):
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise ValidationError(
                f"Dimension {position} is {_shown(dim)}, not a whole number. {hint}"
            )
        if dim < 1:
            raise ValidationError(f"Dimension {position} is {dim}; every dimension is at least 1.")
        if dim > MAX_DIMENSION:
            raise ValidationError(
                f"Dimension {position} is {_shown(dim)}; at most {MAX_DIMENSION} is allowed."
            )
    return raw


class ShapeField(forms.Field):
    """A per-sample shape in a text box, ``[3, 224, 224]``; never raises anything but a
    ValidationError, whatever is typed."""

    widget = forms.TextInput

    def __init__(self, *, example: str, **kwargs: Any) -> None:
        self.example = example
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> list[int] | None:
        if value in self.empty_values:
            return None
        return shape_parse(value, example=self.example)

    def prepare_value(self, value: Any) -> Any:
        if value is None:  # a new task: an empty box with the example, not "null"
            return ""
        return value if isinstance(value, str) else json.dumps(value)

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        return {**super().widget_attrs(widget), "placeholder": self.example}


class MetricOptionsField(forms.JSONField):
    """The metric's settings as a JSON object; an empty box is the metric's defaults (``{}``), and
    an empty ``{}`` shows as an empty box with an example, not as raw JSON."""

    EXAMPLE = '{"ignore_index": 255}'

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, widget=forms.Textarea(attrs={"rows": 2}), **kwargs)

    def to_python(self, value: Any) -> Any:
        parsed = super().to_python(value)
        if parsed is None:
            return {}
        if not isinstance(parsed, dict):
            raise ValidationError(f"The metric's settings are a JSON object, e.g. {self.EXAMPLE}.")
        return parsed

    def prepare_value(self, value: Any) -> Any:
        return "" if value in (None, {}, "") else super().prepare_value(value)

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        return {**super().widget_attrs(widget), "placeholder": self.EXAMPLE}


class _StoredFile:
    """A stored file as the file widget shows it: its name, linked to a staff-only view
    (storage's own URL is /media/, which nothing serves)."""

    def __init__(self, name: str, url: str) -> None:
        self.name, self.url = name, url

    def __str__(self) -> str:
        return self.name


class StaffFileInput(forms.ClearableFileInput):
    def __init__(self, *, url: str) -> None:
        super().__init__()
        self.url = url

    def format_value(self, value: Any) -> Any:
        return _StoredFile(str(value), self.url) if value else None


# The timing protocol's settings, one field each instead of a JSON box: (key, label, help).
TIMING_FIELDS = (
    ("min_time_s", "Minimum time (s)", "For the whole timing phase, split over the passes."),
    ("min_batches", "Minimum batches", "In all, split over the passes."),
    ("max_time_s", "Maximum time (s)", "A slow model stops early, with a batch per pass."),
    ("passes", "Passes", "Latency is the median over every timed batch of them all."),
    (
        "unstable_spread",
        "Unstable above",
        "Spread of the pass medians marked unstable (0.05: 5 %).",
    ),
    ("lock_wait_s", "Lock wait (s)", "How long to wait for the device before timing shared."),
    (
        "precision",
        "Precision",
        "More rounds of passes until the p50's 95 % confidence interval is within this share of "
        "it (0.01: ±1 %; 0: one round).",
    ),
    (
        "unstable_session_spread",
        "Sessions unstable above",
        "Where the device class times in several sessions: (max - min) / median of their p50s "
        "marked unstable (0.05: 5 %).",
    ),
)


def timing_field(key: str, label: str, help_text: str) -> forms.Field:
    """Left empty: the worker's EVAL_TIMING_* default, shown as the placeholder."""
    whole = key in ("min_batches", "passes")
    field: forms.Field = forms.IntegerField() if whole else forms.FloatField()
    field.required, field.label, field.help_text = False, label, help_text
    return field


def _default(name: str) -> int:
    """A task field's model default: what a box left empty means."""
    field = Task._meta.get_field(name)
    assert isinstance(field, models.Field)
    return int(field.get_default())


class TaskAdminForm(forms.ModelForm):
    # Asked with a dataset upload (submissions/tasks/datasets.py: task_dataset_replace).
    dataset_note = forms.CharField(
        required=False,
        max_length=500,
        label="What changed in the dataset",
        help_text="Kept with the new dataset version, for operators.",
    )
    rescore = forms.BooleanField(
        required=False,
        label="Re-score every ranked submission on the new dataset",
        help_text="When you replace the dataset: results on the old one leave the board at once; "
        "ticked, every ranked submission is queued again (behind new uploads, not charged to "
        "quotas) and comes back with its new result. Unticked, the board starts empty.",
    )

    final_selections = forms.IntegerField(
        min_value=0,
        max_value=100,
        required=False,
        label="Final selections",
        help_text=Task._meta.get_field("final_selections").help_text,
    )

    def clean_final_selections(self) -> int:
        return self.cleaned_data.get("final_selections") or 0  # left empty: no selection

    max_team_size = forms.IntegerField(
        min_value=1,
        max_value=100,
        required=False,
        label="Maximum team size",
        help_text=Task._meta.get_field("max_team_size").help_text,
    )

    def clean_max_team_size(self) -> int:
        return self.cleaned_data.get("max_team_size") or 1  # left empty: no teams

    finalists_top = forms.IntegerField(
        min_value=1,
        max_value=1000,
        required=False,
        label="Finalists: top N of each board",
        help_text=Task._meta.get_field("finalists_top").help_text,
    )
    finalists_sessions = forms.IntegerField(
        min_value=1,
        max_value=25,
        required=False,
        label="Finalists: timing sessions each",
        help_text=Task._meta.get_field("finalists_sessions").help_text,
    )

    def clean_finalists_top(self) -> int:
        return self.cleaned_data.get("finalists_top") or _default("finalists_top")

    def clean_finalists_sessions(self) -> int:
        return self.cleaned_data.get("finalists_sessions") or _default("finalists_sessions")

    input_shape = ShapeField(
        example="[3, 224, 224]", help_text="Per-sample input shape, e.g. [3, 224, 224]."
    )
    output_shape = ShapeField(
        example="[1000]",
        help_text="Per-sample output shape: [C] for C classes, e.g. [1000]; [H, W] for depth.",
    )
    metric_options = MetricOptionsField(
        help_text=Task._meta.get_field("metric_options").help_text,
    )
    max_model_mb = forms.DecimalField(
        label="Max model size (MiB)",
        min_value=Decimal("0.01"),
        max_value=Decimal(1024 * 1024),
        decimal_places=2,
        initial=Decimal(200),
        help_text="The largest .onnx file accepted, in MiB (1 MiB = 1,048,576 bytes); pages, "
        "the API, oep and refusals state it in MiB too.",
    )
    timing_min_time_s = timing_field(*TIMING_FIELDS[0])
    timing_min_batches = timing_field(*TIMING_FIELDS[1])
    timing_max_time_s = timing_field(*TIMING_FIELDS[2])
    timing_passes = timing_field(*TIMING_FIELDS[3])
    timing_unstable_spread = timing_field(*TIMING_FIELDS[4])
    timing_lock_wait_s = timing_field(*TIMING_FIELDS[5])
    timing_precision = timing_field(*TIMING_FIELDS[6])
    timing_unstable_session_spread = timing_field(*TIMING_FIELDS[7])
    # A dataset uploaded with a form that failed elsewhere, kept in storage for the next try.
    dataset_pending = forms.CharField(required=False, widget=forms.HiddenInput)

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
            "metric_options",
            "time_limit_s",
            "submissions_per_day",
            "submissions_total",
            "device_class",
            "queued_per_user",
            "opens_at",
            "closes_at",
            "leaderboard",
            "leaderboard_frozen_at",
            "private_revealed",
            "overview",
            "rules",
            "evaluation_notes",
            "timeline_notes",
            "private_reveal_at",
            "final_selections",
            "max_team_size",
            "team_merge_deadline",
            "finalists_top",
            "finalists_sessions",
            "remeasure_finalists_at_close",
        ]

    summary: DatasetSummary | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Read now, not when the class was made: a package installed since may add metrics.
        metric: Any = self.fields["metric"]  # a ChoiceField (the model field has choices)
        metric.choices = metric_choices()
        self.fields["metric"].help_text = metric_help()
        defaults = default_timing_protocol().as_dict()
        for key, *_ in TIMING_FIELDS:
            field = self.fields[f"timing_{key}"]
            field.widget.attrs["placeholder"] = f"{defaults[key]:g} (default)"
            field.initial = (self.instance.timing or {}).get(key)
        if self.instance.pk:
            self.fields["max_model_mb"].initial = _megabytes(self.instance.max_model_bytes)
            url = reverse("admin:submissions_task_dataset", args=[self.instance.pk])
            self.fields["dataset"].widget = StaffFileInput(url=url)
        kept = dataset_pending_open(self.data.get("dataset_pending", "")) if self.data else None
        if kept is not None and not self.files.get("dataset"):
            files: Any = self.files.copy()
            files["dataset"] = kept
            self.files = files
            self._say_kept(kept.name)

    def _say_kept(self, name: str | None) -> None:
        text = f"Kept from your last attempt: {name}. Choose another file to replace it."
        self.fields["dataset"].help_text = text
        self["dataset"].help_text = text  # the bound field copied it when the form was cleaned

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        self._timing_clean(cleaned)
        if cleaned.get("max_model_mb") is not None:
            self.instance.max_model_bytes = int(cleaned["max_model_mb"] * MIB)
        if not self._metric_fits(cleaned):
            return cleaned
        dataset = cleaned.get("dataset")
        changed = "dataset" in self.changed_data or any(
            name in self.changed_data
            for name in ("input_shape", "input_dtype", "output_shape", "metric", "metric_options")
        )
        needed = ("input_shape", "input_dtype", "output_shape", "metric")
        if dataset and changed and all(cleaned.get(name) is not None for name in needed):
            try:
                self.summary = dataset_validate(
                    dataset,
                    input_shape=cleaned["input_shape"],
                    dtype=cleaned["input_dtype"],
                    metric=cleaned["metric"],
                    output_shape=cleaned["output_shape"],
                    options=cleaned.get("metric_options") or {},
                )
            except ValidationError as exc:
                self.add_error("dataset", exc)
        return cleaned

    def _metric_fits(self, cleaned: dict[str, Any]) -> bool:
        """Whether the metric's options are its own and the output shape is one it reads;
        adds the errors otherwise."""
        metric, output_shape = cleaned.get("metric"), cleaned.get("output_shape")
        if not metric:
            return False
        family = get_metric(metric).family
        try:
            options_resolve(get_metric(metric), cleaned.get("metric_options") or {})
        except ValueError as exc:
            self.add_error("metric_options", str(exc))
            return False
        if family == "classification" and output_shape and len(output_shape) != 1:
            self.add_error("output_shape", "A classification output is [C], one score per class.")
            return False
        if family == "segmentation" and output_shape and len(output_shape) < 2:
            self.add_error("output_shape", "A segmentation output is [C, H, W], C class scores.")
            return False
        return True

    def _timing_clean(self, cleaned: dict[str, Any]) -> None:
        """The task's own timing settings: those filled in; checked as the worker reads them."""
        config = {
            key: cleaned[f"timing_{key}"]
            for key, *_ in TIMING_FIELDS
            if cleaned.get(f"timing_{key}") is not None
        }
        try:
            TimingProtocol.from_config(config, default_timing_protocol())
        except ValueError as exc:
            self.add_error(None, f"Timing: {exc}")
            return
        self.instance.timing = config

    def dataset_pending_done(self) -> None:
        """After the save: the kept file (if any) is in the task's storage now; drop it."""
        kept: Any = self.files.get("dataset")
        if getattr(kept, "kept", False):
            kept.close()
        dataset_pending_discard(self.cleaned_data.get("dataset_pending", ""))

    def _post_clean(self) -> None:  # type: ignore[misc]  # the stubs lack ModelForm's own
        super()._post_clean()  # type: ignore[misc]
        upload: Any = self.files.get("dataset")
        if self.errors and _fresh_upload(upload):
            # The operator fixes the other fields without choosing the file again.
            data: Any = self.data.copy()  # type: ignore[attr-defined]  # a QueryDict
            data["dataset_pending"] = dataset_pending_save(upload)
            self.data = data
            self._say_kept(upload.name)


def _fresh_upload(upload: Any) -> bool:
    """An upload from this request (not one kept from an earlier attempt)."""
    return upload is not None and not getattr(upload, "kept", False)


def _megabytes(size: int) -> Decimal:
    value = (Decimal(size) / MIB).quantize(Decimal("0.01"))
    # normalize() alone writes 400 as 4E+2, which the form would show the operator.
    return value.quantize(Decimal(1)) if value == value.to_integral_value() else value.normalize()


class AdminUploadForm(forms.Form):
    """The operator's "Add submission": a model for a task, uploaded through the same service
    as the participants'; a display name makes it a baseline, a board row of its own."""

    task = forms.ModelChoiceField(queryset=Task.objects.order_by("title"))
    file = forms.FileField(label="ONNX model")
    display_name = forms.CharField(
        max_length=100,
        required=False,
        help_text="Shown on the leaderboard instead of your username, e.g. 'ResNet-18 "
        "baseline'. With a name the upload is a baseline; leave it empty for a plain entry.",
    )
    description = forms.CharField(max_length=500, required=False)
