"""Ranking rules through the whole board: each rule orders a fast-but-weak and a slow-but-strong
model as specified on the page, in the API and in the CSV; entries outside the rule are listed
below with the reason; the read models equal a full rebuild after every rule change."""

from __future__ import annotations

import csv
import io
import math
import re
from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import transaction
from django.test import Client

from submissions.admin.services import leaderboard_top_retime
from submissions.boards import display
from submissions.boards.leaderboard import leaderboard_differences, leaderboard_rebuild
from submissions.lifecycle.services import submission_rerun
from submissions.lifecycle.turns import RERUN_PRIORITY
from submissions.models import Submission
from submissions.models.ranking import RankingRule
from tests.submissions.test_admin import task_form
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

PAGE = "/tasks/digits/"


def timed(ms: float, device_class: str = "cpu", **fields: Any) -> dict[str, Any]:
    """Result fields of a model timed at ``ms`` per batch on ``device_class``."""
    return {
        "latency_p50_ms": ms,
        "latency_p95_ms": ms * 1.2,
        "latency_spread": 0.01,
        "timing_exclusive": True,
        "timing": {"conditions": {"device_class": device_class}},
        **fields,
    }


@pytest.fixture
def board(make_task: Any, alice: Any, bob: Any, operator: Any) -> dict[str, Any]:
    """alice: fast but weak; bob: slow but strong; the operator's baseline in between."""
    task = make_task()
    return {
        "task": task,
        "fast": scored(task, alice, 0.70, **timed(1.0, parameters=1_000, flops=10_000)),
        "slow": scored(task, bob, 0.95, **timed(40.0, parameters=10**6, flops=9 * 10**6)),
        "baseline": scored(
            task, operator, 0.80, is_baseline=True, **timed(10.0, parameters=10**4, flops=10**5)
        ),
    }


def rule_set(*, task_id: int, **fields: Any) -> None:
    """What saving the rule in the admin's Task page does (``TaskAdmin.save_related``, tested
    below): the rule validated and saved, the boards re-ranked, in one transaction."""
    with transaction.atomic():
        rule = RankingRule.objects.filter(task_id=task_id).first() or RankingRule(task_id=task_id)
        for name, value in fields.items():
            setattr(rule, name, value)
        rule.full_clean(exclude=["task"])
        rule.save()
        leaderboard_rebuild(task_id=task_id)


def in_step() -> None:
    out = StringIO()
    call_command("leaderboard_rebuild", "--check", stdout=out)
    assert "in step" in out.getvalue()


def api_rows() -> list[dict[str, Any]]:
    return Client().get("/api/tasks/digits/leaderboard/").json()["rows"]


def csv_rows() -> list[dict[str, str]]:
    text = Client().get("/tasks/digits/leaderboard.csv").content.decode()
    return list(csv.DictReader(io.StringIO(text)))


def orders(task: Any) -> dict[str, list[tuple[Any, str]]]:
    """(rank, user) from the page, the API and the CSV; rank None/'' for unranked."""
    page = Client().get(PAGE).content.decode()
    on_page = [
        (rank, user)
        for user, rank in re.findall(
            r'<tr class="[^"]*" data-user="([^"]+)"><td class="num">([^<]+)</td>', page
        )
    ]
    return {
        "page": on_page,
        "api": [(r["rank"], r["user"]) for r in api_rows()],
        "csv": [(r["rank"], r["user"]) for r in csv_rows()],
    }


def test_primary_metric_ranks_the_slow_strong_model_first_everywhere(board: Any) -> None:
    seen = orders(board["task"])
    assert seen["page"] == [("1", "bob"), ("2", "operator"), ("3", "alice")]
    assert seen["api"] == [(1, "bob"), (2, "operator"), (3, "alice")]
    assert seen["csv"] == [("1", "bob"), ("2", "operator"), ("3", "alice")]


