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
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache


def _task_key(task_id: int) -> str:
    namespace = settings.BOARD_CACHE_NAMESPACE  # tests: one of their own, shared with workers
    return f"board-version{namespace}:{task_id}"


def board_changed(*, task_id: int) -> None:
    """After a write that changes what a task's boards show."""
    key = _task_key(task_id)
    cache.add(key, time.time_ns(), timeout=None)
    try:
        cache.incr(key)
    except ValueError:  # evicted between the two calls: the clock is a new number already
        cache.add(key, time.time_ns(), timeout=None)


def board_version(*, task_id: int) -> int:
    """The current version of a task's boards: equal numbers, equal read models."""
    key = _task_key(task_id)
    version = cache.get(key)
    if version is None:
        cache.add(key, time.time_ns(), timeout=None)
        version = cache.get(key)
    return int(version or 0)
