"""Costs that leave out nodes that multiply-accumulate are incomplete: said on every surface,
never ranked against a FLOPs budget or in a composite as if they were the whole, and completed by
the worker from a run at the task's batch shape."""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import pytest
from django.test import Client
from rest_framework.test import APIClient

from submissions.boards import ranking
from submissions.boards.leaderboard import leaderboard_rebuild
from submissions.boards.ranking import Measures, Rule, judge
from submissions.models import Submission
from submissions.models.ranking import RankingRule
from tests.builders import data_dependent_matmul, digits_like
from tests.submissions.test_read_api import scored
from tests.workers.fleet_support import submit

PARTIAL = "MatMul × 71 left out, shape or operator unknown"
SWIN_LIKE = {"ops": {"MatMul": 71, "Add": 12}, "unknown_shapes": 300}  # an old Swin-T export
WHOLE = {"ops": {"Resize": 1}, "unknown_shapes": 0}  # no MAC-bearing node left out


def test_an_incomplete_count_never_passes_a_flops_budget_however_small() -> None:
    rule = Rule(kind=ranking.CONSTRAINED, max_flops=10**10)
    partial = Measures(
        0.9, {"p50": 1.0}, parameters=10, flops=7_850_000_000, flops_incomplete=PARTIAL
    )
    whole = Measures(0.8, {"p50": 1.0}, parameters=10, flops=9_000_000_000)
    assert judge(rule, whole).ranked
    verdict = judge(rule, partial)
    assert not verdict.ranked
    assert verdict.reason == f"FLOPs not counted in full: {PARTIAL}"


def test_an_incomplete_count_enters_no_composite_and_no_baseline() -> None:
    weights = {"score": 1.0, "flops": 0.5}
    baseline = Measures(0.8, {"p50": 1.0}, parameters=10, flops=100)
    partial = Measures(0.9, {"p50": 1.0}, parameters=10, flops=50, flops_incomplete=PARTIAL)
    verdict = judge(Rule(kind=ranking.COMPOSITE, weights=weights, baseline=baseline), partial)
    assert not verdict.ranked and verdict.reason == f"FLOPs not counted in full: {PARTIAL}"
    partial_baseline = Rule(
        kind=ranking.COMPOSITE,
        weights=weights,
        baseline=Measures(0.8, {}, parameters=10, flops=100, flops_incomplete=PARTIAL),
    )
    assert judge(partial_baseline, baseline).reason == "the baseline has no usable FLOPs"


def test_rules_that_do_not_weigh_flops_rank_an_incomplete_count() -> None:
    partial = Measures(0.9, {"p50": 1.0}, parameters=10, flops=50, flops_incomplete=PARTIAL)
    assert judge(Rule(), partial).ranked
    assert judge(Rule(kind=ranking.CONSTRAINED, latency_budget_ms=2.0), partial).ranked
    assert judge(Rule(kind=ranking.CONSTRAINED, max_parameters=100), partial).ranked


@pytest.mark.django_db
def test_the_board_page_api_and_csv_say_which_count_is_incomplete_and_rank_it_so(
    make_task: Any, alice: Any, bob: Any
) -> None:
    """The issue's case: an old export's partial 7.85 GFLOPs under a 10 GFLOPs budget, beside a
    complete 9 GFLOPs entry: only the complete one is ranked."""
    task = make_task()
    RankingRule.objects.create(task=task, kind=ranking.CONSTRAINED, max_flops=10**10)
    partial = scored(
        task,
        alice,
        0.95,
        flops=7_850_000_000,
        macs=3_900_000_000,
        parameters=28 * 10**6,
        costs_not_counted=SWIN_LIKE,
    )
    whole = scored(
        task, bob, 0.90, flops=9 * 10**9, macs=4 * 10**9, parameters=10**6, costs_not_counted=WHOLE
    )
    leaderboard_rebuild(task_id=task.pk)

    rows = {r["user"]: r for r in APIClient().get("/api/tasks/digits/leaderboard/").json()["rows"]}
    assert (rows["bob"]["rank"], rows["alice"]["rank"]) == (1, None)
    assert rows["alice"]["not_ranked_because"] == f"FLOPs not counted in full: {PARTIAL}"
    assert (rows["alice"]["costs_complete"], rows["alice"]["costs_incomplete_reason"]) == (
        False,
        PARTIAL,
    )
    assert (rows["bob"]["costs_complete"], rows["bob"]["costs_incomplete_reason"]) == (True, "")

    table = list(
        csv.DictReader(io.StringIO(Client().get("/tasks/digits/leaderboard.csv").content.decode()))
    )
    by_user = {r["user"]: r for r in table}
    assert (by_user["alice"]["costs_complete"], by_user["bob"]["costs_complete"]) == ("no", "yes")
    assert by_user["alice"]["costs_incomplete_reason"] == PARTIAL

    page = Client().get("/tasks/digits/").content.decode()
    assert f'title="Not counted in full: {PARTIAL}" data-costs-incomplete>≥ 7.85 G</span>' in page
    assert ">9.00 G<" in page  # three significant digits, like every cost

    detail = APIClient()
    detail.force_authenticate(alice)
    mine = detail.get(f"/api/submissions/{partial.pk}/").json()
    assert (mine["costs_complete"], mine["costs_incomplete_reason"]) == (False, PARTIAL)
    assert Submission.objects.get(pk=whole.pk).costs_complete is True


@pytest.mark.django_db(transaction=True)
def test_a_worker_completes_costs_that_only_a_run_can_tell(
    alice: Any, make_task: Any, run_worker: Any
) -> None:
    arrays = digits_like(n=40, seed=5)
    task = make_task(arrays)
    submission = submit(alice, task, data_dependent_matmul())
    uploaded = Submission.objects.get(pk=submission.pk)
    assert uploaded.costs_complete is False and uploaded.macs == 16 * 64 * 10
    assert uploaded.costs_incomplete_reason == "MatMul × 1 left out, shape or operator unknown"
    client = Client()
    client.force_login(alice)
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "<dd data-costs-incomplete>Not counted in full: MatMul × 1 left out" in page

    run_worker()

    done = Submission.objects.get(pk=submission.pk)
    assert done.status == "succeeded", done.log
    first_batch = arrays["inputs"][:16].reshape(16, -1)
    rows = int(np.count_nonzero(first_batch.max(axis=1) > 0))  # the side MatMul's rows
    assert done.costs_complete is True and done.costs_shapes_from == "run"
    assert done.macs == 16 * 64 * 10 + rows * 10
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "shapes from a run at the batch shape" in page and "data-costs-incomplete" not in page
