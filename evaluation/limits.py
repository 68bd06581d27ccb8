"""Containment of one evaluation inside its process: its time limit and its memory.

Time: a watchdog thread sets RunOptions.terminate at the deadline (see TimeLimit); while
onnxruntime creates a session, which no RunOptions reaches, the process is ended instead (the
worker kills the model process at the deadline; ``oep check`` uses process_deadline).

Memory: an address-space limit (RLIMIT_AS) on CPU. Without it a model such as
ConstantOfShape([100000, 100000]) asks for memory the kernel happily overcommits, fills it page by
page and brings the OOM killer down on whatever process is largest, possibly not ours. Under the
limit the allocation itself fails, onnxruntime reports it, and the submission fails with a plain
message while the machine carries on. The limit is on *added* address space: the process already
maps Python, numpy and onnxruntime, none of the model's doing.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

import onnxruntime as ort

EXIT_DEADLINE = 3  # exit status of a process ended by process_deadline


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


# Said after the limit when session creation overran (the worker, and ``oep check`` locally).
LOADING = " while onnxruntime was loading and optimising the model"


def time_limit_message(limit_s: float, during: str = "") -> str:
    """How every time-limit failure is worded for the submitter, whichever part overran."""
    return f"time limit of {limit_s:g} s exceeded{during}"


class _Deadline(NamedTuple):
    """A tuple, not a frozen dataclass: arming a limit is on every evaluation's path, and a frozen
    dataclass's __init__ goes through object.__setattr__ for each field, which a tuple skips."""

    at: float  # time.monotonic()
    expire: Callable[[], None]  # called by the watchdog thread once ``at`` has passed


class _WatchdogThread(threading.Thread):
    """One daemon thread per process that acts when a deadline passes.

    SIGALRM is not delivered while onnxruntime is inside C++, so a signal cannot stop a run; a
    thread can, through RunOptions.terminate (TimeLimit), or by ending the process when nothing
    can be terminated (process_deadline). The thread is started once and polls: arming it is a
    single assignment, so a small model's run is not slowed by starting or waking a thread. It
    wakes at most once a second (or at the deadline), because every wake-up on a busy CPU can
    preempt one of onnxruntime's compute threads (polling 20 times a second slowed the conv
    benchmark in one A/B test). A run is therefore stopped within a second of its limit.
    """

    POLL_S = 1.0

    def __init__(self) -> None:
        super().__init__(name="evaluation-watchdog", daemon=True)
        self.armed: _Deadline | None = None

    def run(self) -> None:
        while True:
            armed = self.armed
            now = time.monotonic()
            if armed is not None and now >= armed.at:
                armed.expire()
            wait = self.POLL_S
            if armed is not None and now < armed.at:
                wait = min(wait, armed.at - now)
            time.sleep(wait)


_watchdog_thread: _WatchdogThread | None = None


def _forget_watchdog_thread() -> None:
    global _watchdog_thread
    _watchdog_thread = None  # a forked child inherits the object, not the thread


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
        # Set once by the watchdog thread (an attribute store is atomic); a plain flag, not a
        # threading.Event, whose creation cost a third of arming a tiny model's limit.
        self.fired = False

    def _expire(self) -> None:
        self.run_options.terminate = True
        self.fired = True

    def __enter__(self) -> TimeLimit:
        _watchdog().armed = _Deadline(time.monotonic() + self.limit_s, self._expire)
        return self

    def __exit__(self, *exc: object) -> None:
        _watchdog().armed = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop this limit's clock while the block runs: time spent giving the device to another
        worker's timing is not the model's. A no-op when the limit is not armed."""
        watchdog = _watchdog()
        armed = watchdog.armed
        if armed is None or armed.expire != self._expire:
            yield
            return
        left = armed.at - time.monotonic()
        watchdog.armed = None
        try:
            yield
        finally:
            watchdog.armed = _Deadline(time.monotonic() + left, self._expire)

    @property
    def exceeded(self) -> bool:
        return self.fired


@contextlib.contextmanager
def process_deadline(limit_s: float, on_expiry: Callable[[], None]) -> Iterator[None]:
    """End this process ``limit_s`` from now unless the block is over by then.

    For work that no RunOptions reaches: onnxruntime creating and optimising a session can run
    for minutes in C++ (constant folding a large graph). At the deadline the watchdog thread calls
    ``on_expiry`` (record the failure) and then ``os._exit``, whatever ``on_expiry`` did. Only for
    a process that may die, run for one check.
    """

    def expire() -> None:
        try:
            on_expiry()
        finally:
            os._exit(EXIT_DEADLINE)

    _watchdog().armed = _Deadline(time.monotonic() + limit_s, expire)
    try:
        yield
    finally:
        _watchdog().armed = None
