"""Containment of one evaluation inside its work horse: its time limit and its memory.

Time: a watchdog thread sets RunOptions.terminate at the deadline (see TimeLimit).

Memory: an address-space limit (RLIMIT_AS) on CPU. Without it a model such as
ConstantOfShape([100000, 100000]) asks for memory the kernel happily overcommits, fills it page by
page and brings the OOM killer down on whatever process is largest, possibly not ours. Under the
limit the allocation itself fails, onnxruntime reports it, and the submission fails with a plain
message while the machine carries on. The limit is on *added* address space: the horse starts as a
fork of the worker and already maps Python, Django, numpy and onnxruntime, none of the model's
doing.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from collections.abc import Iterator

import onnxruntime as ort


def address_space_bytes() -> int:
    """Virtual memory this process maps now (VmSize), from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def added_memory_limit(limit_bytes: int | None) -> Iterator[int | None]:
    """Let the block add at most ``limit_bytes`` of address space; the old limit comes back after.

    Only the soft limit is lowered, so it can be raised again: a job run inside a long-lived
    process (a test, a SimpleWorker) is not left crippled. Yields the absolute limit set, or None
    when ``limit_bytes`` is None/0 or the platform has no RLIMIT_AS.
    """
    if not limit_bytes or not hasattr(resource, "RLIMIT_AS"):
        yield None
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    target = address_space_bytes() + limit_bytes
    if hard != resource.RLIM_INFINITY:
        target = min(target, hard)
    if soft != resource.RLIM_INFINITY:
        target = min(target, soft)  # never loosen a limit someone else set
    resource.setrlimit(resource.RLIMIT_AS, (target, hard))
    try:
        yield target
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class _WatchdogThread(threading.Thread):
    """One daemon thread per process that sets RunOptions.terminate when a deadline passes.

    SIGALRM is not delivered while onnxruntime is inside C++, so a signal cannot stop a run; a
    thread can, through RunOptions.terminate. The thread is started once and polls: arming it is a
    single assignment, so a small model's run is not slowed by starting or waking a thread. It
    wakes at most once a second (or at the deadline), because every wake-up on a busy CPU can
    preempt one of onnxruntime's compute threads (polling 20 times a second measured about 4 % on
    the conv benchmark in one A/B test). A run is therefore stopped within a second of its limit.
    """

    POLL_S = 1.0

    def __init__(self) -> None:
        super().__init__(name="evaluation-watchdog", daemon=True)
        self.armed: tuple[float, ort.RunOptions, threading.Event] | None = None

    def run(self) -> None:
        while True:
            armed = self.armed
            now = time.monotonic()
            if armed is not None and now >= armed[0]:
                armed[1].terminate = True
                armed[2].set()
            wait = self.POLL_S
            if armed is not None and now < armed[0]:
                wait = min(wait, armed[0] - now)
            time.sleep(wait)


_watchdog_thread: _WatchdogThread | None = None


def _forget_watchdog_thread() -> None:
    global _watchdog_thread
    _watchdog_thread = None  # a forked child (the work horse) inherits the object, not the thread


os.register_at_fork(after_in_child=_forget_watchdog_thread)


def _watchdog() -> _WatchdogThread:
    global _watchdog_thread
    if _watchdog_thread is None:
        _watchdog_thread = _WatchdogThread()
        _watchdog_thread.start()
    return _watchdog_thread


class TimeLimit:
    """The time limit of one evaluation: its own RunOptions, terminated at the deadline."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.run_options = ort.RunOptions()
        self.fired = threading.Event()

    def __enter__(self) -> TimeLimit:
        _watchdog().armed = (time.monotonic() + self.limit_s, self.run_options, self.fired)
        return self

    def __exit__(self, *exc: object) -> None:
        _watchdog().armed = None

    @property
    def exceeded(self) -> bool:
        return self.fired.is_set()
