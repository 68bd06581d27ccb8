"""One result reads alike on the submission page, in the API's display fields and in ``oep``
(evaluation/formats.py owns every figure's unit and digits)."""

from __future__ import annotations

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


def test_the_cli_leaderboard_writes_scores_and_latency_as_the_board_does(
    alice: Any, make_task: Any, live_portal: str, tmp_path: Path
) -> None:
    scored(make_task(), alice, 1.0, latency_p50_ms=0.01218)
    board = Client().get("/tasks/digits/").content.decode()
    assert "1.000" in board and "12.2 µs" in board
    oep = Oep(tmp_path, url=live_portal, token=api_token_create(user=alice, name="t").secret)
    out = oep("leaderboard", "digits").stdout
    assert "Top-1 accuracy (higher is better)" in out
    assert "1.000" in out and "12.2 µs" in out
