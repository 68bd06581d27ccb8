"""``oep`` end to end: a separate process against a live portal and a real worker."""

from __future__ import annotations

import csv
import io
import json
import re
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accounts.services import api_token_create
from evaluation import formats
from submissions.boards.tracks import track_create
from submissions.lifecycle.services import submission_create
from submissions.models import Submission
from tests.builders import data_dependent_matmul, digits_like, linear_classifier, linear_reference
from tests.conftest import onnx_upload
from tests.portal.client_support import BASE_DIR, Oep
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice_token(alice: Any) -> str:
    return api_token_create(user=alice, name="tests").secret


def write_model(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def finished(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:  # what we start we stop
            process.kill()
            process.wait()
    return process.returncode, out, err


def test_login_keeps_a_working_token_in_a_file_only_the_user_can_read(
    alice: Any, live_portal: str, tmp_path: Path
) -> None:
    oep = Oep(tmp_path)
    login = oep(
        "login",
        "--url",
        live_portal,
        "--username",
        "alice",
        "--password-stdin",
        stdin="alice-password-1\n",
    )
    assert login.returncode == 0, login.stderr
    config = tmp_path / "oep.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text())["url"] == live_portal
    assert alice.api_tokens.get().name.startswith("oep on ")

    listing = oep("submissions")  # no OEP_URL or OEP_TOKEN: the file alone is enough
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.split() == ["ID", "TASK", "STATUS", "SCORE", "SUBMITTED", "FILE"]


def test_login_writes_under_the_xdg_config_dir_by_default(
    alice: Any, alice_token: str, live_portal: str, tmp_path: Path
) -> None:
    oep = Oep(tmp_path)
    env = oep.env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    del env["OEP_CONFIG"]
    result = subprocess.run(
        oep.command("login", "--url", live_portal, "--token", alice_token),
        capture_output=True,
        text=True,
        cwd=BASE_DIR,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    config = tmp_path / "xdg" / "oep" / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert json.loads(config.read_text()) == {"url": live_portal, "token": alice_token}


def test_wrong_password_and_bad_token_are_refused_with_the_servers_words(
    alice: Any, live_portal: str, tmp_path: Path
) -> None:
    oep = Oep(tmp_path)
    login = oep(
        "login", "--url", live_portal, "--username", "alice", "--password-stdin", stdin="nope\n"
    )
    assert login.returncode == 1
    assert login.stderr == "Unable to log in with provided credentials.\n"
    assert not (tmp_path / "oep.json").exists()

    refused = Oep(tmp_path, url=live_portal, token="not-a-token")("quota", "digits")
    assert refused.returncode == 1
    assert refused.stderr == (
        "The portal refused the token: Invalid or revoked token. "
        "Log in again with `oep login` (or set OEP_TOKEN).\n"
    )


def test_no_network_says_the_portal_cannot_be_reached(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    result = Oep(tmp_path, url=url, token="t")("tasks")
    assert result.returncode == 1
    assert result.stderr == f"cannot reach {url} (connection refused)\n"


def test_tasks_and_task_show_the_shapes_a_model_must_have(
    make_task: Any, live_portal: str, tmp_path: Path
) -> None:
    make_task()
    oep = Oep(tmp_path, url=live_portal)
    tasks = oep("tasks")
    assert tasks.returncode == 0, tasks.stderr
    assert tasks.stdout.splitlines()[1].split() == [
        "digits",
        "Digits",
        "accuracy",
        "16x1x8x8",
        "float32",
        "open",
    ]
    task = oep("task", "digits")
    assert "Input:      [16, 1, 8, 8] float32 (batch 16)" in task.stdout
    assert "Output:     [16, 10]" in task.stdout
    missing = oep("task", "nope")
    assert (missing.returncode, missing.stderr) == (1, "No task 'nope'. (HTTP 404)\n")


@pytest.mark.slow
def test_submit_wait_follows_a_real_worker_to_the_score_or_the_failure(
    alice_token: str, make_task: Any, live_portal: str, run_worker: Any, tmp_path: Path
) -> None:
    arrays = digits_like(n=100, seed=3)
    make_task(arrays)
    rng = np.random.default_rng(4)
    w, b = rng.normal(size=(64, 10)), rng.normal(size=10)
    good = write_model(tmp_path, "good.onnx", linear_classifier(w, b))
    nan = np.zeros(10)
    nan[2] = np.nan
    bad = write_model(tmp_path, "nan.onnx", linear_classifier(w, nan))
    oep = Oep(tmp_path, url=live_portal, token=alice_token)

    waiting_good = oep.start("submit", "digits", str(good), "--wait", "--description", "linear")
    waiting_bad = oep.start("submit", "digits", str(bad), "--wait")
    # Each prints its submission's id once the upload is answered, after the job is enqueued.
    created = [p.stdout.readline() for p in (waiting_good, waiting_bad) if p.stdout]
    assert all(" is queued: http" in line for line in created), created
    run_worker()
    code, out, err = finished(waiting_good)
    bad_code, _, bad_err = finished(waiting_bad)

    scored = Submission.objects.get(original_name="good.onnx")
    public = arrays["split"] == "public"
    expected = np.mean(
        linear_reference(w, b, arrays["inputs"])[public].argmax(1) == arrays["targets"][public]
    )
    assert code == 0, err
    assert scored.status == "succeeded" and scored.score == pytest.approx(expected)
    assert f"Submission {scored.pk} succeeded: score {formats.score(scored.score)}," in out
    assert "succeeded 100%" in err  # the progress, one line per change off a terminal
    failed = Submission.objects.get(original_name="nan.onnx")
    assert bad_code == 1
    assert bad_err.endswith(
        f"Submission {failed.pk} failed: The model's output contains NaN or infinity (batch 1).\n"
    )

    status = oep("status", str(scored.pk))
    assert "Status:      succeeded" in status.stdout and "Description: linear" in status.stdout
    board = oep("leaderboard", "digits", "--csv")
    rows = list(csv.reader(io.StringIO(board.stdout)))
    assert board.returncode == 0 and any("alice" in row for row in rows[1:])


def test_a_full_quota_is_refused_with_the_next_free_slot(
    alice: Any, alice_token: str, make_task: Any, live_portal: str, tmp_path: Path
) -> None:
    task = make_task(submissions_per_day=1)
    Submission.objects.create(
        task=task,
        user=alice,
        status="succeeded",
        sha256="0" * 64,
        size_bytes=1,
        original_name="first.onnx",
    )
    model = write_model(tmp_path, "m.onnx", linear_classifier(np.eye(64, 10), np.zeros(10)))
    oep = Oep(tmp_path, url=live_portal, token=alice_token)

    result = oep("submit", "digits", str(model))
    assert result.returncode == 1
    refusal, hint = result.stderr.splitlines()
    assert refusal.startswith("You have used your 1 submissions for the last 24 hours; the next")
    assert hint.startswith("Next free slot: ")
    assert Submission.objects.count() == 1
    quota = oep("quota", "digits")
    assert "Left now:         0" in quota.stdout
    assert "Last 24 hours:    1 of 1 used" in quota.stdout


def test_a_rate_limit_says_when_to_retry_or_is_waited_out(
    alice_token: str, make_task: Any, live_portal: str, settings: Any, tmp_path: Path
) -> None:
    make_task()
    # No uploads at all, in 2-second windows: every attempt is refused until the test lifts it
    # (a real "1 per window" limit would depend on where the window boundaries fall).
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "uploads": "0/2s"}
    oep = Oep(tmp_path, url=live_portal, token=alice_token)
    model = write_model(tmp_path, "m.onnx", linear_classifier(np.eye(64, 10), np.zeros(10)))

    refused = oep("submit", "digits", str(model))
    assert refused.returncode == 1
    assert re.fullmatch(
        r"Too many uploads: .* Next try possible at \d\d:\d\d:\d\d \(in [12] s\); "
        r"--wait waits for it\.\n",
        refused.stderr,
    ), refused.stderr
    assert Submission.objects.count() == 0

    # --wait waits out Retry-After and tries again, then waits for the result: no worker runs
    # here, so it is stopped once the upload is in.
    waiting = oep.start("submit", "digits", str(model), "--wait")
    try:
        assert waiting.stderr is not None and waiting.stdout is not None
        told = waiting.stderr.readline()  # the client is waiting now
        settings.RATE_LIMITS = {**settings.RATE_LIMITS, "uploads": "100/hour"}
        created = waiting.stdout.readline()
    finally:
        waiting.terminate()
        finished(waiting)
    assert re.fullmatch(r"Too many uploads: .* Waiting [12] s…\n", told), told
    assert created.startswith(f"Submission {Submission.objects.get().pk} is queued: http")


def test_a_refused_upload_prints_the_servers_message(
    alice_token: str, make_task: Any, live_portal: str, tmp_path: Path
) -> None:
    make_task()
    oep = Oep(tmp_path, url=live_portal, token=alice_token)
    model = write_model(tmp_path, "m.onnx", linear_classifier(np.eye(64, 10), np.zeros(10)))
    result = oep("submit", "nope", str(model))
    assert (result.returncode, result.stderr) == (1, "task: No task 'nope'.\n")


def test_status_says_when_the_costs_are_a_lower_bound(
    alice: Any, alice_token: str, make_task: Any, live_portal: str, tmp_path: Path
) -> None:
    task = make_task()
    whole = submission_create(user=alice, task=task, upload=onnx_upload(linear_model()))
    partial = submission_create(user=alice, task=task, upload=onnx_upload(data_dependent_matmul()))
    oep = Oep(tmp_path, url=live_portal, token=alice_token)

    status = oep("status", str(partial.pk))
    assert status.returncode == 0, status.stderr
    fields = fields_of(status.stdout)
    assert partial.flops is not None and partial.costs_complete is False
    assert (
        fields["Costs"] == f"≥ {formats.si(partial.flops)} FLOPs at the batch shape, 651 parameters"
    )
    assert fields["Incomplete"] == (
        "not counted in full: MatMul × 1 left out, shape or operator unknown"
    )
    complete = fields_of(oep("status", str(whole.pk)).stdout)
    assert complete["Costs"] == "20.6 k FLOPs at the batch shape, 650 parameters"
    assert "Incomplete" not in complete


def fields_of(out: str) -> dict[str, str]:
    """``oep status``'s "Name: value" lines."""
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines())}


def linear_model() -> bytes:
    rng = np.random.default_rng(0)
    return linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))


