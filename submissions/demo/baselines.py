"""Baseline ONNX models for the demo tasks, fitted with numpy alone.

Every model has one input "input" and one output "output", both with a
symbolic "batch" first dimension, opset 17 and IR version 9 (onnxruntime 1.31
refuses the IR version onnx 1.23 writes by default). All models are built by
`build_model`; `linear_model` and `conv_model` only decide the nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from submissions.demo.datasets import (
    DEPTH_SIZE,
    DEPTH_TRAIN_SEED,
    build_depth_dataset,
)

OPSET = 17
IR_VERSION = 9
BATCH_DIM = "batch"
DIGITS_INPUT_SHAPE = (1, 8, 8)
DIGITS_CLASSES = 10
DEPTH_INPUT_SHAPE = (3, DEPTH_SIZE, DEPTH_SIZE)
# Far below any real depth (0.5 m) yet positive, so AbsRel and log metrics stay finite.
DEPTH_FLOOR_M = 0.05
_DEPTH_TRAIN_SCENES = 8
_PIXELS_PER_SCENE = 20_000


@dataclass(frozen=True)
class Baseline:
    name: str
    description: str
    onnx_bytes: bytes


def build_model(
    *,
    graph_name: str,
    nodes: list[onnx.NodeProto],
    initializers: dict[str, np.ndarray],
    input_shape: Sequence[int],
    output_shape: Sequence[int],
) -> bytes:
    """Wrap nodes into a checked model: "input" -> ... -> "output", batch left symbolic."""
    graph = helper.make_graph(
        nodes,
        graph_name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [BATCH_DIM, *input_shape])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [BATCH_DIM, *output_shape])],
        initializer=[numpy_helper.from_array(value, name) for name, value in initializers.items()],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="onnx-eval-portal-demo",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return bytes(model.SerializeToString())


def linear_model(
    weight: np.ndarray, bias: np.ndarray, input_shape: Sequence[int], graph_name: str
) -> bytes:
    """Scores = flatten(input) @ weight + bias; weight is (features, outputs)."""
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "weight", "bias"], ["output"]),
    ]
    return build_model(
        graph_name=graph_name,
        nodes=nodes,
        initializers={"weight": weight.astype(np.float32), "bias": bias.astype(np.float32)},
        input_shape=input_shape,
        output_shape=[weight.shape[1]],
    )


def conv_model(
    weight: np.ndarray, bias: np.ndarray, input_shape: Sequence[int], graph_name: str
) -> bytes:
    """A single-output 'same' Conv (weight (1, C, k, k), odd k), floored at DEPTH_FLOOR_M.

    The channel axis is dropped with Reshape([-1, H, W]) rather than Squeeze so
    the batch dimension stays symbolic without needing shape arithmetic.
    """
    kernel = weight.shape[-1]
    pad = kernel // 2
    height, width = input_shape[1:]
    nodes = [
        helper.make_node("Conv", ["input", "weight", "bias"], ["conv"], pads=[pad] * 4),
        helper.make_node("Clip", ["conv", "floor"], ["clipped"]),
        helper.make_node("Reshape", ["clipped", "shape"], ["output"]),
    ]
    initializers: dict[str, np.ndarray] = {
        "weight": weight.astype(np.float32),
        "bias": bias.astype(np.float32),
        "floor": np.array(DEPTH_FLOOR_M, dtype=np.float32),
        "shape": np.array([-1, height, width], dtype=np.int64),
    }
    return build_model(
        graph_name=graph_name,
        nodes=nodes,
        initializers=initializers,
        input_shape=input_shape,
        output_shape=[height, width],
    )


# --- digits -----------------------------------------------------------------


def digits_baselines(train: dict[str, np.ndarray]) -> list[Baseline]:
    """Three linear digit classifiers, best first: (batch, 1, 8, 8) -> (batch, 10) scores."""
    features = train["inputs"].reshape(len(train["inputs"]), -1).astype(np.float64)
    labels = train["targets"].astype(np.int64)
    fits = [
        (
            "logistic-regression",
            "Multinomial logistic regression on the 64 pixels, full-batch gradient descent.",
            _fit_logistic_regression(features, labels),
        ),
        (
            "nearest-centroid",
            "Nearest class mean in pixel space, written as a linear layer.",
            _fit_nearest_centroid(features, labels),
        ),
        (
            "ridge-4x4",
            "One-vs-rest ridge regression on the image averaged down to 4x4.",
            _fit_downsampled_ridge(features, labels),
        ),
    ]
    return [
        Baseline(name, text, linear_model(w, b, DIGITS_INPUT_SHAPE, f"digits_{name}"))
        for name, text, (w, b) in fits
    ]


def _one_hot(labels: np.ndarray) -> np.ndarray:
    encoded: np.ndarray = np.eye(DIGITS_CLASSES)[labels]
    return encoded


def _fit_nearest_centroid(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """argmin ||x - mu||² == argmax (2 mu·x - ||mu||²): the ||x||² term is shared by all classes."""
    centroids = np.stack([x[y == c].mean(axis=0) for c in range(DIGITS_CLASSES)])
    return 2.0 * centroids.T, -(centroids**2).sum(axis=1)


def _fit_logistic_regression(
    x: np.ndarray, y: np.ndarray, steps: int = 1500, rate: float = 0.5, l2: float = 1e-3
) -> tuple[np.ndarray, np.ndarray]:
    """Softmax regression by plain gradient descent; pixels are already in 0..1."""
    weight = np.zeros((x.shape[1], DIGITS_CLASSES))
    bias = np.zeros(DIGITS_CLASSES)
    target = _one_hot(y)
    for _ in range(steps):
        logits = x @ weight + bias
        logits -= logits.max(axis=1, keepdims=True)
        prob = np.exp(logits)
        prob /= prob.sum(axis=1, keepdims=True)
        error = (prob - target) / len(x)
        weight -= rate * (x.T @ error + l2 * weight)
        bias -= rate * error.sum(axis=0)
    return weight, bias


def _pool_matrix() -> np.ndarray:
    """(16, 64) matrix averaging each 2x2 block of a flattened 8x8 image."""
    pool = np.zeros((4, 4, 8, 8))
    for row in range(4):
        for col in range(4):
            pool[row, col, 2 * row : 2 * row + 2, 2 * col : 2 * col + 2] = 0.25
    return pool.reshape(16, 64)


def _fit_downsampled_ridge(
    x: np.ndarray, y: np.ndarray, ridge: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Ridge on 4x4 features, with the pooling folded into a 64-input weight.

    Folding keeps the exported graph identical in shape to the other digit
    models; the model still only sees the 16 pooled values.
    """
    pool = _pool_matrix()
    design = np.hstack([x @ pool.T, np.ones((len(x), 1))])
    penalty = ridge * np.eye(design.shape[1])
    penalty[-1, -1] = 0.0  # leave the intercept unpenalised
    coef = np.linalg.solve(design.T @ design + penalty, design.T @ _one_hot(y))
    return pool.T @ coef[:-1], coef[-1]


