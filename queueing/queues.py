"""The queues the domain enqueues on and the workers listen to: one rq queue per device class,
their Redis connections, and which classes have workers online (from their heartbeats).

A task names the device class it is timed on (``submissions.DeviceClass``: ``cpu``, ``gpu``, or an
operator's class such as ``a40``). Its submissions go to that class's queue only, so they only
ever reach a worker of that class. The ``cpu`` class keeps the plain ``settings.EVALUATION_QUEUE``
name (``evaluation``); every other class is ``evaluation-<slug>``. Which classes a worker serves
is the workers' rule (``workers.classes``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import django_rq
from django.conf import settings
from redis import Redis
from redis.exceptions import RedisError
from rq import Queue

from queueing import heartbeat

log = logging.getLogger(__name__)
CPU_CLASS = "cpu"
GPU_CLASS = "gpu"


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
    # Queues on the same server share the client (one connection for a job and its
    # notification); their rq defaults are not the connection's.
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
