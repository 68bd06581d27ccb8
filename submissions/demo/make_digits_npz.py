"""One-off script that produced the shipped `digits.npz` and `digits_train.npz`.

Run from the repository root with the dev dependencies installed:

    python -m submissions.demo.make_digits_npz

It reads the 1,797 8x8 UCI digits bundled inside scikit-learn (no download),
shuffles them with a fixed seed, keeps 797 rows for training and 1,000 as the
hidden test set split 500 public / 500 private. Pixels (0..16) are scaled to
0..1 and stored as float32 (N, 1, 8, 8); labels as int64 (N,).

scikit-learn is only needed here: the portal reads the `.npz` files directly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from submissions.demo.datasets import DIGITS_TEST_PATH, DIGITS_TRAIN_PATH, make_split, write_npz

SEED = 20240601
TRAIN_ROWS = 797


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """All 1,797 digits as (inputs float32 (N, 1, 8, 8) in 0..1, targets int64 (N,))."""
    from sklearn.datasets import load_digits  # dev-only dependency, so imported late

    bunch = load_digits()
    inputs = (bunch.images / 16.0).astype(np.float32)[:, None, :, :]
    return inputs, bunch.target.astype(np.int64)


def main(train_path: Path = DIGITS_TRAIN_PATH, test_path: Path = DIGITS_TEST_PATH) -> None:
    inputs, targets = digits_arrays()
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(inputs))
    train, test = order[:TRAIN_ROWS], order[TRAIN_ROWS:]
    write_npz(train_path, {"inputs": inputs[train], "targets": targets[train]}, compress=True)
    write_npz(
        test_path,
        {"inputs": inputs[test], "targets": targets[test], "split": make_split(len(test), rng)},
        compress=True,
    )
    print(f"wrote {train_path} ({len(train)} rows) and {test_path} ({len(test)} rows)")


if __name__ == "__main__":
    main()
