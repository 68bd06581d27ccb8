"""What a task page's tabs show, computed from the task row: evaluation facts, the timeline and
the "export your model" snippet. No queries (counts and files are selectors)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from evaluation.inspect import runtime_limits
from evaluation.metrics import get_metric, options_text
from evaluation.sizes import mib_text
from submissions.models import Task

# PyTorch's name for each input dtype a task may feed (evaluation/spec.py ONNX_TYPE_FOR_DTYPE).
TORCH_DTYPES = {
    "float32": "torch.float32",
    "float16": "torch.float16",
    "float64": "torch.float64",
    "int64": "torch.int64",
    "int32": "torch.int32",
    "uint8": "torch.uint8",
}
BATCH_DIM = "batch"


def _shape(dims: list[int] | tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def evaluation_facts(task: Task) -> list[tuple[str, str]]:
    """(label, value) pairs for the evaluation tab, from the task's spec and timing protocol."""
    spec, timing = task.spec(), task.timing_protocol()
    max_ir, max_opset = runtime_limits()
    direction = task.direction.word
    device = task.device_class
    total = f", {task.submissions_total} in total" if task.submissions_total is not None else ""
    options = options_text(get_metric(task.metric), task.metric_options)
    return [
        ("Metric", f"{task.metric_label} ({direction} is better), on the public rows"),
        *([("Metric options", options)] if options else []),
        ("Input", f"{_shape(spec.batch_shape)} {spec.input_dtype}: one input, batch first"),
        ("Output", f"{_shape(spec.output_batch_shape)}: the first output is scored"),
        ("Batch", f"{spec.batch_size} rows a batch; a short last batch is padded and trimmed"),
        ("ONNX", f"opset ≤ {max_opset} (default domain), IR version ≤ {max_ir}, one file"),
        (
            "Device",
            # the class's name alone: "CPU (CPU)" said it twice
            device.name + (" (CUDA required)" if device.requires_gpu else ", no GPU needed"),
        ),
        ("Timing", timing.describe()),
        (
            "Limits",
            f"{mib_text(task.max_model_bytes)} per model · {task.time_limit_s} s per "
            f"evaluation · {task.submissions_per_day} submissions a day{total} · "
            f"{task.queued_per_user} queued at once",
        ),
    ]


@dataclass(frozen=True)
class TimelineEvent:
    key: str  # also the countdown's data attribute: opens, closes, freeze, reveal
    label: str
    at: datetime | None
    passed: bool


def task_timeline(task: Task, now: datetime | None = None) -> list[TimelineEvent]:
    """The task's dates in order of meaning; an unset date is listed as not set."""
    now = now or timezone.now()
    revealed = task.private_revealed
    dates = [
        ("opens", "Opens", task.opens_at),
        ("closes", "Closes", task.closes_at),
        ("freeze", "Leaderboard freezes", task.leaderboard_frozen_at),
        ("reveal", "Private scores revealed", task.private_reveal_at),
    ]
    return [
        TimelineEvent(
            key=key,
            label=label,
            at=at,
            passed=(at is not None and at <= now) or (key == "reveal" and revealed),
        )
        for key, label, at in dates
    ]


def export_snippet(task: Task) -> str:
    """PyTorch code exporting a model this task accepts: its exact per-sample shape and dtype, a
    symbolic batch dimension, and the newest opset and IR version the upload check loads (from
    evaluation.inspect.runtime_limits, the check's own source)."""
    max_ir, max_opset = runtime_limits()
    shape = ", ".join(str(d) for d in task.batch_shape)
    return f'''import onnx
import torch

model = build_model()  # your torch.nn.Module
model.eval()
example = torch.zeros({shape}, dtype={TORCH_DTYPES[task.input_dtype]})
torch.onnx.export(
    model,
    (example,),
    "model.onnx",
    input_names=["input"],
    output_names=["output"],
    # The batch dimension stays symbolic; the others must be exactly {_shape(task.input_shape)}.
    dynamic_axes={{"input": {{0: "{BATCH_DIM}"}}, "output": {{0: "{BATCH_DIM}"}}}},
    # Accepted: default-domain opsets up to {max_opset}; lower it if your torch cannot export it.
    opset_version={max_opset},
)
exported = onnx.load("model.onnx")
if exported.ir_version > {max_ir}:  # the newest IR version our onnxruntime loads
    exported.ir_version = {max_ir}
onnx.save(exported, "model.onnx", save_as_external_data=False)  # one self-contained file
# The output must be [batch, {", ".join(str(d) for d in task.output_shape)}].
'''
