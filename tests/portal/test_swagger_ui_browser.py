"""Swagger UI renders in a real browser from our own static files, under our CSP, offline."""

from __future__ import annotations

import subprocess

from tests.chromium import chromium_or_fail


def test_swagger_ui_lists_every_api_operation_in_a_real_browser(live_portal: str) -> None:
    dom = subprocess.run(
        [
            chromium_or_fail(),
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--virtual-time-budget=10000",
            "--dump-dom",
            f"{live_portal}/api/docs/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    for path in [
        "/api/auth/token/",
        "/api/submissions/",
        "/api/submissions/{id}/cancel/",
        "/api/tasks/{slug}/leaderboard/",
        "/api/tasks/{slug}/quota/",
    ]:
        assert f'data-path="{path}"' in dom, path
