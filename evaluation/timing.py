"""The timing protocol: how long one batch of a model takes, measured so the figure can be trusted.

Pure (no Django, no Redis, no onnxruntime): the runner hands in a callable that runs one batch and
returns its seconds, a lock to hold while timing, and a callable that reads the device's
conditions; tests hand in fakes for the first two through the same seams.

The protocol, MLPerf-style: the timing phase runs at least ``min_time_s`` and at least
``min_batches`` batches in all (so a model that takes microseconds is timed over thousands of
batches), never more than ``max_time_s`` (a slow model stops early, with at least one batch per
pass), split evenly over ``passes`` passes. Then, while the p50's 95 % confidence interval (by
order statistics) is wider than ``precision`` of it either side, it times another round of as
many passes as long, until the cap: a steady model is done at the minimum, a noisy one is timed
until its p50 is known (``precision`` 0: one round). It reports percentiles and the mean over
every timed batch, the precision reached, and the spread: the relative interquartile range of
the pass medians. One slow batch moves the p99, not the pass medians; a stretch of interference
that spans passes moves the spread, and a spread above ``unstable_spread`` marks the result
unstable.

A batch shorter than ``GROUP_MIN_S`` (a model of microseconds) is timed in groups: the runner
runs ``k`` batches back to back between two clock reads, ``k`` chosen so a group lasts at least
that long, and each group counts as ``k`` batches of its mean time. Timed one by one, reading the
clock and the loop around it would be a visible share of such a batch; in groups they are spread
over ``k`` runs, the same loop a bare onnxruntime benchmark runs. The percentiles of such a model
are of the groups' means.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

import numpy as np

RunBatch = Callable[[], float]  # runs one batch, returns the seconds it took
# k -> a callable that runs k batches back to back and returns the seconds they took together
RunGroup = Callable[[int], Callable[[], float]]
Clock = Callable[[], float]
Observe = Callable[[], dict[str, Any]]
# Entered around the timing phase; yields True when the device is held exclusively.
TimingLock = Callable[[], AbstractContextManager[bool]]
# The timed batches kept for the submission page's chart; the statistics use all of them.
KEPT_BATCHES = 500
GROUP_MIN_S = 50e-6  # batches shorter than this are timed in groups lasting at least this long
MAX_GROUP = 1000
GROUP_PROBES = 5  # batches timed one by one to choose the group size


@dataclass(frozen=True)
class TimingProtocol:
    """How a task's models are timed. Every field may be set per task (Task.timing)."""

    min_time_s: float = 0.25
    min_batches: int = 64
    max_time_s: float = 10.0
    passes: int = 5
    unstable_spread: float = 0.05
    lock_wait_s: float = 60.0
    # Where a device class times each model in several sessions (DeviceClass.timing_sessions):
    # a spread of the sessions' p50s above this marks the result unstable too.
    unstable_session_spread: float = 0.05
    # Time further rounds of passes until the p50's 95 % confidence interval is within this
    # share of it either side (0: one round).
    precision: float = 0.01

    @classmethod
    def from_config(
        cls, config: dict[str, Any], base: TimingProtocol | None = None
    ) -> TimingProtocol:
        """``base`` with the keys of ``config`` replaced; ValueError says what is wrong."""
        unknown = sorted(set(config) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown timing setting(s): {', '.join(unknown)}")
        values = asdict(base or cls())
        for key, value in config.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"timing setting {key} must be a number, not {value!r}")
            values[key] = int(value) if key in ("min_batches", "passes") else float(value)
            if key in ("min_batches", "passes") and value != values[key]:
                raise ValueError(f"timing setting {key} must be a whole number")
        protocol = cls(**values)
        protocol.check()
        return protocol

    def check(self) -> None:
        if self.passes < 1 or self.min_batches < 1:
            raise ValueError("timing needs at least one pass and one batch")
        if not 0 <= self.min_time_s <= self.max_time_s:
            raise ValueError("timing min_time_s must be between 0 and max_time_s")
        if self.max_time_s <= 0 or self.unstable_spread <= 0 or self.lock_wait_s < 0:
            raise ValueError("timing max_time_s and unstable_spread must be positive")
        if self.unstable_session_spread <= 0:
            raise ValueError("timing unstable_session_spread must be positive")
        if not 0 <= self.precision < 1:
            raise ValueError("timing precision must be at least 0 and below 1")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """The protocol in words, from its own settings, so that what a task page promises is
        what ``time_passes`` does: the minimums are for the whole phase, split over the passes."""
        until = (
            f", repeated until the median's 95 % confidence interval is within "
            f"±{self.precision * 100:g} % of it"
            if self.precision
            else ""
        )
        return (
            f"at least {self.min_time_s:g} s and {self.min_batches:,} batches in all, split evenly "
            f"over {self.passes} passes{until} (at most {self.max_time_s:g} s), after scoring; "
            "latency per batch is the median of every timed batch; a spread of the pass medians "
            f"above {self.unstable_spread * 100:g} % is marked unstable"
        )


