"""A queued submission's page follows its place in the queue while it waits, without a reload:
the page's script reads the place from the submission API it already polls."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.utils import timezone

from queueing import heartbeat
from submissions.lifecycle.services import submission_cancel, submission_create
from submissions.models import Submission
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


def test_the_waiting_for_a_device_sentence_follows_workers_coming_and_going(
    browser: Any, live_portal: str, alice: Any, make_task: Any, queue: Any
) -> None:
    """No worker of the class online: the page says it waits for a device. One comes online (a
    heartbeat) and the class has run something lately: the page gives an estimated start
    instead. It stops: back to waiting. All without a reload."""
    task = make_task(submissions_per_day=10, queued_per_user=5)
    models = [linear_classifier(np.full((64, 10), k), np.zeros(10)) for k in (1.0, 2.0, 3.0)]
    done, _ahead, mine = (
        submission_create(user=alice, task=task, upload=onnx_upload(m)) for m in models
    )
    finished = timezone.now()
    Submission.objects.filter(pk=done.pk).update(  # a recent run of the class: 3 s
        status="succeeded", started_at=finished - timedelta(seconds=3), finished_at=finished
    )
    worker = heartbeat.WorkerState(
        name="page-cpu",
        host="h",
        pid=1,
        state="busy",
        device="cpu",
        started_at=0.0,
        device_classes=[task.device_class_slug],
    )

    page = browser.new_context(viewport=DESKTOP).new_page()
    log_in(page, live_portal, "alice", "alice-password-1")
    page.goto(f"{live_portal}/submissions/{mine.pk}/")
    waiting = page.locator("[data-queue-position] [data-waiting-for-device]")
    estimate = page.locator("[data-queue-position] [data-estimated-start]")
    assert waiting.is_visible() and not estimate.is_visible()
    page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloads

    heartbeat.publish(queue.connection, worker)
    wait_for(estimate.is_visible, timeout=15, what="the estimated start to show")
    assert not waiting.is_visible()
    # second in the queue, one worker: it starts after one median run (3 s)
    assert page.locator("[data-queue-number]").inner_text() == "2"
    assert page.locator("[data-wait-s]").inner_text() == "3"

    worker.state = "stopped"
    heartbeat.publish(queue.connection, worker)
    wait_for(waiting.is_visible, timeout=15, what="the page to say it waits for a device again")
    assert not estimate.is_visible()
    assert page.evaluate("() => window.sameDocument === true")
    page.context.close()
