"""The demo's super-resolution task (x2), built with numpy and onnx.helper alone.

Each high-resolution image is 32x32 grey levels: a smooth shading, a few soft blobs and a few
hard-edged rectangles, rounded to 8-bit levels (k / 255) like a PNG. Its low-resolution input is
the 2x2 mean of it (16x16), rounded the same way. Scored by PSNR (SSIM beside it) on the Y
channel with a border of 2, as NTIRE scores x2.

Three baselines, worst first: nearest-neighbour and bicubic upsampling (ONNX Resize), and a
learned one: a 5x5 convolution to the four sub-pixel phases and DepthToSpace (ESPCN's layout,
one linear layer), fitted by least squares on training images from a seed no test set uses.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from onnx import helper

from submissions.demo.baselines import Baseline, build_model
from submissions.demo.datasets import make_split

SCALE = 2
HR_SIZE = 32
LR_SIZE = HR_SIZE // SCALE
INPUT_SHAPE = (1, LR_SIZE, LR_SIZE)
OUTPUT_SHAPE = (1, HR_SIZE, HR_SIZE)
SR_TRAIN_SEED = 54321  # the learned baseline and the published rows; no test set uses it
SR_TRAIN_IMAGES = 256
KERNEL = 5
_RIDGE = 1e-3


def _eight_bit(images: np.ndarray) -> np.ndarray:
    levels: np.ndarray = np.round(np.clip(images, 0.0, 1.0) * 255.0) / 255.0
    return levels.astype(np.float32)


def _high_resolution(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 1, 32, 32) images in 0..1: shading + soft blobs + hard-edged rectangles."""
    coord = np.linspace(-1.0, 1.0, HR_SIZE)
    y, x = coord[:, None], coord[None, :]
    images = np.empty((n, HR_SIZE, HR_SIZE))
    for i in range(n):
        a, b, c = rng.uniform(-0.25, 0.25, size=3)
        image = 0.5 + a * x + b * y + c * x * y
        for _ in range(3):
            cy, cx = rng.uniform(-0.8, 0.8, size=2)
            width, height = rng.uniform(0.15, 0.5), rng.uniform(-0.4, 0.4)
            image += height * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * width**2))
        for _ in range(2):
            top, left = rng.integers(0, HR_SIZE - 6, size=2)
            tall, wide = rng.integers(3, 14, size=2)
            image[top : top + tall, left : left + wide] += rng.uniform(-0.35, 0.35)
        images[i] = image
    return _eight_bit(images[:, None])


def _downscaled(images: np.ndarray) -> np.ndarray:
    """The 2x2 mean of each image, in 8-bit levels."""
    n = len(images)
    blocks = images.reshape(n, 1, LR_SIZE, SCALE, LR_SIZE, SCALE)
    return _eight_bit(blocks.mean(axis=(3, 5)))


def build_sr_dataset(n: int = 64, seed: int = 0) -> dict[str, np.ndarray]:
    """inputs (n, 1, 16, 16), targets (n, 1, 32, 32) in 0..1, and a public/private split."""
    rng = np.random.default_rng(seed)
    targets = _high_resolution(n, rng)
    return {"inputs": _downscaled(targets), "targets": targets, "split": make_split(n, rng)}


def build_sr_training(n: int = SR_TRAIN_IMAGES) -> dict[str, np.ndarray]:
    """Training pairs from the seed no test set uses (no split)."""
    rows = build_sr_dataset(n=n, seed=SR_TRAIN_SEED)
    return {"inputs": rows["inputs"], "targets": rows["targets"]}


def _upsampling(mode: str) -> bytes:
    nodes = [helper.make_node("Resize", ["input", "", "scales"], ["output"], mode=mode)]
    scales = np.array([1.0, 1.0, SCALE, SCALE], dtype=np.float32)
    return build_model(
        graph_name=f"sr_{mode}",
        nodes=nodes,
        initializers={"scales": scales},
        input_shape=INPUT_SHAPE,
        output_shape=OUTPUT_SHAPE,
    )


def _patches(inputs: np.ndarray) -> np.ndarray:
    """(pixels, 25): each low-resolution pixel's 5x5 neighbourhood, edges repeated, in the
    order of a Conv weight (ky, kx)."""
    half = KERNEL // 2
    padded = np.pad(inputs[:, 0], ((0, 0), (half, half), (half, half)), mode="edge")
    windows = sliding_window_view(padded, (KERNEL, KERNEL), axis=(1, 2))
    return windows.reshape(-1, KERNEL * KERNEL).astype(np.float64)


def fit_subpixel_conv(train: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Conv weight (4, 1, 5, 5) and bias (4,): output channel i*2 + j predicts the
    high-resolution pixel (2h + i, 2w + j), the order DepthToSpace (DCR) reads."""
    design = np.hstack([_patches(train["inputs"]), np.ones((train["inputs"][:, 0].size, 1))])
    hr = train["targets"][:, 0].astype(np.float64)
    phases = np.stack(
        [hr[:, i::SCALE, j::SCALE].ravel() for i in range(SCALE) for j in range(SCALE)], axis=1
    )
    gram = design.T @ design + _RIDGE * np.eye(design.shape[1])
    coef = np.linalg.solve(gram, design.T @ phases)
    return coef[:-1].T.reshape(SCALE * SCALE, 1, KERNEL, KERNEL), coef[-1]


def _subpixel_model(weight: np.ndarray, bias: np.ndarray) -> bytes:
    half = KERNEL // 2
    nodes = [
        helper.make_node("Pad", ["input", "pads"], ["padded"], mode="edge"),
        helper.make_node("Conv", ["padded", "weight", "bias"], ["phases"]),
        helper.make_node("DepthToSpace", ["phases"], ["output"], blocksize=SCALE, mode="DCR"),
    ]
    initializers: dict[str, np.ndarray] = {
        "pads": np.array([0, 0, half, half, 0, 0, half, half], dtype=np.int64),
        "weight": weight.astype(np.float32),
        "bias": bias.astype(np.float32),
    }
    return build_model(
        graph_name="sr_subpixel_conv",
        nodes=nodes,
        initializers=initializers,
        input_shape=INPUT_SHAPE,
        output_shape=OUTPUT_SHAPE,
    )


def sr_baselines(train: dict[str, np.ndarray] | None = None) -> list[Baseline]:
    """Nearest, bicubic and the learned sub-pixel convolution, worst first."""
    weight, bias = fit_subpixel_conv(train if train is not None else build_sr_training())
    return [
        Baseline(
            "nearest-x2", "Nearest-neighbour upsampling (ONNX Resize).", _upsampling("nearest")
        ),
        Baseline("bicubic-x2", "Bicubic upsampling (ONNX Resize, cubic).", _upsampling("cubic")),
        Baseline(
            "subpixel-conv-x2",
            "One 5x5 convolution to the four sub-pixel phases, then DepthToSpace; fitted by "
            "least squares on the training pairs.",
            _subpixel_model(weight, bias),
        ),
    ]
