"""Redis down at upload: the submission is kept whole (row and file), answered as queued, and
enqueued by recovery once Redis is back. Never a row without its model file."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest
from rest_framework.test import APIClient

from submissions.models import Submission
from tests.conftest import onnx_upload
from tests.workers.fleet_support import fast_model, submit
from workers import recovery

pytestmark = pytest.mark.django_db(transaction=True)


def closed_port() -> int:
    """A local port nothing listens on: bound, never listened to, closed again."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def redis_down(settings: Any) -> None:
    """The evaluation queue points at a real Redis URL whose port refuses connections."""
    settings.RQ_QUEUES = {
        settings.EVALUATION_QUEUE: {"URL": f"redis://127.0.0.1:{closed_port()}/0"}
    }


def test_an_upload_while_redis_is_down_is_kept_whole_and_queued_by_recovery_later(
    alice: Any,
    make_task: Any,
    queue: Any,
    redis_down: None,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    task = make_task()
    client = APIClient()
    client.force_authenticate(alice)
    with caplog.at_level(logging.WARNING, logger="submissions.lifecycle.services"):
        response = client.post(
            "/api/submissions/",
            {"task": task.slug, "file": onnx_upload(fast_model())},
            format="multipart",
        )

    assert response.status_code == 201, response.content
    assert response.json()["status"] == "queued"
    stored = Submission.objects.get(pk=response.json()["id"])
    assert stored.status == "queued" and stored.job_id == ""
    assert stored.model_file.storage.exists(stored.model_file.name)  # the file stayed with it
    (record,) = [r for r in caplog.records if r.name == "submissions.lifecycle.services"]
    assert record.levelno == logging.WARNING
    assert f"submission {stored.pk} stays queued without a job" in record.getMessage()

    # Redis is back: recovery finds the queued submission without a job and enqueues it
    settings.RQ_QUEUES = {settings.EVALUATION_QUEUE: {"URL": settings.REDIS_URL}}
    now = 1_000_000_000.0
    assert recovery.reconcile(clock=lambda: now).enqueued == []  # maybe just committed
    report = recovery.reconcile(clock=lambda: now + recovery.UNJOBBED_GRACE_S)

    assert report.enqueued == [stored.pk]
    assert queue.job_ids == [Submission.objects.get(pk=stored.pk).job_id]


def test_a_cancel_while_redis_is_down_stands_and_answers_normally(
    alice: Any, make_task: Any, queue: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    submission = submit(alice, make_task(), fast_model())
    job_id = Submission.objects.get(pk=submission.pk).job_id
    settings.RQ_QUEUES = {
        settings.EVALUATION_QUEUE: {"URL": f"redis://127.0.0.1:{closed_port()}/0"}
    }
    client = APIClient()
    client.force_authenticate(alice)

    with caplog.at_level(logging.WARNING, logger="submissions.lifecycle.services"):
        response = client.post(f"/api/submissions/{submission.pk}/cancel/")

    assert response.status_code == 200, response.content
    assert Submission.objects.get(pk=submission.pk).status == "cancelled"
    (record,) = [r for r in caplog.records if r.name == "submissions.lifecycle.services"]
    assert record.getMessage().startswith(f"could not stop job {job_id} of a cancelled submission")
