"""Waiting for a submission to finish, without polling: ``GET /api/submissions/<id>/?wait=S``
holds its answer until the submission is final (succeeded, failed, cancelled) or ``S`` seconds
have passed, so a client sees its result as soon as it is saved and asks once a second at most.

Each final transition adds an entry to the submission's stream in Redis once its transaction
commits (``submission_settled``, from ``services._became_final``). A waiter has read the row and
found it not final; it then blocks on that stream from its beginning, so an entry added between
its read and its block is seen at once, and reads the row again. A web process lets at most
``SUBMISSION_WAITERS_PER_PROCESS`` requests wait at a time, so waiting never holds every thread
of a process: beyond that, and while Redis cannot be reached, a request is answered at once, as
without ``wait``. A lost entry (Redis down at the commit) costs its waiters the rest of their
wait, never a wrong answer: the row is the truth.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from redis.exceptions import RedisError

from plumbing.redis_client import redis_client

log = logging.getLogger(__name__)
WAIT_MAX_S = 20  # under gunicorn's graceful timeout: a restart does not cut a wait short
SETTLED_TTL_S = 600  # long after any waiter of the final state could have started
_REPLY_MARGIN_S = 5  # the waiter's Redis client: its reply timeout beyond the longest block
WAKE_TIMEOUT_S = 2.0  # the waker's (a worker saving a result): a stalled Redis delays it no more
_waiters = threading.BoundedSemaphore(settings.SUBMISSION_WAITERS_PER_PROCESS)


def _key(submission_id: int) -> str:
    return f"submission-settled{settings.BOARD_CACHE_NAMESPACE}:{submission_id}"


def submission_settled(*, submission_id: int) -> None:
    """After the commit that made the submission final: wake whoever waits for it."""
    key = _key(submission_id)
    try:
        client = redis_client(settings.REDIS_URL, WAKE_TIMEOUT_S)
        pipe = client.pipeline(transaction=False)  # one round trip; nothing to make atomic
        pipe.xadd(key, {"final": "1"}, maxlen=1)
        pipe.expire(key, SETTLED_TTL_S)
        pipe.execute()
    except RedisError as exc:
        log.warning("submission %s final, its waiters not woken: %s", submission_id, exc)


def submission_settled_wait(*, submission_id: int, seconds: float) -> bool:
    """Block until the submission is final (its ``submission_settled``) or ``seconds`` pass.
    False when it did not wait: no waiting slot free in this process, or Redis unreachable."""
    if not _waiters.acquire(blocking=False):
        return False
    try:
        client = redis_client(settings.REDIS_URL, WAIT_MAX_S + _REPLY_MARGIN_S)
        block_ms = max(1, int(min(seconds, WAIT_MAX_S) * 1000))
        client.xread({_key(submission_id): "0-0"}, count=1, block=block_ms)
        return True
    except RedisError as exc:
        log.warning("waiting for submission %s: Redis unavailable: %s", submission_id, exc)
        return False
    finally:
        _waiters.release()
