"""A model process killed mid-evaluation (what the OOM killer or a segfault does) is retried once,
then failed with a plain message, and the same worker goes on to score the next submission."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.db import connection

from submissions.boards.leaderboard import leaderboard_differences
from submissions.lifecycle.selectors import leaderboard
from submissions.models import Submission
from submissions.models.boards import LeaderboardPending
from tests.builders import linear_classifier
from tests.evaluation.hostile.models import endless_loop
from tests.evaluation.hostile.test_hostile_corpus import client_for, upload

pytestmark = pytest.mark.django_db(transaction=True)


def children_of(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.update(int(c) for c in (task / "children").read_text().split())
    return found


class ModelProcessKiller(threading.Thread):
    """Sends SIGKILL to the model process each time ``submission_id`` starts a new attempt."""

    def __init__(self, submission_id: int, attempts: int) -> None:
        super().__init__(daemon=True)
        self.submission_id, self.attempts = submission_id, attempts
        self.killed: list[int] = []
        self.before = children_of(os.getpid())

    def run(self) -> None:
        try:
            deadline = time.monotonic() + 120
            while len(self.killed) < self.attempts and time.monotonic() < deadline:
                row = Submission.objects.filter(pk=self.submission_id).values("status", "attempts")[
                    0
                ]
                if row["status"] == "running" and row["attempts"] == len(self.killed) + 1:
                    children = children_of(os.getpid()) - self.before
                    if len(children) == 1:  # the model process, mid-way through the endless Loop
                        (pid,) = children
                        os.kill(pid, signal.SIGKILL)
                        self.killed.append(pid)
                time.sleep(0.05)
        finally:
            connection.close()


def test_a_killed_model_process_is_retried_once_then_failed_and_the_worker_serves_on(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    task = make_task(time_limit_s=600, submissions_per_day=100)
    client = client_for(alice)
    doomed = upload(client, task.slug, endless_loop(), "doomed.onnx").json()
    good = upload(client, task.slug, linear_classifier(np.eye(64, 10), np.zeros(10))).json()
    killer = ModelProcessKiller(doomed["id"], attempts=2)
    killer.start()

    run_worker()  # burst: doomed (killed) → good → doomed again (killed) → queue empty
    killer.join(timeout=10)

    assert len(killer.killed) == 2 and killer.killed[0] != killer.killed[1]
    doomed_row = Submission.objects.get(pk=doomed["id"])
    assert doomed_row.status == "failed"
    assert doomed_row.attempts == 2
    assert doomed_row.error_message == (
        "The evaluation process was killed twice (out of memory or a crash inside the model's "
        "operators). Check the model's memory use at this task's batch shape."
    )
    first = doomed_row.log.splitlines()[0]
    assert first.startswith("attempt 1: the evaluation process died (while ")
    assert first.endswith("it was killed by signal SIGKILL); retrying.")
    assert Submission.objects.get(pk=good["id"]).status == "succeeded"
    assert queue.count == 0
    # The last job's model process died: its worker refreshed the board for every result left
    # pending (the good one's, when the retry still waited after it).
    assert not LeaderboardPending.objects.exists()
    assert [r.submission.pk for r in leaderboard(task=task)] == [good["id"]]
    assert leaderboard_differences(task_id=task.pk) == []
