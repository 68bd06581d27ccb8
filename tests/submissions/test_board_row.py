"""One row model for the board: the page, the CSV and the API read the same columns, and the
private board shows the private metrics in all three (it used to show the public ones)."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from submissions.api_serializers import LeaderboardRowSerializer
from submissions.board_row import COLUMNS
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

PUBLIC = {"accuracy": 0.91, "macro_f1": 0.88}
PRIVATE = {"accuracy": 0.62, "macro_f1": 0.57}


@pytest.fixture
def revealed(make_task: Any, alice: Any) -> Any:
    task = make_task(private_revealed=True)
    scored(task, alice, 0.91, score_private=0.62, metrics=PUBLIC, metrics_private=PRIVATE)
    return task


def page_metrics(board: str) -> str:
    page = Client().get(f"/tasks/digits/?board={board}").content.decode()
    return re.search(r'<td class="metrics">(.*?)</td>', page, re.S).group(1)  # type: ignore[union-attr]


def csv_row(board: str) -> dict[str, str]:
    text = Client().get(f"/tasks/digits/leaderboard.csv?board={board}").content.decode()
    return next(csv.DictReader(io.StringIO(text)))


def api_row(board: str) -> dict[str, Any]:
    return APIClient().get(f"/api/tasks/digits/leaderboard/?board={board}").json()["rows"][0]


def test_the_private_board_shows_private_metrics_on_the_page_the_csv_and_the_api(
    revealed: Any,
) -> None:
    assert "macro_f1 0.5700" in page_metrics("private")
    row = csv_row("private")
    assert row["score (accuracy, higher is better)"] == "0.62" and row["macro_f1"] == "0.57"
    assert api_row("private")["metrics"] == PRIVATE and api_row("private")["score"] == 0.62


def test_the_public_board_shows_public_metrics_on_the_page_the_csv_and_the_api(
    revealed: Any,
) -> None:
    assert "macro_f1 0.8800" in page_metrics("public")
    assert csv_row("public")["macro_f1"] == "0.88"
    assert api_row("public")["metrics"] == PUBLIC


def test_the_api_and_the_csv_carry_every_column_of_the_row_model(revealed: Any) -> None:
    keys = [c.key for c in COLUMNS]
    assert set(LeaderboardRowSerializer().fields) == set(keys)
    assert set(api_row("public")) == set(keys)
    header = next(
        csv.reader(io.StringIO(Client().get("/tasks/digits/leaderboard.csv").content.decode()))
    )
    assert len(header) == len(keys) - 1 + len(PUBLIC)  # metrics: one column per metric
