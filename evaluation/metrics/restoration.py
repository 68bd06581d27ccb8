"""Image restoration (super-resolution, denoising): PSNR and SSIM as NTIRE's challenges compute
them (the KAIR / BasicSR scripts their organisers publish).

Predictions and targets are images (N, C, H, W) with white at ``data_range`` (1.0 for 0..1
floats). Each image is brought to 8-bit levels 0..255 (clipped and rounded, as saving a PNG
does), RGB images (C = 3) are reduced to the Y channel of YCbCr (ITU-R BT.601, 16..235, rounded
like MATLAB's and KAIR's ``rgb2ycbcr``), ``crop_border`` pixels are cut from every edge (NTIRE
crops the scale factor), then:

- PSNR = 10 log10(255² / MSE) per image, averaged over the images;
- SSIM per Wang et al. 2004: an 11x11 Gaussian window of sigma 1.5 over the "valid" positions,
  K1 = 0.01, K2 = 0.03, L = 255, averaged over the window positions, the channels and the images.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from evaluation.metrics.base import Option, as_numeric, shape_error

RESTORATION_OPTIONS = {
    "crop_border": Option(
        0, "pixels cut from each edge before scoring; NTIRE cuts the scale factor", minimum=0
    ),
    "y_channel": Option(
        True, "score RGB images on the Y channel of YCbCr (BT.601), as NTIRE does; false: RGB"
    ),
    "data_range": Option(1.0, "the value of white in the images (1.0, or 255)", minimum=1e-9),
    "quantize": Option(
        True, "round the images (and Y) to 8-bit levels first, as scoring saved PNGs does"
    ),
}

# An exact copy has infinite PSNR, which JSON and a ranking cannot hold: such an image counts as
# this, far above any image that differs (an 8-bit image of under 10^10 pixels with one level
# wrong somewhere scores below 150 dB).
PSNR_CAP_DB = 150.0
_IMAGES_AT_ONCE = 8
SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
_C1 = (0.01 * 255) ** 2
_C2 = (0.03 * 255) ** 2
# ITU-R BT.601 luma for R, G, B in 0..1, giving 16..235 (MATLAB's rgb2ycbcr, KAIR, BasicSR).
_Y_WEIGHTS = np.array([65.481, 128.553, 24.966])


def _restoration_inputs(
    predictions: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    images = as_numeric("predictions", predictions)
    truth = as_numeric("targets", targets)
    if images.shape != truth.shape or images.ndim != 4:
        raise shape_error(images, truth, "restoration expects the same shape (N, C, H, W)")
    if not np.isfinite(images).all():
        raise ValueError("predictions contain NaN or infinite values")
    if not np.isfinite(truth).all():
        raise ValueError("targets contain NaN or infinite values")
    return images, truth


def _levels(
    images: np.ndarray, *, crop_border: int, y_channel: bool, data_range: float, quantize: bool
) -> np.ndarray:
    """(N, C', H', W') float64 in 0..255: 8-bit levels, Y when asked for RGB, border cut."""
    levels = np.clip(images.astype(np.float64) * (255.0 / data_range), 0.0, 255.0)
    if quantize:
        levels = np.round(levels)
    if y_channel and levels.shape[1] == 3:
        luma = np.tensordot(_Y_WEIGHTS, levels, axes=([0], [1])) / 255.0 + 16.0
        levels = (np.round(luma) if quantize else luma)[:, None]
    if crop_border:
        levels = levels[..., crop_border:-crop_border, crop_border:-crop_border]
    if levels.shape[-1] < SSIM_WINDOW or levels.shape[-2] < SSIM_WINDOW:
        raise ValueError(
            f"images of {images.shape[-2]}x{images.shape[-1]} less a border of {crop_border} "
            f"are smaller than SSIM's {SSIM_WINDOW}x{SSIM_WINDOW} window"
        )
    return levels


def _psnr(prediction: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per image, over its channels and pixels."""
    mse = np.square(prediction - target).reshape(len(prediction), -1).mean(axis=1)
    with np.errstate(divide="ignore"):
        psnr: np.ndarray = 10.0 * np.log10(255.0**2 / mse)
    return np.minimum(psnr, PSNR_CAP_DB)


def gaussian_window() -> np.ndarray:
    """The 1-D factor of SSIM's 11x11 window, summing to 1 (OpenCV's getGaussianKernel)."""
    x = np.arange(SSIM_WINDOW) - SSIM_WINDOW // 2
    weights = np.exp(-(x**2) / (2 * SSIM_SIGMA**2))
    return weights / weights.sum()


def _filtered(images: np.ndarray) -> np.ndarray:
    """Each (H, W) plane filtered by the window at the positions where it fits ("valid")."""
    window = gaussian_window()
    rows = sliding_window_view(images, SSIM_WINDOW, axis=-2) @ window
    return sliding_window_view(rows, SSIM_WINDOW, axis=-1) @ window


def _ssim(prediction: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per image: the mean SSIM map over its window positions and channels."""
    mu_p, mu_t = _filtered(prediction), _filtered(target)
    var_p = _filtered(prediction * prediction) - mu_p**2
    var_t = _filtered(target * target) - mu_t**2
    covariance = _filtered(prediction * target) - mu_p * mu_t
    ssim_map = ((2 * mu_p * mu_t + _C1) * (2 * covariance + _C2)) / (
        (mu_p**2 + mu_t**2 + _C1) * (var_p + var_t + _C2)
    )
    means: np.ndarray = ssim_map.reshape(len(ssim_map), -1).mean(axis=1)
    return means


def restoration_metrics(
    predictions: np.ndarray, targets: np.ndarray, **options: Any
) -> dict[str, float]:
    """PSNR (dB) and SSIM, each the mean over the images."""
    images, truth = _restoration_inputs(predictions, targets)
    settings: dict[str, Any] = {
        name: option.default for name, option in RESTORATION_OPTIONS.items()
    }
    settings.update(options)
    psnrs, ssims = [], []
    for start in range(0, len(images), _IMAGES_AT_ONCE):  # bounds the float64 temporaries
        part = slice(start, start + _IMAGES_AT_ONCE)
        prediction, target = _levels(images[part], **settings), _levels(truth[part], **settings)
        psnrs.append(_psnr(prediction, target))
        ssims.append(_ssim(prediction, target))
    return {
        "psnr": float(np.concatenate(psnrs).mean()),
        "ssim": float(np.concatenate(ssims).mean()),
    }


def psnr(predictions: np.ndarray, targets: np.ndarray, **options: Any) -> float:
    return restoration_metrics(predictions, targets, **options)["psnr"]


def ssim(predictions: np.ndarray, targets: np.ndarray, **options: Any) -> float:
    return restoration_metrics(predictions, targets, **options)["ssim"]
