"""The timing protocol's own figures: repeatability, interference, overhead (issue 11).

- repeatability: the digits logistic-regression baseline timed ``--repeats`` times, each with a
  fresh session and the default protocol (>= 1 s, >= 64 batches, 5 passes), on this host; the
  figure is the spread of the p50s, (max - min) / median, and their relative IQR.
- interference: the same model timed while a second process evaluates the demo's 3x3 conv depth
  model on the same host, over and over: a scoring stretch (its dataset's batches) then a timing
  phase of its own. With the lock both timing phases take the host's CPU timing lock in Redis
  and the neighbour's scoring gives way to a timing between batches (evaluation/device_lock.py,
  as a worker's does); without it neither does. The figure is the median p50 over rounds
  relative to the idle p50.
- overhead: the protocol's timed passes (wall time, lock and conditions excluded) against a bare
  ``session.run`` loop over the same number of batches on the same session, alternately; the
  median ratio over rounds.

Run: ``python -m benchmarks.timing_bench`` (needs REDIS_URL or the embedded Redis).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import numpy as np

from benchmarks.runner_overhead import Workload, workloads
from evaluation.device_lock import ScoringTurn, device_lock, device_lock_key
from evaluation.runner import DeviceConfig, create_session, time_model
from evaluation.timing import ScoringGate, TimingHooks, TimingProtocol, no_lock, scoring_alone

PROTOCOL = TimingProtocol()  # the defaults: >= 1 s, >= 64 batches, <= 10 s, 5 passes


def _first_batch(work: Workload) -> np.ndarray:
    return np.ascontiguousarray(
        work.data.inputs[: work.spec.batch_size].astype(work.spec.input_dtype)
    )


def _connection() -> Any:
    import django_rq
    from django.conf import settings

    return django_rq.get_connection(settings.EVALUATION_QUEUE)


def _lock(with_lock: bool) -> Callable[[], AbstractContextManager[bool]]:
    if not with_lock:
        return no_lock
    connection, key = _connection(), device_lock_key(gpu_uuid=None)
    return lambda: device_lock(connection, key, wait_s=60, ttl_s=5)


def _scoring(with_lock: bool) -> AbstractContextManager[ScoringGate]:
    if not with_lock:
        return scoring_alone()
    return ScoringTurn(_connection(), device_lock_key(gpu_uuid=None), ttl_s=5)


def time_once(work: Workload, device: DeviceConfig, with_lock: bool = False) -> Any:
    spec = replace(work.spec, timing=PROTOCOL)
    session = create_session(work.model, device)
    return time_model(session, _first_batch(work), spec, device, TimingHooks(lock=_lock(with_lock)))


def repeatability(work: Workload, device: DeviceConfig, repeats: int) -> dict[str, Any]:
    timings = [time_once(work, device) for _ in range(repeats)]
    p50s = [t.p50_ms for t in timings]
    q25, q50, q75 = np.percentile(p50s, [25, 50, 75])
    return {
        "p50s_us": [round(p * 1000, 2) for p in p50s],
        "range": (max(p50s) - min(p50s)) / q50,
        "iqr": (q75 - q25) / q50,
        "unstable": sum(t.unstable for t in timings),
        "batches": statistics.median(t.batches for t in timings),
    }


def _neighbour(with_lock: bool, stop: Any) -> None:
    """A second worker: evaluates the heavy conv model again and again until told to stop."""
    import django

    django.setup()
    heavy = workloads()[1]
    device = DeviceConfig(intra_op_threads=1, warmup_runs=1)
    session = create_session(heavy.model, device)
    name, out = session.get_inputs()[0].name, [session.get_outputs()[0].name]
    inputs = heavy.data.inputs.astype("float32")
    size = heavy.spec.batch_size
    batches = [inputs[i : i + size] for i in range(0, len(inputs) - size + 1, size)]
    spec_timing = TimingProtocol(min_time_s=2.0, min_batches=8, passes=2)
    spec = replace(heavy.spec, timing=spec_timing)
    while not stop.is_set():
        with _scoring(with_lock) as gate:  # scoring: gives way to a timing, as a worker's does
            for batch in batches:
                if gate.due():
                    gate.give_way(60)
                session.run(out, {name: batch})
        time_model(session, batches[0], spec, device, TimingHooks(lock=_lock(with_lock)))


def interference(
    work: Workload, device: DeviceConfig, rounds: int, with_lock: bool
) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    neighbour = ctx.Process(target=_neighbour, args=(with_lock, stop), daemon=True)
    neighbour.start()
    try:
        time.sleep(8)  # let it start and reach its loop
        timings = [time_once(work, device, with_lock) for _ in range(rounds)]
    finally:
        stop.set()
        neighbour.join(60)
        if neighbour.is_alive():
            neighbour.kill()
            neighbour.join()
    return {
        "p50_ms": statistics.median(t.p50_ms for t in timings),
        "unstable": sum(t.unstable for t in timings),
        "exclusive": sum(t.exclusive for t in timings),
        "waited_s": statistics.median(t.lock_wait_s for t in timings),
    }


def overhead(work: Workload, device: DeviceConfig, rounds: int) -> dict[str, Any]:
    session = create_session(work.model, device)
    batch = _first_batch(work)
    name, out = session.get_inputs()[0].name, [session.get_outputs()[0].name]
    spec = replace(work.spec, timing=PROTOCOL)
    ratios, means = [], []
    for _ in range(rounds):
        timing = time_model(session, batch, spec, device, TimingHooks())
        feed = {name: batch}
        start = time.perf_counter()
        for _ in range(timing.batches):
            session.run(out, feed)
        bare = time.perf_counter() - start
        ratios.append(timing.duration_s / bare)
        means.append(timing.mean_ms / (1000 * bare / timing.batches))
    return {
        "ratio": statistics.median(ratios),
        "mean_vs_bare": statistics.median(means),
        "batches": timing.batches,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per session")
    args = parser.parse_args(argv)
    device = DeviceConfig(intra_op_threads=args.threads, warmup_runs=2)
    work = workloads()[0]
    load = {"start": os.getloadavg()[0]}  # other processes on the host move every figure
    rep = repeatability(work, device, args.repeats)
    load["repeatability"] = os.getloadavg()[0]
    idle = statistics.median(time_once(work, device).p50_ms for _ in range(args.rounds))
    load["idle"] = os.getloadavg()[0]
    locked = interference(work, device, args.rounds, with_lock=True)
    load["with the lock"] = os.getloadavg()[0]
    unlocked = interference(work, device, args.rounds, with_lock=False)
    load["without the lock"] = os.getloadavg()[0]
    over = overhead(work, device, args.rounds)
    print(f"workload: {work.name}; intra-op threads {args.threads}\n")
    print("| measure | figure | target |")
    print("|---|---|---|")
    print(
        f"| repeatability: p50 over {args.repeats} timings, (max-min)/median "
        f"| {rep['range'] * 100:.1f} % (IQR {rep['iqr'] * 100:.1f} %, "
        f"{rep['unstable']} flagged unstable, ~{rep['batches']:,.0f} batches each) | <= 3 % |"
    )
    for label, row in (("with the lock", locked), ("without the lock", unlocked)):
        print(
            f"| interference {label}: p50 / idle p50 ({idle * 1000:.2f} µs) "
            f"| {row['p50_ms'] / idle:.3f}× ({row['unstable']}/{args.rounds} unstable, "
            f"{row['exclusive']}/{args.rounds} exclusive, median wait {row['waited_s']:.1f} s) "
            f"| <= 1.05× with the lock |"
        )
    print(
        f"| overhead: timed passes / bare loop, {over['batches']:,} batches "
        f"| {over['ratio']:.3f}× (reported mean / bare mean {over['mean_vs_bare']:.3f}×) "
        f"| <= 1.03× |"
    )
    print(f"\np50s (µs): {rep['p50s_us']}")
    print("1-minute load average after each part:", {k: round(v, 2) for k, v in load.items()})
    return {"repeatability": rep, "idle": idle, "locked": locked, "unlocked": unlocked}


if __name__ == "__main__":
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    main()
