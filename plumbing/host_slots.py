"""A counted semaphore across the processes of one host: a pool of lock files in a directory.

Bounds work whose cost is the host's (memory for inspecting an upload), so the count is per
host, not per Redis or database that several hosts share. A slot is an exclusive ``flock`` on
one of ``count`` files; the kernel drops it when its descriptor closes, so a process killed
while holding a slot frees it at once: nothing to expire, nothing to clean up, and no outage of
Redis or the database can leave the pool stuck. ``flock`` locks belong to an open file
description, so two threads of one process that each open a slot file exclude each other too.

Plain Python, no Django.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

POLL_S = 0.2


class SlotsFull(Exception):
    """Every slot is held: the caller answers "busy, retry later"."""


def _take_free_slot(directory: Path, count: int) -> int | None:
    """An open descriptor holding one free slot's lock, or None when all are held."""
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        fd = os.open(directory / f"slot-{index}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return fd
    return None


@contextlib.contextmanager
def slot_held(directory: Path, count: int, *, wait_s: float = 0.0) -> Iterator[None]:
    """Hold one of ``count`` slots in ``directory`` for the block, waiting up to ``wait_s`` for
    one to come free; SlotsFull when none did. Polled: a slot held briefly (a small model's
    inspection) frees quickly, and a waiter must give up at its deadline, which a blocking
    ``flock`` cannot."""
    deadline = time.monotonic() + wait_s
    while (fd := _take_free_slot(directory, count)) is None:
        if time.monotonic() >= deadline:
            raise SlotsFull(f"all {count} slots in {directory} are held")
        time.sleep(POLL_S)
    try:
        yield
    finally:
        os.close(fd)  # releases the lock
