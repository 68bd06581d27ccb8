"""Specification of the segmentation and restoration metrics (issue 35, item 5): worked
examples, and agreement with references written straightforwardly here (a confusion matrix
counted pixel by pixel; PSNR and SSIM as KAIR / BasicSR compute them for NTIRE, SSIM window by
window per Wang et al. 2004, and through scipy's Gaussian filter as scikit-image does)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter

from evaluation.metrics import compute_family, restoration_metrics, segmentation_metrics
from evaluation.runner import Dataset, DeviceConfig, evaluate
from tests.builders import DIGITS_SPEC, unary_model

# --- segmentation --------------------------------------------------------------------------------


def one_hot_scores(labels: np.ndarray, classes: int) -> np.ndarray:
    """Scores (N, C, H, W) whose argmax is ``labels`` (N, H, W)."""
    scores: np.ndarray = np.moveaxis(np.eye(classes)[labels], -1, 1)
    return scores


def reference_segmentation(
    predicted: np.ndarray, targets: np.ndarray, classes: int, ignore: int, all_declared: bool
) -> dict[str, float]:
    matrix = [[0] * classes for _ in range(classes)]
    for truth, guess in zip(targets.ravel().tolist(), predicted.ravel().tolist(), strict=True):
        if truth != ignore:
            matrix[truth][guess] += 1
    ious = []
    for c in range(classes):
        hits = matrix[c][c]
        in_targets = sum(matrix[c])
        in_predictions = sum(row[c] for row in matrix)
        union = in_targets + in_predictions - hits
        if (union > 0) if all_declared else (in_targets > 0):
            ious.append(hits / union)
    scored = sum(sum(row) for row in matrix)
    hits = sum(matrix[c][c] for c in range(classes))
    return {"miou": sum(ious) / len(ious), "pixel_accuracy": hits / scored}


def test_miou_and_pixel_accuracy_by_hand() -> None:
    # Four classes declared; class 3 never appears. 255 marks a pixel that is not scored.
    targets = np.array([[[0, 0, 1], [1, 2, 255]]])
    predicted = np.array([[[0, 1, 1], [1, 3, 0]]])
    values = segmentation_metrics(one_hot_scores(predicted, 4), targets)
    # IoU: class 0: 1 / (2 + 1 - 1) = 1/2; class 1: 2 / (2 + 3 - 2) = 2/3; class 2: 0 / 1 = 0.
    assert values["miou"] == pytest.approx((1 / 2 + 2 / 3 + 0) / 3)
    assert values["pixel_accuracy"] == pytest.approx(3 / 5)
    # Over every declared class, class 3 (predicted once, never a target) counts as IoU 0.
    declared = segmentation_metrics(one_hot_scores(predicted, 4), targets, miou_all_declared=True)
    assert declared["miou"] == pytest.approx((1 / 2 + 2 / 3 + 0 + 0) / 4)


@pytest.mark.parametrize("all_declared", [False, True])
@pytest.mark.parametrize("ignore", [255, 0, -1])
def test_segmentation_agrees_with_a_pixel_by_pixel_confusion_matrix(
    ignore: int, all_declared: bool
) -> None:
    rng = np.random.default_rng(ignore + 7)
    classes = 6
    targets = rng.integers(0, classes - 1, size=(3, 9, 11))  # class 5 is never a target
    if ignore == 255:
        targets[rng.random(targets.shape) < 0.2] = 255
    scores = rng.random((3, classes, 9, 11)).astype(np.float32)
    expected = reference_segmentation(
        np.argmax(scores, axis=1), targets, classes, ignore, all_declared
    )
    values = compute_family(
        "miou", scores, targets, {"ignore_index": ignore, "miou_all_declared": all_declared}
    )
    assert values == pytest.approx(expected, rel=1e-12)


def test_a_label_outside_the_classes_that_is_not_the_ignore_label_is_refused() -> None:
    targets = np.array([[[0, 7]]])
    with pytest.raises(ValueError, match=r"class ids in \[0, 3\) or the ignore label 255"):
        segmentation_metrics(np.zeros((1, 3, 1, 2)), targets)


def test_a_set_with_every_pixel_ignored_is_refused() -> None:
    with pytest.raises(ValueError, match="no scored pixel"):
        segmentation_metrics(np.zeros((1, 3, 1, 2)), np.full((1, 1, 2), 255))


def test_segmentation_wants_scores_per_class_and_labels_per_pixel() -> None:
    with pytest.raises(ValueError, match=r"predictions \(N, C, H, W\) and targets \(N, H, W\)"):
        segmentation_metrics(np.zeros((1, 3, 4, 4)), np.zeros((1, 4, 5), np.int64))


def test_options_a_metric_does_not_take_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="miou has no option 'crop_border'"):
        compute_family("miou", np.zeros((1, 2, 1, 1)), np.zeros((1, 1, 1), int), {"crop_border": 2})
    with pytest.raises(ValueError, match="'ignore_index' must be a whole number, not True"):
        compute_family(
            "miou", np.zeros((1, 2, 1, 1)), np.zeros((1, 1, 1), int), {"ignore_index": True}
        )


# --- restoration ---------------------------------------------------------------------------------


def kair_y(image: np.ndarray) -> np.ndarray:
    """KAIR's ``rgb2ycbcr(img, only_y=True)`` of an 8-bit (H, W, 3) RGB image: rounded Y."""
    luma = np.dot(image.astype(np.float64), [65.481, 128.553, 24.966]) / 255.0 + 16.0
    return np.round(luma)


