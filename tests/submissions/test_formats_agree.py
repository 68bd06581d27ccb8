"""One result reads alike on the submission page, in the API's display fields and in ``oep``
(evaluation/formats.py owns every figure's unit and digits)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.services import api_token_create
from tests.portal.client_support import Oep
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db(transaction=True)

FIGURES = {
    "latency_p50_ms": 0.01218,
    "latency_spread": 0.009,
    "throughput": 3692893.0,
    "peak_memory_bytes": 1234567,
    "parameters": 650,
    "flops": 41300,
}


def test_page_api_and_cli_write_a_result_the_same_way(
    alice: Any, make_task: Any, live_portal: str, tmp_path: Path
) -> None:
    metrics = {"accuracy": 0.97222, "top5_accuracy": 1.0, "macro_f1": 0.9655}
    s = scored(make_task(), alice, 0.97222, **FIGURES, metrics=metrics)

    api = APIClient()
    api.force_authenticate(alice)
    display = api.get(f"/api/submissions/{s.pk}/").json()["display"]
    assert display["score"] == "0.9722" and display["latency_p50"] == "12.2 µs"
    assert display["throughput"] == "3.69 M samples/s"
    # labels from the registry, the score's own metric once (as the score), 4 digits each
    assert display["metrics"] == {"Top-5 accuracy": "1.000", "Macro F1": "0.9655"}

    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/submissions/{s.pk}/").content.decode()
    for text in (display["score"], display["latency_p50"], display["throughput"]):
        assert text in page
    for label, value in display["metrics"].items():
        assert f'<dt>{label}</dt><dd class="num" data-metric>{value}</dd>' in page
    assert "top5_accuracy" not in page and page.count("0.9722") == 1

    oep = Oep(tmp_path, url=live_portal, token=api_token_create(user=alice, name="t").secret)
    out = oep("status", str(s.pk))
    assert out.returncode == 0, out.stderr
    fields = {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in out.stdout.splitlines())}
    assert fields["Score"] == display["score"]
    assert fields["Metrics"] == "Top-5 accuracy 1.000, Macro F1 0.9655"
    assert fields["Latency"] == f"p50 {display['latency_p50']} ± 0.9 % per batch"
    assert fields["Throughput"] == display["throughput"]


def board_row_html(user: str) -> str:
    page = Client().get("/tasks/digits/").content.decode()
    found = re.search(rf'<tr [^>]*data-user="{user}">.*?</tr>', page, re.S)
    assert found is not None
    return found.group(0)


def test_the_board_page_its_api_display_and_the_cli_write_a_row_the_same_way(
    alice: Any, make_task: Any, live_portal: str, tmp_path: Path
) -> None:
    metrics = {"accuracy": 1.0, "top5_accuracy": 1.0, "macro_f1": 0.9655}
    timed = {
        "latency_sessions": 3,
        "latency_session_spread": 0.021,
        "energy_per_sample_j": 0.000321,
        "costs_not_counted": {"ops": {"Loop": 2}},
    }
    scored(make_task(), alice, 1.0, **FIGURES, **timed, metrics=metrics)

    board = APIClient().get("/api/tasks/digits/leaderboard/").json()
    assert board["metric_label"] == "Top-1 accuracy"
    display = board["rows"][0]["display"]
    assert display == {
        "score": "1.000",
        "metrics": {"Top-5 accuracy": "1.000", "Macro F1": "0.9655"},
        "latency_p50": "12.2 µs",
        "latency_spread": "± 0.9 %",
        "latency_session_spread": "2.1 %",
        "throughput": "3.69 M samples/s",
        "peak_memory": "1.18 MiB",
        "parameters": "650",
        "flops": "≥ 41.3 k",
        "energy_per_sample": "321 µJ",
        "remeasured": "",  # not a re-measured finalist
    }

    row = board_row_html("alice")  # the board page draws every one of them, the same way
    for name, text in display.items():
        if name == "metrics":
            assert all(f"<span>{k} {v}</span>" in row for k, v in text.items())
        elif name not in ("energy_per_sample", "remeasured"):  # no energy column; none re-measured
            assert text in row, name

    oep = Oep(tmp_path, url=live_portal, token=api_token_create(user=alice, name="t").secret)
    out = oep("leaderboard", "digits").stdout
    assert f"{board['metric_label']} (higher is better)" in out
    line = next(ln for ln in out.splitlines() if "alice" in ln).split()
    assert display["score"] in line and display["latency_p50"] in " ".join(line)
