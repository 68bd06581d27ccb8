"""The demo: seeded tasks and baselines evaluate for real and rank in distinct places."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from submissions.lifecycle.selectors import leaderboard
from submissions.models import Challenge, Submission, Task, Track

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_seeded_demo_evaluates_every_baseline_and_ranks_them(queue: Any, run_worker: Any) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    call_command("seed_demo", stdout=io.StringIO())  # idempotent: creates nothing twice
    assert Submission.objects.count() == 12  # 3 per task, the challenge's first phase included

    run_worker()

    failed = list(
        Submission.objects.exclude(status="succeeded").values_list("original_name", "error_message")
    )
    assert failed == []
    digits = [row.submission.score for row in leaderboard(task=Task.objects.get(slug="digits"))]
    depth = [row.submission.score for row in leaderboard(task=Task.objects.get(slug="depth-448"))]
    assert len(set(digits)) == 3 and digits == sorted(digits, reverse=True) and digits[0] > 0.9
    assert len(set(depth)) == 3 and depth == sorted(depth)  # AbsRel: lower is better
    sr_task = Task.objects.get(slug="sr-x2")
    assert (sr_task.metric, sr_task.metric_options) == ("psnr", {"crop_border": 2})
    sr = [row.submission for row in leaderboard(task=sr_task)]
    assert [s.original_name for s in sr] == [  # PSNR: higher is better
        "subpixel-conv-x2.onnx",
        "bicubic-x2.onnx",
        "nearest-x2.onnx",
    ]
    assert all(set(s.metrics) == {"psnr", "ssim"} for s in sr)
    assert Submission.objects.filter(is_baseline=True).count() == 12
    dev = Task.objects.get(slug="esr-dev")
    main = [row.submission.original_name for row in leaderboard(task=dev)]
    fast = [
        (row.rank, row.submission.original_name)
        for row in leaderboard(task=dev, track=Track.objects.get(task=dev, slug="efficiency"))
    ]
    assert main == ["subpixel-conv-x2.onnx", "bicubic-x2.onnx", "nearest-x2.onnx"]
    assert fast[-1] == (None, "nearest-x2.onnx")  # under the PSNR threshold: not ranked
    assert {name for _, name in fast[:2]} == {"subpixel-conv-x2.onnx", "bicubic-x2.onnx"}
    out = io.StringIO()
    call_command("leaderboard_rebuild", "--check", stdout=out)
    assert "in step" in out.getvalue()


def test_the_demo_has_a_challenge_with_two_phases_each_with_an_efficiency_track(
    settings: Any,
) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    call_command("seed_demo", stdout=io.StringIO())  # idempotent

    challenge = Challenge.objects.get(slug="efficient-sr")
    phases = list(challenge.phases.order_by("phase_order"))
    assert [p.slug for p in phases] == ["esr-dev", "esr-test"]
    assert phases[0].is_open() and phases[1].opens_at == phases[0].closes_at
    assert [list(Track.objects.filter(task=p).values_list("slug", "kind")) for p in phases] == [
        [("efficiency", "measure")]
    ] * 2
    registered = challenge.registrations.filter(status="approved")
    assert {"alice", "bob"} <= set(registered.values_list("user__username", flat=True))
    assert Submission.objects.filter(task=phases[0], is_baseline=True).count() == 3
    assert challenge.announcements.count() == 1
    page = Client().get("/tasks/esr-dev/").content.decode()
    assert 'data-track="efficiency"' in page and "Efficient super-resolution" in page
