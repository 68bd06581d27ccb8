"""Every page fits a laptop (1366 px) and a phone (390 px) in Chromium: nothing, the board
included, is wider than the window, so nothing is hidden off to the right. Each page's screenshot
at each width is saved under test-artifacts/ for a person to look at."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from submissions.boards.tracks import track_create
from submissions.challenges.fact_sheets import fact_sheet_save
from submissions.demo.datasets import STARTER_PATH
from submissions.models import Announcement
from submissions.notifications.announcements import announcement_post
from submissions.tasks.files import task_file_publish
from submissions.teams.services import team_create
from tests.browser.conftest import wait_for
from tests.browser.test_portal_flow import log_in
from tests.submissions.challenge_support import registered, two_phase_challenge
from tests.submissions.test_read_api import scored

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
WIDTHS = {"1366": LAPTOP, "390": PHONE}

# How far anything sticks out past the page's and the board's right edge, in CSS pixels.
OVERFLOW = """() => {
  const page = document.documentElement.scrollWidth - document.documentElement.clientWidth;
  const wrap = document.querySelector('.table-wrap, #changelist .results');
  const board = wrap ? wrap.scrollWidth - wrap.clientWidth : 0;
  // what sticks out, to say in a failure which element to fix
  const edge = document.documentElement.clientWidth;
  const out = [...document.querySelectorAll('main *')]
    .filter(e => e.getBoundingClientRect().right > edge + 0.5)
    .filter(e => !e.closest('.table-wrap, .results'))
    .slice(-3).map(e => e.tagName + '.' + e.className + ' ' + e.textContent.slice(0, 30));
  return {page, board, out};
}"""


# A name with no place to break, longer than a phone is wide: it once pushed the board past the
# window's right edge, as names may not wrap mid-word.
UNBROKEN = "a_participant_whose_name_has_no_spaces_at_all_2026"
UNBROKEN_TEAM = "TheTeamWhoseNameHasNoSpacesAnywhereAtAll"


def a_busy_board(make_task: Any, alice: Any) -> Any:
    """A board with what once made it too wide: long names (one with nowhere to break, and the
    leader, so the home page's card shows it too; alice's team has one too), baselines, timing
    marks, metrics."""
    task = make_task(title="Handwritten digits, 8×8, ten classes", max_team_size=3)
    users = get_user_model().objects
    figures = dict(
        latency_p50_ms=0.0123,
        latency_spread=0.148,
        latency_unstable=True,
        timing_exclusive=False,
        throughput=7907229.0,
        parameters=1_234_567,
        flops=41_300_000,
        peak_memory_bytes=3 * 1024**2,
        device_name="Intel(R) Xeon(R) Platinum 8480C",
        provider="CPUExecutionProvider",
    )
    metrics = {"accuracy": 0.97, "top5_accuracy": 1.0, "macro_f1": 0.9655}
    for n, name in enumerate(["baseline-logistic-regression", "baseline-mlp-two-layers"]):
        scored(task, users.create_user(name), 0.9 - n / 10, **figures, metrics=metrics,
               is_baseline=True)  # fmt: skip
    long_name = users.create_user("a-participant-with-a-rather-long-username")
    scored(task, long_name, 0.95, **figures, metrics=metrics)
    scored(task, users.create_user(UNBROKEN), 0.99, **figures, metrics=metrics)
    mine = scored(task, alice, 0.972, **figures, metrics=metrics)
    team_create(user=alice, task=task, name=UNBROKEN_TEAM)
    return mine


@pytest.mark.parametrize("width", WIDTHS)
def test_participant_pages_fit_the_window(
    browser: Any, live_portal: str, make_task: Any, alice: Any, screenshot: Any, width: str
) -> None:
    mine = a_busy_board(make_task, alice)
    context = browser.new_context(viewport=WIDTHS[width])
    page = context.new_page()
    wide = {}
    for name, path in {"login": "/accounts/login/", "signup": "/accounts/signup/"}.items():
        page.goto(f"{live_portal}{path}")  # before logging in: what a newcomer sees first
        screenshot(page, f"fit-{name}-{width}")
        sticks_out = page.evaluate(OVERFLOW)
        if sticks_out["page"] > 0 or sticks_out["board"] > 0:
            wide[name] = sticks_out
    log_in(page, live_portal, "alice", "alice-password-1")
    pages = {
        "home": "/",
        "task": "/tasks/digits/",
        "my-submissions": "/submissions/",
        "submission": f"/submissions/{mine.pk}/",
        "upload": "/tasks/digits/submit/",
        "challenges": "/challenges/",
        "profile": "/accounts/profile/",
        "team": "/tasks/digits/team/",
        "workers": "/workers/",
    }
    for name, path in pages.items():
        page.goto(f"{live_portal}{path}")
        if name == "task":  # task.js fills in the queue an upload would join
            counts = page.locator("[data-queue-counts]")
            wait_for(lambda c=counts: "waiting" in c.inner_text(), timeout=10, what="the queue")
            assert "No evaluation machine of this class is online" in page.inner_text("main")
        screenshot(page, f"fit-{name}-{width}")
        sticks_out = page.evaluate(OVERFLOW)
        if sticks_out["page"] > 0 or sticks_out["board"] > 0:
            wide[name] = sticks_out
    context.close()
    assert wide == {}


def test_the_board_folds_its_details_and_a_row_opens_them(
    browser: Any, live_portal: str, make_task: Any, alice: Any, screenshot: Any
) -> None:
    a_busy_board(make_task, alice)
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    page.goto(f"{live_portal}/tasks/digits/")
    headers = page.locator("table.leaderboard thead th").all_inner_texts()
    assert headers[:4] == ["#", "Participant", "Top-1 accuracy ↑", "p50 / batch"]
    assert headers[-1] == "More"
    row = page.locator('tr[data-user="alice"]')
    row.get_by_text("More").click()
    details = row.locator("td.more dl").inner_text()
    assert "Throughput" in details and "7.91 M samples/s" in details and "Top-5 accuracy" in details
    screenshot(page, "fit-board-row-open-390")
    sticks_out = page.evaluate(OVERFLOW)
    assert sticks_out["page"] <= 0 and sticks_out["board"] <= 0, sticks_out
    context.close()


def test_operator_pages_fit_a_laptop(
    browser: Any, live_portal: str, make_task: Any, alice: Any, operator: Any, screenshot: Any
) -> None:
    mine = a_busy_board(make_task, alice)
    # the task-files inline once made the task's page 2,055 px wide
    starter = STARTER_PATH.read_bytes()
    task_file_publish(task=mine.task, title="Starter", filename="starter.py", content=starter)
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.goto(f"{live_portal}/admin/login/")
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill("operator-password-1")
    page.get_by_role("button", name="Log in").click()
    pages = {
        "admin-submissions": "/admin/submissions/submission/",
        "admin-submission": f"/admin/submissions/submission/{mine.pk}/change/",
        "admin-tasks": "/admin/submissions/task/",
        "admin-task": f"/admin/submissions/task/{mine.task.pk}/change/",
        "admin-add-task": "/admin/submissions/task/add/",
        "admin-task-analytics": f"/admin/submissions/task/{mine.task.pk}/analytics/",
        "admin-workers": "/admin/submissions/submission/workers/",
        "admin-upload": "/admin/submissions/submission/upload/",
        "operator-task": "/tasks/digits/",
    }
    wide = {}
    for name, path in pages.items():
        page.goto(f"{live_portal}{path}")
        screenshot(page, f"fit-{name}-1366")
        sticks_out = page.evaluate(OVERFLOW)
        if sticks_out["page"] > 0 or sticks_out["board"] > 0:
            wide[name] = sticks_out
    context.close()
    assert wide == {}


@pytest.mark.parametrize("width", WIDTHS)
def test_a_challenge_phase_with_tracks_and_methods_fits_the_window(
    browser: Any, live_portal: str, make_task: Any, alice: Any, screenshot: Any, width: str
) -> None:
    challenge, first, _ = two_phase_challenge(make_task)
    registered(challenge, alice)
    scored(first, alice, 0.97, latency_p50_ms=0.0123, parameters=1_234_567)
    fact_sheet_save(
        user=alice,
        task=first,
        values={
            "method_name": "DistilledResidualEnsembleWithTestTimeAugmentationV2",
            "paper_url": "https://example.org/a/rather/long/path/to/the/paper.pdf",
            "code_url": "https://example.org/code",
        },
    )
    for slug, measure in (("efficiency", "latency"), ("parameters", "parameters")):
        track_create(task_id=first.pk, name=slug.capitalize(), slug=slug, kind="measure",
                     measure=measure)  # fmt: skip
    announcement_post(
        announcement=Announcement(
            challenge=challenge,
            title="The test phase opens when development closes, with the hidden test images",
            body="Read the rules again.",
            email=False,
        )
    )
    context = browser.new_context(viewport=WIDTHS[width])
    page = context.new_page()
    log_in(page, live_portal, "alice", "alice-password-1")
    wide = {}
    for name, path in {
        "phase": first.get_absolute_url(),
        "phase-track": f"{first.get_absolute_url()}?track=efficiency",
        "phase-params": f"{first.get_absolute_url()}?track=parameters",
        "challenge": challenge.get_absolute_url(),
        "fact-sheet": f"/tasks/{first.slug}/fact-sheet/",
    }.items():
        page.goto(f"{live_portal}{path}")
        screenshot(page, f"fit-{name}-{width}")
        sticks_out = page.evaluate(OVERFLOW)
        if sticks_out["page"] > 0 or sticks_out["board"] > 0:
            wide[name] = sticks_out
    context.close()
    assert wide == {}
