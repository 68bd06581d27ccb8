"""``oep check`` refuses what the server refuses, with the server's words, before any upload.

The hostile corpus (tests/evaluation/hostile) records the message the upload or the worker gives
for every bad file; the local check must give the same one for each. The worker's memory limit
is not published by the portal: ``--memory-limit-mb`` gives the one the corpus test uses.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from portal.client.check import RUN, UPLOAD
from portal.client.cli import main
from tests.builders import linear_classifier
from tests.evaluation.hostile.corpus import build_corpus
from tests.evaluation.hostile.test_hostile_corpus import TIME_LIMIT_S
from tests.portal.client_support import BASE_DIR, Oep

pytestmark = pytest.mark.django_db(transaction=True)
CORPUS_MEMORY_LIMIT_MB = 512  # as tests/evaluation/hostile/test_hostile_corpus.py sets it


@pytest.fixture
def corpus_task(make_task: Any) -> Any:
    """The task the corpus is written for (see tests/evaluation/hostile/corpus.py)."""
    return make_task(time_limit_s=TIME_LIMIT_S, max_model_bytes=200_000)


def test_every_hostile_file_gets_the_servers_message_from_the_local_check(
    corpus_task: Any, live_portal: str, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    """In this process for speed (one onnxruntime import for 37 files); the console script's
    own path is the next test's."""
    monkeypatch.setenv("OEP_URL", live_portal)
    monkeypatch.setenv("OEP_CONFIG", str(tmp_path / "none.json"))
    wrong = []
    for case in build_corpus():
        path = tmp_path / case.name / case.filename
        path.parent.mkdir()
        path.write_bytes(case.data)
        code = main(
            ["check", "digits", str(path), "--memory-limit-mb", str(CORPUS_MEMORY_LIMIT_MB)]
        )
        err = capsys.readouterr().err
        stage, _, message = err.rstrip("\n").partition(": ")
        expected_stage = UPLOAD if case.stage == "upload" else RUN
        if code != 1 or stage != expected_stage or not case.matches(message):
            wrong.append(f"{case.name}: exit {code}, {err!r}")
    assert not wrong, "\n".join(wrong)


def test_oep_check_passes_a_good_model_and_names_the_stage_of_a_bad_one(
    corpus_task: Any, live_portal: str, tmp_path: Path
) -> None:
    oep = Oep(tmp_path, url=live_portal)
    good = tmp_path / "good.onnx"
    good.write_bytes(linear_classifier(np.eye(64, 10), np.zeros(10)))
    passed = oep("check", "digits", str(good))
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout.startswith(
        "OK: good.onnx passes the portal's checks for 'digits': input 'input' "
    )
    assert "output [16, 10] float32, finite" in passed.stdout

    flat = next(c for c in build_corpus() if c.name == "output-wrong-shape")
    bad = tmp_path / "flat.onnx"
    bad.write_bytes(flat.data)
    failed = oep("check", "digits", str(bad))
    assert failed.returncode == 1
    assert failed.stderr == (
        f"{RUN}: The model's output has shape [16, 64] but this task expects [16, 10] "
        "(batch 16 × per-sample [10]).\n"
    )


def test_the_client_imports_no_django_and_is_the_oep_console_script() -> None:
    import tomllib

    probe = (
        "import sys, portal.client.cli, portal.client.check; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=BASE_DIR, check=True
    )
    assert loaded.stdout == "[]\n"
    pyproject = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["oep"] == "portal.client.cli:main"
    assert any(d.startswith("requests") for d in pyproject["project"]["dependencies"])
