"""How a worker rides out a Redis or PostgreSQL outage instead of exiting.

Redis holds the queue, so a worker without it can take no new job; PostgreSQL holds the truth,
so a result that cannot be saved yet is kept and saved when the database answers again. Neither
outage is a reason for the process to end: with no supervisor (or one whose restart back-off
grows, as Kubernetes' does) a worker that exits stays down long after the outage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django import db
from django.db import DatabaseError
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

# What a lost Redis raises (a refused connection, a reset one, a read that timed out).
REDIS_ERRORS = (RedisConnectionError, RedisTimeoutError)
# Waits between tries grow from the first to the last, doubling.
FIRST_WAIT_S = 0.5
LAST_WAIT_S = 10.0

T = TypeVar("T")


def backoff() -> Callable[[], float]:
    """Successive waits: FIRST_WAIT_S, doubled each time, at most LAST_WAIT_S."""
    wait = [FIRST_WAIT_S / 2]

    def next_wait() -> float:
        wait[0] = min(wait[0] * 2, LAST_WAIT_S)
        return wait[0]

    return next_wait


def redis_answers(connection: Redis) -> bool:
    try:
        return bool(connection.ping())
    except REDIS_ERRORS:
        return False


def wait_for_redis(connection: Redis, *, name: str, stop: Callable[[], bool]) -> bool:
    """Block until Redis answers (True) or ``stop()`` says to give up (False), logging the wait
    once when it starts and once when it ends."""
    if redis_answers(connection):
        return True
    log.error("worker %s: Redis does not answer; waiting for it (no job is lost)", name)
    started, next_wait = time.monotonic(), backoff()
    while not stop():
        time.sleep(next_wait())
        if redis_answers(connection):
            log.warning(
                "worker %s: Redis answers again after %.1f s; going on",
                name,
                time.monotonic() - started,
            )
            return True
    return False


def save_patiently(save: Callable[[], T], *, what: str) -> T:
    """``save()``, tried again while the database is unreachable, until it answers.

    Between tries the connections are closed (the next try opens a fresh one). The worker's
    heartbeat goes on in its own thread meanwhile (``workers.pulse``), keeping its claim on the
    submission alive so that recovery does not take it from a worker that only waits; only the
    worker's end (a second stop signal, a kill) gives up, and recovery runs it again."""
    next_wait, logged = backoff(), False
    while True:
        try:
            return save()
        except DatabaseError as exc:
            if not logged:
                log.error("%s not saved yet: the database does not answer (%s)", what, exc)
                logged = True
        db.connections.close_all()
        time.sleep(next_wait())
