"""The leaderboard page: constant query count, sorting, tabs, frozen boards, the viewer's row,
CSV export and the best-score chart."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from submissions.admin.services import task_leaderboard_set
from submissions.lifecycle import selectors
from submissions.lifecycle.selectors import leaderboard_best_over_time
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

PAGE = "/tasks/digits/"
API = "/api/tasks/digits/leaderboard/"


def board_users(html: str) -> list[str]:
    return re.findall(r'<tr class="[^"]*" data-user="([^"]+)">', html)


def add_users(task: Any, django_user_model: Any, *, users: int, per_user: int, prefix: str) -> None:
    start = timezone.now() - timedelta(days=30)
    for u in range(users):
        user = django_user_model.objects.create(username=f"{prefix}{u:04d}")
        for k in range(per_user):
            scored(
                task,
                user,
                0.5 + ((u * 7 + k * 13) % 97) / 250,
                created_at=start + timedelta(minutes=u * per_user + k),
                latency_p50_ms=1.0 + u,
                throughput=1000.0 - u,
                device_name="cpu",
            )


def queries_for(client: Client, url: str, task: Any) -> int:
    """Queries of one request, the task's counts not cached (they are, for 30 s, after a page
    view; the test keeps them for no time): so every measure counts the same queries whatever
    ran before."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured)


