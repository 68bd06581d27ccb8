"""One row model for the board: the page, the CSV and the API read the same columns, and the
private board shows the private metrics in all three (it used to show the public ones). The
columns are defined once (``board_row.COLUMNS``): the API's fields, the CSV, the page's headers
and cells and the sort fields all follow from them."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from django.test import Client
from rest_framework import serializers
from rest_framework.test import APIClient

from submissions.boards import display
from submissions.boards.cells import significant
from submissions.boards.ranking import COMPOSITE, PRIMARY, Rule
from submissions.boards.row import COLUMNS, SORT_FIELDS, Column, PageCell
from submissions.lifecycle.selectors import leaderboard
from submissions.web.serializers import LeaderboardRowSerializer
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
    found = re.search(r"<dt>Other metrics</dt><dd>(.*?)</dd>", page, re.S)  # under "More"
    return found.group(1)  # type: ignore[union-attr]


def csv_row(board: str) -> dict[str, str]:
    text = Client().get(f"/tasks/digits/leaderboard.csv?board={board}").content.decode()
    return next(csv.DictReader(io.StringIO(text)))


def api_row(board: str) -> dict[str, Any]:
    return APIClient().get(f"/api/tasks/digits/leaderboard/?board={board}").json()["rows"][0]


def test_the_private_board_shows_private_metrics_on_the_page_the_csv_and_the_api(
    revealed: Any,
) -> None:
    assert "Macro F1 0.5700" in page_metrics("private")
    row = csv_row("private")
    assert row["score (Top-1 accuracy, higher is better)"] == "0.62" and row["macro_f1"] == "0.57"
    assert api_row("private")["metrics"] == PRIVATE and api_row("private")["score"] == 0.62
    shown = api_row("private")["display"]  # as the page writes them, the private ones too
    assert shown["score"] == "0.6200" and shown["metrics"] == {"Macro F1": "0.5700"}


def test_the_public_board_shows_public_metrics_on_the_page_the_csv_and_the_api(
    revealed: Any,
) -> None:
    assert "Macro F1 0.8800" in page_metrics("public")
    assert csv_row("public")["macro_f1"] == "0.88"
    assert api_row("public")["metrics"] == PUBLIC


def test_the_api_and_the_csv_carry_every_column_of_the_row_model(revealed: Any) -> None:
    keys = [c.key for c in COLUMNS]
    assert set(LeaderboardRowSerializer().fields) == {*keys, "display"}
    assert set(api_row("public")) == {*keys, "display"}
    header = next(
        csv.reader(io.StringIO(Client().get("/tasks/digits/leaderboard.csv").content.decode()))
    )
    assert len(header) == len(keys) - 1 + len(PUBLIC)  # metrics: one column per metric


def test_the_api_fields_are_the_columns_in_their_order_with_their_types_and_help() -> None:
    fields = LeaderboardRowSerializer().fields
    assert list(fields) == [*(c.key for c in COLUMNS), "display"]
    for column in COLUMNS:
        field = fields[column.key]
        assert field.allow_null is column.null, column.key
        assert (field.help_text or "") == column.help, column.key
    assert isinstance(fields["final"], serializers.ChoiceField)
    assert isinstance(fields["last_submitted_at"], serializers.DateTimeField)
    assert isinstance(fields["metrics"], serializers.DictField)


def test_the_sort_fields_are_the_sortable_page_columns(make_task: Any) -> None:
    headers = display.board_columns(
        task=make_task(), rule=Rule(kind=COMPOSITE), sort="rank", descending=False
    )
    # a folded column is sorted from the links that "More" carries, the others from headers
    more = headers[-1]
    shown = [h.key for h in (*headers[:-1], *more.folded) if h.key]
    assert sorted(shown) == sorted(SORT_FIELDS)
    places = [c.page.place for c in COLUMNS if c.page is not None]
    assert len(places) == len(set(places)) == len(headers) - 1 + len(more.folded)
    assert SORT_FIELDS["latency"] == "latency_p50_ms" and SORT_FIELDS["rank"] == "rank_key"


def cells_of(html: str) -> list[list[str]]:
    return [re.findall(r"<td[ >]", row) for row in re.findall(r"<tr [^>]*data-user.*?</tr>", html)]


@pytest.mark.parametrize("kind", [PRIMARY, COMPOSITE])
def test_every_row_has_one_cell_under_each_header_and_gaps_span_them_all(
    revealed: Any, bob: Any, kind: str
) -> None:
    """The headers and the cells come from the same page cells: under a composite rule its
    column stands right after the score in both (the header once sat after "Other metrics")."""
    scored(revealed, bob, 0.5, latency_p50_ms=2.0)
    rows = leaderboard(task=revealed)
    rule = Rule(kind=kind)
    headers = display.board_columns(task=revealed, rule=rule, sort="rank", descending=False)
    html = display.leaderboard_rows_html(
        task=revealed, rule=rule, rows=[(False, r) for r in rows] + [(True, rows[0])],
        own_submission_id=None,
    )  # fmt: skip
    assert [len(cells) for cells in cells_of(html)] == [len(headers)] * 3
    assert f'colspan="{len(headers)}"' in html
    labels = [h.label for h in headers]
    assert labels[2:4] == (
        ["Top-1 accuracy ↑", "Composite ↓"]
        if kind == COMPOSITE
        else ["Top-1 accuracy ↑", "p50 / batch"]
    )
    # the rest are folded into each row's last cell, under "More"
    assert labels[-1] == "More" and "Other metrics" not in labels
    assert "<dt>Other metrics</dt><dd>" in html and "<dt>Peak memory</dt>" in html


ENERGY = Column(
    "energy_j",
    lambda row: row.score * 10,
    float,
    null=True,
    help="Joules per batch.",
    header="energy (J)",
    page=PageCell(99, "Energy", significant(2), "energy", "score", "num energy"),
)


def test_a_new_column_appears_in_the_api_the_csv_and_the_page(revealed: Any) -> None:
    columns = (*COLUMNS, ENERGY)
    row = leaderboard(task=revealed)[0]
    rule = Rule()

    class WithEnergy(LeaderboardRowSerializer):
        pass

    WithEnergy.columns = columns
    assert WithEnergy(row).data["energy_j"] == pytest.approx(9.1)
    assert WithEnergy().fields["energy_j"].help_text == "Joules per batch."

    header, line = display.leaderboard_csv_rows(
        task=revealed, rule=rule, rows=[row], columns=columns
    )
    assert header[-1] == "energy (J)" and line[-1] == pytest.approx(9.1)

    headers = display.board_columns(
        task=revealed, rule=rule, sort="energy", descending=True, columns=columns
    )
    assert headers[-1].label == "More"  # the folded columns' cell stays last
    assert (headers[-2].label, headers[-2].key, headers[-2].aria_sort) == (
        "Energy",
        "energy",
        "descending",
    )
    html = display.leaderboard_rows_html(
        task=revealed, rule=rule, rows=[(False, row)], own_submission_id=None, columns=columns
    )
    assert '<td class="num energy">9.1</td><td class="more">' in html


def test_the_submission_page_says_how_long_the_timing_held_the_device() -> None:
    from submissions.models import Submission

    three = Submission(timing={"held_s": 3.214, "session_p50s_ms": [1.0, 1.1, 1.0]})
    assert ("Device time", "3.21 s held over 3 sessions") in display.timing_facts(three)
    one = Submission(timing={"held_s": 0.5})
    assert ("Device time", "0.50 s held") in display.timing_facts(one)
    before = Submission(timing={"batches": 64})  # timed before the figure was recorded
    assert "Device time" not in dict(display.timing_facts(before))
