"""Board versions, in the shared cache: what rendered board fragments and ETags are keyed on.

Each task has a counter, bumped by every write of its read models
(``submissions.boards.leaderboard``)
when it writes, so that a reader in the same transaction sees it, and again once the
transaction commits, so that nothing a reader cached in between outlives the commit. A counter
that the cache lost starts again from the clock (nanoseconds), never from a number it may have
had before, so a fragment cached under an old version is never taken for a new one.

Not a write of the read models, so not a new version: a user renamed (pages read names through
the submission); cached fragments show the new name after the board's next write, or once they
expire (``board_pages.FRAGMENT_TTL_S``).

Redis holds only what can be rebuilt: while it cannot be reached, the pages are rendered from the
database (``cached`` computes, nothing is kept), every read gets a version of its own (so no
ETag matches and no fragment is taken for another), and a write's new version is logged as lost;
fragments cached before the outage expire within ``FRAGMENT_TTL_S`` of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from redis.exceptions import RedisError

log = logging.getLogger(__name__)
T = TypeVar("T")


def _task_key(task_id: int) -> str:
    namespace = settings.BOARD_CACHE_NAMESPACE  # tests: one of their own, shared with workers
    return f"board-version{namespace}:{task_id}"


def board_changed(*, task_id: int) -> None:
    """After a write that changes what a task's boards show."""
    key = _task_key(task_id)
    try:
        cache.add(key, time.time_ns(), timeout=None)
        try:
            cache.incr(key)
        except ValueError:  # evicted between the two calls: the clock is a new number already
            cache.add(key, time.time_ns(), timeout=None)
    except RedisError as exc:
        log.warning(
            "board version of task %s not bumped, the cache is unavailable: %s", task_id, exc
        )


def board_changes(*, task_id: int) -> None:
    """Inside a transaction that changes what a task's boards or its page show: the version is
    bumped now, so that a reader in the same transaction sees it, and again once the transaction
    commits, so that nothing a reader cached in between outlives the commit."""
    board_changed(task_id=task_id)
    transaction.on_commit(lambda: board_changed(task_id=task_id))


def board_version(*, task_id: int) -> int:
    """The current version of a task's boards: equal numbers, equal read models. While the cache
    cannot be reached, a number of this call's own (the clock): nothing cached is matched."""
    key = _task_key(task_id)
    try:
        version = cache.get(key)
        if version is None:
            cache.add(key, time.time_ns(), timeout=None)
            version = cache.get(key)
    except RedisError:
        return time.time_ns()
    return int(version or 0)


def cached(key: str, compute: Callable[[], T], ttl_s: float) -> T:
    """``compute()``'s value, kept in the shared cache under ``key`` for ``ttl_s``; computed
    afresh, and not kept, while the cache cannot be reached."""
    try:
        found: Any = cache.get(key)
    except RedisError as exc:
        log.warning("cache unavailable, computing %s: %s", key.split(":")[0], exc)
        return compute()
    if found is not None:
        return found  # type: ignore[no-any-return]
    value = compute()
    try:
        cache.set(key, value, ttl_s)
    except RedisError as exc:
        log.warning("cache unavailable, %s not kept: %s", key.split(":")[0], exc)
    return value
