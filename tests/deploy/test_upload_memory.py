"""The acceptance measure of bounded upload memory (benchmarks/upload_memory.py), for one model
the size of ViT-B/16 (331 MB): gunicorn's worker process gives back what the upload took.
The full run, four at once and its figures, is a benchmark (docs/benchmarks.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024**2

pytestmark = pytest.mark.slow


def test_a_gunicorn_worker_returns_within_50_mb_of_its_start_after_a_331_mb_upload() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        pytest.skip("the benchmark makes a database of its own on a PostgreSQL server")
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.upload_memory", "--sizes", "331", "--at-once", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    start = re.search(r"after a first upload \(.*\): (\d+) MiB", run.stdout)
    case = re.search(r"331 MB x 1: answers (\S+) .* after (\d+) MiB", run.stdout)
    assert start and case, run.stdout
    assert case.group(1) == "201"
    grown_bytes = (int(case.group(2)) - int(start.group(1))) * MiB
    assert grown_bytes < 50_000_000, run.stdout
