"""The shipped demo datasets and the baseline models built from them (no Django, no DB)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from itertools import combinations
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from evaluation.inspect import inspect_model
from evaluation.metrics import compute_family
from submissions.demo import baselines, datasets, super_resolution
from submissions.demo.baselines import Baseline
from submissions.demo.tasks import TASKS
from tests.evaluation.test_inspect import SPEC

DEPTH_SHAPE = (3, datasets.DEPTH_SIZE, datasets.DEPTH_SIZE)


@pytest.fixture(scope="module")
def digits_test() -> dict[str, np.ndarray]:
    return datasets.load_digits_test()


@pytest.fixture(scope="module")
def digits_models() -> list[Baseline]:
    return baselines.digits_baselines(datasets.load_digits_train())


@pytest.fixture(scope="module")
def depth_test() -> dict[str, np.ndarray]:
    return datasets.build_depth_dataset(n=8, seed=0)


@pytest.fixture(scope="module")
def depth_models() -> list[Baseline]:
    return baselines.depth_baselines()


@pytest.fixture(scope="module")
def sr_models() -> list[Baseline]:
    return super_resolution.sr_baselines()


def predict(baseline: Baseline, inputs: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(baseline.onnx_bytes, providers=["CPUExecutionProvider"])
    (output,) = session.run(["output"], {"input": inputs})
    return np.asarray(output)


def accuracy_of(baseline: Baseline, data: dict[str, np.ndarray]) -> float:
    predicted = predict(baseline, data["inputs"]).argmax(axis=1)
    return float(np.mean(predicted == data["targets"]))


def abs_rel(pred: np.ndarray, target: np.ndarray) -> float:
    valid = target > 0
    return float(np.mean(np.abs(pred[valid] - target[valid]) / target[valid]))


def dims(value_info: onnx.ValueInfoProto) -> list[str | int]:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


# --- shipped digits files ----------------------------------------------------


def test_digits_test_file_has_1000_scaled_images_split_evenly(
    digits_test: dict[str, np.ndarray],
) -> None:
    assert set(digits_test) == {"inputs", "targets", "split"}
    assert digits_test["inputs"].shape == (1000, 1, 8, 8)
    assert digits_test["inputs"].dtype == np.float32
    assert digits_test["targets"].shape == (1000,)
    assert digits_test["targets"].dtype == np.int64
    assert digits_test["split"].dtype.kind == "U"
    labels, counts = np.unique(digits_test["split"], return_counts=True)
    assert labels.tolist() == ["private", "public"]
    assert counts.tolist() == [500, 500]


def test_digits_train_file_has_797_rows_and_no_split() -> None:
    train = datasets.load_digits_train()
    assert set(train) == {"inputs", "targets"}
    assert train["inputs"].shape == (797, 1, 8, 8)
    assert train["inputs"].dtype == np.float32
    assert train["targets"].shape == (797,)
    assert train["targets"].dtype == np.int64


@pytest.mark.parametrize("path", [datasets.DIGITS_TEST_PATH, datasets.DIGITS_TRAIN_PATH])
def test_digits_pixels_are_sixteenths_in_unit_range_and_labels_are_digits(path: Path) -> None:
    data = datasets.load_npz(path)
    assert data["inputs"].min() == 0.0
    assert data["inputs"].max() == 1.0
    np.testing.assert_array_equal(data["inputs"] * 16, np.round(data["inputs"] * 16))
    assert set(np.unique(data["targets"]).tolist()) == set(range(10))


def test_shipped_digits_files_stay_small() -> None:
    for path in (datasets.DIGITS_TEST_PATH, datasets.DIGITS_TRAIN_PATH):
        assert path.stat().st_size < 100_000


def test_runtime_modules_do_not_import_sklearn_or_django() -> None:
    code = (
        "import sys, submissions.demo.datasets, submissions.demo.baselines, "
        "submissions.demo.super_resolution; "
        "print(sorted(m for m in ('sklearn', 'django') if m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# --- synthetic depth data ----------------------------------------------------


def test_depth_dataset_has_documented_shapes_and_positive_depths(
    depth_test: dict[str, np.ndarray],
) -> None:
    assert depth_test["inputs"].shape == (8, *DEPTH_SHAPE)
    assert depth_test["inputs"].dtype == np.float32
    assert depth_test["targets"].shape == (8, *DEPTH_SHAPE[1:])
    assert depth_test["targets"].dtype == np.float32
    assert depth_test["targets"].min() >= datasets.DEPTH_MIN_M
    assert depth_test["targets"].max() <= datasets.DEPTH_MAX_M
    assert sorted(depth_test["split"].tolist()) == ["private"] * 4 + ["public"] * 4


def test_depth_dataset_is_reproducible_per_seed() -> None:
    first = datasets.build_depth_dataset(n=2, seed=7)
    again = datasets.build_depth_dataset(n=2, seed=7)
    other = datasets.build_depth_dataset(n=2, seed=8)
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
    assert not np.array_equal(first["targets"], other["targets"])


def test_write_npz_round_trips_through_load_npz(tmp_path: Path) -> None:
    arrays = datasets.build_depth_dataset(n=2, seed=1)
    path = tmp_path / "depth.npz"
    datasets.write_npz(path, arrays)
    loaded = datasets.load_npz(path)
    for key, value in arrays.items():
        np.testing.assert_array_equal(loaded[key], value)


# --- baseline models ---------------------------------------------------------


@pytest.mark.parametrize(
    ("models", "input_shape", "output_shape", "batch"),
    [
        ("digits_models", (1, 8, 8), (10,), 32),
        ("depth_models", DEPTH_SHAPE, DEPTH_SHAPE[1:], 8),
        ("sr_models", (1, 16, 16), (1, 32, 32), 16),
    ],
)
def test_every_baseline_is_a_valid_model_with_a_symbolic_batch(
    request: pytest.FixtureRequest,
    models: str,
    input_shape: tuple[int, ...],
    output_shape: tuple[int, ...],
    batch: int,
) -> None:
    built: list[Baseline] = request.getfixturevalue(models)
    assert len(built) >= 3
    assert len({b.name for b in built}) == len(built)
    inputs = np.random.default_rng(0).random((batch, *input_shape), dtype=np.float32)
    for baseline in built:
        model = onnx.load_from_string(baseline.onnx_bytes)
        onnx.checker.check_model(model)
        assert model.ir_version == 9
        assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
        assert [i.name for i in model.graph.input] == ["input"]
        assert [o.name for o in model.graph.output] == ["output"]
        assert dims(model.graph.input[0]) == ["batch", *input_shape]
        assert dims(model.graph.output[0]) == ["batch", *output_shape]
        assert predict(baseline, inputs).shape == (batch, *output_shape)
        assert baseline.description


def test_digits_baselines_reach_clearly_different_accuracies(
    digits_models: list[Baseline], digits_test: dict[str, np.ndarray]
) -> None:
    accuracy = {b.name: accuracy_of(b, digits_test) for b in digits_models}
    assert max(accuracy.values()) > 0.9
    assert min(accuracy.values()) > 0.5
    for a, b in combinations(accuracy.values(), 2):
        assert abs(a - b) > 0.02, accuracy


def test_depth_baselines_improve_from_constant_to_1x1_to_3x3(
    depth_models: list[Baseline], depth_test: dict[str, np.ndarray]
) -> None:
    error = {
        b.name: abs_rel(predict(b, depth_test["inputs"]), depth_test["targets"])
        for b in depth_models
    }
    assert error["constant-mean"] > error["conv-1x1"] > error["conv-3x3"], error
    # "Clearly" better, not a rounding-level win.
    assert error["conv-1x1"] < 0.8 * error["constant-mean"], error
    assert error["conv-3x3"] < 0.8 * error["conv-1x1"], error


def test_depth_baselines_never_predict_non_positive_depth(
    depth_models: list[Baseline], depth_test: dict[str, np.ndarray]
) -> None:
    # Inputs far outside the training range push a linear model below zero; the clip must hold.
    extreme = np.concatenate([depth_test["inputs"][:2], -depth_test["inputs"][:2]])
    for baseline in depth_models:
        assert predict(baseline, extreme).min() >= baselines.DEPTH_FLOOR_M - 1e-6


def test_the_digits_task_says_its_hidden_images_come_from_scikit_learn() -> None:
    """A model trained on all of load_digits() has seen the hidden test images."""
    from submissions.demo.tasks import TASKS

    description = TASKS["digits"]["description"]
    assert "hidden images come from scikit-learn's digits set" in description
    assert "not a fair entry" in description


# --- super-resolution x2 -------------------------------------------------------


def test_sr_pairs_are_8_bit_images_whose_inputs_are_their_2x2_means() -> None:
    rows = super_resolution.build_sr_dataset(n=8, seed=0)
    assert rows["inputs"].shape == (8, 1, 16, 16) and rows["targets"].shape == (8, 1, 32, 32)
    assert rows["inputs"].dtype == rows["targets"].dtype == np.float32
    for images in (rows["inputs"], rows["targets"]):
        levels = images * 255
        np.testing.assert_allclose(levels, np.round(levels), atol=1e-4)
        assert images.min() >= 0 and images.max() <= 1
    means = rows["targets"].reshape(8, 1, 16, 2, 16, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(rows["inputs"], means, atol=0.5 / 255 + 1e-6)
    again = super_resolution.build_sr_dataset(n=8, seed=0)
    assert all(np.array_equal(rows[k], again[k]) for k in rows)
    published = super_resolution.build_sr_training()
    assert len(published["inputs"]) == super_resolution.SR_TRAIN_IMAGES
    assert len(datasets.npz_bytes(published)) < 500_000
    assert not np.array_equal(published["targets"][:8], rows["targets"])  # another seed


def test_sr_baselines_improve_from_nearest_to_bicubic_to_learned(
    sr_models: list[Baseline],
) -> None:
    test = super_resolution.build_sr_dataset(n=64, seed=0)
    options = TASKS["sr-x2"]["metric_options"]
    scores = {
        b.name: compute_family("psnr", predict(b, test["inputs"]), test["targets"], options)
        for b in sr_models
    }
    psnr = [scores[name]["psnr"] for name in ("nearest-x2", "bicubic-x2", "subpixel-conv-x2")]
    assert psnr == sorted(psnr) and psnr[1] - psnr[0] > 1 and psnr[2] - psnr[1] > 0.2, scores
    ssim = [scores[name]["ssim"] for name in ("nearest-x2", "bicubic-x2", "subpixel-conv-x2")]
    assert ssim == sorted(ssim), scores


def test_sr_baselines_pass_the_upload_inspection(sr_models: list[Baseline], tmp_path: Path) -> None:
    task = TASKS["sr-x2"]
    spec = replace(
        SPEC,
        batch_size=task["batch_size"],
        input_shape=tuple(task["input_shape"]),
        output_shape=tuple(task["output_shape"]),
        metric=task["metric"],
        metric_options=task["metric_options"],
    )
    for baseline in sr_models:
        path = tmp_path / f"{baseline.name}.onnx"
        path.write_bytes(baseline.onnx_bytes)
        inspect_model(path, spec)