def to_uint8(image: np.ndarray) -> np.ndarray:
    """As a 0..1 float (C, H, W) image is saved to PNG: (H, W, C) uint8."""
    return np.round(np.clip(image * 255.0, 0, 255)).astype(np.uint8).transpose(1, 2, 0)


def reference_psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def ssim_window() -> np.ndarray:
    g = np.array([math.exp(-((i - 5) ** 2) / (2 * 1.5**2)) for i in range(11)])
    g /= g.sum()
    return np.outer(g, g)


def reference_ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Wang et al. 2004's ssim_index, window by window over the valid positions."""
    a, b, w = a.astype(np.float64), b.astype(np.float64), ssim_window()
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    values = []
    for i in range(a.shape[0] - 10):
        for j in range(a.shape[1] - 10):
            x, y = a[i : i + 11, j : j + 11], b[i : i + 11, j : j + 11]
            mx, my = (w * x).sum(), (w * y).sum()
            vx, vy = (w * x * x).sum() - mx**2, (w * y * y).sum() - my**2
            cov = (w * x * y).sum() - mx * my
            values.append(
                ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
            )
    return float(np.mean(values))


def skimage_style_ssim(a: np.ndarray, b: np.ndarray) -> float:
    """scikit-image's structural_similarity(gaussian_weights=True, sigma=1.5,
    use_sample_covariance=False, data_range=255): filter everywhere, keep the interior."""
    a, b = a.astype(np.float64), b.astype(np.float64)

    def f(x: np.ndarray) -> np.ndarray:
        return gaussian_filter(x, sigma=1.5, truncate=3.5)

    mx, my = f(a), f(b)
    vx, vy, cov = f(a * a) - mx**2, f(b * b) - my**2, f(a * b) - mx * my
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    s = ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    return float(s[5:-5, 5:-5].mean())


