"""The timing protocol (evaluation/timing.py): minimums, caps, passes, spread and the unstable flag.

Batch times are injected through the protocol's seams (a run callable and a clock that advances
by what the callable reports), so these tests are exact and never sleep; one test times a real
tiny model with real onnxruntime.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import evaluation.runner as runner_module
from evaluation.runner import Dataset, DeviceConfig, evaluate
from evaluation.timing import (
    TimingHooks,
    TimingProtocol,
    combine_sessions,
    measure,
    median_precision,
    relative_iqr,
)
from tests.builders import DIGITS_SPEC, digits_like, linear_classifier


class FakeDevice:
    """Batches that take ``durations(i)`` seconds of a clock that only they advance."""

    def __init__(self, durations: object) -> None:
        self.durations = durations
        self.now = 0.0
        self.count = 0

    def clock(self) -> float:
        return self.now

    def run_batch(self) -> float:
        seconds = self.durations(self.count)  # type: ignore[operator]
        self.count += 1
        self.now += seconds
        return seconds


# One round of passes: these tests are about the passes (the rounds have tests of their own).
PROTOCOL = TimingProtocol(min_time_s=0.01, min_batches=64, max_time_s=1.0, passes=5, precision=0)


def test_a_tiny_model_is_timed_over_thousands_of_batches_to_meet_the_minimum_time() -> None:
    device = FakeDevice(lambda i: 1e-6)  # 1 µs a batch

    timing = measure(device.run_batch, PROTOCOL, clock=device.clock)

    # 0.01 s in 5 passes of at least 2 ms each: 2,000 batches a pass, far beyond 64 in all.
    assert all(2000 <= n <= 2001 for n in timing.batches_per_pass)  # 2001: float rounding
    assert timing.p50_ms == pytest.approx(0.001)  # a real value, not "0.01 ms" nor zero
    assert timing.mean_ms == pytest.approx(0.001)
    assert timing.spread == 0.0 and not timing.unstable
    assert len(timing.kept_batches_ms) <= 500


def grouped(device: FakeDevice) -> Any:
    """The runner's ``timed_group`` for a fake: k batches back to back, their seconds."""

    def group(k: int) -> Any:
        calls.append(k)
        return lambda: sum(device.run_batch() for _ in range(k))

    calls: list[int] = []
    group.calls = calls  # type: ignore[attr-defined]
    return group


def test_a_batch_of_microseconds_is_timed_in_groups_that_each_last_the_group_minimum() -> None:
    device = FakeDevice(lambda i: 1e-6)
    run_group = grouped(device)

    timing = measure(device.run_batch, PROTOCOL, clock=device.clock, run_group=run_group)

    assert run_group.calls == [50] and timing.batches_per_sample == 50  # 50 µs / 1 µs
    assert all(n % 50 == 0 and n >= 2000 for n in timing.batches_per_pass)  # still >= 2 ms
    assert timing.p50_ms == pytest.approx(0.001) and timing.mean_ms == pytest.approx(0.001)
    assert timing.summary()["batches_per_sample"] == 50


def test_a_batch_as_long_as_the_group_minimum_is_timed_alone() -> None:
    device = FakeDevice(lambda i: 0.001)
    run_group = grouped(device)

    timing = measure(device.run_batch, PROTOCOL, clock=device.clock, run_group=run_group)

    assert run_group.calls == [] and timing.batches_per_sample == 1
    assert timing.batches == 65  # 13 a pass, as without groups


def test_a_slow_model_meets_the_minimum_batch_count_unless_the_cap_stops_it() -> None:
    quick = FakeDevice(lambda i: 0.001)
    assert measure(quick.run_batch, PROTOCOL, clock=quick.clock).batches == 65  # 13 a pass

    slow = FakeDevice(lambda i: 0.5)  # the cap is 1 s in all: 0.2 s a pass, one batch each
    timing = measure(slow.run_batch, PROTOCOL, clock=slow.clock)
    assert timing.batches_per_pass == [1] * 5
    assert timing.p50_ms == pytest.approx(500.0)


def test_a_single_slow_batch_shows_in_the_tail_but_leaves_the_result_stable() -> None:
    device = FakeDevice(lambda i: 0.050 if i == 30 else 0.001)  # one batch of 65, in pass 3

    timing = measure(device.run_batch, PROTOCOL, clock=device.clock)

    assert not timing.unstable and timing.spread == 0.0
    assert timing.p50_ms == pytest.approx(1.0)
    assert max(timing.kept_batches_ms) == pytest.approx(50.0)
    assert timing.p99_ms > 10 * timing.p95_ms


