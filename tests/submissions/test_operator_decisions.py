"""Operator decisions the owner is shown: a hidden or disqualified submission says so, with the
operator's reason, on its page, in the list and in the API, and only to its owner; an entry made
after the board froze says so too. The admin asks for the reason before it hides or disqualifies.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from submissions.admin.services import submission_flag_set
from submissions.models import Submission
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/submissions/submission/"


def seen_by(user: Any, submission: Submission) -> dict[str, Any]:
    """What ``user`` is shown of the submission: its page, the list page, the API's detail and
    list (None where refused)."""
    web, api = Client(), APIClient()
    web.force_login(user)
    api.force_authenticate(user)
    page = web.get(submission.get_absolute_url())
    detail = api.get(f"/api/submissions/{submission.pk}/")
    listed = [s for s in api.get("/api/submissions/").json()["results"] if s["id"] == submission.pk]
    return {
        "page": page.content.decode() if page.status_code == 200 else None,
        "list": web.get("/submissions/").content.decode(),
        "api": detail.json()["notices"] if detail.status_code == 200 else None,
        "api_list": listed[0]["notices"] if listed else None,
    }


def test_a_disqualified_submission_tells_its_owner_why_everywhere(
    make_task: Any, alice: Any
) -> None:
    cheat = scored(make_task(), alice, 0.94)
    submission_flag_set(
        submission_ids=[cheat.pk], flag="disqualified", value=True, reason="two accounts"
    )
    shown = seen_by(alice, cheat)
    assert "Disqualified: two accounts" in shown["page"]
    assert "Disqualified: two accounts" in shown["list"]
    assert shown["api"] == shown["api_list"] == ["Disqualified: two accounts"]
    detail = APIClient()
    detail.force_authenticate(alice)
    data = detail.get(f"/api/submissions/{cheat.pk}/").json()
    assert (data["status"], data["disqualified"], data["hidden"]) == ("succeeded", True, False)


def test_a_hidden_submission_says_the_organisers_hid_it_and_why(make_task: Any, alice: Any) -> None:
    entry = scored(make_task(), alice, 0.94)
    submission_flag_set(
        submission_ids=[entry.pk], flag="hidden", value=True, reason="copied from a paper"
    )
    shown = seen_by(alice, entry)
    notice = "Hidden from the leaderboard by the organisers: copied from a paper"
    assert notice in shown["page"] and notice in shown["list"]
    assert shown["api"] == shown["api_list"] == [notice]


def test_nobody_else_sees_the_decision_or_its_reason(make_task: Any, alice: Any, bob: Any) -> None:
    task = make_task()
    cheat = scored(task, alice, 0.94)
    submission_flag_set(
        submission_ids=[cheat.pk], flag="disqualified", value=True, reason="two accounts"
    )
    shown = seen_by(bob, cheat)
    assert shown["page"] is None and shown["api"] is None and shown["api_list"] is None
    assert "two accounts" not in shown["list"]
    board = Client().get(task.get_absolute_url()).content.decode()
    assert "two accounts" not in board and 'data-user="alice"' not in board
    api_board = APIClient().get(f"/api/tasks/{task.slug}/leaderboard/").content.decode()
    assert "two accounts" not in api_board


def test_a_submission_without_a_decision_has_no_notice(make_task: Any, alice: Any) -> None:
    entry = scored(make_task(), alice, 0.94)
    assert seen_by(alice, entry)["api"] == []


def test_lifting_a_decision_clears_its_reason(make_task: Any, alice: Any) -> None:
    entry = scored(make_task(), alice, 0.94)
    submission_flag_set(submission_ids=[entry.pk], flag="hidden", value=True, reason="check")
    submission_flag_set(submission_ids=[entry.pk], flag="hidden", value=False)
    entry.refresh_from_db()
    assert (entry.hidden, entry.hidden_reason) == (False, "")
    assert seen_by(alice, entry)["api"] == []


def test_a_new_reason_for_the_same_decision_replaces_the_old_one(
    make_task: Any, alice: Any
) -> None:
    entry = scored(make_task(), alice, 0.94)
    submission_flag_set(submission_ids=[entry.pk], flag="hidden", value=True, reason="first")
    changed = submission_flag_set(
        submission_ids=[entry.pk], flag="hidden", value=True, reason="second look"
    )
    assert changed == [entry.pk]
    assert seen_by(alice, entry)["api"] == [
        "Hidden from the leaderboard by the organisers: second look"
    ]


@pytest.mark.parametrize("flag", ["hidden", "disqualified"])
def test_hiding_or_disqualifying_without_a_reason_is_refused(
    make_task: Any, alice: Any, flag: str
) -> None:
    entry = scored(make_task(), alice, 0.94)
    with pytest.raises(ValueError, match="Say why"):
        submission_flag_set(submission_ids=[entry.pk], flag=flag, value=True, reason="  ")
    entry.refresh_from_db()
    assert not getattr(entry, flag)


@pytest.mark.parametrize("action, flag", [("hide", "hidden"), ("disqualify", "disqualified")])
def test_the_admin_asks_for_the_reason_before_it_acts(
    make_task: Any, alice: Any, operator: Any, action: str, flag: str
) -> None:
    entry = scored(make_task(), alice, 0.94)
    console = Client()
    console.force_login(operator)
    selected = {"action": action, "_selected_action": [str(entry.pk)]}

    asked = console.post(CHANGELIST, selected)
    assert asked.status_code == 200 and 'name="reason"' in asked.content.decode()
    entry.refresh_from_db()
    assert not getattr(entry, flag)  # nothing happens until the reason is given

    blank = console.post(CHANGELIST, {**selected, "apply": "1", "reason": " "})
    assert "Give a reason" in blank.content.decode()
    entry.refresh_from_db()
    assert not getattr(entry, flag)

    done = console.post(CHANGELIST, {**selected, "apply": "1", "reason": "same weights as #3"})
    assert done.status_code == 302
    entry.refresh_from_db()
    assert getattr(entry, flag) and getattr(entry, f"{flag}_reason") == "same weights as #3"
    assert any("same weights as #3" in n for n in seen_by(alice, entry)["api"])


def test_an_entry_made_after_the_freeze_says_it_is_not_on_the_board(
    make_task: Any, alice: Any
) -> None:
    frozen = timezone.now() - timedelta(hours=1)
    task = make_task(leaderboard_frozen_at=frozen)
    before = scored(task, alice, 0.5, created_at=frozen - timedelta(hours=1))
    after = scored(task, alice, 0.94)
    assert seen_by(alice, before)["api"] == []
    shown = seen_by(alice, after)
    assert shown["api"] == [
        f"Submitted after the leaderboard froze ({frozen:%Y-%m-%d %H:%M} UTC): not on the board."
    ]
    assert "Submitted after the leaderboard froze" in shown["page"]
