"""The device's timing lock: a readers-writer scheme in Redis, one per physical device.

A timing phase is the writer: one at a time per device, across every worker, and no scoring beside
it. Scoring phases are the readers: any number side by side, but they give way to a timing.

A GPU is named by its UUID (the one name that means the same device to every process on the
host, whatever CUDA_VISIBLE_DEVICES says); a CPU by its host. For a device key ``K``:

- ``K`` is the timing lock, a Redis lock whose TTL a thread of the holder renews while it times;
- ``K:timers`` is a sorted set of the timers waiting for ``K``, scored by when their claim
  lapses: scoring gives way to a timing that holds the device *or waits for it* (else a steady
  stream of scoring could keep a timer waiting for ever);
- ``K:scorers`` is a sorted set of the scoring phases running on the device, scored likewise.

The order of steps makes the two sides see each other: a scorer registers and looks for timers
in one MULTI, a timer announces itself before it takes the lock and takes the lock before it
looks for scorers. Then it waits (at most what is left of its wait) until the scorers have
finished their batch in flight and stepped aside. Every claim is a lease of ``ttl_s`` that the
live process renews, so a worker killed by ``kill -9`` (no ``finally``) holds nobody up for
longer than ``ttl_s``.

When the lock, or the scorers' stepping aside, cannot be had within the task's wait, the model is
timed anyway and the result says it was timed without exclusivity (``exclusive`` False, shown on
the submission page): a submission is never failed or held back because another worker is slow,
and a figure taken without exclusivity is never passed off as one taken with it. Likewise a scorer
gives way for at most the budget its caller gives it, then scores on. Redis failing is never the
model's fault: both sides carry on as if alone, and the timing says it was not exclusive.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator

from redis import Redis
from redis.exceptions import LockError, RedisError
from redis.lock import Lock

log = logging.getLogger(__name__)
PREFIX = "eval:timing-lock"
POLL_S = 0.05  # how often a waiting side looks again, once it has waited a while
FIRST_POLL_S = 0.002  # its first look again: a one-batch timing holds the device a few ms


def _pauses(most_s: float = POLL_S) -> Iterator[float]:
    """The sleeps of a waiting side: FIRST_POLL_S, doubling up to ``most_s``. A side that slept
    a fixed POLL_S (or a scorer its 0.25 s) let the device stand idle that long after a timing
    of a few milliseconds: in a burst of one-batch timings on two workers most of the time
    between models."""
    pause = FIRST_POLL_S
    while True:
        yield pause
        pause = min(pause * 2, most_s)


def device_lock_key(*, gpu_uuid: str | None) -> str:
    """``eval:timing-lock:gpu:<uuid>`` for a GPU, ``eval:timing-lock:cpu:<hostname>`` for a CPU."""
    if gpu_uuid:
        return f"{PREFIX}:gpu:{gpu_uuid}"
    return f"{PREFIX}:cpu:{socket.gethostname()}"


def timers_key(key: str) -> str:
    return f"{key}:timers"


def scorers_key(key: str) -> str:
    return f"{key}:scorers"


def _claimant() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _live(connection: Redis, members: str) -> int:
    """How many claims in ``members`` have not lapsed (the lapsed ones are dropped)."""
    now = time.time()
    pipe = connection.pipeline()
    pipe.zremrangebyscore(members, "-inf", now)
    pipe.zcard(members)
    return int(pipe.execute()[1])


def timing_wanted(connection: Redis, key: str) -> bool:
    """A timing holds the device or waits for it."""
    pipe = connection.pipeline()
    pipe.exists(key)
    pipe.zcount(timers_key(key), time.time(), "+inf")
    held, waiting = pipe.execute()
    return bool(held or waiting)


class _Renewer(threading.Thread):
    """Pushes the lock's expiry back every third of its TTL until told to stop."""

    def __init__(self, lock: Lock, ttl_s: float) -> None:
        super().__init__(name="timing-lock-renewer", daemon=True)
        self.lock = lock
        self.interval = ttl_s / 3
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.lock.reacquire()
            except (LockError, RedisError) as exc:  # lost it (Redis flushed, or far too slow)
                log.warning("timing lock could not be renewed: %s", exc)
                return


def _acquire(connection: Redis, lock: Lock, key: str, deadline: float, ttl_s: float) -> bool:
    """Take ``lock`` before ``deadline``, announced in ``K:timers`` meanwhile so scoring on the
    device gives way; the announcement is renewed with each try and withdrawn at the end.

    Each try announces and tries the lock in one round trip (Redis runs a connection's commands
    in order, so the announcement still comes first): a lock nobody holds costs one round trip.
    A lock held by another timer is tried again after each of ``_pauses``."""
    me, timers = _claimant(), timers_key(key)
    pauses = _pauses()
    try:
        while True:
            token = uuid.uuid1().hex.encode()  # as redis-py's Lock.acquire makes them
            pipe = connection.pipeline(transaction=False)
            pipe.zadd(timers, {me: time.time() + ttl_s})
            pipe.expire(timers, max(1, int(ttl_s) + 1))
            pipe.set(key, token, nx=True, px=int(ttl_s * 1000))  # Lock.do_acquire's SET
            if pipe.execute()[2]:
                lock.local.token = token  # where Lock.acquire keeps it: release() reads it
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(next(pauses), left))
    finally:
        with contextlib.suppress(RedisError):
            connection.zrem(timers, me)


