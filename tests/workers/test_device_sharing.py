"""Scoring and timing on one device (workers/device_lock.py): scorers give way to a timing,
a timer waits for the scorers' batches in flight, and a killed process holds nobody up for longer
than its lease's TTL. Real Redis; threads stand in for other workers, and one real process is
killed with SIGKILL."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import threading
import time
from typing import Any

import pytest

from workers.device_lock import (
    FIRST_POLL_S,
    POLL_S,
    ScoringTurn,
    _pauses,
    device_lock,
    device_lock_key,
    scorers_key,
)

KEY = device_lock_key(gpu_uuid="GPU-sharing-test")


def test_a_scorer_is_told_to_give_way_while_a_timing_holds_the_device(queue: Any) -> None:
    with ScoringTurn(queue.connection, KEY, ttl_s=0.6) as turn:
        assert not turn.due()
        released = threading.Event()
        held: list[bool] = []

        def timer() -> None:
            with device_lock(queue.connection, KEY, wait_s=5, ttl_s=0.6) as exclusive:
                held.append(exclusive)
                time.sleep(1.0)
            released.set()

        thread = threading.Thread(target=timer)
        thread.start()
        time.sleep(0.5)  # longer than the scorer's poll: it has seen the timer
        assert turn.due()
        waited = turn.give_way(limit_s=10)
        assert released.is_set() and not turn.due()
        assert 0.3 < waited < 2.0
        thread.join()
    assert held == [True]  # it had the device alone once the scorer stepped aside


def test_a_timer_waits_for_the_batch_in_flight_then_has_the_device_alone(queue: Any) -> None:
    events: list[tuple[str, float]] = []

    def scorer() -> None:
        with ScoringTurn(queue.connection, KEY, ttl_s=0.6) as turn:
            for _ in range(8):
                if turn.due():
                    turn.give_way(limit_s=10)
                events.append(("batch start", time.monotonic()))
                time.sleep(0.3)  # one batch
                events.append(("batch end", time.monotonic()))

    thread = threading.Thread(target=scorer)
    thread.start()
    time.sleep(0.45)  # mid-batch
    with device_lock(queue.connection, KEY, wait_s=5, ttl_s=0.6) as exclusive:
        began = time.monotonic()
        time.sleep(1.0)  # the timed passes
        ended = time.monotonic()
    thread.join()

    assert exclusive is True
    during = [name for name, at in events if began <= at <= ended]
    assert during == []  # no batch started or ended while it timed
    assert any(at < began for _, at in events) and any(at > ended for _, at in events)
    assert not queue.connection.zcard(scorers_key(KEY))  # withdrawn, not left to lapse


def test_a_scorer_that_does_not_step_aside_in_the_wait_leaves_the_timing_not_exclusive(
    queue: Any,
) -> None:
    with ScoringTurn(queue.connection, KEY, ttl_s=0.6):  # never asks: one long batch
        asked = time.monotonic()
        with device_lock(queue.connection, KEY, wait_s=0.8, ttl_s=0.6) as exclusive:
            assert exclusive is False
            assert 0.7 < time.monotonic() - asked < 2.0  # it waited its wait, no longer
    assert not queue.connection.exists(KEY)


def test_a_free_lock_taken_in_one_round_trip_is_renewed_and_released_as_its_own(
    queue: Any,
) -> None:
    """The lock taken by the pipelined SET NX must carry its token where redis-py's Lock reads
    it: else the renewer cannot extend it (it lapses after its TTL while the timing runs) and the
    release is refused (it stays until its TTL), both silently."""
    with device_lock(queue.connection, KEY, wait_s=5, ttl_s=0.6) as exclusive:
        assert exclusive
        time.sleep(1.0)  # past the TTL: still held only if renewed
        assert queue.connection.exists(KEY)
    assert not queue.connection.exists(KEY)  # released at once, not left to lapse


def test_a_scorer_gives_way_for_no_longer_than_its_limit(queue: Any) -> None:
    with device_lock(queue.connection, KEY, wait_s=1, ttl_s=0.6) as exclusive:
        assert exclusive is True
        with ScoringTurn(queue.connection, KEY, ttl_s=0.6) as turn:
            assert turn.due()
            assert 0.5 <= turn.give_way(limit_s=0.5) < 1.0
            assert not turn.due()  # registered again, and scoring on


def _score_until_killed(key: str, ready: Any) -> None:
    import django_rq
    from django.conf import settings

    connection = django_rq.get_connection(settings.EVALUATION_QUEUE)
    with ScoringTurn(connection, key, ttl_s=1.0):
        ready.set()
        time.sleep(600)  # one endless batch; SIGKILL ends it, no finally runs


@pytest.mark.slow
def test_a_scorer_killed_mid_batch_holds_the_timer_no_longer_than_its_ttl(queue: Any) -> None:
    ready = multiprocessing.get_context("fork").Event()
    process = multiprocessing.get_context("fork").Process(
        target=_score_until_killed, args=(KEY, ready), daemon=True
    )
    process.start()
    try:
        assert ready.wait(30)
        time.sleep(1.5)  # past the TTL: the live process renews its lease
        assert queue.connection.zcard(scorers_key(KEY)) == 1
        os.kill(process.pid, signal.SIGKILL)
        killed = time.monotonic()
        with device_lock(queue.connection, KEY, wait_s=30, ttl_s=1.0) as exclusive:
            waited = time.monotonic() - killed
    finally:
        if process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
        process.join(10)

    assert exclusive is True
    assert waited < 1.0 + 0.5  # the TTL and a few polls


def test_a_waiting_side_looks_again_soon_at_first_then_every_poll() -> None:
    # A one-batch timing holds the device a few milliseconds: a fixed 50 ms (a scorer's 0.25 s)
    # between looks kept the device idle that long after it (measured: waits up to 61 ms in a
    # burst of 200 on two workers, 8-11 ms with these pauses).
    pauses = _pauses()
    first = [next(pauses) for _ in range(8)]
    assert first[0] == FIRST_POLL_S
    assert all(b == min(a * 2, POLL_S) for a, b in itertools.pairwise(first))
    assert first[-1] == POLL_S
    scorer = _pauses(0.25)
    assert max(next(scorer) for _ in range(12)) == 0.25