def test_a_latency_budget_ranks_the_fast_model_and_lists_the_slow_one_below_with_why(
    board: Any,
) -> None:
    rule_set(
        task_id=board["task"].pk, kind="constrained", latency_percentile="p95", latency_budget_ms=20
    )
    in_step()
    seen = orders(board["task"])
    assert seen["page"] == [("1", "operator"), ("2", "alice"), ("—", "bob")]
    assert seen["api"] == [(1, "operator"), (2, "alice"), (None, "bob")]
    assert seen["csv"] == [("1", "operator"), ("2", "alice"), ("", "bob")]
    why = "p95 latency 48 ms is over the 20 ms budget"
    assert api_rows()[2]["not_ranked_because"] == why and api_rows()[2]["ranked"] is False
    assert csv_rows()[2]["not_ranked_because"] == why
    page = Client().get(PAGE).content.decode()
    assert f"Not ranked: {why}" in page and "Not ranked under this board" in page
    assert "among entries with p95 latency ≤ 20 ms" in page  # the rule, said on the page
    api = Client().get("/api/tasks/digits/leaderboard/").json()
    assert api["ranking"]["kind"] == "constrained"


def test_the_composite_ranks_by_the_hand_computed_score_relative_to_the_baseline(
    board: Any,
) -> None:
    rule_set(
        task_id=board["task"].pk,
        kind="composite",
        weights={"latency": 0.7, "parameters": 0.15, "flops": 0.15},
        baseline=board["baseline"],
    )
    in_step()
    seen = orders(board["task"])
    assert seen["api"] == [(1, "alice"), (2, "operator"), (3, "bob")]
    assert seen["page"] == [("1", "alice"), ("2", "operator"), ("3", "bob")]
    assert seen["csv"] == [("1", "alice"), ("2", "operator"), ("3", "bob")]
    alice = 0.7 * math.exp(2 * 0.1) + 0.15 * math.exp(2 * 0.1) + 0.15 * math.exp(2 * 0.1)
    bob = 0.7 * math.exp(2 * 4) + 0.15 * math.exp(2 * 100) + 0.15 * math.exp(2 * 90)
    values = [r["ranking_value"] for r in api_rows()]
    assert values == pytest.approx([alice, math.exp(2), bob])
    assert float(csv_rows()[0]["ranking_value"]) == pytest.approx(alice)
    assert "Composite ↓" in Client().get(PAGE).content.decode()


def test_the_baseline_rerunning_unranks_everyone_until_it_is_back_and_stays_in_step(
    board: Any,
) -> None:
    rule_set(
        task_id=board["task"].pk, kind="composite", weights={"latency": 1.0},
        baseline=board["baseline"],
    )  # fmt: skip
    assert submission_rerun(submission_id=board["baseline"].pk)
    assert leaderboard_differences(task_id=board["task"].pk) == []
    rows = api_rows()
    assert [r["ranked"] for r in rows] == [False, False]  # the baseline itself left the board
    assert {r["not_ranked_because"] for r in rows} == {"the baseline has no usable latency"}


def test_a_new_result_under_a_rule_refreshes_only_its_owner_and_stays_in_step(
    board: Any, alice: Any
) -> None:
    rule_set(task_id=board["task"].pk, kind="constrained", max_parameters=5_000)
    scored(board["task"], alice, 0.99, **timed(2.0, parameters=10**7))  # over: not her best
    scored(board["task"], alice, 0.75, **timed(2.0, parameters=2_000))  # within: her entry
    in_step()
    rows = api_rows()
    assert [(r["rank"], r["user"], r["score"]) for r in rows] == [
        (1, "alice", 0.75),
        (None, "bob", 0.95),
        (None, "operator", 0.80),
    ]


def test_an_entry_timed_on_another_device_class_is_marked_and_not_ranked_on_latency(
    board: Any, alice: Any
) -> None:
    scored(board["task"], alice, 0.99, **timed(0.5, device_class="gpu"))
    page = Client().get(PAGE).content.decode()
    assert "on gpu" in page and "not ranked on latency" in page  # marked under the primary
    assert api_rows()[0]["user"] == "alice" and api_rows()[0]["timed_on_device_class"] == "gpu"
    rule_set(task_id=board["task"].pk, kind="constrained", latency_budget_ms=100)
    in_step()
    alice_row = next(r for r in api_rows() if r["user"] == "alice")
    # her gpu-timed best is not ranked on a latency rule; her cpu-timed entry ranks instead
    assert alice_row["submission_id"] == board["fast"].pk and alice_row["ranked"]


