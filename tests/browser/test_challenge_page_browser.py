"""A participant reads a challenge's timeline in a real browser, sees the phase open now, follows
a phase's board link, and registers by accepting the terms; reads an announcement on the
challenge's page, reached from a phase's page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from submissions.models import Announcement
from submissions.notifications.announcements import announcement_post
from tests.browser.conftest import DESKTOP
from tests.browser.test_portal_flow import log_in
from tests.submissions.challenge_support import two_phase_challenge

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_participant_reads_the_timeline_and_registers(
    browser: Any, live_portal: str, make_task: Any, screenshot: Any
) -> None:
    challenge, first, _ = two_phase_challenge(make_task, terms="No **external** data.")
    get_user_model().objects.create_user("alice", password="alice-password-1")
    page = browser.new_context(viewport=DESKTOP).new_page()
    log_in(page, live_portal, "alice", "alice-password-1")

    page.goto(f"{live_portal}{challenge.get_absolute_url()}")
    current = page.locator('[data-phase][aria-current="step"]')
    assert current.get_attribute("data-phase") == "1"
    assert "Development" in current.inner_text()
    assert page.locator('[data-phase="2"]').get_attribute("data-state") == "upcoming"
    assert page.locator(".terms strong").inner_text() == "external"
    screenshot(page, "challenge-01-timeline")

    page.get_by_role("button", name="Register").click()  # terms not ticked: refused
    page.wait_for_load_state()
    assert "You must accept the challenge's terms" in page.locator(".messages").inner_text()
    page.get_by_label("I accept the challenge's terms").check()
    page.get_by_role("button", name="Register").click()
    page.wait_for_load_state()
    assert page.locator('[data-registration="approved"]').is_visible()

    current.locator("[data-board]").click()
    page.wait_for_load_state()
    assert page.url.endswith(first.get_absolute_url())


def test_participant_reads_an_announcement_on_the_challenge_and_from_a_phases_page(
    browser: Any, live_portal: str, make_task: Any, screenshot: Any
) -> None:
    challenge, first, _ = two_phase_challenge(make_task)
    announcement_post(
        announcement=Announcement(
            challenge=challenge,
            title="Test data published",
            body="The *test* phase opens tomorrow.",
            email=False,
        )
    )
    page = browser.new_context(viewport=DESKTOP).new_page()

    page.goto(f"{live_portal}{first.get_absolute_url()}")
    assert page.locator("[data-challenge-link]").inner_text() == "Phase of Digits Cup"
    page.locator("[data-announcements]").get_by_role("link", name="Test data published").click()
    page.wait_for_load_state()

    announcement = Announcement.objects.get()
    assert page.url.endswith(f"{challenge.get_absolute_url()}#announcement-{announcement.pk}")
    shown = page.locator("[data-announcement]").first
    assert shown.locator("h3").inner_text() == "Test data published"
    assert shown.locator("em").inner_text() == "test"
    assert shown.is_visible()
    screenshot(page, "challenge-02-announcement")

    page.locator('[data-phase="1"] [data-board]').click()
    page.wait_for_load_state()
    assert page.url.endswith(first.get_absolute_url())
