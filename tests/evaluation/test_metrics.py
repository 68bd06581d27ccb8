"""Specification of evaluation.metrics: worked examples, sklearn and a plain-Python reference."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    mean_absolute_error,
    mean_squared_error,
    top_k_accuracy_score,
)

from evaluation.metrics import (
    BUILT_IN,
    DEPTH_KEYS,
    Direction,
    compute_family,
    get_metric,
    metric_choices,
    metric_families,
)

METRICS = {metric.key: metric for metric in BUILT_IN}

# Four samples, three classes. Argmax per row: 1, 0, 2, 1 against targets 1, 2, 2, 0.
SCORES = np.array(
    [
        [0.1, 0.7, 0.2],
        [0.5, 0.3, 0.2],
        [0.2, 0.2, 0.6],
        [0.3, 0.4, 0.3],
    ],
    dtype=np.float32,
)
LABELS = np.array([1, 2, 2, 0])


def score(key: str, predictions: np.ndarray, targets: np.ndarray) -> float:
    return get_metric(key).fn(predictions, targets)


# --- classification: by hand --------------------------------------------------------------------


def test_accuracy_counts_argmax_hits() -> None:
    # Rows 0 and 2 are hits: 2 / 4.
    assert score("accuracy", SCORES, LABELS) == 0.5


def test_macro_f1_averages_per_class_f1() -> None:
    # F1 = 2TP / (2TP + FP + FN) = 2TP / (times predicted + times a target).
    # class 0: TP 0, predicted 1, target 1 -> 0
    # class 1: TP 1, predicted 2, target 1 -> 2/3
    # class 2: TP 1, predicted 1, target 2 -> 2/3
    # mean = (0 + 2/3 + 2/3) / 3 = 4/9
    assert score("macro_f1", SCORES, LABELS) == pytest.approx(0.4444444444444444)


def test_macro_f1_ignores_a_class_never_predicted_nor_a_target() -> None:
    # A fourth class with very low scores: still 4/9, not (0 + 2/3 + 2/3 + 0) / 4 = 1/3.
    scores = np.hstack([SCORES, np.full((4, 1), -10.0, dtype=np.float32)])
    assert score("macro_f1", scores, LABELS) == pytest.approx(0.4444444444444444)


def test_top5_accuracy_counts_targets_among_five_highest() -> None:
    # Scores rise with the class id, so class 6 ranks first, 2 fifth and 1 sixth.
    scores = np.tile(np.arange(7, dtype=np.float64), (2, 1))
    targets = np.array([2, 1])
    assert score("top5_accuracy", scores, targets) == 0.5
    assert score("accuracy", scores, targets) == 0.0


def test_top5_accuracy_is_one_with_fewer_than_five_classes() -> None:
    # Every one of 3 classes is in the top 5, even where top-1 misses.
    assert score("top5_accuracy", SCORES, LABELS) == 1.0


def test_ties_go_to_the_lower_class_index_like_argmax() -> None:
    scores = np.ones((2, 6))
    targets = np.array([0, 5])
    # Class 0 ranks first of six equal scores; class 5 ranks sixth, outside the top 5.
    assert score("accuracy", scores, targets) == 0.5
    assert score("top5_accuracy", scores, targets) == 0.5


# --- classification: against scikit-learn ------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_agrees_with_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_samples, n_classes = 400, 12
    scores = rng.normal(size=(n_samples, n_classes)).astype(np.float32)
    # Skew the scores and leave classes 10 and 11 out of the targets, so some classes are only
    # predicted and some rarely predicted: the union-of-labels rule matters.
    scores[:, :3] += 1.0
    targets = rng.integers(0, 10, size=n_samples)
    predicted = scores.argmax(axis=1)

    assert score("accuracy", scores, targets) == pytest.approx(accuracy_score(targets, predicted))
    assert score("top5_accuracy", scores, targets) == pytest.approx(
        top_k_accuracy_score(targets, scores, k=5, labels=np.arange(n_classes))
    )
    assert score("macro_f1", scores, targets) == pytest.approx(
        f1_score(targets, predicted, average="macro")
    )


# --- regression ---------------------------------------------------------------------------------


def test_regression_metrics_by_hand() -> None:
    predictions = np.array([[1.0, 2.0], [3.0, 4.0]])
    targets = np.array([[1.0, 0.0], [5.0, 4.0]])
    # Errors 0, 2, -2, 0: MSE = 8 / 4 = 2, MAE = 4 / 4 = 1, RMSE = sqrt(2).
    assert score("mse", predictions, targets) == 2.0
    assert score("mae", predictions, targets) == 1.0
    assert score("rmse", predictions, targets) == pytest.approx(1.4142135623730951)


@pytest.mark.parametrize("shape", [(50,), (20, 3), (4, 5, 6)])
def test_regression_agrees_with_sklearn_over_all_elements(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    predictions = rng.normal(size=shape)
    targets = rng.normal(size=shape)
    flat_p, flat_t = predictions.ravel(), targets.ravel()

    expected_mse = mean_squared_error(flat_t, flat_p)
    assert score("mse", predictions, targets) == pytest.approx(expected_mse)
    assert score("mae", predictions, targets) == pytest.approx(mean_absolute_error(flat_t, flat_p))
    assert score("rmse", predictions, targets) == pytest.approx(math.sqrt(expected_mse))


def test_float32_inputs_are_accumulated_in_float64() -> None:
    rng = np.random.default_rng(3)
    predictions = rng.normal(size=1_000_000).astype(np.float32)
    targets = np.zeros_like(predictions)
    exact = np.mean(np.square(predictions.astype(np.float64)))
    assert score("mse", predictions, targets) == pytest.approx(exact, rel=1e-14)


def test_regression_refuses_nan_predictions() -> None:
    with pytest.raises(ValueError, match="NaN or infinite"):
        score("mse", np.array([1.0, np.nan]), np.array([1.0, 2.0]))


# --- depth: by hand -----------------------------------------------------------------------------


def depth_example() -> tuple[np.ndarray, np.ndarray]:
    """Three 2x2 images; the third has no valid pixel and must be skipped."""
    predictions = np.array(
        [
            [[2.0, 2.0], [5.0, np.inf]],  # the last two pixels are invalid, so ignored
            [[4.0, 5.0], [7.0, 4.0]],
            [[1.0, 1.0], [1.0, 1.0]],
        ]
    )
    targets = np.array(
        [
            [[1.0, 2.0], [0.0, np.nan]],
            [[4.0, 4.0], [4.0, 4.0]],
            [[0.0, -1.0], [np.inf, 0.0]],
        ]
    )
    return predictions, targets


# Image 0, valid pairs (p, t) = (2, 1), (2, 2); ratios 2, 1.
#   abs_rel (1/1 + 0)/2 = 0.5; sq_rel (1/1 + 0)/2 = 0.5; rmse sqrt(1/2);
#   rmse_log sqrt((ln 2)^2 / 2) = ln2 / sqrt2; delta1/2/3 all 1/2 (2 >= 1.25^3 = 1.953125).
# Image 1, pairs (4,4), (5,4), (7,4), (4,4); errors 0, 1, 3, 0; ratios 1, 1.25, 1.75, 1.
#   abs_rel (0 + 1/4 + 3/4 + 0)/4 = 0.25; sq_rel (0 + 1/4 + 9/4 + 0)/4 = 0.625; rmse sqrt(10/4);
#   rmse_log sqrt((ln 1.25^2 + ln 1.75^2)/4);
#   delta1 2/4 (1.25 is not < 1.25); delta2 3/4 (1.75 >= 1.5625); delta3 4/4.
# Means over the two scored images:
DEPTH_BY_HAND = {
    "abs_rel": 0.375,  # (0.5 + 0.25) / 2
    "sq_rel": 0.5625,  # (0.5 + 0.625) / 2
    "depth_rmse": 1.1441228056353687,  # (sqrt(0.5) + sqrt(2.5)) / 2
    "rmse_log": 0.39568053655259294,  # (0.4901290717 + 0.3012320014) / 2
    "delta1": 0.5,  # (1/2 + 2/4) / 2
    "delta2": 0.625,  # (1/2 + 3/4) / 2
    "delta3": 0.75,  # (1/2 + 4/4) / 2
}


@pytest.mark.parametrize("key", DEPTH_KEYS)
def test_depth_metric_by_hand(key: str) -> None:
    predictions, targets = depth_example()
    assert score(key, predictions, targets) == pytest.approx(DEPTH_BY_HAND[key])


def test_depth_predictions_are_clipped_before_log_and_ratios() -> None:
    # p = -1 is scored as 0.001 against t = 1: |0.001 - 1| = 0.999, ln(1 / 0.001) = 3 ln 10.
    values = compute_family("abs_rel", np.array([[-1.0]]), np.array([[1.0]]))
    assert values == pytest.approx(
        {
            "abs_rel": 0.999,
            "sq_rel": 0.998001,
            "depth_rmse": 0.999,
            "rmse_log": 6.907755278982138,
            "delta1": 0.0,
            "delta2": 0.0,
            "delta3": 0.0,
        }
    )


def test_depth_without_any_valid_pixel_is_refused() -> None:
    with pytest.raises(ValueError, match="no valid depth pixels"):
        score("abs_rel", np.ones((2, 3, 3)), np.zeros((2, 3, 3)))


def test_depth_refuses_non_finite_predictions_at_valid_pixels() -> None:
    with pytest.raises(ValueError, match="NaN or infinite"):
        score("abs_rel", np.array([[np.nan, 1.0]]), np.array([[1.0, 1.0]]))


# --- depth: against a plain per-image, per-pixel Python reference -------------------------------


def reference_depth(predictions: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    totals = dict.fromkeys(DEPTH_KEYS, 0.0)
    images = 0
    for prediction_image, target_image in zip(predictions, targets, strict=True):
        pairs = [
            (max(float(p), 1e-3), float(t))
            for p, t in zip(prediction_image.ravel(), target_image.ravel(), strict=True)
            if math.isfinite(t) and t > 0
        ]
        if not pairs:
            continue
        images += 1
        n = len(pairs)
        ratios = [max(p / t, t / p) for p, t in pairs]
        totals["abs_rel"] += sum(abs(p - t) / t for p, t in pairs) / n
        totals["sq_rel"] += sum((p - t) ** 2 / t for p, t in pairs) / n
        totals["depth_rmse"] += math.sqrt(sum((p - t) ** 2 for p, t in pairs) / n)
        totals["rmse_log"] += math.sqrt(sum((math.log(p) - math.log(t)) ** 2 for p, t in pairs) / n)
        for power, key in enumerate(("delta1", "delta2", "delta3"), start=1):
            totals[key] += sum(r < 1.25**power for r in ratios) / n
    return {key: total / images for key, total in totals.items()}


@pytest.mark.parametrize("seed", [0, 1])
def test_depth_agrees_with_python_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (6, 8, 9)
    targets = rng.uniform(0.5, 80.0, size=shape).astype(np.float32)
    predictions = (targets * rng.lognormal(0.0, 0.3, size=shape)).astype(np.float32)
    predictions[rng.random(shape) < 0.05] = -2.0  # exercises the clip
    targets[rng.random(shape) < 0.2] = 0.0  # missing LiDAR returns
    targets[rng.random(shape) < 0.05] = np.nan
    targets[3] = 0.0  # an image with no valid pixel

    expected = reference_depth(predictions, targets)
    # Per-pixel arithmetic is float32 (sums float64): agreement to 1e-5 relative is the contract.
    assert compute_family("delta1", predictions, targets) == pytest.approx(expected, rel=1e-5)


def test_depth_scored_in_blocks_agrees_with_python_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A block of two images at a time: per-image sums must not leak across block boundaries.
    monkeypatch.setattr("evaluation.metrics.depth.DEPTH_BLOCK_PIXELS", 2 * 5 * 7)
    rng = np.random.default_rng(7)
    targets = rng.uniform(0.5, 10.0, size=(5, 5, 7))
    predictions = targets * rng.lognormal(0.0, 0.2, size=targets.shape)
    targets[rng.random(targets.shape) < 0.3] = 0.0
    targets[2] = np.nan  # a whole image without a valid pixel, in the middle block
    expected = reference_depth(predictions, targets)
    assert compute_family("abs_rel", predictions, targets) == pytest.approx(expected, rel=1e-5)


# --- registry -----------------------------------------------------------------------------------

HIGHER_IS_BETTER = {
    "accuracy",
    "top5_accuracy",
    "macro_f1",
    "delta1",
    "delta2",
    "delta3",
    "miou",
    "pixel_accuracy",
    "psnr",
    "ssim",
}


@pytest.mark.parametrize("key", list(METRICS))
def test_direction(key: str) -> None:
    assert get_metric(key).higher_is_better is (key in HIGHER_IS_BETTER)


@pytest.mark.parametrize(
    ("key", "a", "b", "better"),
    [
        ("accuracy", 0.9, 0.8, True),
        ("accuracy", 0.8, 0.9, False),
        ("accuracy", 0.8, 0.8, False),
        ("delta1", 0.95, 0.9, True),
        ("mse", 1.0, 2.0, True),
        ("mse", 2.0, 1.0, False),
        ("abs_rel", 0.1, 0.1, False),
        ("abs_rel", 0.1, 0.2, True),
    ],
)
def test_a_score_beats_another_only_when_strictly_better_in_the_metric_direction(
    key: str, a: float, b: float, better: bool
) -> None:
    assert get_metric(key).direction.beats(a, b) is better


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_sorting_by_rank_key_or_best_first_order_puts_the_beaten_after_the_better(
    higher_is_better: bool,
) -> None:
    direction = Direction(higher_is_better)
    scores = [0.3, 0.9, 0.1, 0.5, 0.5]
    by_key = sorted(scores, key=direction.rank_key)
    assert by_key == sorted(scores, reverse=direction.best_first_descending)
    for i, better in enumerate(by_key):
        for worse in by_key[i + 1 :]:
            assert not direction.beats(worse, better)
    assert direction.word == ("higher" if higher_is_better else "lower")


def test_unknown_metric_names_the_valid_keys() -> None:
    with pytest.raises(KeyError, match=r"unknown metric 'nope'; valid keys are accuracy, .*ssim"):
        get_metric("nope")


def test_families_partition_the_metrics_in_display_order() -> None:
    families = metric_families()
    assert families == {
        "classification": ("accuracy", "top5_accuracy", "macro_f1"),
        "regression": ("mse", "mae", "rmse"),
        "depth": DEPTH_KEYS,
        "segmentation": ("miou", "pixel_accuracy"),
        "restoration": ("psnr", "ssim"),
    }
    for family, keys in families.items():
        assert all(METRICS[key].family == family for key in keys)
    assert sorted(key for keys in families.values() for key in keys) == sorted(METRICS)


def test_metric_choices_say_each_metrics_label_key_and_direction() -> None:
    choices = metric_choices()
    assert [key for key, _ in choices] == [
        key for keys in metric_families().values() for key in keys
    ]
    assert ("psnr", "PSNR in dB (psnr, higher is better)") in choices
    assert ("mse", "Mean squared error (mse, lower is better)") in choices
    for key, label in choices:
        assert label.startswith(f"{METRICS[key].label} ({key}, ")


FAMILY_INPUTS = {
    "classification": (SCORES, LABELS),
    "regression": (np.array([1.0, 2.0]), np.array([1.5, 2.0])),
    "depth": depth_example(),
    "segmentation": (
        np.random.default_rng(0).random((2, 3, 4, 5)),
        np.random.default_rng(1).integers(0, 3, size=(2, 4, 5)),
    ),
    "restoration": (
        np.random.default_rng(0).random((2, 1, 12, 12)),
        np.random.default_rng(1).random((2, 1, 12, 12)),
    ),
}


@pytest.mark.parametrize("key", list(METRICS))
def test_compute_family_returns_every_metric_of_the_family_as_floats(key: str) -> None:
    family = METRICS[key].family
    predictions, targets = FAMILY_INPUTS[family]
    values = compute_family(key, predictions, targets)
    assert tuple(values) == metric_families()[family]
    assert all(type(value) is float for value in values.values())
    assert values == {name: score(name, predictions, targets) for name in metric_families()[family]}


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(METRICS))
def test_mismatched_shapes_are_named_in_the_message(key: str) -> None:
    message = "predictions have shape (8, 10) but targets have shape (9,)"
    with pytest.raises(ValueError, match=re.escape(message)):
        score(key, np.zeros((8, 10)), np.zeros(9, dtype=np.int64))


def test_same_size_but_different_shape_is_refused() -> None:
    message = "predictions have shape (2, 3) but targets have shape (3, 2)"
    with pytest.raises(ValueError, match=re.escape(message)):
        score("mse", np.zeros((2, 3)), np.zeros((3, 2)))


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        (np.array([1.0, 2.0, 2.0, 0.0]), "targets must be integer class ids, got dtype float64"),
        (np.array([1, 2, 3, 0]), r"class ids in \[0, 3\).*from 0 to 3"),
        (np.array([1, -1, 2, 0]), r"class ids in \[0, 3\).*from -1 to 2"),
        (np.array([[1, 2, 2, 0]]), re.escape("targets have shape (1, 4)")),
    ],
)
def test_classification_refuses_bad_targets(targets: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        score("accuracy", SCORES, targets)


def test_classification_refuses_nan_scores() -> None:
    scores = SCORES.copy()
    scores[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        score("macro_f1", scores, LABELS)


def test_empty_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        score("mae", np.zeros(0), np.zeros(0))
