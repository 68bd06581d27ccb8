"""How the benchmarks time a call: wall-clock seconds by ``time.perf_counter``, one helper for all
of them (they each had a copy). Imports nothing heavy, so a benchmark that needs no onnxruntime
(``fair_order``) can use it as well as those that do."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def seconds(fn: Callable[[], Any]) -> float:
    """Wall-clock seconds of one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median milliseconds of ``repeats`` calls of ``fn``, after one call not counted: the first
    pays for set-up (a connection, a prepared statement, a cold cache) that the rest do not."""
    fn()
    return round(statistics.median(seconds(fn) for _ in range(repeats)) * 1000, 2)
