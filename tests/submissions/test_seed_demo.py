"""The demo: seeded tasks and baselines evaluate for real and rank in distinct places."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from submissions.lifecycle.selectors import leaderboard
from submissions.models import Submission, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_seeded_demo_evaluates_every_baseline_and_ranks_them(queue: Any, run_worker: Any) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    call_command("seed_demo", stdout=io.StringIO())  # idempotent: creates nothing twice
    assert Submission.objects.count() == 9

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
    assert Submission.objects.filter(is_baseline=True).count() == 9
