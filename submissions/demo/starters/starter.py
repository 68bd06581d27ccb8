"""Starter for the portal's demo tasks: fit a trivial model with numpy, export it as ONNX.

    pip install numpy onnx
    python starter.py digits-train.npz           # writes model.onnx
    python starter.py depth-train.npz model.onnx

No PyTorch needed: the model is written node by node with onnx.helper. For a classification task
(integer targets: one class per image) it fits a linear classifier to one-hot targets by least
squares; for a per-pixel regression task (targets shaped like the image) it fits a 1x1
convolution, depth = a·R + b·G + c·B + d. Either is a baseline to beat, not a good model.

The exported model has one input "input" and one output "output", both with a symbolic first
dimension "batch", opset 17 and IR version 9, and is saved as one self-contained file.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 9
RIDGE = 1e-2  # keeps the least-squares fit stable where pixels never vary
FLOOR = 0.05  # predicted depths stay positive, so relative errors stay finite


def fit_least_squares(features: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Weights (features + 1, outputs) minimising |[X 1] W - Y|² + RIDGE |W|²."""
    x = np.hstack([features, np.ones((len(features), 1))]).astype(np.float64)
    gram = x.T @ x + RIDGE * np.eye(x.shape[1])
    return np.linalg.solve(gram, x.T @ targets.astype(np.float64)).astype(np.float32)


def classifier(inputs: np.ndarray, targets: np.ndarray) -> tuple[list, dict, list[int]]:
    classes = int(targets.max()) + 1
    flat = inputs.reshape(len(inputs), -1)
    weights = fit_least_squares(flat, np.eye(classes)[targets])
    accuracy = np.mean((flat @ weights[:-1] + weights[-1]).argmax(1) == targets)
    print(f"linear classifier: training accuracy {accuracy:.3f}")
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "weight", "bias"], ["output"]),
    ]
    return nodes, {"weight": weights[:-1], "bias": weights[-1]}, [classes]


def pixel_regressor(inputs: np.ndarray, targets: np.ndarray) -> tuple[list, dict, list[int]]:
    channels = inputs.shape[1]
    pixels = inputs.transpose(0, 2, 3, 1).reshape(-1, channels)
    weights = fit_least_squares(pixels, targets.reshape(-1, 1))
    predicted = np.maximum(pixels @ weights[:-1] + weights[-1], FLOOR).ravel()
    abs_rel = np.mean(np.abs(predicted - targets.ravel()) / targets.ravel())
    print(f"1x1 convolution: training AbsRel {abs_rel:.3f}")
    nodes = [
        helper.make_node("Conv", ["input", "weight", "bias"], ["conv"]),
        helper.make_node("Squeeze", ["conv", "channel_axis"], ["depth"]),
        helper.make_node("Max", ["depth", "floor"], ["output"]),
    ]
    initializers = {
        "weight": weights[:-1].reshape(1, channels, 1, 1),
        "bias": weights[-1].reshape(1),
        "channel_axis": np.array([1], dtype=np.int64),
        "floor": np.array(FLOOR, dtype=np.float32),
    }
    return nodes, initializers, list(targets.shape[1:])


def build(inputs: np.ndarray, targets: np.ndarray) -> onnx.ModelProto:
    regression = np.issubdtype(targets.dtype, np.floating) and targets.ndim > 1
    fit = pixel_regressor if regression else classifier
    nodes, initializers, output_shape = fit(inputs, targets)
    graph = helper.make_graph(
        nodes,
        "starter",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *inputs.shape[1:]])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", *output_shape])],
        initializer=[numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python starter.py TRAINING.npz [MODEL.onnx]", file=sys.stderr)
        return 2
    out = argv[2] if len(argv) == 3 else "model.onnx"
    with np.load(argv[1], allow_pickle=False) as data:
        inputs, targets = data["inputs"].astype(np.float32), data["targets"]
    onnx.save(build(inputs, targets), out, save_as_external_data=False)
    print(f"wrote {out}: input [batch, {', '.join(map(str, inputs.shape[1:]))}] float32")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
