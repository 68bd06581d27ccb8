"""Prometheus metrics for ops: django-rq's collector plus ours (queue, submissions, GPUs).

Collected on each scrape from the database and the heartbeats, so any web process can answer
and nothing has to be pushed or shared between processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import Count
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from submissions.models import Submission
from workers.fleet import worker_cards


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class FleetCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        yield self._submissions()
        yield from self._workers()

    def _submissions(self) -> GaugeMetricFamily:
        metric = _gauge("eval_submissions", "Submissions by status (database)", ["status"])
        counts = dict(Submission.objects.values_list("status").annotate(n=Count("id")).order_by())
        for status in Submission.Status.values:
            metric.add_metric([status], counts.get(status, 0))
        return metric

    def _workers(self) -> Iterator[Metric]:
        cards = worker_cards(history=0)
        up = _gauge("eval_worker_up", "1 while the worker's heartbeat is fresh", ["worker"])
        busy = _gauge("eval_worker_busy", "1 while the worker evaluates a submission", ["worker"])
        age = _gauge("eval_worker_heartbeat_age_seconds", "Seconds since heartbeat", ["worker"])
        # Counters (exposed as ..._total): they only grow while a worker lives, so rate() works
        # and a restart reads as a counter reset, not as evaluations undone.
        done = CounterMetricFamily(
            "eval_worker_jobs_done", "Succeeded evaluations since start", labels=["worker"]
        )
        failed = CounterMetricFamily(
            "eval_worker_jobs_failed", "Failed evaluations since start", labels=["worker"]
        )
        gpu_labels = ["worker", "gpu_uuid", "gpu_name"]
        used = _gauge("eval_gpu_memory_used_bytes", "GPU memory used", gpu_labels)
        total = _gauge("eval_gpu_memory_total_bytes", "GPU memory total", gpu_labels)
        util = _gauge("eval_gpu_utilization_ratio", "GPU utilisation (0..1)", gpu_labels)
        mem_util = _gauge(
            "eval_gpu_memory_utilization_ratio", "GPU memory bandwidth utilisation", gpu_labels
        )
        temp = _gauge("eval_gpu_temperature_celsius", "GPU temperature", gpu_labels)
        power = _gauge("eval_gpu_power_watts", "GPU power draw", gpu_labels)
        for card in cards:
            up.add_metric([card.name], int(card.online))
            busy.add_metric([card.name], int(card.state == "busy"))
            age.add_metric([card.name], card.seconds_since_heartbeat)
            done.add_metric([card.name], card.jobs_done)
            failed.add_metric([card.name], card.jobs_failed)
            if not card.online or not card.gpu:
                continue
            g: dict[str, Any] = card.gpu
            labels = [card.name, g["uuid"], g["name"]]
            used.add_metric(labels, g["memory_used"])
            total.add_metric(labels, g["memory_total"])
            for metric, key, scale in (
                (util, "utilization_gpu", 0.01),
                (mem_util, "utilization_memory", 0.01),
                (temp, "temperature_c", 1.0),
                (power, "power_w", 1.0),
            ):
                if g.get(key) is not None:
                    metric.add_metric(labels, g[key] * scale)
        yield from (up, busy, age, done, failed, used, total, util, mem_util, temp, power)


def render_metrics() -> bytes:
    from django_rq.contrib.prometheus import RQCollector  # queue depth, jobs by status, workers

    registry = CollectorRegistry(auto_describe=True)
    registry.register(RQCollector())
    registry.register(FleetCollector())
    return generate_latest(registry)