def _drain(connection: Redis, key: str, deadline: float) -> bool:
    """Wait until no scorer is on the device (each finishes its batch in flight and steps aside,
    or its lease lapses), at most until ``deadline``; True when none is left."""
    pauses = _pauses()
    while _live(connection, scorers_key(key)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(next(pauses))
    return True


@contextlib.contextmanager
def device_lock(connection: Redis, key: str, *, wait_s: float, ttl_s: float) -> Iterator[bool]:
    """Hold the device for a timing while the block runs; yields True when it is held alone (no
    other timing, no scoring), False when the wait ran out (or Redis failed): the block runs
    either way."""
    deadline = time.monotonic() + wait_s
    # thread_local=False: the token must be visible to the renewing thread, not only to this one.
    lock = connection.lock(key, timeout=ttl_s, thread_local=False)  # waited for by _acquire
    try:
        held = _acquire(connection, lock, key, deadline, ttl_s)
    except RedisError as exc:
        log.warning("timing lock %s unavailable: %s", key, exc)
        held = False
    if not held:
        yield False
        return
    renewer = _Renewer(lock, ttl_s)
    renewer.start()
    try:
        try:
            alone = _drain(connection, key, deadline)
        except RedisError as exc:
            log.warning("scorers on %s unknown: %s", key, exc)
            alone = False
        yield alone
    finally:
        renewer.stopped.set()
        renewer.join()
        with contextlib.suppress(LockError, RedisError):  # expired meanwhile: nothing to free
            lock.release()


class ScoringTurn:
    """One scoring phase on the device, as a reader: registered in ``K:scorers`` while it runs,
    stepping aside whenever a timing holds or waits for the device.

    A thread renews the registration every ``poll_s`` and looks for timers in the same MULTI;
    what it sees, ``due()`` answers without a round trip, so the scoring loop can ask between
    every batch. ``give_way`` withdraws, waits for the timings to finish, and registers again.
    """

    def __init__(self, connection: Redis, key: str, *, ttl_s: float) -> None:
        self.connection = connection
        self.key = key
        self.ttl_s = ttl_s
        self.poll_s = min(ttl_s / 3, 0.25)
        self.me = _claimant()
        self.wanted = threading.Event()
        self.stopped = threading.Event()
        self.registered = False
        self.mutex = threading.Lock()  # the thread never renews a registration just withdrawn
        self.thread = threading.Thread(target=self._watch, name="scoring-turn", daemon=True)

    def _register(self) -> None:
        """Register (or renew) and look for timers, atomically; the caller holds ``mutex``."""
        scorers = scorers_key(self.key)
        pipe = self.connection.pipeline(transaction=True)
        pipe.zadd(scorers, {self.me: time.time() + self.ttl_s})
        pipe.expire(scorers, max(1, int(self.ttl_s) + 1))
        pipe.exists(self.key)
        pipe.zcount(timers_key(self.key), time.time(), "+inf")
        held, waiting = pipe.execute()[2:]
        self.registered = True
        if held or waiting:
            self.wanted.set()
        else:
            self.wanted.clear()

    def _withdraw(self) -> None:
        with self.mutex:
            self.registered = False
            with contextlib.suppress(RedisError):
                self.connection.zrem(scorers_key(self.key), self.me)

    def _watch(self) -> None:
        while not self.stopped.wait(self.poll_s):
            with self.mutex:
                if not self.registered:
                    continue
                try:
                    self._register()
                except RedisError as exc:  # scoring carries on; the timer will wait its lease out
                    log.warning("scoring turn on %s not renewed: %s", self.key, exc)

    def __enter__(self) -> ScoringTurn:
        with self.mutex:
            try:
                self._register()
            except RedisError as exc:
                log.warning("scoring turn on %s unavailable: %s", self.key, exc)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()
        self._withdraw()

    def due(self) -> bool:
        """A timing holds or waits for the device: give way before the next batch."""
        return self.wanted.is_set()

    def give_way(self, limit_s: float) -> float:
        """Step aside until no timing holds or waits for the device, for at most ``limit_s``;
        registered again on return. The seconds it waited."""
        began = time.monotonic()
        deadline = began + limit_s
        self._withdraw()
        pauses = _pauses(self.poll_s)
        try:
            while time.monotonic() < deadline:
                if not timing_wanted(self.connection, self.key):
                    with self.mutex:
                        self._register()  # a timer may have come in between: look again
                    if not self.wanted.is_set():
                        break
                    self._withdraw()
                time.sleep(next(pauses))
            else:
                with self.mutex:
                    self._register()
                self.wanted.clear()  # the budget is spent: score on, the timer sees us
        except RedisError as exc:
            log.warning("scoring turn on %s lost: %s", self.key, exc)
            self.wanted.clear()
        return time.monotonic() - began