def test_a_slow_stretch_across_passes_trips_the_unstable_flag() -> None:
    # 13 batches a pass (64 over 5); batches 13..38 take twice as long: another process took the
    # device through passes 2 and 3.
    device = FakeDevice(lambda i: 0.002 if 13 <= i < 39 else 0.001)

    timing = measure(device.run_batch, PROTOCOL, clock=device.clock)

    assert timing.pass_medians_ms == pytest.approx([1.0, 2.0, 2.0, 1.0, 1.0])
    assert timing.spread == pytest.approx(1.0)  # (q75 2.0 - q25 1.0) / median 1.0
    assert timing.unstable


def test_the_unstable_threshold_is_the_protocols() -> None:
    medians = [1.00, 1.00, 1.03, 1.06, 1.06]
    assert relative_iqr(medians) == pytest.approx(0.06 / 1.03)
    durations = [m / 1000 for m in medians]
    lenient = replace(PROTOCOL, min_batches=5, min_time_s=0, unstable_spread=0.10)
    strict = replace(lenient, unstable_spread=0.05)
    for protocol, unstable in ((lenient, False), (strict, True)):
        device = FakeDevice(lambda i: durations[i])
        assert measure(device.run_batch, protocol, clock=device.clock).unstable is unstable


def test_timing_runs_inside_the_lock_and_records_whether_it_was_exclusive() -> None:
    events: list[str] = []

    def lock_that_ran_out() -> contextlib.AbstractContextManager[bool]:
        @contextlib.contextmanager
        def held() -> Iterator[bool]:
            events.append("enter")
            yield False
            events.append("exit")

        return held()

    device = FakeDevice(lambda i: events.append("batch") or 0.001)
    timing = measure(
        device.run_batch,
        PROTOCOL,
        lock=lock_that_ran_out,
        observe=lambda: {"temperature_c": 60 + len(events)},
        warm_up=lambda: events.append("warm-up"),
        clock=device.clock,
    )

    assert events[:3] == ["enter", "warm-up", "batch"] and events[-1] == "exit"
    assert timing.exclusive is False
    assert timing.conditions["start"]["temperature_c"] == 62
    assert timing.conditions["end"]["temperature_c"] > 62
    assert timing.started_at <= timing.finished_at


def test_the_time_the_device_was_held_counts_the_warm_up_and_not_the_wait_and_adds_up() -> None:
    @contextlib.contextmanager
    def slow_to_take() -> Iterator[bool]:
        time.sleep(0.3)  # waiting for another worker: not the device's time taken
        yield True

    def timed() -> Any:
        device = FakeDevice(lambda i: 0.001)
        return measure(
            device.run_batch,
            PROTOCOL,
            lock=slow_to_take,
            warm_up=lambda: time.sleep(0.2),  # on the device, under the lock
            clock=device.clock,
        )

    one = timed()
    # held from the lock taken: the warm-up, not the 0.3 s wait (with it, held would be >= 0.5)
    assert 0.2 <= one.held_s < 0.5 and one.lock_wait_s >= 0.3
    assert one.summary()["held_s"] == one.held_s
    other = timed()
    both = combine_sessions([one, other])
    assert both.held_s == pytest.approx(one.held_s + other.held_s) and both.held_s >= 0.4


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"passes": 0}, "at least one pass"),
        ({"min_batches": 2.5}, "whole number"),
        ({"min_time_s": "1"}, "must be a number"),
        ({"min_time_s": 20, "max_time_s": 10}, "between 0 and max_time_s"),
        ({"warmup": 3}, "unknown timing setting(s): warmup"),
    ],
)
def test_a_bad_timing_setting_is_refused_with_what_is_wrong(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TimingProtocol.from_config(config)


def test_a_task_overrides_only_the_settings_it_names() -> None:
    base = TimingProtocol(min_time_s=2.0, passes=7)
    assert TimingProtocol.from_config({"passes": 3}, base) == replace(base, passes=3)


def test_a_real_tiny_model_has_a_real_sub_millisecond_latency() -> None:
    rng = np.random.default_rng(0)
    model = linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))
    spec = replace(DIGITS_SPEC, timing=TimingProtocol(min_time_s=0.05, min_batches=64))

    result = evaluate(model, Dataset.from_arrays(digits_like(n=32)), spec, DeviceConfig())

    assert 0 < result.latency_p50_ms < 1.0
    assert result.latency_p50_ms != round(result.latency_p50_ms, 2)  # precision kept
    assert result.timing["batches"] >= 64
    assert result.latency_p50_ms <= result.latency_p90_ms <= result.latency_p99_ms
    assert result.throughput == pytest.approx(16 * 1000 / result.latency_mean_ms)
    assert result.timing["batches_per_sample"] > 1  # microseconds a batch: timed in groups
    assert result.timing_exclusive is False  # the pure runner has no lock unless lent one
    assert result.timing["conditions"]["provider"] == "CPUExecutionProvider"


