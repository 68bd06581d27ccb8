"""Latency from several sessions (DeviceClass.timing_sessions): each further session is a fresh
model process with its own warm-up and timing phase; the result is their median, and their
spread is stored and shown. Real workers, real model processes (on the CPU, which this machine
has; the same code path times on a GPU)."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from django.test import Client

from submissions.models import Submission
from tests.workers.fleet_support import fast_model, submit
from workers import sandboxing

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_model_is_timed_in_each_session_of_its_device_class_and_ranked_on_their_median(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    task = make_task()
    task.device_class.timing_sessions = 3
    task.device_class.save()
    submission = submit(alice, task, fast_model())

    run_worker()

    s = Submission.objects.get(pk=submission.pk)
    assert s.status == "succeeded", s.error_message
    p50s = s.timing["session_p50s_ms"]
    assert len(p50s) == s.latency_sessions == 3
    assert s.latency_p50_ms == pytest.approx(statistics.median(p50s))
    assert s.latency_session_spread == pytest.approx(
        (max(p50s) - min(p50s)) / statistics.median(p50s)
    )
    assert len(s.timing["conditions"]["sessions"]) == 3  # each session's own readings
    assert s.samples_evaluated == 100  # the scored run is the first session's, over every row
    client = Client()
    client.force_login(alice)
    api = client.get(f"/api/submissions/{s.pk}/").json()
    assert api["latency_sessions"] == 3
    assert api["latency_session_spread"] == pytest.approx(s.latency_session_spread)
    page = client.get(f"/submissions/{s.pk}/").content.decode()
    assert "the median of 3 sessions" in page


def test_one_session_where_the_device_class_asks_for_one(
    alice: Any, make_task: Any, queue: Any, run_worker: Any
) -> None:
    task = make_task()
    assert task.device_class.timing_sessions == 1  # the seeded cpu class
    submission = submit(alice, task, fast_model())

    run_worker()

    s = Submission.objects.get(pk=submission.pk)
    assert s.latency_sessions == 1 and s.latency_session_spread is None
    assert s.timing["session_p50s_ms"] == []


def test_a_worker_asked_to_stop_starts_no_further_session(
    alice: Any, make_task: Any, queue: Any, run_worker: Any, monkeypatch: Any
) -> None:
    """Its job then ends within the first session's bounds, which is what the deployments'
    grace periods allow for (services.job_timeout_s)."""
    task = make_task()
    task.device_class.timing_sessions = 3
    task.device_class.save()
    submission = submit(alice, task, fast_model())
    monkeypatch.setattr(sandboxing, "stopping", lambda: True)

    run_worker()

    s = Submission.objects.get(pk=submission.pk)
    assert s.status == "succeeded" and s.latency_sessions == 1
