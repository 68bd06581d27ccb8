"""A participant reads their submission's run report in a real browser, on a phone too: the
operators' time, the nodes placed off the GPU, onnxruntime's warnings, and nothing wider than
the screen."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import DESKTOP, PHONE
from tests.browser.test_portal_flow import log_in
from tests.submissions.test_read_api import scored

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPORT = {
    "main_provider": "CUDAExecutionProvider",
    "providers": {"CUDAExecutionProvider": 52, "CPUExecutionProvider": 2},
    "off_main_provider": ["NonMaxSuppression", "Shape"],
    "operators": [
        {"op": "Conv", "nodes": 49, "us": 812.5, "share": 0.8125},
        {"op": "NonMaxSuppression", "nodes": 1, "us": 150.0, "share": 0.15},
        {"op": "Shape", "nodes": 1, "us": 37.5, "share": 0.0375},
    ],
    "operators_left_out": 0,
    "batch_us": 1000.0,
    "host_time_only": True,
    "warnings": [
        "Some nodes were not assigned to the preferred execution providers which may or may not "
        "have an negative impact on performance. e.g. ORT explicitly assigns shape related ops "
        "to CPU to improve perf."
    ],
    "log": [],
}


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_submitter_reads_the_run_report(
    browser: Any, live_portal: str, make_task: Any, alice: Any, screenshot: Any, viewport: Any
) -> None:
    submission = scored(make_task(), alice, 0.9, run_report=REPORT)
    alice.set_password("alice-password-1")
    alice.save()
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    log_in(page, live_portal, "alice", "alice-password-1")

    page.goto(f"{live_portal}/submissions/{submission.pk}/")
    report = page.locator("[data-run-report]")
    assert report.locator("h2").inner_text() == "Run report"
    off = report.locator("[data-off-provider]").inner_text()
    assert "outside CUDAExecutionProvider: NonMaxSuppression, Shape" in off
    rows = report.locator("[data-profile] tbody tr").all_inner_texts()
    assert rows[0].split("\t") == ["Conv", "49", "812 µs", "81.2 %"]
    assert "not their time on the device" in report.locator("caption").inner_text()
    assert (
        "ORT explicitly assigns shape related ops" in report.locator("[data-warnings]").inner_text()
    )
    screenshot(page, f"run-report-{viewport['width']}")
    wider = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert wider <= 0, wider
    context.close()
