from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import django_rq
import numpy as np
import pytest
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile

from submissions.models import Task
from tests.builders import digits_like, npz_bytes
from workers.worker import EvaluationWorker


def pytest_unconfigure(config: pytest.Config) -> None:
    """What we start we stop: the embedded Redis this session started (REDIS_URL unset) ends with
    it, after every fixture that used it. A server the session found already running is left."""
    from portal.embedded_redis import embedded_redis_stop_own

    embedded_redis_stop_own()


@pytest.fixture(autouse=True)
def _media_in_tmp(settings: Any, tmp_path: Any) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.EVAL_CACHE_DIR = tmp_path / "cache"


@pytest.fixture(autouse=True)
def _plain_http_and_fresh_rate_limits(settings: Any) -> None:
    """Tests speak plain HTTP to the test client (production redirects to HTTPS), and each test
    starts with empty rate-limit counters of its own (they expire by themselves in Redis)."""
    settings.SECURE_SSL_REDIRECT = False
    settings.RATE_LIMIT_NAMESPACE = uuid.uuid4().hex
    settings.BOARD_CACHE_NAMESPACE = uuid.uuid4().hex  # cached boards: keyed on fresh ids


@pytest.fixture(autouse=True)
def _no_worker_state_from_another_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A worker run in this process holds its last task's dataset (``jobs.task_dataset``);
    each test starts with none, since ids can come again once a test's transaction has been
    rolled back. Nor does it start with another test's look for stale board results
    (``jobs.refresh_boards``) a moment ago, nor with its model process server or a model process
    started ahead: what a test started in this process is stopped at its end."""
    from workers import jobs, sandboxing

    monkeypatch.setattr(jobs, "_held", {})
    monkeypatch.setattr(jobs, "_stale_looked_at", float("-inf"))
    monkeypatch.setattr(sandboxing, "_server_failed", False)
    yield
    sandboxing.stop_spare()
    sandboxing.stop_server()


@pytest.fixture(autouse=True)
def _quick_timing(settings: Any) -> None:
    """Tests time each model briefly (tests about timing set their own protocol)."""
    settings.EVAL_TIMING_MIN_TIME_S = 0.01
    settings.EVAL_TIMING_MIN_BATCHES = 4
    settings.EVAL_TIMING_PASSES = 2
    settings.EVAL_TIMING_LOCK_WAIT_S = 10.0
    settings.EVAL_TIMING_PRECISION = 0.0  # one round: a busy test machine would time for longer


@pytest.fixture
def live_portal(transactional_db: Any, settings: Any) -> Iterator[str]:
    """A real threaded HTTP server running the portal; yields its base URL.

    Started after this test's settings (pytest-django's session-wide live_server is built before
    them, and SecurityMiddleware reads SECURE_SSL_REDIRECT once, when its handler is built).
    """
    from pytest_django.live_server_helper import LiveServer

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]
    server = LiveServer("localhost:0")
    yield server.url
    server.stop()


@pytest.fixture
def queue() -> Iterator[Any]:
    """The evaluation queue on the test Redis database, emptied before and after."""
    q = django_rq.get_queue(settings.EVALUATION_QUEUE)
    q.connection.flushdb()
    yield q
    q.connection.flushdb()


@pytest.fixture
def run_worker(queue: Any) -> Callable[[], EvaluationWorker]:
    """Run a real EvaluationWorker in burst mode in this process, then return it."""

    def run() -> EvaluationWorker:
        worker = EvaluationWorker(
            [queue], connection=queue.connection, name=f"test-worker-{id(queue)}"
        )
        worker.work(burst=True, with_scheduler=False)
        return worker

    return run


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="alice-password-1")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="bob-password-1")


@pytest.fixture
def operator(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(
        "operator", password="operator-password-1", is_staff=True, is_superuser=True
    )


@pytest.fixture
def digits_data() -> dict[str, np.ndarray]:
    return digits_like(n=100)


@pytest.fixture
def make_task(db: Any) -> Callable[..., Task]:
    def make(arrays: dict[str, np.ndarray] | None = None, **fields: Any) -> Task:
        arrays = arrays if arrays is not None else digits_like(n=100)
        defaults: dict[str, Any] = dict(
            slug="digits",
            title="Digits",
            batch_size=16,
            input_shape=[1, 8, 8],
            input_dtype="float32",
            output_shape=[10],
            metric="accuracy",
            time_limit_s=60,
            queued_per_user=100,  # many tests queue a burst; the limit's own tests set it
        )
        if fields.pop("requires_gpu", False):  # the seeded GPU class (migration 0004)
            fields.setdefault("device_class_id", "gpu")
        defaults.update(fields)
        task = Task(**defaults)
        task.dataset.save(f"{defaults['slug']}.npz", ContentFile(npz_bytes(arrays)), save=False)
        task.save()
        return task

    return make


def onnx_upload(data: bytes, name: str = "model.onnx") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")
