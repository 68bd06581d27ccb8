"""Two participants, in real browsers, against a real worker: one founds a team and makes an
invite link, the other accepts it and uploads a model; the board shows the team as one row,
"you" for both members, and the team's page lists both."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from submissions.models import Submission, Team
from tests.browser.conftest import DESKTOP, wait_for
from tests.browser.test_portal_flow import log_in
from tests.builders import digits_like, linear_classifier
from tests.submissions.test_leaderboard_read_models import boards_refreshed
from tests.submissions.test_read_api import scored

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_invite_accept_submit_and_one_team_row_on_the_board(
    browser: Any, live_portal: str, live_worker: Any, make_task: Any, screenshot: Any
) -> None:
    base = live_portal
    task = make_task(digits_like(n=96, seed=5), title="Handwritten digits", max_team_size=3)
    users = get_user_model().objects
    for name in ("alice", "bob", "carol"):
        users.create_user(name, password=f"{name}-password-1")
    scored(task, users.get(username="alice"), 0.05)  # alice's own earlier entry joins the team
    scored(task, users.get(username="carol"), 0.07)  # carol stays alone

    founder = browser.new_context(viewport=DESKTOP).new_page()
    joiner = browser.new_context(viewport=DESKTOP).new_page()
    try:
        log_in(founder, base, "alice", "alice-password-1")
        founder.goto(f"{base}{task.get_absolute_url()}")
        founder.locator("[data-team-link]").click()
        founder.get_by_label("Team name").fill("Lab A")
        founder.get_by_role("button", name="Create team").click()
        founder.wait_for_load_state()
        assert founder.locator("[data-team-name]").inner_text() == "Lab A"
        founder.get_by_role("button", name="Make an invite link").click()
        founder.wait_for_load_state()
        link = founder.locator("[data-invite-link]").inner_text()
        screenshot(founder, "team-01-invite")

        log_in(joiner, base, "bob", "bob-password-1")
        joiner.goto(link)
        assert joiner.get_by_role("heading", name="Join Lab A").is_visible()
        joiner.locator("[data-accept]").click()
        joiner.wait_for_load_state()
        assert joiner.locator('[data-member="bob"]').is_visible()
        assert joiner.locator('[data-member="alice"]').inner_text().startswith("alice (creator)")

        # bob uploads through the page; the worker scores it for the team.
        weights = np.random.default_rng(1).normal(size=(64, 10))
        joiner.goto(f"{base}/tasks/{task.slug}/submit/")
        joiner.get_by_label("ONNX model").set_input_files(
            {
                "name": "team.onnx",
                "mimeType": "application/octet-stream",
                "buffer": linear_classifier(weights, np.zeros(10)),
            }
        )
        joiner.get_by_role("button", name="Upload and evaluate").click()
        joiner.wait_for_load_state()
        upload = Submission.objects.get(user__username="bob")
        assert upload.team == Team.objects.get(name="Lab A")
        wait_for(
            lambda: (
                Submission.objects.get(pk=upload.pk).status == "succeeded" and boards_refreshed()
            ),
            what="bob's upload scored and on the board",
        )
        # The submission's page reloads itself once its status is final: let it, so that the
        # next navigation is not interrupted by that reload.
        joiner.locator(".chip-succeeded[data-status]").wait_for()

        for page in (founder, joiner):
            page.goto(f"{base}{task.get_absolute_url()}")
            rows = page.locator("tbody tr[data-user]")
            assert rows.count() == 2  # Lab A (alice's and bob's entries) and carol
            team_row = page.locator("tbody tr.mine")
            assert team_row.count() == 1
            assert team_row.locator("[data-team]").inner_text() == "Lab A"
            assert team_row.locator(".chip-you").is_visible()
        screenshot(joiner, "team-02-board")

        founder.locator("tbody tr.mine [data-team]").click()
        founder.wait_for_load_state()
        members = founder.locator("[data-member]").all_inner_texts()
        assert [m.split()[0] for m in members] == ["alice", "bob"]
    finally:
        founder.context.close()
        joiner.context.close()