@dataclass
class Timing:
    """What the timing phase measured, in milliseconds per batch."""

    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    spread: float  # relative IQR of the pass medians (0.02 = 2 %)
    unstable: bool
    exclusive: bool  # the device was held exclusively (False: the lock wait ran out)
    pass_medians_ms: list[float]
    batches_per_pass: list[int]
    duration_s: float
    lock_wait_s: float
    started_at: float  # Unix time the timed passes began and ended (the lock was held between)
    finished_at: float
    protocol: TimingProtocol
    conditions: dict[str, Any] = field(default_factory=dict)
    kept_batches_ms: list[float] = field(default_factory=list)
    batches_per_sample: int = 1  # > 1: timed in groups of this many batches (GROUP_MIN_S)
    # Several sessions (``combine_sessions``): each one's p50, and their (max - min) / median.
    session_p50s_ms: list[float] = field(default_factory=list)
    session_spread: float | None = None
    # The device's energy over the timed passes, per batch, and its average power: from the
    # energy counter read by ``observe`` at their start and end; None where there is none.
    energy_per_batch_j: float | None = None
    average_power_w: float | None = None
    # Half the width of the p50's 95 % confidence interval, relative to it (0.004 = ±0.4 %);
    # None with too few samples to tell.
    precision: float | None = None
    # How long the phase held the device's lock (its warm-up, group sizing, passes and
    # readings), summed over sessions: the device time it took from every other worker.
    held_s: float = 0.0

    @property
    def batches(self) -> int:
        return sum(self.batches_per_pass)

    @property
    def sessions(self) -> int:
        return max(1, len(self.session_p50s_ms))

    def summary(self) -> dict[str, Any]:
        """The details stored beside the headline fields (Submission.timing)."""
        return {
            "protocol": self.protocol.as_dict(),
            "batches": self.batches,
            "batches_per_pass": self.batches_per_pass,
            "batches_per_sample": self.batches_per_sample,
            "pass_medians_ms": self.pass_medians_ms,
            "duration_s": self.duration_s,
            "exclusive": self.exclusive,
            "lock_wait_s": self.lock_wait_s,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "conditions": self.conditions,
            "session_p50s_ms": self.session_p50s_ms,
            "session_spread": self.session_spread,
            "energy_per_batch_j": self.energy_per_batch_j,
            "average_power_w": self.average_power_w,
            "precision": self.precision,
            "held_s": self.held_s,
        }


def _energy(conditions: dict[str, Any], batches: int, duration_s: float) -> dict[str, Any]:
    """Joules per batch and average watts from the energy counter (millijoules, ``energy_mj``)
    that ``observe`` read at the start and the end of the timed passes; {} without both."""
    start = (conditions.get("start") or {}).get("energy_mj")
    end = (conditions.get("end") or {}).get("energy_mj")
    if not isinstance(start, int | float) or not isinstance(end, int | float) or end < start:
        return {}
    joules = (end - start) / 1000.0
    return {
        "energy_per_batch_j": joules / batches if batches else None,
        "average_power_w": joules / duration_s if duration_s > 0 else None,
    }


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.median(known)) if len(known) == len(values) and known else None


