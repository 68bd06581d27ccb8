"""A participant and an operator, in a real browser, against a real worker: log in, upload a
model, watch it evaluate, find it on the leaderboard, export the board; the operator hides it."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from evaluation import formats
from submissions.models import Submission
from tests.browser.conftest import DESKTOP, PHONE, wait_for
from tests.builders import digits_like, linear_classifier, linear_reference
from tests.submissions.test_leaderboard_read_models import boards_refreshed
from tests.submissions.test_read_api import scored

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def sign_up(page: Any, base: str, username: str, password: str) -> None:
    """Create an account through the sign-up page; it signs the new user in."""
    page.goto(f"{base}/accounts/signup/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Email").fill(f"{username}@example.org")
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_label("Password confirmation").fill(password)
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_load_state()
    assert page.get_by_role("button", name=f"Log out {username}").is_visible()


def log_in(page: Any, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()
    assert page.get_by_role("button", name=f"Log out {username}").is_visible()


def watch_progress(page: Any) -> list[float]:
    """Read the progress bar until the page (reloaded by its own script) shows a final state."""
    seen: list[float] = []

    def finished() -> bool:
        try:
            value = page.evaluate("() => document.getElementById('progress')?.value ?? null")
        except Exception:  # the page's script reloads it when the evaluation ends
            return False
        if value is not None:
            seen.append(float(value))
        return page.locator(".chip-succeeded, .chip-failed").count() > 0 and value is None

    wait_for(finished, timeout=120, what="the submission page to show a final state")
    return seen


def test_participant_uploads_watches_ranks_exports_and_operator_hides(
    browser: Any, live_portal: str, live_worker: Any, make_task: Any, screenshot: Any
) -> None:
    base = live_portal
    arrays = digits_like(n=96, seed=3)
    task = make_task(arrays, title="Handwritten digits", description="8×8 digits, 10 classes.")
    weights, bias = np.random.default_rng(7).normal(size=(64, 10)), np.zeros(10)
    logits = linear_reference(weights, bias, arrays["inputs"])
    public = arrays["split"] == "public"
    expected = float(np.mean(logits[public].argmax(1) == arrays["targets"][public]))

    # Two earlier participants, one a baseline, so the board and its chart have some history.
    days_ago = timezone.now() - timedelta(days=3)
    for name, share, baseline in [("baseline", 0.5, True), ("bob", 0.75, False)]:
        user = get_user_model().objects.create_user(name, password=f"{name}-password-1")
        scored(task, user, expected * share, is_baseline=baseline, created_at=days_ago)
        days_ago += timedelta(days=1)

    participant = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    page = participant.new_page()
    sign_up(page, base, "alice", "alice-password-1")
    page.goto(base)
    screenshot(page, "01-task-list")
    page.get_by_role("link", name="Handwritten digits").click()
    page.get_by_role("link", name="Submit a model").click()
    page.get_by_label("ONNX model").set_input_files(
        {
            "name": "mine.onnx",
            "mimeType": "application/octet-stream",
            "buffer": linear_classifier(weights, bias),
        }
    )
    page.get_by_label("Description (optional)").fill("linear, seed 7")
    screenshot(page, "02-upload-form")
    page.get_by_role("button", name="Upload and evaluate").click()

    submission = Submission.objects.get(user__username="alice")
    assert page.url == f"{base}/submissions/{submission.pk}/"
    progress = watch_progress(page)
    assert progress == sorted(progress), progress  # the bar only ever moves forward
    assert page.locator(".chip-succeeded").inner_text() == "Succeeded"
    assert formats.score(expected) in page.locator("dl.facts").first.inner_text()
    assert page.locator("figure.chart svg circle").count() > 0  # per-batch latency chart
    screenshot(page, "03-submission-done")

    wait_for(boards_refreshed, timeout=30, what="the board refreshed after the result")
    page.get_by_role("link", name="Handwritten digits").click()
    mine = page.locator('tr.mine[data-user="alice"]')
    assert mine.locator("td").first.inner_text() == "1"
    assert page.locator('tr[data-user="baseline"] .chip-baseline').is_visible()
    assert page.locator("figure.chart circle").count() == 3  # three records so far
    assert formats.score(expected) in mine.inner_text()  # as on the submission page
    screenshot(page, "04-leaderboard")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").click()
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    header = ["rank", "user", "team", "baseline", "score (Top-1 accuracy, higher is better)"]
    assert rows[0][:5] == header
    assert rows[1][:3] == ["1", "alice", ""] and float(rows[1][4]) == pytest.approx(expected)

    phone = browser.new_context(viewport=PHONE, is_mobile=True)
    phone_page = phone.new_page()
    log_in(phone_page, base, "alice", "alice-password-1")
    for name, url in [
        ("05-phone-leaderboard", task.get_absolute_url()),
        ("06-phone-submission", submission.get_absolute_url()),
        ("07-phone-my-submissions", "/submissions/"),
    ]:
        phone_page.goto(base + url)
        # nothing but the table may scroll sideways on a phone
        width = phone_page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (name, width)
        screenshot(phone_page, name)
    phone.close()

    get_user_model().objects.create_user(
        "op", password="op-password-1", is_staff=True, is_superuser=True
    )
    console = browser.new_context(viewport=DESKTOP).new_page()
    log_in(console, base, "op", "op-password-1")
    console.goto(f"{base}/admin/submissions/submission/workers/")

    def worker_listed() -> bool:
        if "browser-test-worker" in console.locator("#workers").inner_text():
            return True
        console.reload()
        return False

    wait_for(worker_listed, timeout=30, what="the worker in the admin worker list")
    screenshot(console, "08-admin-workers")
    console.goto(f"{base}/admin/submissions/submission/")
    console.locator(f'input[name="_selected_action"][value="{submission.pk}"]').check()
    console.locator('select[name="action"]').select_option("hide")
    console.locator('button[name="index"]').click()  # the admin's "Go"
    console.locator("#id_reason").fill("the same file as another account's")  # it asks why
    console.locator('input[name="apply"]').click()
    assert "Hidden from the leaderboard (#" in console.locator(".messagelist").inner_text()
    row = console.locator(f'#result_list tr:has(input[value="{submission.pk}"])')
    assert row.locator("td.field-flags").inner_text() == "hidden"  # the effect, on screen
    screenshot(console, "09-admin-submissions")

    visitor = browser.new_context(viewport=DESKTOP).new_page()
    visitor.goto(base + task.get_absolute_url())
    assert visitor.locator('tr[data-user="alice"]').count() == 0
    ranked = visitor.locator("table.leaderboard tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.user)"
    )
    assert ranked == ["bob", "baseline"]
    participant.close()