# --- depth ------------------------------------------------------------------


def depth_baselines(train: dict[str, np.ndarray] | None = None) -> list[Baseline]:
    """Three conv depth regressors, worst first: (batch, 3, 448, 448) -> (batch, 448, 448).

    By default they are fitted on `build_depth_dataset(n=8, seed=DEPTH_TRAIN_SEED)`,
    scenes generated apart from any test set, so a baseline never sees the rows
    it is scored on. Pass `train` only with rows that are not in the test set.
    """
    if train is None:
        train = build_depth_dataset(n=_DEPTH_TRAIN_SCENES, seed=DEPTH_TRAIN_SEED)
    rng = np.random.default_rng(0)
    channels = DEPTH_INPUT_SHAPE[0]
    mean_depth = float(train["targets"].mean())
    fits = [
        (
            "constant-mean",
            "Predicts the mean training depth everywhere.",
            (np.zeros((1, channels, 1, 1)), np.array([mean_depth])),
        ),
        (
            "conv-1x1",
            "Per-pixel linear map from RGB to depth, least squares on relative error.",
            _fit_conv(train, 1, rng),
        ),
        (
            "conv-3x3",
            "3x3 linear filter from RGB to depth, least squares on relative error.",
            _fit_conv(train, 3, rng),
        ),
    ]
    return [
        Baseline(name, text, conv_model(w, b, DEPTH_INPUT_SHAPE, f"depth_{name}"))
        for name, text, (w, b) in fits
    ]


def _fit_conv(
    train: dict[str, np.ndarray], kernel: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares conv weights on sampled pixels, minimising ((pred - d) / d)².

    Dividing each row by its depth matches the relative error the task is
    scored on; sampling pixels keeps the design matrix small.
    """
    patches, depth = _sample_patches(train["inputs"], train["targets"], kernel, rng)
    design = np.hstack([patches, np.ones((len(patches), 1))]) / depth[:, None]
    coef, *_ = np.linalg.lstsq(design, np.ones(len(depth)), rcond=None)
    channels = train["inputs"].shape[1]
    return coef[:-1].reshape(1, channels, kernel, kernel), coef[-1:]


def _sample_patches(
    images: np.ndarray, depth: np.ndarray, kernel: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(samples, C·k·k) patches ordered like a Conv weight (C, ky, kx), and their depths.

    Centres avoid the border so no patch reaches into the Conv's zero padding.
    """
    scenes, channels, height, width = images.shape
    half = kernel // 2
    count = scenes * _PIXELS_PER_SCENE
    scene = np.repeat(np.arange(scenes), _PIXELS_PER_SCENE)
    row = rng.integers(half, height - half, size=count)
    col = rng.integers(half, width - half, size=count)
    offsets = np.arange(kernel) - half
    patches = images[
        scene[:, None, None, None],
        np.arange(channels)[None, :, None, None],
        row[:, None, None, None] + offsets[None, None, :, None],
        col[:, None, None, None] + offsets[None, None, None, :],
    ]
    targets = depth[scene, row, col].astype(np.float64)
    return patches.reshape(count, -1).astype(np.float64), targets
