"""The board of a challenge's phase shows each entry's method name with its paper and code links
under its name, from the entrant's fact sheet (a team's sheet on a team's row); the CSV and the
API carry them; saving a sheet shows on the next read, cached boards included."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from submissions.challenges.fact_sheets import fact_sheet_save
from submissions.models import FactSheet
from submissions.teams.services import team_create
from tests.submissions.challenge_support import two_phase_challenge
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

RIDGE = {
    "method_name": "Ridge on pixels",
    "paper_url": "https://example.org/paper",
    "code_url": "https://example.org/code",
}


@pytest.fixture
def phase(make_task: Any, alice: Any, bob: Any, operator: Any) -> Any:
    """alice (with a sheet) and bob (without) on the first phase, and a baseline."""
    _, first, _ = two_phase_challenge(make_task)
    scored(first, alice, 0.9)
    scored(first, bob, 0.8)
    scored(first, operator, 0.5, is_baseline=True)
    fact_sheet_save(user=alice, task=first, values=RIDGE)
    return first


def test_the_api_rows_carry_the_method_and_links(phase: Any) -> None:
    rows = APIClient().get(f"/api/tasks/{phase.slug}/leaderboard/").json()["rows"]

    shown = [(r["user"], r["method_name"], r["paper_url"], r["code_url"]) for r in rows]
    assert shown == [
        ("alice", "Ridge on pixels", "https://example.org/paper", "https://example.org/code"),
        ("bob", "", "", ""),
        ("operator", "", "", ""),
    ]


def test_the_csv_has_a_column_for_the_method_and_each_link(phase: Any) -> None:
    response = Client().get(f"/tasks/{phase.slug}/leaderboard.csv")
    lines = list(csv.DictReader(io.StringIO(response.content.decode())))

    assert lines[0]["method_name"] == "Ridge on pixels"
    assert lines[0]["code_url"] == "https://example.org/code"
    assert lines[1]["method_name"] == ""


def test_the_page_shows_the_method_with_its_links_and_a_saved_change_at_once(
    phase: Any, alice: Any
) -> None:
    client = Client()
    before = client.get(f"/tasks/{phase.slug}/").content.decode()
    fact_sheet_save(user=alice, task=phase, values={"method_name": "Ridge, tuned"})
    after = client.get(f"/tasks/{phase.slug}/").content.decode()

    assert (
        '<div class="method" data-method>Ridge on pixels · <a href="https://example.org/paper" '
        'rel="nofollow noopener" data-link="paper">paper</a>'
    ) in before
    assert 'data-link="code">code</a></div>' in before
    assert before.count("data-method") == 1  # bob has no sheet, a baseline none
    assert "Ridge, tuned" in after and "Ridge on pixels" not in after


def test_a_teams_row_shows_the_teams_sheet(phase: Any, alice: Any, bob: Any) -> None:
    phase.max_team_size = 2
    phase.save()
    team = team_create(user=bob, task=phase, name="Owls")
    fact_sheet_save(user=bob, task=phase, values={"method_name": "Owl net"})
    scored(phase, bob, 0.95, team=team)

    rows = APIClient().get(f"/api/tasks/{phase.slug}/leaderboard/").json()["rows"]

    assert (rows[0]["team"], rows[0]["method_name"]) == ("Owls", "Owl net")


def test_a_task_outside_a_challenge_shows_no_method(make_task: Any, alice: Any) -> None:
    task = make_task()
    scored(task, alice, 0.9)
    fact_sheet_save(user=alice, task=task, values=RIDGE)  # nobody asks for one here

    assert "data-method" not in Client().get("/tasks/digits/").content.decode()
    assert APIClient().get("/api/tasks/digits/leaderboard/").json()["rows"][0]["method_name"] == ""


def test_a_phases_page_links_to_its_challenge_and_to_your_fact_sheet(
    phase: Any, alice: Any
) -> None:
    client = Client()
    client.force_login(alice)

    page = client.get(f"/tasks/{phase.slug}/").content.decode()

    assert 'Phase of <a href="/challenges/digits-cup/">Digits Cup</a>' in page
    assert f'href="/tasks/{phase.slug}/fact-sheet/" data-fact-sheet-link' in page


def test_an_operators_edit_of_a_sheet_shows_on_the_board_at_once(
    phase: Any, operator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    Client().get(f"/tasks/{phase.slug}/")  # the board is cached now
    console = Client()
    console.force_login(operator)
    sheet = FactSheet.objects.get()
    fields = {**RIDGE, "method_name": "Ridge (renamed by the organisers)", "extra_data": "unknown"}

    with django_capture_on_commit_callbacks(execute=True):
        response = console.post(f"/admin/submissions/factsheet/{sheet.pk}/change/", fields)

    assert response.status_code == 302, response.content.decode()[-2000:]
    page = Client().get(f"/tasks/{phase.slug}/").content.decode()
    assert "Ridge (renamed by the organisers)" in page
