"""Demo datasets in the portal's `.npz` format, built with numpy alone.

A dataset file holds `inputs` (N, *input_shape), `targets` (N, ...) and
`split`, a unicode array of "public"/"private" labels, one per row. Training
files carry no `split`.

Nothing here imports Django or scikit-learn: the shipped digits files were
produced once by `make_digits_npz.py` and the depth scenes are synthetic.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

DEMO_DIR = Path(__file__).resolve().parent
DIGITS_TEST_PATH = DEMO_DIR / "digits.npz"
DIGITS_TRAIN_PATH = DEMO_DIR / "digits_train.npz"
# A participant's starter (published on the digits and depth tasks); numpy and onnx only.
STARTER_PATH = DEMO_DIR / "starters" / "starter.py"

PUBLIC = "public"
PRIVATE = "private"

DEPTH_SIZE = 448
DEPTH_MIN_M = 0.5
DEPTH_MAX_M = 10.0
# The depth baselines fit on scenes from this seed, which no test set uses.
DEPTH_TRAIN_SEED = 12345
DEPTH_TRAIN_SCENES = 4  # about 11 MB compressed: enough to fit a per-pixel baseline


def load_npz(path: Path | str) -> dict[str, np.ndarray]:
    """Read every array of an `.npz` into memory (no pickled objects allowed)."""
    with np.load(path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


def write_npz(path: Path | str, arrays: dict[str, np.ndarray], *, compress: bool = False) -> None:
    """Write arrays to `path`; large float data compresses poorly, so the default is raw."""
    save = np.savez_compressed if compress else np.savez
    # numpy's stubs fear a key named "allow_pickle"; array names never are.
    save(path, **arrays)  # type: ignore[arg-type]


def make_split(n: int, rng: np.random.Generator) -> np.ndarray:
    """Label half of `n` rows public and the rest private, in random order.

    A random order rather than two contiguous halves, so neither half is biased
    by however the rows happen to be arranged.
    """
    labels = np.full(n, PRIVATE, dtype="<U7")
    labels[: n // 2] = PUBLIC
    return labels[rng.permutation(n)]


def load_digits_train() -> dict[str, np.ndarray]:
    """The 797 shipped digits rows meant for fitting baselines (no split)."""
    return load_npz(DIGITS_TRAIN_PATH)


def load_digits_test() -> dict[str, np.ndarray]:
    """The 1,000 shipped digits rows the portal scores on, split 500/500."""
    return load_npz(DIGITS_TEST_PATH)


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """``arrays`` as a compressed `.npz` file's bytes (what the task pages publish)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def digits_training_rows() -> dict[str, np.ndarray]:
    """The 797 digits rows participants may train on: the shipped training file, which
    make_digits_npz.py cut from the same shuffle as the hidden set, so no row is in both."""
    train = load_digits_train()
    return {"inputs": train["inputs"], "targets": train["targets"]}


def build_depth_training(n: int = DEPTH_TRAIN_SCENES) -> dict[str, np.ndarray]:
    """Depth scenes participants may train on, from the seed no test set uses (no split)."""
    scenes = build_depth_dataset(n=n, seed=DEPTH_TRAIN_SEED)
    return {"inputs": scenes["inputs"], "targets": scenes["targets"]}


def build_depth_dataset(n: int = 32, seed: int = 0) -> dict[str, np.ndarray]:
    """Synthetic RGB-D scenes: inputs (n, 3, 448, 448), targets (n, 448, 448) in metres.

    Each depth map is a tilted plane plus a few Gaussian bumps, kept inside
    0.5..10 m. Two colour channels are textured, noisy functions of depth and
    inverse depth (see `_render_images`), so depth can be read partly from a
    single pixel (a 1x1 conv beats a constant) and better from a neighbourhood
    that averages the sensor noise away (a 3x3 conv beats a 1x1).
    """
    rng = np.random.default_rng(seed)
    depth = _depth_fields(n, rng)
    images = _render_images(depth, rng)
    return {"inputs": images, "targets": depth, "split": make_split(n, rng)}


def _axis(size: int) -> np.ndarray:
    """Pixel-centre coordinates in -1..1, the frame every scene is drawn in."""
    return np.linspace(-1.0, 1.0, size, dtype=np.float32)


def _depth_fields(n: int, rng: np.random.Generator, blobs: int = 4) -> np.ndarray:
    """Smooth depth maps (n, H, W): plane + separable Gaussian bumps, clipped to range."""
    coord = _axis(DEPTH_SIZE)
    base = rng.uniform(2.5, 6.0, size=(n, 1, 1)).astype(np.float32)
    tilt_y, tilt_x = (rng.uniform(-2.0, 2.0, size=(2, n, 1, 1))).astype(np.float32)
    depth: np.ndarray = base + tilt_y * coord[:, None] + tilt_x * coord[None, :]
    for _ in range(blobs):
        centre = rng.uniform(-0.8, 0.8, size=(2, n, 1)).astype(np.float32)
        width = rng.uniform(0.1, 0.4, size=(n, 1)).astype(np.float32)
        height = rng.uniform(-3.0, 3.0, size=(n, 1, 1)).astype(np.float32)
        # exp(-(x²+y²)/2s²) factorises, so (n, H) and (n, W) profiles replace n·H·W exps.
        gy = np.exp(-0.5 * ((coord[None, :] - centre[0]) / width) ** 2)
        gx = np.exp(-0.5 * ((coord[None, :] - centre[1]) / width) ** 2)
        depth += height * gy[:, :, None] * gx[:, None, :]
    np.clip(depth, DEPTH_MIN_M, DEPTH_MAX_M, out=depth)
    return depth


def _texture(n: int, rng: np.random.Generator, spread: float, cells: int = 28) -> np.ndarray:
    """Blocky albedo factors (n, H, W) in 1 ± spread, cheap to upsample by repetition."""
    coarse = rng.uniform(1.0 - spread, 1.0 + spread, size=(n, cells, cells)).astype(np.float32)
    factor = DEPTH_SIZE // cells
    return coarse.repeat(factor, axis=1).repeat(factor, axis=2)


def _render_images(
    depth: np.ndarray, rng: np.random.Generator, spread: float = 0.25, noise: float = 0.08
) -> np.ndarray:
    """RGB (n, 3, H, W) in roughly 0..1, each channel times its own albedo texture.

    Red brightens with distance (haze, ∝ depth), green darkens with it (a light
    at the camera, ∝ 1/depth), blue is texture only and carries no depth. The
    textures bound how well any model can do; the per-pixel sensor noise is
    what a wider kernel can average away.
    """
    n = depth.shape[0]
    images = np.empty((n, 3, *depth.shape[1:]), dtype=np.float32)
    images[:, 0] = depth * np.float32(1.0 / DEPTH_MAX_M)
    images[:, 1] = np.float32(DEPTH_MIN_M) / depth
    images[:, 2] = 0.5
    for channel in range(3):
        # One channel at a time keeps temporaries at (n, H, W), not (n, 3, H, W).
        images[:, channel] *= _texture(n, rng, spread)
        images[:, channel] += rng.standard_normal(depth.shape, dtype=np.float32) * noise
    return images
