"""A participant, in a real browser, selects a final submission on "My submissions"; after the
task closes and the operator reveals the private board, they find it ranked by that final."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from submissions.admin.services import task_leaderboard_set
from submissions.models import Submission, Task
from tests.browser.conftest import DESKTOP
from tests.browser.test_portal_flow import log_in
from tests.submissions.test_read_api import scored

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_participant_selects_a_final_and_sees_the_revealed_private_board(
    browser: Any, live_portal: str, make_task: Any, screenshot: Any
) -> None:
    base = live_portal
    task = make_task(title="Handwritten digits", final_selections=1)
    users = get_user_model().objects
    alice = users.create_user("alice", password="alice-password-1")
    bob = users.create_user("bob", password="bob-password-1")
    # alice's best public score is weak on the hidden rows; her other submission is strong.
    scored(task, alice, 0.90, score_private=0.50, description="overfit")
    steady = scored(task, alice, 0.60, score_private=0.95, description="steady")
    scored(task, bob, 0.80, score_private=0.70)

    page = browser.new_page(viewport=DESKTOP)
    try:
        log_in(page, base, "alice", "alice-password-1")
        page.goto(f"{base}/submissions/")
        finals = page.get_by_role("group", name="Selected 0 of 1")
        finals.get_by_label(f"#{steady.pk} m.onnx").check()
        page.get_by_role("button", name="Save finals").click()
        page.wait_for_load_state()
        assert page.get_by_text("Your finals for Handwritten digits are saved.").is_visible()
        assert page.get_by_role("group", name="Selected 1 of 1").is_visible()
        assert list(Submission.objects.filter(selected=True)) == [steady]

        # The task closes; the operator reveals the private board.
        Task.objects.filter(pk=task.pk).update(closes_at=timezone.now() - timedelta(minutes=1))
        task_leaderboard_set(task_ids=[task.pk], private_revealed=True)

        page.goto(f"{base}/tasks/{task.slug}/")
        page.get_by_role("link", name="Private").click()
        page.wait_for_load_state()
        assert (
            page.locator("[data-finals]")
            .inner_text()
            .startswith("This board ranks each participant's selected final submission only")
        )
        rows = page.locator("tbody tr[data-user]")
        assert rows.nth(0).get_attribute("data-user") == "alice"
        assert rows.nth(0).locator("td.score").inner_text() == "0.9500"
        assert rows.nth(0).locator("[data-final]").inner_text() == "selected"
        assert rows.nth(1).locator("[data-final]").inner_text() == "best by public score"
        screenshot(page, "final-selection-private-board")

        page.goto(f"{base}/submissions/")
        assert page.get_by_text("The task has closed: your selection is final.").is_visible()
        assert page.get_by_label(f"#{steady.pk} m.onnx").is_disabled()
    finally:
        page.close()
