"""Device-aware queues: one rq queue per device class, and which classes a worker serves.

A task names the device class it is timed on (``submissions.DeviceClass``: ``cpu``, ``gpu``, or an
operator's class such as ``a40``). Its submissions go to that class's queue only, so they only
ever reach a worker of that class. The ``cpu`` class keeps the plain ``settings.EVALUATION_QUEUE``
name (``evaluation``); every other class is ``evaluation-<slug>``.

A worker started on ``evaluation`` (``worker_command``) listens to the queues of the classes its
device serves (``served_classes``): a CPU worker serves ``cpu``; a CUDA worker serves ``gpu`` and
every class whose ``gpu_name_contains`` is in its GPU's name. ``EVAL_DEVICE_CLASSES=a40,gpu``
overrides the derivation. Workers read the classes when they start: restart them after adding one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import django_rq
from django.conf import settings
from redis import Redis
from redis.exceptions import RedisError
from rq import Queue

from evaluation import heartbeat

log = logging.getLogger(__name__)
CPU_CLASS = "cpu"
GPU_CLASS = "gpu"


@dataclass(frozen=True)
class ClassRule:
    """What a worker needs to know about one device class to decide whether it serves it."""

    slug: str
    gpu_name_contains: str = ""


def served_classes(
    *, device: str, gpu_name: str | None, override: Sequence[str], rules: Iterable[ClassRule]
) -> list[str]:
    """The device classes a worker serves, given what it runs on ("cuda" or "cpu"), its GPU's
    name, and the operator's override (EVAL_DEVICE_CLASSES), which wins when given."""
    if override:
        return list(dict.fromkeys(override))
    if device != "cuda":
        return [CPU_CLASS]
    name = (gpu_name or "").casefold()
    matched = [
        rule.slug
        for rule in rules
        if rule.gpu_name_contains and rule.gpu_name_contains.casefold() in name
    ]
    return list(dict.fromkeys([GPU_CLASS, *matched]))


def queue_name(device_class: str) -> str:
    if device_class == CPU_CLASS:
        return settings.EVALUATION_QUEUE
    return f"{settings.EVALUATION_QUEUE}-{device_class}"


_connections: dict[str, Redis] = {}


def evaluation_redis() -> Redis:
    """This process's client of the evaluation queue's Redis (``queue_redis``)."""
    return queue_redis(settings.EVALUATION_QUEUE)


# RQ_QUEUES settings of a queue that django-rq does not use to connect.
_NOT_CONNECTION = {"DEFAULT_TIMEOUT", "DEFAULT_RESULT_TTL", "ASYNC", "AUTOCOMMIT"}


def queue_redis(name: str) -> Redis:
    """This process's client of the Redis behind rq queue ``name`` (settings.RQ_QUEUES), with
    its one connection pool.

    django_rq.get_connection builds a new client, and so a new pool and a new TCP connection, on
    every call: one per upload request, one per finished evaluation's notification. redis-py's
    pool notices a fork (it checks the pid) and opens fresh connections in the child, so the
    client is safe to inherit.
    """
    config: dict[str, Any] = settings.RQ_QUEUES[name]
    # Queues on the same server share the client (a work horse used to open one connection for
    # its job and another for its notification); their rq defaults are not the connection's.
    # Keyed by the settings, not the name: tests may point the setting at another database.
    key = repr(sorted((k, v) for k, v in config.items() if k not in _NOT_CONNECTION))
    connection = _connections.get(key)
    if connection is None:
        connection = _connections[key] = django_rq.get_connection(name)
    return connection


def enqueue_in_one_round_trip(queue: Queue, func: str, *args: Any, **options: Any) -> None:
    """``queue.enqueue(func, *args, **options)`` in one MULTI/EXEC: given no pipeline, rq
    registers the queue in one round trip and saves and pushes the job in another."""
    with queue.connection.pipeline() as pipe:
        queue.enqueue(func, *args, pipeline=pipe, **options)
        pipe.execute()


def class_queue(device_class: str, connection: Redis | None = None) -> Queue:
    """The rq queue of one device class, on the evaluation queue's Redis."""
    connection = connection or evaluation_redis()
    config: dict[str, Any] = settings.RQ_QUEUES[settings.EVALUATION_QUEUE]
    timeout: int | None = config.get("DEFAULT_TIMEOUT")
    return Queue(queue_name(device_class), connection=connection, default_timeout=timeout)


def known_classes() -> list[ClassRule]:
    from submissions.models import DeviceClass

    rows = DeviceClass.objects.values_list("slug", "gpu_name_contains")
    return [ClassRule(slug, contains) for slug, contains in rows]


def detected_device() -> tuple[str, str | None]:
    """("cuda" or "cpu", the GPU's name) by the device rule of evaluation/device.py, read
    without creating a session (a worker parent must never initialise CUDA)."""
    from evaluation.device import device_config

    config = device_config()
    return ("cuda", config.device_name) if config.use_cuda else ("cpu", None)


def worker_classes(*, device: str, gpu_name: str | None) -> list[str]:
    """This worker's classes, from its device, the operator's classes and EVAL_DEVICE_CLASSES."""
    rules = known_classes()
    classes = served_classes(
        device=device, gpu_name=gpu_name, override=settings.EVAL_DEVICE_CLASSES, rules=rules
    )
    unknown = sorted(set(classes) - {rule.slug for rule in rules})
    if unknown:
        log.warning("device class(es) %s are not defined in the admin yet", ", ".join(unknown))
    return classes


def online_classes(connection: Redis | None = None, now: float | None = None) -> dict[str, int]:
    """device class → number of online workers serving it, from their heartbeats."""
    connection = connection or evaluation_redis()
    now = now if now is not None else time.time()
    counts: dict[str, int] = {}
    for state in heartbeat.read_states(connection):
        if heartbeat.is_online(state, now):
            for device_class in state.device_classes:
                counts[device_class] = counts.get(device_class, 0) + 1
    return counts


def workers_online(device_class: str) -> int | None:
    """Online workers serving the class; None when Redis cannot tell."""
    try:
        return heartbeat.online_in_class(evaluation_redis(), device_class)
    except RedisError:
        return None


def device_notice(device_class: str, class_name: str) -> str:
    """What the upload page and the task API say before an upload when no worker of the task's
    class is online; empty when one is (or when Redis cannot tell: the upload says nothing)."""
    if workers_online(device_class) != 0:
        return ""
    return NO_WORKER_NOTICE.format(name=class_name)


NO_WORKER_NOTICE = (
    "No evaluation machine for this task's device class ({name}) is online right now. You can "
    "still upload: the submission waits in the queue and starts when one comes back. A waiting "
    "submission does not count against your quota until its evaluation starts."
)