def test_waiting_for_the_lock_does_not_count_against_the_models_time_limit() -> None:
    @contextlib.contextmanager
    def busy_device() -> Iterator[bool]:
        time.sleep(1.5)  # another worker times for longer than this task's whole time limit
        yield True

    rng = np.random.default_rng(0)
    model = linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))
    spec = replace(DIGITS_SPEC, time_limit_s=1.0)

    result = evaluate(
        model,
        Dataset.from_arrays(digits_like(n=32)),
        spec,
        DeviceConfig(),
        hooks=TimingHooks(lock=busy_device),
    )

    assert result.timing_exclusive is True and result.timing["lock_wait_s"] >= 1.5


class Gate:
    """A scoring gate that is due at the given checks and waits ``wait_s`` (or its limit, if
    shorter) each time it gives way; it records every check and every limit it was given."""

    def __init__(self, due_at: set[int] | None = None, wait_s: float = 0.0) -> None:
        self.due_at = due_at
        self.wait_s = wait_s
        self.checks = 0
        self.limits: list[float] = []

    def due(self) -> bool:
        self.checks += 1
        return self.due_at is None or self.checks in self.due_at

    def give_way(self, limit_s: float) -> float:
        self.limits.append(limit_s)
        time.sleep(min(self.wait_s, limit_s))
        return min(self.wait_s, limit_s)


