"""Workers page, worker cards, /api/workers/, /api/queue/ and the Prometheus endpoint.

Worker states are published by real EvaluationWorker objects on the real test Redis; NVML is
faked at ``gpu._nvml()`` only, since this machine has no GPU.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from queueing import heartbeat
from submissions.lifecycle.services import submission_create
from submissions.models import Submission
from tests.conftest import onnx_upload
from tests.workers.fake_nvml import FakeGpu, FakeNvml, install
from tests.workers.fleet_support import fast_model
from workers.worker import EvaluationWorker

pytestmark = pytest.mark.django_db(transaction=True)


def publish(queue: Any, name: str, samples: int = 1) -> EvaluationWorker:
    worker = EvaluationWorker([queue], connection=queue.connection, name=name)
    for _ in range(samples):
        worker._last_publish = 0.0
        worker.publish_heartbeat()
    return worker


def workers_json(client: Any) -> dict[str, dict[str, Any]]:
    response = client.get("/api/workers/")
    assert response.status_code == 200
    return {w["name"]: w for w in response.json()["workers"]}


def test_the_workers_api_shows_gpu_stats_and_hides_hosts_and_pids_from_non_staff(
    monkeypatch: Any, queue: Any, operator: Any, alice: Any
) -> None:
    install(monkeypatch)
    publish(queue, "gpu0-a", samples=3)

    public = workers_json(APIClient())["gpu0-a"]
    client = APIClient()
    client.force_authenticate(operator)
    staff = workers_json(client)["gpu0-a"]

    assert public["online"] and public["state"] == "idle"
    assert public["gpu"]["name"] == "NVIDIA A40" and public["gpu"]["utilization_memory"] == 41
    assert public["memory_used_fraction"] == pytest.approx(0.25)
    assert [s["util"] for s in public["history"]] == [63, 63, 63]
    assert "host" not in public and "pid" not in public and "processes" not in public["gpu"]
    assert staff["host"] and staff["pid"] > 0
    assert staff["gpu"]["processes"] == [{"pid": 4242, "used_memory": 6 * 1024**3}]


def test_health_warnings_for_heat_full_memory_and_a_lost_gpu(
    monkeypatch: Any, queue: Any, settings: Any
) -> None:
    settings.EVAL_TEMPERATURE_WARN_C = 80
    hot = FakeGpu(temperature_c=91, memory_used=47 * 1024**3)
    install(monkeypatch, FakeNvml(hot))
    publish(queue, "hot")
    lost = FakeGpu(errors={"nvmlDeviceGetMemoryInfo": 15})  # NVML_ERROR_GPU_IS_LOST
    install(monkeypatch, FakeNvml(lost))
    publish(queue, "lost")

    found = workers_json(APIClient())

    assert found["hot"]["warnings"] == [
        "GPU at 91 °C (warning at 80 °C).",
        "GPU memory 98% full.",
    ]
    assert any("GPU #0 is lost" in w for w in found["lost"]["warnings"])


def test_operators_are_warned_when_no_worker_serves_a_device_class(
    queue: Any, make_task: Any, settings: Any, operator: Any
) -> None:
    settings.EVAL_DEVICE = "cpu"
    make_task(slug="big-gpu", requires_gpu=True)
    publish(queue, "cpu-only")
    client = Client()
    client.force_login(operator)

    classes = {c["slug"]: c for c in APIClient().get("/api/queue/").json()["device_classes"]}
    page = client.get("/workers/").content.decode()

    assert classes["cpu"]["workers_online"] == 1 and classes["cpu"]["warning"] == ""
    assert classes["gpu"]["workers_online"] == 0
    assert classes["gpu"]["warning"].startswith("No worker of device class gpu is online")
    assert 'data-class-warning="gpu"' in page and 'data-class-warning="cpu"' not in page
    # The CPU worker itself is fine: it never takes the GPU task's submissions.
    assert workers_json(APIClient())["cpu-only"]["warnings"] == []


def test_a_worker_with_a_stale_heartbeat_is_shown_offline(queue: Any, settings: Any) -> None:
    publish(queue, "silent")
    age = settings.EVAL_HEARTBEAT_STALE_S + 30
    queue.connection.hset(heartbeat.worker_key("silent"), "last_heartbeat", time.time() - age)

    silent = workers_json(APIClient())["silent"]

    assert not silent["online"] and silent["state"] == "offline"
    assert silent["warnings"] == [f"No heartbeat for {age:.0f} s: the worker is offline."]


def test_the_queue_api_counts_the_last_day_and_gives_my_positions(
    queue: Any, alice: Any, bob: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=100)
    now = timezone.now()

    def row(user: Any, status: str, minutes_ago: int, wait_s: int | None = None) -> Submission:
        created = now - timedelta(minutes=minutes_ago)
        started = created + timedelta(seconds=wait_s) if wait_s is not None else None
        return Submission.objects.create(
            user=user,
            task=task,
            model_file="models/x.onnx",
            sha256="0" * 64,
            size_bytes=1,
            original_name="x.onnx",
            status=status,
            created_at=created,
            started_at=started,
            finished_at=now if status in ("succeeded", "failed", "cancelled") else None,
        )

    row(bob, "succeeded", 30, wait_s=10)
    row(alice, "succeeded", 20, wait_s=20)
    row(bob, "failed", 10, wait_s=60)
    row(bob, "running", 5, wait_s=30)
    first_in_line = row(bob, "queued", 4)
    mine = [row(alice, "queued", 3), row(alice, "queued", 2)]
    old = row(alice, "succeeded", 3 * 24 * 60, wait_s=5)
    Submission.objects.filter(pk=old.pk).update(finished_at=now - timedelta(days=3))
    client = APIClient()
    client.force_authenticate(alice)

    body = client.get("/api/queue/").json()

    assert (body["queued"], body["running"]) == (3, 1)
    assert (body["succeeded_24h"], body["failed_24h"], body["cancelled_24h"]) == (2, 1, 0)
    assert body["median_wait_s_24h"] == 25.0  # waits 10, 20, 60, 30 s started in the last day
    # Users take turns: bob has one running, alice started least recently, so her first
    # queued submission is next, then bob's, then her second. No worker is online here.
    waiting = {"device_class": "cpu", "estimated_wait_s": None, "waiting_for_device": True}
    assert body["mine"] == [
        {"id": mine[0].pk, "task": "digits", "position": 1, **waiting},
        {"id": mine[1].pk, "task": "digits", "position": 3, **waiting},
    ]
    assert first_in_line.pk not in [m["id"] for m in body["mine"]]
    assert APIClient().get("/api/queue/").json()["mine"] == []


def test_the_workers_page_and_an_operators_task_page_show_live_worker_cards(
    monkeypatch: Any, queue: Any, make_task: Any, operator: Any
) -> None:
    install(monkeypatch)
    publish(queue, "gpu0-a", samples=4)
    task = make_task()

    page = Client().get("/workers/").content.decode()
    fragment = Client().get(f"/workers/cards/?task={task.slug}").content.decode()
    task_page = Client().get(f"/tasks/{task.slug}/").content.decode()
    client = Client()
    client.force_login(operator)
    staff_page = client.get("/workers/").content.decode()

    staff_task_page = client.get(f"/tasks/{task.slug}/").content.decode()

    for html in (page, fragment, staff_task_page):
        assert 'data-worker="gpu0-a"' in html and "NVIDIA A40" in html
        assert '<svg class="sparkline"' in html and "<meter" in html
        assert "js/workers.js" in html
    assert "pid " not in page and "pid " in staff_page
    assert "data-worker-cards" in fragment and "<html" not in fragment
    # a participant's task page shows the queue an upload joins (task.js), not the machines
    assert "data-worker-cards" not in task_page and "NVIDIA A40" not in task_page
    assert "data-task-queue" in task_page and "js/workers.js" not in task_page


def test_the_metrics_endpoint_needs_its_token_and_reports_queue_and_gpus(
    monkeypatch: Any, queue: Any, settings: Any, alice: Any, make_task: Any
) -> None:
    install(monkeypatch)
    publish(queue, "gpu0-a")
    submission_create(user=alice, task=make_task(), upload=onnx_upload(fast_model()))
    client = Client()

    settings.EVAL_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    settings.EVAL_METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token")

    assert response.status_code == 200
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }
    gpu = (("gpu_name", "NVIDIA A40"), ("gpu_uuid", FakeGpu().uuid), ("worker", "gpu0-a"))
    assert samples["eval_submissions", (("status", "queued"),)] == 1
    assert samples["rq_jobs", (("queue", "evaluation"), ("status", "queued"))] == 1  # django-rq's
    assert samples["eval_worker_up", (("worker", "gpu0-a"),)] == 1
    assert samples["eval_gpu_memory_used_bytes", gpu] == 12 * 1024**3
    assert samples["eval_gpu_memory_total_bytes", gpu] == 48 * 1024**3
    assert samples["eval_gpu_utilization_ratio", gpu] == pytest.approx(0.63)
    assert samples["eval_gpu_temperature_celsius", gpu] == 71


def test_a_busy_workers_card_shows_the_submission_task_and_progress(
    queue: Any, alice: Any, make_task: Any
) -> None:
    submission = submission_create(user=alice, task=make_task(), upload=onnx_upload(fast_model()))
    Submission.objects.filter(pk=submission.pk).update(status="running", progress=0.4)
    worker = EvaluationWorker([queue], connection=queue.connection, name="busy-one")
    worker.fleet_state.state = "busy"
    worker.fleet_state.submission_id = submission.pk
    worker.publish_heartbeat(force=True)

    card = workers_json(APIClient())["busy-one"]
    html = Client().get("/workers/").content.decode()

    assert card["job"] == {"id": submission.pk, "task": "digits", "progress": 0.4}
    assert f"Evaluating submission #{submission.pk} (digits)" in html
    assert '<progress max="1" value="0.4">40%</progress>' in html
