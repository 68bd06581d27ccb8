"""Fact sheets: each entry of a phase (a participant alone, or a team) says its method, code and
data; a phase can require a complete sheet before finals are selected; the operator exports a
phase's sheets."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from submissions.challenges.fact_sheets import FactSheetRefused, fact_sheet_of, fact_sheet_save
from submissions.lifecycle.finals import submission_select
from submissions.models import FactSheet
from submissions.teams.services import team_create
from tests.submissions.challenge_support import two_phase_challenge
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

COMPLETE = {
    "method_name": "Ridge on pixels",
    "code_url": "https://example.org/code",
    "training_data": "The published training rows.",
    "extra_data": False,
}


def test_a_participant_fills_in_their_sheet_through_the_api(make_task: Any, alice: Any) -> None:
    _, first, _ = two_phase_challenge(make_task)
    api = APIClient()
    api.force_authenticate(alice)
    url = f"/api/tasks/{first.slug}/fact-sheet/"

    empty = api.get(url).json()
    assert empty["missing"] == ["method_name", "code_url", "training_data", "extra_data"]
    saved = api.put(url, {"method_name": "Ridge", "extra_data": True}, format="json")
    assert saved.status_code == 200, saved.json()
    assert saved.json()["missing"] == ["code_url", "training_data"]
    again = api.put(url, {**COMPLETE, "extra_data": False}, format="json").json()
    assert (again["method_name"], again["missing"]) == ("Ridge on pixels", [])
    assert FactSheet.objects.count() == 1
    bad = api.put(url, {"code_url": "not a link"}, format="json")
    assert bad.status_code == 400 and "code_url" in bad.json()


def test_a_team_has_one_sheet_any_member_edits(make_task: Any, alice: Any, bob: Any) -> None:
    _, first, _ = two_phase_challenge(make_task)
    first.max_team_size = 2
    first.save()
    team = team_create(user=alice, task=first, name="Owls")
    team.memberships.create(task=first, user=bob)

    fact_sheet_save(user=alice, task=first, values={"method_name": "A"})
    fact_sheet_save(user=bob, task=first, values={"method_name": "B"})

    sheet = fact_sheet_of(user=alice, task=first)
    assert sheet is not None and (sheet.team, sheet.method_name) == (team, "B")
    assert FactSheet.objects.count() == 1


def test_a_phase_that_requires_a_sheet_refuses_finals_until_it_is_complete(
    make_task: Any, alice: Any
) -> None:
    _, first, _ = two_phase_challenge(make_task)
    first.final_selections, first.requires_fact_sheet = 1, True
    first.save()
    entry = scored(first, alice, 0.9)

    with pytest.raises(FactSheetRefused, match="yours lacks: method name, code link"):
        submission_select(user=alice, submission_id=entry.pk)
    api = APIClient()
    api.force_authenticate(alice)
    refused = api.post(f"/api/submissions/{entry.pk}/select/")
    assert refused.status_code == 409 and "complete fact sheet" in refused.json()["detail"]

    fact_sheet_save(user=alice, task=first, values=COMPLETE)
    assert submission_select(user=alice, submission_id=entry.pk).selected


def test_the_sheet_page_saves_the_form(make_task: Any, alice: Any) -> None:
    _, first, _ = two_phase_challenge(make_task)
    web = Client()
    web.force_login(alice)
    form = {**COMPLETE, "extra_data": "false", "description": "", "paper_url": ""}

    page = web.post(f"/tasks/{first.slug}/fact-sheet/", form, follow=True).content.decode()

    assert "Fact sheet saved." in page and 'value="Ridge on pixels"' in page
    assert fact_sheet_of(user=alice, task=first).extra_data is False  # type: ignore[union-attr]


def test_the_operator_exports_a_phases_sheets_as_csv(
    make_task: Any, alice: Any, bob: Any, operator: Any
) -> None:
    _, first, _ = two_phase_challenge(make_task)
    fact_sheet_save(user=alice, task=first, values=COMPLETE)
    fact_sheet_save(user=bob, task=first, values={"method_name": "Guess"})
    console = Client()
    console.force_login(operator)

    response = console.post(
        "/admin/submissions/factsheet/",
        {
            "action": "export_csv",
            "_selected_action": list(FactSheet.objects.values_list("pk", flat=True)),
        },
    )

    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:4] == ["task", "entrant", "team", "method_name"]
    by_entrant = {r[1]: r for r in rows[1:]}
    assert by_entrant["alice"][3] == "Ridge on pixels" and by_entrant["alice"][-2] == "yes"
    assert by_entrant["alice"][8] == "no"  # extra data
    assert by_entrant["bob"][-2] == "no"  # incomplete