@pytest.fixture
def every_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint between every two batches (evaluation.runner.CHECK_EVERY_S), as for batches
    slower than its interval: the gate is then asked before every batch."""
    monkeypatch.setattr(runner_module, "CHECK_EVERY_S", 0.0)


def evaluate_with_gate(gate: Gate, time_limit_s: float, rows: int = 100) -> Any:
    rng = np.random.default_rng(0)
    model = linear_classifier(rng.normal(size=(64, 10)), rng.normal(size=10))
    spec = replace(
        DIGITS_SPEC,
        time_limit_s=time_limit_s,
        timing=TimingProtocol(min_time_s=0.05, min_batches=8, passes=2),
    )

    @contextlib.contextmanager
    def scoring() -> Iterator[Gate]:
        yield gate

    return evaluate(
        model,
        Dataset.from_arrays(digits_like(n=rows)),
        spec,
        DeviceConfig(),
        hooks=TimingHooks(scoring=scoring),
    )


def test_scoring_asks_whether_to_give_way_before_warming_up_and_between_batches(
    every_batch: None,
) -> None:
    gate = Gate(due_at=set())
    evaluate_with_gate(gate, time_limit_s=10, rows=100)  # 7 batches of 16
    assert gate.checks == 1 + 6  # and never while timing: the timing has the device


def test_giving_way_to_another_workers_timing_does_not_count_against_the_time_limit(
    every_batch: None,
) -> None:
    gate = Gate(due_at={3}, wait_s=5.0)  # a timing elsewhere outlasts this task's whole limit

    result = evaluate_with_gate(gate, time_limit_s=1.0)  # scored, not stopped by the watchdog

    assert result.samples_evaluated == 100
    assert gate.limits == [1.0]  # it waited the whole limit, and scored on after
    assert result.timing["scoring_wait_s"] == pytest.approx(1.0)


def test_scoring_gives_way_for_at_most_the_tasks_time_limit_in_all(every_batch: None) -> None:
    gate = Gate(due_at=None, wait_s=0.4)  # a timing wants the device at every batch

    result = evaluate_with_gate(gate, time_limit_s=1.0, rows=160)

    assert gate.limits == pytest.approx([1.0, 0.6, 0.2], abs=0.05)  # then it scores on
    assert result.timing["scoring_wait_s"] == pytest.approx(1.0)
    assert gate.checks == 3  # not asked again once the budget is spent


def _session(p50_s: float, spread: float = 0.0) -> Any:
    """A session's timing from a steady clock: every batch takes ``p50_s``, one pass
    ``spread`` slower than the others."""
    protocol = TimingProtocol(min_time_s=0, min_batches=5, passes=5)
    times = iter([p50_s] * 4 + [p50_s * (1 + spread)] * 1)
    durations = {"now": 0.0}

    def run() -> float:
        return next(times, p50_s)

    def clock() -> float:
        durations["now"] += 1.0
        return durations["now"]

    return measure(run, protocol, clock=clock)


def test_several_sessions_give_their_median_and_are_unstable_when_they_disagree() -> None:
    steady = combine_sessions([_session(1e-3), _session(1.02e-3), _session(0.99e-3)])
    assert steady.p50_ms == pytest.approx(1.0) and steady.sessions == 3
    assert steady.session_spread == pytest.approx(0.03)
    assert not steady.unstable  # within the default 5 %

    apart = combine_sessions([_session(1e-3), _session(1.25e-3), _session(1.2e-3)])
    assert apart.p50_ms == pytest.approx(1.2)
    assert apart.session_spread == pytest.approx(0.25 / 1.2)
    assert apart.unstable  # each session steady, the sessions 21 % apart
    assert apart.batches == 15 and len(apart.session_p50s_ms) == 3


def test_one_session_is_left_as_it_is() -> None:
    one = _session(1e-3)
    assert combine_sessions([one]) is one and one.sessions == 1 and one.session_spread is None


class _Device:
    """A model on a fake clock: each run advances the clock by its own time, drawn from
    ``times`` in turn."""

    def __init__(self, times: list[float]) -> None:
        self.now, self.times, self.runs = 0.0, times, 0

    def clock(self) -> float:
        return self.now

    def run(self) -> float:
        took = self.times[self.runs % len(self.times)]
        self.runs += 1
        self.now += took
        return took


def test_a_steady_model_is_timed_one_round_and_a_noisy_one_until_its_p50_is_known() -> None:
    protocol = TimingProtocol(min_time_s=0.1, min_batches=10, max_time_s=10.0, passes=5)
    steady = _Device([1e-3, 1.002e-3, 0.998e-3])
    timing = measure(steady.run, protocol, clock=steady.clock)
    assert len(timing.pass_medians_ms) == 5  # one round
    assert timing.precision is not None and timing.precision <= 0.01

    rng = np.random.default_rng(0)
    noisy = _Device(list(rng.lognormal(np.log(1e-3), 0.2, 10_000)))
    timing = measure(noisy.run, protocol, clock=noisy.clock)
    rounds = len(timing.pass_medians_ms) // 5
    assert rounds > 1 and len(timing.pass_medians_ms) == 5 * rounds
    assert timing.precision is not None and timing.precision <= 0.01
    assert timing.duration_s < protocol.max_time_s


def test_the_rounds_stop_at_the_cap_with_the_precision_reached_and_never_without_one() -> None:
    rng = np.random.default_rng(1)
    wild = _Device(list(rng.lognormal(np.log(1e-3), 2.0, 10_000)))
    capped = TimingProtocol(min_time_s=0.1, min_batches=10, max_time_s=0.5, passes=5)
    timing = measure(wild.run, capped, clock=wild.clock)
    assert timing.duration_s <= capped.max_time_s * 1.2  # a round only starts if it fits
    assert timing.precision is not None and timing.precision > 0.01  # stated, not met

    one_round = replace(capped, precision=0.0)
    again = _Device(list(rng.lognormal(np.log(1e-3), 2.0, 10_000)))
    assert len(measure(again.run, one_round, clock=again.clock).pass_medians_ms) == 5


def test_the_p50_precision_is_the_order_statistic_interval() -> None:
    assert median_precision([1.0] * 9) is None  # too few to tell
    assert median_precision([1.0] * 100) == 0.0
    values = list(range(1, 101))  # 1..100: ranks 40 and 61 (0-based), median 50.5
    assert median_precision(values) == pytest.approx((61 - 40) / 2 / 50.5, rel=0.05)
