"""A hidden task is named to staff only: on the workers page, its cards fragment and /api/workers/.

Anonymous visitors and other participants see that a worker is busy and with which submission
number, but not the hidden task's slug; staff see it. The per-device-class warnings (no worker
online for a class) name the class, never a task.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from submissions.lifecycle.services import submission_create
from submissions.models import Submission
from tests.conftest import onnx_upload
from tests.workers.fleet_support import fast_model
from workers.worker import EvaluationWorker

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "secret-gpu-task"


def busy_worker(queue: Any, name: str, submission: Submission) -> None:
    worker = EvaluationWorker([queue], connection=queue.connection, name=name)
    worker.fleet_state.state = "busy"
    worker.fleet_state.submission_id = submission.pk
    worker.publish_heartbeat(force=True)


def views_of(user: Any) -> dict[str, str]:
    """The workers page, the cards fragment and /api/workers/ as ``user`` (None: anonymous)."""
    client, api = Client(), APIClient()
    if user is not None:
        client.force_login(user)
        api.force_authenticate(user)
    return {
        "page": client.get("/workers/").content.decode(),
        "fragment": client.get("/workers/cards/").content.decode(),
        "api": api.get("/api/workers/").content.decode(),
    }


@pytest.fixture
def hidden_task_running(queue: Any, settings: Any, make_task: Any, operator: Any) -> Submission:
    """A CPU worker evaluating a submission to a hidden task that requires a GPU."""
    settings.EVAL_DEVICE = "cpu"
    task = make_task(slug=SECRET, requires_gpu=True, is_hidden=True)
    submission = submission_create(user=operator, task=task, upload=onnx_upload(fast_model()))
    Submission.objects.filter(pk=submission.pk).update(status="running", progress=0.5)
    busy_worker(queue, "cpu-busy", submission)
    return submission


@pytest.mark.parametrize("viewer", ["anonymous", "another participant"])
def test_a_hidden_tasks_name_reaches_no_one_but_staff(
    hidden_task_running: Submission, viewer: str, alice: Any
) -> None:
    seen = views_of(None if viewer == "anonymous" else alice)

    for where, body in seen.items():
        assert SECRET not in body, f"{where} names the hidden task to {viewer}"
    assert f"Evaluating submission #{hidden_task_running.pk}" in seen["page"]
    (card,) = APIClient().get("/api/workers/").json()["workers"]
    assert card["job"] == {"id": hidden_task_running.pk, "task": None, "progress": 0.5}
    assert card["warnings"] == []


def test_staff_see_the_hidden_task_on_the_card(
    hidden_task_running: Submission, operator: Any
) -> None:
    seen = views_of(operator)

    assert f"Evaluating submission #{hidden_task_running.pk} ({SECRET})" in seen["page"]
    assert f'"task":"{SECRET}"' in seen["api"]


def test_the_device_class_warning_names_no_task(
    queue: Any, settings: Any, make_task: Any, alice: Any, operator: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    make_task(slug="hidden-gpu", requires_gpu=True, is_hidden=True)
    EvaluationWorker([queue], connection=queue.connection, name="cpu-idle").publish_heartbeat(
        force=True
    )

    for user in (None, alice, operator):
        api, client = APIClient(), Client()
        if user is not None:
            api.force_authenticate(user)
            client.force_login(user)
        classes = api.get("/api/queue/").json()["device_classes"]
        (gpu,) = [c for c in classes if c["slug"] == "gpu"]
        assert gpu["warning"].startswith("No worker of device class gpu is online")
        for body in (
            api.get("/api/queue/").content.decode(),
            client.get("/workers/").content.decode(),
        ):
            assert "hidden-gpu" not in body
