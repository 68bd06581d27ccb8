"""Depth: the seven KITTI / Monodepth2 metrics per image over its valid pixels, in float32 a
block of images at a time, sums pairwise or in float64 so that sums over millions of pixels do
not drift."""

from __future__ import annotations

import numpy as np

from evaluation.metrics.base import MetricFn, as_numeric, shape_error

# Depth predictions are clipped up to this before any metric: log and the ratios p/t, t/p need a
# positive prediction, and a network may emit zero or negative depth. Monodepth2's KITTI evaluation
# clips the same way (to its MIN_DEPTH) and, like it, we apply the clipped depth to every metric so
# the seven numbers all describe the same depth map.
MIN_PREDICTED_DEPTH = 1e-3

DEPTH_KEYS = ("abs_rel", "sq_rel", "depth_rmse", "rmse_log", "delta1", "delta2", "delta3")


def _depth_inputs(predictions: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    depths = as_numeric("predictions", predictions)
    truth = as_numeric("targets", targets)
    if depths.shape != truth.shape or depths.ndim < 2:
        raise shape_error(depths, truth, "depth expects the same shape (N, H, W) or (N, ...)")
    return depths.reshape(len(depths), -1), truth.reshape(len(truth), -1)


# Images are scored in blocks of about this many pixels through scratch buffers allocated once:
# the buffers stay in the CPU's cache, and no block allocates or faults in fresh pages.
DEPTH_BLOCK_PIXELS = 1 << 18
_DELTA_THRESHOLDS = tuple(np.float32(1.25**k) for k in (1, 2, 3))
_ONE = np.float32(1)


def _row_counts(mask: np.ndarray) -> np.ndarray:
    """True values per row; for a few long rows one count per row is several times faster than
    numpy's count along an axis (which sums through a cast to integers)."""
    if len(mask) <= 64:
        return np.array([np.count_nonzero(row) for row in mask])
    return np.count_nonzero(mask, axis=1)


class _Scratch:
    """Reusable float32 and bool buffers for blocks of ``rows`` images of ``pixels`` each."""

    def __init__(self, rows: int, pixels: int) -> None:
        self.t, self.p, self.a, self.b = (np.empty((rows, pixels), np.float32) for _ in range(4))
        self.mask = np.empty((rows, pixels), bool)


def _depth_block_sums(depths: np.ndarray, truth: np.ndarray, scratch: _Scratch) -> np.ndarray:
    """Per image of the block: its valid-pixel count, then the sums behind the seven metrics.

    Elementwise work is float32; invalid pixels are set to p = t = 1, which adds 0 to every error
    sum and 1 to every delta count (taken off again). Every error is written through the ratio
    q = p/t, so that one division serves all seven. Sums are numpy's pairwise float32 sums along
    the image (error grows with log n, not n), then float64.
    """
    rows, pixels = truth.shape
    t, p, a, b, mask = (
        x[:rows] for x in (scratch.t, scratch.p, scratch.a, scratch.b, scratch.mask)
    )
    out = np.empty((rows, 8))
    np.greater(truth, 0, out=mask)  # False for NaN
    mask &= truth != np.inf
    invalid = pixels - _row_counts(mask)
    out[:, 0] = pixels - invalid
    np.maximum(depths, np.float32(MIN_PREDICTED_DEPTH), out=p, casting="unsafe")
    if invalid.any():
        np.logical_not(mask, out=mask)
        np.copyto(t, truth, casting="unsafe")
        np.copyto(t, _ONE, where=mask)
        np.copyto(p, _ONE, where=mask)
    elif truth.dtype == np.float32:
        t = truth  # read only below
    else:
        np.copyto(t, truth, casting="unsafe")
    if not np.isfinite(p).all():  # np.maximum kept NaN
        raise ValueError("predictions contain NaN or infinite values at valid target pixels")
    np.divide(p, t, out=a)  # q
    np.subtract(a, _ONE, out=b)  # q - 1
    np.multiply(t, b, out=p)  # t (q - 1) = p - t; t may be the caller's array
    scratch_t = scratch.t[:rows]
    np.multiply(p, b, out=scratch_t)  # (p - t)^2 / t
    out[:, 2] = scratch_t.sum(axis=1)
    np.multiply(p, p, out=p)  # (p - t)^2
    out[:, 3] = p.sum(axis=1)
    np.abs(b, out=b)  # |p - t| / t
    out[:, 1] = b.sum(axis=1)
    np.log(a, out=b)
    np.multiply(b, b, out=b)  # (log p - log t)^2
    out[:, 4] = b.sum(axis=1)
    np.reciprocal(a, out=b)
    np.maximum(a, b, out=a)  # max(p/t, t/p)
    for column, threshold in enumerate(_DELTA_THRESHOLDS, start=5):
        np.less(a, threshold, out=mask)
        out[:, column] = _row_counts(mask) - invalid
    return out


def depth_metrics(predictions: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """All depth metrics: per image over its valid pixels (target finite and > 0), then averaged
    over the images that have any, as the KITTI / Monodepth2 evaluation does.

    Computed in float32 a block of images at a time; agrees with a float64 per-pixel reference to
    about 1e-6 relative.
    """
    depths, truth = _depth_inputs(predictions, targets)
    per_block = max(1, min(len(truth), DEPTH_BLOCK_PIXELS // max(1, truth.shape[1])))
    scratch = _Scratch(per_block, truth.shape[1])
    sums = np.concatenate(
        [
            _depth_block_sums(depths[i : i + per_block], truth[i : i + per_block], scratch)
            for i in range(0, len(truth), per_block)
        ]
    )
    counts, sums = sums[:, 0], sums[:, 1:]
    scored = counts > 0
    if not scored.any():
        raise ValueError("targets have no valid depth pixels (finite and > 0) in any sample")
    per_image = sums[scored] / counts[scored, None]
    per_image[:, 2:4] = np.sqrt(per_image[:, 2:4])  # depth_rmse, rmse_log
    means = per_image.mean(axis=0)
    return {key: float(value) for key, value in zip(DEPTH_KEYS, means, strict=True)}


def depth_metric(key: str) -> MetricFn:
    def fn(predictions: np.ndarray, targets: np.ndarray) -> float:
        return depth_metrics(predictions, targets)[key]

    fn.__name__ = key
    return fn
