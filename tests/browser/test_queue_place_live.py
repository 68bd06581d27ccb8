"""A queued submission's page follows its place in the queue while it waits, without a reload:
the page's script reads the place from the submission API it already polls."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from submissions.services import submission_cancel, submission_create
from tests.browser.conftest import DESKTOP, wait_for
from tests.browser.test_portal_flow import log_in
from tests.builders import linear_classifier
from tests.conftest import onnx_upload

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_place_in_the_queue_moves_up_on_the_page_when_the_one_ahead_leaves(
    browser: Any, live_portal: str, alice: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=10, queued_per_user=5)
    models = [linear_classifier(np.full((64, 10), k), np.zeros(10)) for k in (1.0, 2.0)]
    ahead, mine = (submission_create(user=alice, task=task, upload=onnx_upload(m)) for m in models)

    page = browser.new_context(viewport=DESKTOP).new_page()
    log_in(page, live_portal, "alice", "alice-password-1")
    page.goto(f"{live_portal}/submissions/{mine.pk}/")  # no worker runs: both stay queued
    place = page.locator("[data-queue-position] [data-queue-number]")
    assert place.inner_text() == "2"
    page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloads

    assert submission_cancel(submission_id=ahead.pk, user=alice)

    wait_for(lambda: place.inner_text() == "1", timeout=15, what="the place to move up to 1")
    assert page.evaluate("() => window.sameDocument === true")
    assert "Position in the queue: 1" in page.locator("[data-queue-position]").inner_text()
    page.context.close()
