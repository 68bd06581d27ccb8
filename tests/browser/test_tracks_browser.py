"""A visitor switches a phase's board between its main ranking and its efficiency track in a
real browser: each tab ranks the same entries by its own rule, says the rule, and exports its
own CSV."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from submissions.boards.tracks import track_create
from tests.browser.conftest import DESKTOP
from tests.submissions.test_read_api import scored

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def board_users(page: Any) -> list[str]:
    rows = page.locator("table.leaderboard tbody tr[data-user]")
    return [rows.nth(i).get_attribute("data-user") for i in range(rows.count())]


def test_visitor_switches_between_the_main_board_and_the_efficiency_track(
    browser: Any, live_portal: str, make_task: Any, screenshot: Any
) -> None:
    task = make_task(title="Handwritten digits")
    users = get_user_model().objects
    scored(task, users.create_user("fast"), 0.80, latency_p50_ms=1.0)
    scored(task, users.create_user("strong"), 0.95, latency_p50_ms=40.0)
    scored(task, users.create_user("weak"), 0.60, latency_p50_ms=0.5)
    track_create(
        task_id=task.pk,
        name="Efficiency",
        slug="efficiency",
        description="Fastest with accuracy at least 0.75.",
        kind="measure",
        measure="latency",
        metric_threshold=0.75,
    )
    page = browser.new_context(viewport=DESKTOP).new_page()

    page.goto(f"{live_portal}/tasks/{task.slug}/")
    tabs = page.locator("[data-tracks]")
    assert tabs.get_by_role("link", name="Main").get_attribute("aria-current") == "page"
    assert board_users(page) == ["strong", "fast", "weak"]

    tabs.get_by_role("link", name="Efficiency").click()
    page.wait_for_load_state()
    assert page.url.endswith("?track=efficiency")
    assert tabs.get_by_role("link", name="Efficiency").get_attribute("aria-current") == "page"
    assert "Ranked by p50 latency" in page.locator("[data-rule]").inner_text()
    assert "Fastest with accuracy" in page.locator("[data-track-description]").inner_text()
    assert board_users(page) == ["fast", "strong", "weak"]
    assert "below the minimum" in page.locator('tr[data-user="weak"] .reason').inner_text()
    screenshot(page, "tracks-01-efficiency")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").click()
    assert download.value.suggested_filename == "digits-efficiency-public-leaderboard.csv"

    tabs.get_by_role("link", name="Main").click()
    page.wait_for_load_state()
    assert board_users(page) == ["strong", "fast", "weak"]
