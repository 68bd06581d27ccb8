"""What one participant does on the site, for Locust (benchmarks/site_load.py starts it).

Browses the task list and the task's leaderboard (page and API), polls their submissions through
the API with their token, and uploads one model. Each simulated user signs in as its own account
from the JSON file named by LOAD_ACCOUNTS ([{"username", "token"}], written by site_load.py), so
uploads never hit another user's quota or the duplicate check.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

from locust import FastHttpUser, between, task

from benchmarks.http_client import multipart

ACCOUNTS: list[dict[str, str]] = json.loads(Path(os.environ["LOAD_ACCOUNTS"]).read_text())
MODEL = Path(os.environ["LOAD_MODEL"]).read_bytes()
TASK = os.environ.get("LOAD_TASK", "digits")
UPLOAD_AT_START = os.environ.get("LOAD_UPLOAD_AT_START") == "1"  # the short mode: every path runs
_next_account = itertools.count()


class Participant(FastHttpUser):
    wait_time = between(1, 3)

    def on_start(self) -> None:
        account = ACCOUNTS[next(_next_account) % len(ACCOUNTS)]
        self.auth = {"Authorization": f"Token {account['token']}"}
        self.uploaded: int | None = None
        # The short mode: every path once, then the weighted mix. A 5 s run on a slow host made
        # too few picks to be sure of each (one CI run never drew the API's leaderboard, 3 of 17).
        if UPLOAD_AT_START:
            self.upload()
            self.task_list()
            self.leaderboard_page()
            self.leaderboard_api()
            self.poll_submissions()

    @task(3)
    def task_list(self) -> None:
        self.client.get("/", name="GET / (task list)")

    @task(6)
    def leaderboard_page(self) -> None:
        self.client.get(f"/tasks/{TASK}/", name="GET /tasks/[slug]/ (leaderboard page)")

    @task(3)
    def leaderboard_api(self) -> None:
        self.client.get(
            f"/api/tasks/{TASK}/leaderboard/", name="GET /api/tasks/[slug]/leaderboard/"
        )

    @task(4)
    def poll_submissions(self) -> None:
        self.client.get("/api/submissions/", headers=self.auth, name="GET /api/submissions/")
        if self.uploaded is not None:
            self.client.get(
                f"/api/submissions/{self.uploaded}/",
                headers=self.auth,
                name="GET /api/submissions/[id]/",
            )

    @task(1)
    def upload(self) -> None:
        if self.uploaded is not None:  # one model each: the quota and duplicate check hold
            return
        body, boundary = multipart({"task": TASK, "description": "load test"}, "m.onnx", MODEL)
        headers: dict[str, Any] = {
            **self.auth,
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        }
        with self.client.post(
            "/api/submissions/", data=body, headers=headers, name="POST /api/submissions/ (upload)",
            catch_response=True,
        ) as response:  # fmt: skip
            if response.status_code != 201:
                response.failure(f"{response.status_code}: {response.text[:200]}")
                return
            self.uploaded = response.json()["id"]
