"""The Prometheus exposition: each metric has the type its meaning calls for."""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from queueing import heartbeat
from workers.prometheus import render_metrics

pytestmark = pytest.mark.django_db


def test_evaluations_done_and_failed_are_counters_with_the_total_suffix(queue: Any) -> None:
    """They only grow while a worker lives: rate() works on them, and a restart reads as a
    counter reset instead of evaluations undone."""
    state = heartbeat.WorkerState(
        name="w1", host="h", pid=1, state="idle", device="cpu", started_at=time.time()
    )
    state.jobs_done, state.jobs_failed = 3, 1
    heartbeat.publish(queue.connection, state)

    families = {f.name: f for f in text_string_to_metric_families(render_metrics().decode())}

    for name, value in (("eval_worker_jobs_done", 3), ("eval_worker_jobs_failed", 1)):
        assert families[name].type == "counter"
        (sample,) = families[name].samples
        assert sample.name == f"{name}_total" and sample.labels == {"worker": "w1"}
        assert sample.value == value
    assert families["eval_worker_up"].type == "gauge"
