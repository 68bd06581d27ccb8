"""Real ONNX models and datasets built in the tests with onnx.helper and numpy."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from evaluation.spec import TaskSpec
from evaluation.timing import TimingProtocol

# A brief timing phase for tests that are not about timing.
QUICK_TIMING = TimingProtocol(min_time_s=0.01, min_batches=4, passes=2)

# The digits-like task most engine tests use: batch 16 of [1, 8, 8] float32 -> 10 scores.
DIGITS_SPEC = TaskSpec(
    batch_size=16,
    input_shape=(1, 8, 8),
    input_dtype="float32",
    output_shape=(10,),
    metric="accuracy",
    max_model_bytes=1_000_000,
    time_limit_s=30,
    timing=QUICK_TIMING,
)

OPSET = 17
IR_VERSION = 9  # onnxruntime 1.31 loads IR <= 13; onnx 1.23 would write 14 by default


def finish(graph: onnx.GraphProto, opsets: Sequence[tuple[str, int]] = (("", OPSET),)) -> bytes:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = IR_VERSION
    return model.SerializeToString()


def linear_classifier(
    weights: np.ndarray,
    bias: np.ndarray,
    input_shape: Sequence[int] = (1, 8, 8),
    batch: int | str = "batch",
) -> bytes:
    """logits = flatten(x) @ W + b, input [batch, *input_shape] float32 -> [batch, classes]."""
    classes = weights.shape[1]
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, *input_shape])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, classes])
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["output"]),
    ]
    init = [
        numpy_helper.from_array(weights.astype(np.float32), "W"),
        numpy_helper.from_array(bias.astype(np.float32), "b"),
    ]
    return finish(helper.make_graph(nodes, "linear", [x], [y], init))


def linear_reference(weights: np.ndarray, bias: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    return inputs.reshape(len(inputs), -1).astype(np.float32) @ weights.astype(
        np.float32
    ) + bias.astype(np.float32)


def unary_model(
    op: str,
    shape: Sequence[Any],
    out_shape: Sequence[Any] | None = None,
    elem: int = TensorProto.FLOAT,
    **attrs: Any,
) -> bytes:
    x = helper.make_tensor_value_info("input", elem, list(shape))
    y = helper.make_tensor_value_info(
        "output", elem, list(out_shape if out_shape is not None else shape)
    )
    return finish(
        helper.make_graph(
            [helper.make_node(op, ["input"], ["output"], **attrs)], op.lower(), [x], [y]
        )
    )


def digits_like(n: int = 100, classes: int = 10, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inputs = rng.random((n, 1, 8, 8), dtype=np.float32)
    targets = rng.integers(0, classes, size=n).astype(np.int64)
    split = np.array(["public" if i % 2 == 0 else "private" for i in range(n)])
    return {"inputs": inputs, "targets": targets, "split": split}


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def data_dependent_matmul() -> bytes:
    """A digits-shaped classifier with a side branch whose MatMul's shape depends on the input's
    values (NonZero): no shape inference can tell it, one run can."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["logits"]),
        helper.make_node("ReduceMax", ["flat"], ["peak"], axes=[1], keepdims=0),
        helper.make_node("Greater", ["peak", "zero"], ["positive"]),
        helper.make_node("NonZero", ["positive"], ["where"]),  # [1, rows with a positive pixel]
        helper.make_node("Cast", ["where"], ["rows"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["rows"], ["column"]),  # [rows, 1]
        helper.make_node("MatMul", ["column", "V"], ["side"]),  # [rows, 10]
        helper.make_node("ReduceSum", ["side"], ["total"], keepdims=0),
        helper.make_node("Mul", ["total", "zero"], ["nothing"]),
        helper.make_node("Add", ["logits", "nothing"], ["output"]),
    ]
    init = [
        numpy_helper.from_array(np.eye(64, 10, dtype=np.float32), "W"),
        numpy_helper.from_array(np.ones((1, 10), dtype=np.float32), "V"),
        numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
    ]
    return finish(helper.make_graph(nodes, "data_dependent", [x], [y], init))
