"""What a dataset file is: its sha256 and its row counts, read from the stored file once when a
version is recorded. Only numpy and a file object: the migration that records version 1 of the
existing tasks uses it too."""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from typing import IO

import numpy as np

CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class DatasetFacts:
    sha256: str
    rows: int | None  # None: the file could not be read as a dataset
    public_rows: int | None
    private_rows: int | None


def dataset_facts(stored: IO[bytes]) -> DatasetFacts:
    """Hash the whole file, then count its rows (``split`` absent: every row is public)."""
    digest = hashlib.sha256()
    stored.seek(0)
    while chunk := stored.read(CHUNK_BYTES):
        digest.update(chunk)
    stored.seek(0)
    try:
        with np.load(stored, allow_pickle=False) as arrays:
            rows = len(arrays["inputs"])
            if "split" in arrays.files:
                public = int((np.asarray(arrays["split"]).astype(str) == "public").sum())
            else:
                public = rows
    except (KeyError, ValueError, OSError, zipfile.BadZipFile):
        return DatasetFacts(digest.hexdigest(), None, None, None)
    finally:
        stored.seek(0)
    return DatasetFacts(digest.hexdigest(), rows, public, rows - public)
