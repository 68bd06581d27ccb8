"""A visitor reads a task's tabs in a real browser and downloads its starter script; without
JavaScript the same page is a list of anchored sections."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from submissions.demo.datasets import STARTER_PATH
from submissions.tasks.files import task_file_publish
from tests.browser.conftest import DESKTOP, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PANELS = ["overview", "rules", "evaluation", "timeline", "data"]


def visible_panels(page: Any) -> list[str]:
    return [name for name in PANELS if page.locator(f"#{name}").is_visible()]


def test_visitor_reads_the_tabs_and_downloads_the_starter(
    browser: Any, live_portal: str, make_task: Any, screenshot: Any
) -> None:
    task = make_task(
        title="Handwritten digits",
        overview="Classify **8×8** digits. <script>document.title='owned'</script>",
        rules="- Train on the published rows only.",
        closes_at=timezone.now() + timedelta(days=2, hours=3),
    )
    starter = task_file_publish(
        task=task,
        title="Starter script",
        filename="starter.py",
        content=STARTER_PATH.read_bytes(),
    )
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    page = context.new_page()
    page.goto(f"{live_portal}/tasks/digits/")

    assert visible_panels(page) == ["overview"]
    assert page.title() != "owned"
    assert page.locator("#overview strong").inner_text() == "8×8"
    assert "<script>" in page.locator("#overview").inner_text()  # shown as text

    page.get_by_role("link", name="Rules").click()
    assert visible_panels(page) == ["rules"] and page.url.endswith("#rules")
    assert "published rows only" in page.locator("#rules").inner_text()

    page.get_by_role("link", name="Evaluation").click()
    snippet = page.locator("[data-export-snippet]").inner_text()
    assert "torch.zeros(16, 1, 8, 8, dtype=torch.float32)" in snippet

    page.get_by_role("link", name="Timeline").click()
    countdown = page.locator('[data-event="closes"] [data-countdown]')
    first = countdown.inner_text()  # the script's wording, not the server's "in 2 days, 3 hours"
    assert re.fullmatch(r"in 2 d \d+ h \d+ min \d+ s", first), first
    wait_for(lambda: countdown.inner_text() != first, timeout=5, what="the countdown to tick")

    page.get_by_role("link", name="Data").click()
    assert visible_panels(page) == ["data"]
    screenshot(page, "task-pages-data")
    with page.expect_download() as download:
        page.get_by_role("link", name="Starter script").click()
    data = Path(download.value.path()).read_bytes()
    assert download.value.suggested_filename == "starter.py"
    assert data == STARTER_PATH.read_bytes()
    assert hashlib.sha256(data).hexdigest() == starter.sha256
    assert starter.sha256 in page.locator("#data").inner_text()

    page.goto(f"{live_portal}/tasks/digits/#evaluation")  # a tab can be linked to
    assert visible_panels(page) == ["evaluation"]
    context.close()

    without_js = browser.new_context(viewport=DESKTOP, java_script_enabled=False).new_page()
    without_js.goto(f"{live_portal}/tasks/digits/")
    assert visible_panels(without_js) == PANELS
    without_js.get_by_role("link", name="Data").click()
    assert without_js.url.endswith("#data")
    without_js.context.close()