def test_challenges_lists_the_challenges_and_one_challenges_phases(
    make_task: Any, live_portal: str, tmp_path: Path
) -> None:
    from tests.submissions.challenge_support import two_phase_challenge

    two_phase_challenge(make_task)
    oep = Oep(tmp_path, url=live_portal)

    listed = oep("challenges")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[:3] == ["digits-cup", "Digits", "Cup"]
    phases = oep("challenges", "digits-cup")
    assert phases.returncode == 0, phases.stderr
    lines = phases.stdout.splitlines()
    assert lines[1].split()[:4] == ["1", "digits-dev", "Development", "current"]
    assert lines[2].split()[:4] == ["2", "digits-test", "Test", "upcoming"]
    assert lines[-1] == "Registration: not registered"


def test_leaderboard_shows_a_track_by_its_slug_as_the_api_ranks_it(
    alice: Any, bob: Any, alice_token: str, make_task: Any, live_portal: str, tmp_path: Path
) -> None:
    task = make_task()
    scored(task, alice, 0.70, latency_p50_ms=1.0)
    scored(task, bob, 0.95, latency_p50_ms=40.0)
    track_create(task_id=task.pk, name="Speed", slug="speed", kind="measure", measure="latency")
    oep = Oep(tmp_path, url=live_portal, token=alice_token)

    main = oep("leaderboard", "digits")
    speed = oep("leaderboard", "digits", "--track", "speed")
    speed_csv = oep("leaderboard", "digits", "--track", "speed", "--csv")

    assert main.returncode == speed.returncode == speed_csv.returncode == 0, speed.stderr
    assert "digits: public board, track speed," in speed.stdout
    assert "Ranked by p50 latency (lower is better)." in speed.stdout
    users = [line.split()[1] for line in speed.stdout.splitlines()[3:]]
    assert users == ["alice", "bob"]
    assert [line.split()[1] for line in main.stdout.splitlines()[3:]] == ["bob", "alice"]
    rows = list(csv.DictReader(io.StringIO(speed_csv.stdout)))
    assert [r["user"] for r in rows] == ["alice", "bob"]
