"""The fair-order benchmark (benchmarks/fair_order.py) in a short mode on the test database: it
times both reads with and without fresh statistics and leaves none of its rows behind. No
timing is asserted; the figures are in docs/benchmarks.md."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from benchmarks import fair_order
from submissions.models import Submission, Task

pytestmark = pytest.mark.django_db


def test_a_short_run_times_both_reads_and_cleans_up(alice: Any) -> None:
    short = ["--burst", "30", "--entrants", "4", "--history", "3", "--repeats", "3"]
    results = fair_order.main(short)

    assert [r["statistics"] for r in results] == ["before ANALYZE", "after ANALYZE"]
    assert all(r["queued"] == 33 and r["entrants"] == 4 for r in results)
    assert all(r["next_candidates_ms"] > 0 and r["queue_position_ms"] > 0 for r in results)
    assert not Task.objects.filter(slug=fair_order.TASK_SLUG).exists()
    assert not Submission.objects.exists()
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["alice"]