def test_the_board_shows_microseconds_spread_and_timing_marks(make_task: Any, alice: Any) -> None:
    task = make_task()
    scored(
        task, alice, 0.9, latency_p50_ms=0.0055371, latency_spread=0.071, latency_unstable=True,
        timing_exclusive=False, parameters=1_234_567, flops=2_500_000_000,
        peak_memory_bytes=3 * 1024**2,
    )  # fmt: skip
    page = Client().get(PAGE).content.decode()
    assert "5.54 µs" in page and "± 7.1 %" in page and "0.01 ms" not in page
    assert "chip-unstable" in page and "timed without exclusivity" in page
    assert "1.23 M" in page and "2.50 G" in page and "3.00 MiB" in page
    row = api_rows()[0]
    assert row["latency_spread"] == 0.071 and row["parameters"] == 1_234_567
    assert row["peak_memory_bytes"] == 3 * 1024**2 and row["latency_unstable"] is True
    line = csv_rows()[0]
    assert line["latency_unstable"] == "yes" and line["timed_exclusively"] == "no"
    assert line["flops"] == "2500000000"


def test_the_score_versus_latency_chart_marks_the_pareto_front(board: Any) -> None:
    page = Client().get(PAGE).content.decode()
    assert "data-pareto" in page
    # every entry is on the front here: each faster one is weaker
    assert page.count('class="dot front"') == 3
    assert "alice · Top-1 accuracy 0.7000 · 1.00 ms · on the Pareto front" in page
    assert '<text class="point-label"' in page  # the front's points carry their names


def test_a_rule_that_cannot_work_is_refused_and_changes_nothing(board: Any) -> None:
    with pytest.raises(ValidationError, match="needs a baseline"):
        rule_set(task_id=board["task"].pk, kind="composite", weights={"flops": 1})
    assert not RankingRule.objects.exists()
    assert [r["rank"] for r in api_rows()] == [1, 2, 3]


def test_saving_the_rule_in_the_admin_re_ranks_the_board(board: Any, operator: Any) -> None:
    console = Client()
    console.force_login(operator)
    task = board["task"]
    form = task_form({}, **{
        "ranking_rule-TOTAL_FORMS": "1", "ranking_rule-0-kind": "constrained",
        "ranking_rule-0-latency_percentile": "p50", "ranking_rule-0-latency_budget_ms": "5",
        "ranking_rule-0-weights": "{}", "ranking_rule-0-task": str(task.pk),
    })  # fmt: skip
    del form["dataset"]  # kept as it is
    response = console.post(f"/admin/submissions/task/{task.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[-3000:]
    ranked = [(r["rank"], r["user"]) for r in api_rows()]
    assert ranked == [(1, "alice"), (None, "bob"), (None, "operator")]
    in_step()


def test_the_operator_re_times_the_top_ranked_entries_at_re_run_priority(board: Any) -> None:
    rule_set(task_id=board["task"].pk, kind="constrained", latency_budget_ms=20)
    retimed = leaderboard_top_retime(task_id=board["task"].pk, count=5)
    assert sorted(retimed) == sorted([board["baseline"].pk, board["fast"].pk])  # not bob
    queued = Submission.objects.filter(pk__in=retimed)
    assert {(s.status, s.priority) for s in queued} == {("queued", RERUN_PRIORITY)}
    assert [r["user"] for r in api_rows()] == ["bob"]  # off the board until re-timed
    in_step()


def test_a_large_boards_chart_draws_its_front_and_the_best_ranked_others(
    board: Any, django_user_model: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(display, "PARETO_OTHERS_DRAWN", 2)
    # Four more entries, each slower and weaker than alice's or the baseline: none on the front.
    for n, (score, ms) in enumerate([(0.79, 12.0), (0.78, 13.0), (0.60, 2.0), (0.50, 3.0)]):
        user = django_user_model.objects.create_user(f"extra{n}")
        scored(board["task"], user, score, **timed(ms))

    page = Client().get(PAGE).content.decode()
    figure = page.split("data-pareto>")[1].split("</figure>")[0]

    assert figure.count('class="dot front"') == 3  # the front is drawn whole
    assert figure.count('class="dot"') == 2  # and the two best-ranked others
    assert "extra0 · Top-1 accuracy 0.7900" in figure and "extra1 · Top-1 accuracy 0.7800" in figure
    assert "extra2" not in figure and "extra3" not in figure
    assert "Drawn: the front and the 2 best-ranked of 7 entries." in figure
