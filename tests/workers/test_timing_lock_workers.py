"""Two real workers on one host share its CPU for scoring but never for timing, and never score
beside a timing.

Real worker processes (``manage.py rqworker``), real Redis, the real test database; the lock's
TTL is 1 s so that a worker killed while timing or scoring frees the device within a second or so.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.builders import digits_like
from tests.workers.batch_recorder import recorded
from tests.workers.fleet_support import (
    WorkerProcess,
    fast_model,
    final,
    online_workers,
    row,
    slow_classifier,
    start_worker,
    submit,
    wait_for,
)
from workers.device_lock import device_lock_key, scorers_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
_ = start_worker  # a fixture, used by name
TTL = {"EVAL_TIMING_LOCK_TTL_S": "1"}
KEY = device_lock_key(gpu_uuid=None)  # this host's CPU: the workers run here


def waited(timing: dict[str, Any]) -> float:
    """How long an evaluation waited for other workers' timings: scoring, then for the lock."""
    return float(timing["scoring_wait_s"] + timing["lock_wait_s"])


def test_two_workers_on_one_host_never_time_at_once(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    task = make_task(timing={"min_time_s": 1.0, "min_batches": 4, "passes": 2})
    workers = [start_worker("lock-a", **TTL), start_worker("lock-b", **TTL)]
    wait_for("both workers online", lambda: len(online_workers(queue)) == 2, 60, workers)

    submissions = [submit(alice, task, fast_model(i)) for i in range(2)]
    wait_for("both final", lambda: all(final(s) for s in submissions), 120, workers)

    rows = [row(s) for s in submissions]
    assert [r.status for r in rows] == ["succeeded"] * 2, [r.error_message for r in rows]
    assert {r.worker_name for r in rows} == {"lock-a", "lock-b"}  # they ran side by side
    assert all(r.timing_exclusive for r in rows)
    first, second = sorted((r.timing for r in rows), key=lambda t: t["started_at"])
    assert first["finished_at"] <= second["started_at"]  # one timing phase after the other
    # The second really waited for the first: for the lock, or, still scoring, before its batches
    assert waited(second) > 0.3
    assert first["duration_s"] >= 1.0 and second["duration_s"] >= 1.0


def test_a_worker_killed_while_timing_frees_the_device_within_the_locks_ttl(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    long = make_task(
        slug="long", time_limit_s=300, timing={"min_time_s": 120, "max_time_s": 120, "passes": 1}
    )
    quick = make_task(slug="quick", timing={"min_time_s": 0.2, "lock_wait_s": 60})
    workers = {name: start_worker(name, **TTL) for name in ("held-a", "held-b")}
    wait_for(
        "both workers online", lambda: len(online_workers(queue)) == 2, 60, [*workers.values()]
    )
    key = device_lock_key(gpu_uuid=None)  # this host's CPU: the workers run here

    timed = submit(alice, long, fast_model(1))
    wait_for("the long timing to hold the lock", lambda: queue.connection.exists(key), 60)
    assert 0 < queue.connection.pttl(key) <= 1000
    time.sleep(2.0)
    assert queue.connection.exists(key)  # renewed past its TTL while the job times
    holder = workers[row(timed).worker_name]
    waiting = submit(alice, quick, fast_model(2))
    wait_for("the other worker to score", lambda: row(waiting).status == "running", 60)
    time.sleep(1.0)  # now it waits for the device, scoring or for the lock

    holder.kill()  # kill -9: its model process dies with it, no finally runs, nothing is released
    killed_at = time.time()

    done = wait_for("the waiting one to finish", lambda: final(waiting), 60, [*workers.values()])
    assert done.status == "succeeded", done.error_message
    assert done.timing_exclusive is True
    assert killed_at < done.timing["started_at"] < killed_at + 1.0 + 3.0  # TTL + slack
    assert waited(done.timing) > 1.0


def batches_run(worker: WorkerProcess) -> list[tuple[float, float]]:
    """When each run of a model in a recorded worker started and ended (warm-ups included)."""
    times = recorded(worker.log_path)
    return list(zip(times[::2], times[1::2], strict=False))


def test_a_worker_scoring_on_the_device_steps_aside_while_another_worker_times_it(
    start_worker: Any, queue: Any, alice: Any, make_task: Any, tmp_path: Path
) -> None:
    # About 70 batches of 65 ms to score (4.6 s: long enough for the other worker to reach its
    # timing on a busy machine), within an 11 s limit that the 8 s timing beside it would break
    # if waiting for it counted as the model's time.
    scored = make_task(slug="scored", time_limit_s=11, arrays=digits_like(n=1120))
    timed = make_task(slug="timed", timing={"min_time_s": 8, "max_time_s": 8, "passes": 2})
    records = {
        name: start_worker(name, record_batches=True, **TTL) for name in ("share-a", "share-b")
    }
    workers = list(records.values())
    wait_for("both workers online", lambda: len(online_workers(queue)) == 2, 60, workers)

    scoring = submit(alice, scored, slow_classifier(20_000))
    wait_for("a worker to score", lambda: queue.connection.zcard(scorers_key(KEY)), 60, workers)
    scorer = row(scoring).worker_name
    time.sleep(0.5)  # a few batches in
    timing = submit(alice, timed, fast_model(3))
    wait_for("both final", lambda: final(scoring) and final(timing), 120, workers)
    done = [row(scoring), row(timing)]

    assert [d.status for d in done] == ["succeeded"] * 2, [d.error_message for d in done]
    assert done[1].worker_name != scorer and done[1].timing_exclusive is True
    window = (done[1].timing["started_at"], done[1].timing["finished_at"])
    began = done[0].started_at.timestamp()  # type: ignore[union-attr]
    batches = [b for b in batches_run(records[scorer]) if b[0] >= began]  # this job's runs only
    overlapping = [b for b in batches if b[0] < window[1] and b[1] > window[0]]
    assert overlapping == []  # no batch of the scorer ran while the other worker timed
    assert any(end <= window[0] for _, end in batches)  # it scored before the timing
    assert any(start >= window[1] for start, _ in batches)  # and after it
    assert done[0].timing["scoring_wait_s"] >= 8.0  # it waited, and the limit did not count it


def test_a_worker_killed_while_scoring_holds_a_timing_no_longer_than_the_ttl(
    start_worker: Any, queue: Any, alice: Any, make_task: Any
) -> None:
    scored = make_task(slug="scored", time_limit_s=300, arrays=digits_like(n=16))
    quick = make_task(slug="quick", timing={"min_time_s": 0.2, "lock_wait_s": 60})
    workers = {name: start_worker(name, **TTL) for name in ("kill-a", "kill-b")}
    everyone = [*workers.values()]
    wait_for("both workers online", lambda: len(online_workers(queue)) == 2, 60, everyone)

    scoring = submit(alice, scored, slow_classifier(10_000_000))  # one batch of half a minute
    wait_for("a worker to score", lambda: queue.connection.zcard(scorers_key(KEY)), 60, everyone)
    waiting = submit(alice, quick, fast_model(4))
    wait_for("the other worker to take the lock", lambda: queue.connection.exists(KEY), 60)
    time.sleep(1.5)  # past the TTL: the timer is held by the live scorer's batch in flight
    assert queue.connection.zcard(scorers_key(KEY)) == 1

    workers[row(scoring).worker_name].kill()  # kill -9, model process and all: nothing withdrawn
    killed_at = time.time()

    done = wait_for("the timing to finish", lambda: final(waiting), 60, everyone)
    assert done.status == "succeeded", done.error_message
    assert done.timing_exclusive is True
    assert killed_at < done.timing["started_at"] < killed_at + 1.0 + 3.0  # TTL + slack
    assert done.timing["lock_wait_s"] > 1.5
