"""The README's "Your first submission", command by command, against the seeded demo: a new
participant who follows it alone ends with a scored model of their own (issue 39's Done-when).
The commands are taken from the README itself, so an edit there that breaks the path fails here."""

from __future__ import annotations

import io
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from submissions.models import Submission
from tests.portal.client_support import BASE_DIR, Oep

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def readme_steps() -> list[list[str]]:
    """The commands of the README's first-submission block, each as its words (comments cut)."""
    readme = (BASE_DIR / "README.md").read_text()
    section = readme.split("## Your first submission", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines() if line]


def test_the_readmes_first_submission_ends_with_a_scored_model(
    queue: Any, run_worker: Any, live_portal: str, tmp_path: Path
) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    queue.empty()  # the baselines' jobs: this test follows one participant's model
    steps = readme_steps()
    assert steps[0][0].startswith("PORTAL=") and steps[1][:2] == [".venv/bin/oep", "login"]
    assert steps[3] == ["cd", "digits"]
    oep = Oep(tmp_path / "home")
    env = oep.env(PYTHONPATH=str(BASE_DIR))
    cwd = tmp_path
    submitted = None
    for words in steps[1:]:
        words = [w.replace("$PORTAL", live_portal) for w in words]
        if words[0] == "cd":
            cwd = cwd / words[1]
            continue
        # .venv/bin/oep and .venv/bin/python are this interpreter, from the checkout
        program = Path(words[0]).name
        command = [sys.executable, *(["-m", "portal.client"] if program == "oep" else [])]
        command += words[1:]
        if words[1] == "login":  # it asks for the password; a test types it on stdin
            command.append("--password-stdin")
        if words[1] == "submit":
            submitted = subprocess.Popen(
                command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            continue
        done = subprocess.run(
            command, cwd=cwd, env=env, input="alice-demo-pass\n", capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, (words, done.stdout, done.stderr)
    assert (tmp_path / "digits" / "model.onnx").exists()
    assert submitted is not None and submitted.stdout is not None
    try:
        assert " is queued: http" in submitted.stdout.readline()
        run_worker()
        out, err = submitted.communicate(timeout=120)
    finally:
        if submitted.poll() is None:  # what we start we stop
            submitted.kill()
            submitted.wait()
    assert submitted.returncode == 0, err
    mine = Submission.objects.get(user__username="alice", is_baseline=False)
    assert mine.status == "succeeded" and mine.score is not None
    assert f"Submission {mine.pk} succeeded: score" in out