def test_page_and_api_make_the_same_number_of_queries_at_two_board_sizes(
    make_task: Any, django_user_model: Any, alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(selectors, "TASK_COUNTS_TTL_S", 0)  # counted on every request
    task = make_task()
    client = Client()
    client.force_login(alice)
    scored(task, alice, 0.1)  # alice ranks last: her row is pinned below the first page
    add_users(task, django_user_model, users=3, per_user=2, prefix="small")
    small = [queries_for(client, PAGE, task), queries_for(client, API, task)]

    add_users(task, django_user_model, users=150, per_user=4, prefix="big")
    big = [queries_for(client, PAGE, task), queries_for(client, API, task)]

    assert small == big
    # session, user, task, count, page ids and ranks, page rows, own row, own rank, chart
    # steps, the ranking rule, the score-versus-latency points, the task tabs' counts and data
    # files, the task's tracks: none per row
    assert big[0] <= 14
    page = client.get(PAGE).content.decode()
    assert "Page 1 of 4" in page
    assert board_users(page)[-1] == "alice"  # pinned, although she is on the last page
    assert re.search(r'<tr class="mine" data-user="alice">\s*<td class="num">154</td>', page)


def test_sorting_by_a_column_reorders_rows_but_keeps_each_rank(
    make_task: Any, alice: Any, bob: Any, operator: Any
) -> None:
    task = make_task()
    scored(task, alice, 0.9, throughput=100.0)
    scored(task, bob, 0.8, throughput=300.0)
    scored(task, operator, 0.7, throughput=200.0)
    default = Client().get(PAGE).content.decode()
    assert board_users(default) == ["alice", "bob", "operator"]
    by_speed = Client().get(PAGE, {"sort": "throughput", "dir": "desc"}).content.decode()
    assert board_users(by_speed) == ["bob", "operator", "alice"]
    assert re.search(r'data-user="bob">\s*<td class="num">2</td>', by_speed)
    # throughput is folded under "More": its sort link says which way the board is sorted
    assert re.search(r'sort=throughput[^"]*"\s*aria-current="true">Throughput ▼</a>', by_speed)
    by_name = Client().get(PAGE, {"sort": "user", "dir": "desc"}).content.decode()
    assert board_users(by_name) == ["operator", "bob", "alice"]
    nonsense = Client().get(PAGE, {"sort": "password", "dir": "sideways", "page": "-3"})
    assert board_users(nonsense.content.decode()) == ["alice", "bob", "operator"]


def test_private_tab_appears_only_once_revealed_and_ranks_by_private_score(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    scored(task, alice, 0.9, score_private=0.6)
    scored(task, bob, 0.8, score_private=0.7)
    concealed = Client().get(PAGE, {"board": "private"}).content.decode()
    assert "Private</a>" not in concealed
    assert board_users(concealed) == ["alice", "bob"]  # falls back to the public board
    assert Client().get("/tasks/digits/leaderboard.csv", {"board": "private"}).status_code == 404

    task_leaderboard_set(task_ids=[task.pk], private_revealed=True)  # the operator's action
    revealed = Client().get(PAGE, {"board": "private"}).content.decode()
    assert 'aria-current="page">Private</a>' in revealed
    assert board_users(revealed) == ["bob", "alice"]
    assert "0.7000" in revealed


def test_a_frozen_board_says_since_when_and_ignores_later_submissions(
    make_task: Any, alice: Any, bob: Any
) -> None:
    now = timezone.now()
    task = make_task(leaderboard_frozen_at=now - timedelta(hours=1))
    scored(task, alice, 0.7, created_at=now - timedelta(hours=2))
    scored(task, bob, 0.99, created_at=now)  # after the freeze
    page = Client().get(PAGE).content.decode()
    assert "Frozen since" in page
    assert board_users(page) == ["alice"]


def test_baselines_are_marked_and_the_viewers_row_is_highlighted(
    make_task: Any, alice: Any, operator: Any
) -> None:
    task = make_task()
    scored(task, operator, 0.8, is_baseline=True)
    scored(task, alice, 0.7)
    client = Client()
    client.force_login(alice)
    page = client.get(PAGE).content.decode()
    assert re.search(r'data-user="operator">(?:(?!</tr>).)*chip-baseline', page, re.S)
    assert '<tr class="mine" data-user="alice">' in page
    assert '<tr class="baseline" data-user="operator">' in page  # marked, not highlighted


def test_an_unstable_baseline_says_why_on_the_board_with_the_tasks_own_limits(
    make_task: Any, operator: Any
) -> None:
    """The demo's baselines are timed on whatever machine runs the demo, busy or not: where one
    comes out "unstable", the board says what that means and why, in the task's own limits."""
    task = make_task(timing={"unstable_spread": 0.08})
    scored(task, operator, 0.8, is_baseline=True, latency_p50_ms=42.0, latency_spread=0.148,
           latency_unstable=True)  # fmt: skip
    page = Client().get(PAGE).content.decode()
    assert re.search(r'data-user="operator">(?:(?!</tr>).)*chip-unstable', page, re.S)
    assert "± 14.8 %" in page  # beside the chip, on a phone too (a title is hover-only)
    why = re.search(r"<span data-unstable-why>(.*?)</span>", page, re.S)
    assert why is not None
    assert "differ by more than 8.0 %" in why.group(1)
    assert "other work shared the machine" in why.group(1)
    assert "score is not affected" in why.group(1)


def test_csv_export_has_every_ranked_user_and_every_metric(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task()
    scored(task, alice, 0.9, metrics={"accuracy": 0.9, "macro_f1": 0.85}, latency_p50_ms=2.5)
    scored(task, alice, 0.5, metrics={"accuracy": 0.5, "macro_f1": 0.4})
    scored(task, bob, 0.8, metrics={"accuracy": 0.8, "macro_f1": 0.75}, is_baseline=True)
    response = Client().get("/tasks/digits/leaderboard.csv")
    assert response["Content-Type"].startswith("text/csv")
    assert "digits-public-leaderboard.csv" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    header = rows[0]
    assert header[:5] == [
        "rank",
        "user",
        "team",
        "baseline",
        "score (Top-1 accuracy, higher is better)",
    ]
    assert header[5:7] == ["accuracy", "macro_f1"]
    assert [r[:5] for r in rows[1:]] == [
        ["1", "alice", "", "", "0.9"],
        ["2", "bob", "", "yes", "0.8"],
    ]
    assert rows[1][6] == "0.85" and rows[1][7] == "2.5"
    assert rows[1][header.index("entries")] == "2"


def test_hidden_board_is_neither_shown_nor_exported_to_participants(
    make_task: Any, alice: Any, operator: Any
) -> None:
    task = make_task(leaderboard="hidden")
    scored(task, alice, 0.9)
    assert "leaderboard of this task is hidden" in Client().get(PAGE).content.decode()
    assert Client().get("/tasks/digits/leaderboard.csv").status_code == 404
    staff = Client()
    staff.force_login(operator)
    assert board_users(staff.get(PAGE).content.decode()) == ["alice"]


def test_best_score_over_time_keeps_only_the_records_in_the_metrics_direction(
    make_task: Any, alice: Any, bob: Any
) -> None:
    start = timezone.now() - timedelta(days=5)
    high = make_task()
    low = make_task(slug="regress", title="Regress", metric="mse")
    for day, (user, score) in enumerate(
        [(alice, 0.5), (bob, 0.4), (bob, 0.7), (alice, 0.7), (alice, 0.9)]
    ):
        scored(high, user, score, created_at=start + timedelta(days=day))
        scored(low, user, score, created_at=start + timedelta(days=day))
    steps = [(r.score, r.username) for r in leaderboard_best_over_time(task=high)]
    assert steps == [(0.5, "alice"), (0.7, "bob"), (0.9, "alice")]
    steps = [(r.score, r.username) for r in leaderboard_best_over_time(task=low)]
    assert steps == [(0.5, "alice"), (0.4, "bob")]
    page = Client().get(PAGE).content.decode()
    assert page.count('<circle class="dot"') == 3
    assert "0.9000 · alice" in page


def test_submission_page_shows_the_latency_chart_and_what_to_do_after_a_failure(
    make_task: Any, alice: Any
) -> None:
    task = make_task()
    good = scored(task, alice, 0.9, batch_latencies_ms=[1.5, 2.0, 1.7, 1.6])
    bad = scored(
        task,
        alice,
        0.0,
        status="failed",
        error_message="The model's output contains NaN or infinity (batch 3).",
    )
    client = Client()
    client.force_login(alice)
    page = client.get(f"/submissions/{good.pk}/").content.decode()
    assert "4 timed batches" in page and page.count('<circle class="dot"') == 4
    grouped = scored(
        task,
        alice,
        0.8,
        batch_latencies_ms=[0.004, 0.005],
        timing={"batches": 40_000, "batches_per_sample": 16},
    )
    page = client.get(f"/submissions/{grouped.pk}/").content.decode()
    assert "2 groups of 16 back-to-back batches, each point their mean" in page
    assert "evenly sampled from all 40000" in page
    failed = client.get(f"/submissions/{bad.pk}/").content.decode()
    assert "NaN or infinity (batch 3)" in failed
    assert "Look for divisions by zero" in failed


def test_a_tiny_models_latency_shows_in_microseconds_with_its_spread_and_conditions(
    make_task: Any, alice: Any
) -> None:
    task = make_task()
    timing = {
        "protocol": {"passes": 5},
        "batches": 181_234,
        "duration_s": 1.0,
        "exclusive": False,
        "conditions": {
            "device_class": "a40",
            "gpu_name": "NVIDIA A40",
            "driver": "550.54.15",
            "cuda_driver": "12.4",
            "onnxruntime": "1.31.1",
            "start": {"sm_clock_mhz": 1740, "temperature_c": 61},
            "end": {"sm_clock_mhz": 1695, "temperature_c": 64},
        },
    }
    tiny = scored(
        task,
        alice,
        0.9,
        latency_p50_ms=0.0055371,
        latency_p90_ms=0.0061,
        latency_p95_ms=0.0072,
        latency_p99_ms=0.0123,
        latency_mean_ms=0.0058,
        latency_spread=0.071,
        latency_unstable=True,
        timing_exclusive=False,
        timing=timing,
        peak_memory_bytes=3 * 1024**3,
        provider="CUDAExecutionProvider",
    )
    client = Client()
    client.force_login(alice)
    page = client.get(f"/submissions/{tiny.pk}/").content.decode()
    assert "p50 <span data-p50>5.54 µs</span> ± 7.1 %" in page and "p99 12.3 µs" in page
    assert "0.01 ms" not in page  # the old display: two decimals of a millisecond
    assert "data-unstable" in page and "timed without exclusivity" in page
    assert "181,234 batches in 5 passes" in page
    assert "550.54.15 / 12.4" in page and "1740 → 1695 MHz" in page and "61 → 64 °C" in page
    assert "3.00 GiB of device memory" in page  # evaluation.formats.size, binary units
    detail = client.get(f"/api/submissions/{tiny.pk}/").json()
    assert detail["latency_p50_ms"] == 0.0055371  # stored and served at full precision
    assert detail["latency_unstable"] is True and detail["timing_exclusive"] is False
    assert detail["timing"]["conditions"]["gpu_name"] == "NVIDIA A40"
