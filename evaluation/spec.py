"""What the worker needs to know about a task, as plain data (no Django).

Built from a Task row by ``Task.spec()``; consumed by the inspector and the runner, so both can be
tested without a database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluation.timing import TimingProtocol

# Input dtypes a task may declare, mapped to the ONNX tensor type names onnxruntime reports.
ONNX_TYPE_FOR_DTYPE: dict[str, str] = {
    "float32": "tensor(float)",
    "float16": "tensor(float16)",
    "float64": "tensor(double)",
    "int64": "tensor(int64)",
    "int32": "tensor(int32)",
    "uint8": "tensor(uint8)",
}


@dataclass(frozen=True)
class TaskSpec:
    batch_size: int
    input_shape: tuple[int, ...]
    input_dtype: str
    output_shape: tuple[int, ...]
    metric: str
    max_model_bytes: int
    time_limit_s: float
    requires_gpu: bool = False
    timing: TimingProtocol = field(default_factory=TimingProtocol)
    # The task's settings of its metric (evaluation.metrics: ``Metric.options``), plain JSON.
    metric_options: dict[str, Any] = field(default_factory=dict)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """The one input shape every run uses: ``[batch_size, *input_shape]``."""
        return (self.batch_size, *self.input_shape)

    @property
    def output_batch_shape(self) -> tuple[int, ...]:
        return (self.batch_size, *self.output_shape)