def degraded(shape: tuple[int, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    targets = np.round(rng.random(shape) * 255) / 255  # 8-bit images, as datasets hold them
    predictions = targets + rng.normal(0, 0.04, shape)  # some go past 0 and 1: clipped
    return predictions, targets


def test_psnr_and_ssim_on_y_with_a_border_agree_with_ntire_scoring() -> None:
    predictions, targets = degraded((3, 3, 20, 23), seed=1)
    crop = 2
    psnrs, ssims = [], []
    for p, t in zip(predictions, targets, strict=True):
        y_p, y_t = kair_y(to_uint8(p)), kair_y(to_uint8(t))
        y_p, y_t = y_p[crop:-crop, crop:-crop], y_t[crop:-crop, crop:-crop]
        psnrs.append(reference_psnr(y_p, y_t))
        ssims.append(reference_ssim(y_p, y_t))
        assert skimage_style_ssim(y_p, y_t) == pytest.approx(ssims[-1], rel=1e-9)
    values = compute_family("psnr", predictions, targets, {"crop_border": crop})
    assert values["psnr"] == pytest.approx(np.mean(psnrs), rel=1e-12)
    assert values["ssim"] == pytest.approx(np.mean(ssims), rel=1e-9)


def test_rgb_without_y_scores_every_channel_and_grey_images_score_as_they_are() -> None:
    predictions, targets = degraded((2, 3, 14, 14), seed=2)
    values = restoration_metrics(predictions, targets, y_channel=False)
    pairs = list(zip(predictions, targets, strict=True))
    psnr = [reference_psnr(to_uint8(p), to_uint8(t)) for p, t in pairs]
    ssim = [
        np.mean([reference_ssim(to_uint8(p)[..., c], to_uint8(t)[..., c]) for c in range(3)])
        for p, t in pairs
    ]
    assert values == pytest.approx({"psnr": np.mean(psnr), "ssim": np.mean(ssim)}, rel=1e-9)
    grey = restoration_metrics(predictions[:, :1], targets[:, :1])
    expected = np.mean([reference_psnr(to_uint8(p[:1]), to_uint8(t[:1])) for p, t in pairs])
    assert grey["psnr"] == pytest.approx(expected, rel=1e-12)


def test_white_against_black_is_the_span_of_bt601_luma() -> None:
    white, black = np.ones((1, 3, 11, 11)), np.zeros((1, 3, 11, 11))
    # Y of white is 235 and of black 16: PSNR = 10 log10(255² / 219²).
    assert restoration_metrics(white, black)["psnr"] == pytest.approx(20 * math.log10(255 / 219))


def test_one_level_off_everywhere_is_48_13_db_and_a_copy_is_capped() -> None:
    targets = np.full((1, 1, 12, 12), 100 / 255)
    assert restoration_metrics(targets + 1 / 255, targets)["psnr"] == pytest.approx(
        10 * math.log10(255**2), rel=1e-12
    )
    copy = restoration_metrics(targets, targets)
    assert copy == {"psnr": 150.0, "ssim": 1.0}


def test_the_border_is_not_scored_and_0_255_images_take_their_data_range() -> None:
    predictions, targets = degraded((1, 1, 16, 16), seed=3)
    predictions[..., 2:-2, 2:-2] = targets[..., 2:-2, 2:-2]
    assert restoration_metrics(predictions, targets, crop_border=2)["psnr"] == 150.0
    scaled = restoration_metrics(predictions * 255, targets * 255, data_range=255.0)
    assert scaled == pytest.approx(restoration_metrics(predictions, targets), rel=1e-12)


def test_images_smaller_than_the_ssim_window_are_refused() -> None:
    with pytest.raises(ValueError, match="smaller than SSIM's 11x11 window"):
        restoration_metrics(np.zeros((1, 1, 14, 14)), np.zeros((1, 1, 14, 14)), crop_border=2)


# --- through the runner -----------------------------------------------------------------------


def test_a_segmentation_task_is_scored_by_the_runner_with_its_ignore_label() -> None:
    rng = np.random.default_rng(5)
    scores = rng.random((20, 3, 4, 6), dtype=np.float32)  # the model passes them through
    targets = rng.integers(0, 3, size=(20, 4, 6))
    targets[:, 0] = 7  # this task's unlabelled pixels
    split = np.array(["public", "private"] * 10)
    spec = replace(
        DIGITS_SPEC,
        input_shape=(3, 4, 6),
        output_shape=(3, 4, 6),
        metric="miou",
        metric_options={"ignore_index": 7},
    )
    model = unary_model("Identity", ["batch", 3, 4, 6])
    data = Dataset.from_arrays({"inputs": scores, "targets": targets, "split": split})
    result = evaluate(model, data, spec, DeviceConfig(worker_name="test", warmup_runs=1))
    public = split == "public"
    expected = reference_segmentation(
        np.argmax(scores[public], axis=1), targets[public], 3, ignore=7, all_declared=False
    )
    assert result.metrics == pytest.approx(expected, rel=1e-12)
    assert result.score == result.metrics["miou"]
