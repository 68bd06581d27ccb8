"""Test helpers for notifications: a local HTTP receiver for webhooks and a real rq worker for
the notifications queue, run in burst mode in this process (so Django's locmem outbox and the
test's database transaction are the ones the jobs use)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import django_rq
import pytest
from rq import Queue, SimpleWorker

from evaluation.runner import EvalResult
from submissions.models import Submission, Task


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Answers 500 to the first ``failures`` POSTs, then 200; keeps every request it got."""

    failures: int = 0
    requests: list[Received] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append(Received(dict(self.headers.items()), body))
                failing = len(receiver.requests) <= receiver.failures
                self.send_response(500 if failing else 200)
                self.end_headers()
                self.wfile.write(b"down for a moment" if failing else b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server is not None and self.thread is not None:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=5)


@pytest.fixture
def receiver() -> Iterator[Callable[..., Receiver]]:
    """Start receivers; every one is stopped after the test, whatever happened."""
    started: list[Receiver] = []

    def start(failures: int = 0) -> Receiver:
        started.append(Receiver(failures=failures).start())
        return started[-1]

    yield start
    for one in started:
        one.stop()
    assert not any(one.thread and one.thread.is_alive() for one in started)


@pytest.fixture
def notifications_queue(settings: Any) -> Iterator[Queue]:
    """The notifications queue on the test Redis database, emptied before and after."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.SITE_URL = "https://portal.test"
    queue = django_rq.get_queue(settings.NOTIFICATIONS_QUEUE)
    queue.connection.flushdb()
    yield queue
    queue.connection.flushdb()


def run_notifier(
    queue: Queue, until: Callable[[], bool] = lambda: True, timeout_s: float = 20
) -> None:
    """Run a real rq worker on the notifications queue in burst mode, again and again (its
    scheduler moves due retries back to the queue) until ``until()`` holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        SimpleWorker([queue], connection=queue.connection).work(burst=True, with_scheduler=True)
        if until():
            return
        assert time.monotonic() < deadline, "the notifier did not get there in time"
        time.sleep(0.2)


def running(task: Task, user: Any) -> Submission:
    return Submission.objects.create(
        task=task, user=user, sha256="0" * 64, size_bytes=1, original_name="m.onnx",
        status="running", attempts=1, worker_name="gpu-host-7-gpu0",
    )  # fmt: skip


def result(score: float) -> EvalResult:
    return EvalResult(
        score=score, score_private=score / 2, metrics={"accuracy": score}, metrics_private={},
        latency_p50_ms=1.0, latency_p95_ms=1.0, latency_p99_ms=1.0, throughput=10.0,
        provider="CPUExecutionProvider", device_name="cpu", ort_version="1", samples_evaluated=1,
    )  # fmt: skip