def combine_sessions(timings: list[Timing]) -> Timing:
    """One result from the timings of the same model in several fresh sessions (each in its own
    process, with its own warm-up): every figure is the median of the sessions' figures, the
    between-session spread is (max - min) / median of their p50s, and a spread above the
    protocol's ``unstable_session_spread`` marks the result unstable. The chart's batches are
    those of the session whose p50 is the median's (the lower middle one for an even count)."""
    if len(timings) == 1:
        return timings[0]
    protocol = timings[0].protocol
    p50s = [t.p50_ms for t in timings]
    middle = sorted(timings, key=lambda t: t.p50_ms)[(len(timings) - 1) // 2]
    p50 = float(np.median(p50s))
    session_spread = (max(p50s) - min(p50s)) / p50 if p50 > 0 else 0.0
    spread = float(np.median([t.spread for t in timings]))

    def median_of(name: str) -> float:
        return float(np.median([getattr(t, name) for t in timings]))

    return Timing(
        p50_ms=p50,
        p90_ms=median_of("p90_ms"),
        p95_ms=median_of("p95_ms"),
        p99_ms=median_of("p99_ms"),
        mean_ms=median_of("mean_ms"),
        spread=spread,
        unstable=spread > protocol.unstable_spread
        or session_spread > protocol.unstable_session_spread,
        exclusive=all(t.exclusive for t in timings),
        pass_medians_ms=[m for t in timings for m in t.pass_medians_ms],
        batches_per_pass=[b for t in timings for b in t.batches_per_pass],
        duration_s=sum(t.duration_s for t in timings),
        lock_wait_s=sum(t.lock_wait_s for t in timings),
        started_at=timings[0].started_at,
        finished_at=timings[-1].finished_at,
        protocol=protocol,
        conditions={**middle.conditions, "sessions": [t.conditions for t in timings]},
        kept_batches_ms=middle.kept_batches_ms,
        batches_per_sample=middle.batches_per_sample,
        session_p50s_ms=p50s,
        session_spread=session_spread,
        energy_per_batch_j=_median([t.energy_per_batch_j for t in timings]),
        average_power_w=_median([t.average_power_w for t in timings]),
        precision=_median([t.precision for t in timings]),
        held_s=sum(t.held_s for t in timings),
    )


def relative_iqr(values: list[float]) -> float:
    """(q75 - q25) / median; 0 for a single value or a zero median."""
    q25, q50, q75 = np.percentile(values, [25, 50, 75])
    return float((q75 - q25) / q50) if q50 > 0 else 0.0


def _one_pass(
    run: RunBatch, group: int, min_batches: int, min_s: float, max_s: float, clock: Clock
) -> list[float]:
    """Samples (``run``: ``group`` batches each) until both minimums are met, or the cap is
    reached (at least one sample); the seconds per batch of each."""
    times: list[float] = []
    append = times.append
    samples = math.ceil(min_batches / group)
    start = clock()
    while True:
        append(run() / group)
        elapsed = clock() - start
        if elapsed >= max_s or (len(times) >= samples and elapsed >= min_s):
            return times


def median_precision(values: list[float] | np.ndarray) -> float | None:
    """Half the width of the median's 95 % confidence interval by order statistics (the ranks
    n/2 ± 1.96·√n/2), relative to the median; None below 10 values."""
    n = len(values)
    if n < 10:
        return None
    ordered = np.sort(np.asarray(values))
    half = 1.96 * math.sqrt(n) / 2
    low, high = (
        ordered[max(0, math.floor(n / 2 - half))],
        ordered[min(n - 1, math.ceil(n / 2 + half))],
    )
    median = float(np.median(ordered))
    return float((high - low) / 2 / median) if median > 0 else None


def time_passes(
    run: RunBatch,
    protocol: TimingProtocol,
    clock: Clock = time.perf_counter,
    group: int = 1,
    rounds_within_s: float = math.inf,
) -> list[list[float]]:
    """Seconds per batch of each sample (``run``: ``group`` batches), one list per pass: one
    round of ``passes`` passes, then more rounds while the p50 is less precise than the
    protocol asks and another round fits under ``max_time_s`` and ``rounds_within_s``."""
    per_pass = math.ceil(protocol.min_batches / protocol.passes)
    min_s = protocol.min_time_s / protocol.passes
    max_s = protocol.max_time_s / protocol.passes
    start = clock()
    passes = [_one_pass(run, group, per_pass, min_s, max_s, clock) for _ in range(protocol.passes)]
    first_round = clock() - start
    while protocol.precision > 0:
        reached = median_precision(np.concatenate(passes))
        if reached is not None and reached <= protocol.precision:
            break
        if clock() - start + first_round > min(protocol.max_time_s, rounds_within_s):
            break
        passes += [
            _one_pass(run, group, per_pass, min_s, max_s, clock) for _ in range(protocol.passes)
        ]
    return passes


def group_size(run_batch: RunBatch) -> int:
    """How many batches to time together: enough for a group to last ``GROUP_MIN_S``, judged
    by the median of ``GROUP_PROBES`` batches timed one by one; 1 for any batch that long."""
    probe = float(np.median([run_batch() for _ in range(GROUP_PROBES)]))
    if probe >= GROUP_MIN_S:
        return 1
    return min(MAX_GROUP, math.ceil(GROUP_MIN_S / probe - 1e-9)) if probe > 0 else MAX_GROUP


def _kept(ms: np.ndarray) -> list[float]:
    """At most KEPT_BATCHES evenly spaced batch times, to nanosecond precision."""
    step = max(1, math.ceil(len(ms) / KEPT_BATCHES))
    return [round(float(v), 6) for v in ms[::step]]


def summarise(
    passes: list[list[float]], protocol: TimingProtocol, group: int = 1, **extra: Any
) -> Timing:
    """Statistics of the timed passes (seconds per batch in, milliseconds out); each value
    stands for ``group`` batches."""
    ms = np.concatenate([np.asarray(p) for p in passes]) * 1000.0
    medians = [float(np.median(p)) * 1000.0 for p in passes]
    extra.setdefault("precision", median_precision(ms))
    p50, p90, p95, p99 = (float(v) for v in np.percentile(ms, [50, 90, 95, 99]))
    spread = relative_iqr(medians)
    return Timing(
        p50_ms=p50,
        p90_ms=p90,
        p95_ms=p95,
        p99_ms=p99,
        mean_ms=float(ms.mean()),
        spread=spread,
        unstable=spread > protocol.unstable_spread,
        pass_medians_ms=medians,
        batches_per_pass=[len(p) * group for p in passes],
        protocol=protocol,
        kept_batches_ms=_kept(ms),
        batches_per_sample=group,
        **extra,
    )


@contextlib.contextmanager
def no_lock() -> Iterator[bool]:
    """For callers without a shared device to guard (the pure runner's default)."""
    yield False


class ScoringGate(Protocol):
    """How a scoring phase gives the device to another worker's timing, asked between batches."""

    def due(self) -> bool:
        """A timing holds or waits for the device: give way before the next batch (cheap)."""
        ...

    def give_way(self, limit_s: float) -> float:
        """Wait until no timing holds or waits for the device, at most ``limit_s``; the seconds
        waited."""
        ...


class Alone:
    """Nobody to give way to."""

    def due(self) -> bool:
        return False

    def give_way(self, limit_s: float) -> float:
        return 0.0


@contextlib.contextmanager
def scoring_alone() -> Iterator[ScoringGate]:
    """For callers without a shared device: nobody to give way to."""
    yield Alone()


# Entered around the scoring phase; yields what the scoring loop asks between batches.
ScoringTurn = Callable[[], AbstractContextManager[ScoringGate]]


@dataclass(frozen=True)
class TimingHooks:
    """What the caller (the job) lends the timing phase: the device's lock, a reading of its
    conditions while timed, and facts about it that do not change (driver, versions, class);
    and to the scoring phase before it, the turn in which it gives way to other workers' timings
    on the same device."""

    lock: TimingLock = no_lock
    observe: Observe = dict
    facts: dict[str, Any] = field(default_factory=dict)
    scoring: ScoringTurn = scoring_alone


def measure(
    run_batch: RunBatch,
    protocol: TimingProtocol,
    *,
    lock: TimingLock = no_lock,
    observe: Observe = dict,
    warm_up: Callable[[], None] = lambda: None,
    clock: Clock = time.perf_counter,
    run_group: RunGroup | None = None,
    rounds_within_s: float = math.inf,
) -> Timing:
    """The timing phase: take the device's lock, warm up, time the passes, release.

    ``observe`` reads the conditions (clocks, temperature) at the start and the end of the timed
    passes, inside the lock, so they describe the device as it was while it was timed. With
    ``run_group``, batches shorter than ``GROUP_MIN_S`` are timed in groups (``group_size``).
    ``rounds_within_s``: no further round of passes past this many seconds of them (a phase
    bounded by a time limit of its own)."""
    asked = time.monotonic()
    with lock() as exclusive:
        acquired = time.monotonic()
        waited = acquired - asked
        warm_up()
        group = group_size(run_batch) if run_group is not None else 1
        run = run_group(group) if run_group is not None and group > 1 else run_batch
        before = observe()
        started = time.time()
        began = clock()
        passes = time_passes(run, protocol, clock, group, rounds_within_s)
        duration = clock() - began
        finished = time.time()
        after = observe()
    held = time.monotonic() - acquired
    conditions = {"start": before, "end": after}
    return summarise(
        passes,
        protocol,
        group,
        exclusive=bool(exclusive),
        duration_s=duration,
        lock_wait_s=waited,
        started_at=started,
        finished_at=finished,
        conditions=conditions,
        held_s=held,
        **_energy(conditions, sum(len(p) for p in passes) * group, duration),
    )
