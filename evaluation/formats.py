"""How a number reads, the same on every surface: the pages, the admin, the CSV's headers, the
API's display fields and the ``oep`` client all call these, so a latency or a score reads alike
wherever a participant meets it. Pure (no Django), so the client can import it.

One rule per quantity: its unit is chosen here once, and so is its number of significant digits.
A figure reads "—" when there is none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from evaluation.metrics import all_metrics

NONE = "—"

# Significant digits per quantity. A score keeps four so that boards ranked on small differences
# still tell entries apart; measured times and costs keep three, finer than their timing spread.
SCORE_DIGITS = 4
MEASURE_DIGITS = 3

# From here a time reads in ms: a value that rounds up to a whole millisecond at three
# significant digits reads as milliseconds, never as a thousand microseconds.
_MS_FROM = 0.9995
_SI = ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k"))
_BINARY = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def significant(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant digits, fixed-point with thousands separators: never an
    exponent (1.23e+03) and never a bare "1" beside a "0.972" (1 reads "1.000" at four digits)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:.{digits - 1}f}" if value == 0 else str(value)
    magnitude = math.floor(math.log10(abs(value)))
    rounded = round(value, digits - 1 - magnitude)
    places = max(0, digits - 1 - magnitude)
    # rounding can carry into the next power of ten (9.996 -> 10.00): one place fewer then
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > magnitude:
        places = max(0, places - 1)
    return f"{rounded:,.{places}f}"


def metric_label(key: str) -> str:
    """A metric's name for people, from the registry; an unknown key reads as itself."""
    metric = all_metrics().get(key)
    return metric.label if metric is not None else key


def score(value: float | None) -> str:
    """A score or any metric's value: four significant digits."""
    return NONE if value is None else significant(value, SCORE_DIGITS)


def metrics(values: Mapping[str, float], *, leave_out: str = "") -> dict[str, str]:
    """Every metric as label -> value in the registry's order (a JSON column does not keep the
    order it was given), without ``leave_out`` (the score's own metric, shown as the score)."""
    order = {key: n for n, key in enumerate(all_metrics())}
    keys = sorted(
        (k for k in values if k != leave_out), key=lambda k: (order.get(k, len(order)), k)
    )
    return {metric_label(k): score(values[k]) for k in keys}


def latency(ms: float | None) -> str:
    """A time per batch: microseconds below one millisecond (a tiny model's batch is not a
    string of zeros after the point), milliseconds from there; three significant digits either
    way."""
    if ms is None:
        return NONE
    if abs(ms) < _MS_FROM:
        return f"{significant(ms * 1000, MEASURE_DIGITS)} µs"
    return f"{significant(ms, MEASURE_DIGITS)} ms"


def latency_unit(ms_values: list[float]) -> tuple[str, float]:
    """The unit ``latency`` would choose for the largest of these, and ms' factor to it: a chart's
    axis uses one unit for all its ticks, the same one its text uses."""
    top = max((abs(v) for v in ms_values), default=0.0)
    return ("µs", 1000.0) if top < _MS_FROM else ("ms", 1.0)


def spread(fraction: float | None) -> str:
    """The spread across timing passes: "± 1.2 %"."""
    return "" if fraction is None else f"± {fraction * 100:.1f} %"


def energy(joules: float | None) -> str:
    """Energy per sample, three significant digits in the unit that keeps it at one or more:
    "225 mJ", "321 µJ"."""
    if joules is None:
        return NONE
    for factor, unit in ((1.0, "J"), (1e-3, "mJ"), (1e-6, "µJ")):
        if abs(joules) >= factor:
            return f"{significant(joules / factor, MEASURE_DIGITS)} {unit}"
    return f"{significant(joules * 1e9, MEASURE_DIGITS)} nJ"


def power(watts: float | None) -> str:
    """Average power: "182 W"."""
    return NONE if watts is None else f"{significant(watts, MEASURE_DIGITS)} W"


def relative(fraction: float | None) -> str:
    """A difference as a share: "25.7 %"."""
    return NONE if fraction is None else f"{fraction * 100:.1f} %"


def count(n: float | None) -> str:
    """Something counted, in full with thousands separators: 245,336 batches."""
    return NONE if n is None else f"{round(n):,}"


def si(n: float | None) -> str:
    """A large quantity in SI prefixes, three significant digits: 41.3 k, 1.23 M, 7.91 G."""
    if n is None:
        return NONE
    for size, prefix in _SI:
        if abs(n) >= size:
            return f"{significant(n / size, MEASURE_DIGITS)} {prefix}"
    return significant(n, MEASURE_DIGITS) if isinstance(n, float) else str(n)


def throughput(samples_per_s: float | None) -> str:
    """Samples per second, as ``si``: "3.69 M samples/s"."""
    return NONE if samples_per_s is None else f"{si(samples_per_s)} samples/s"


def size(n: int | None) -> str:
    """Bytes in binary units, three significant digits: 1.21 MiB."""
    if n is None:
        return NONE
    for unit_bytes, unit in _BINARY:
        if n >= unit_bytes:
            return f"{significant(n / unit_bytes, MEASURE_DIGITS)} {unit}"
    return f"{n} byte" if n == 1 else f"{n} bytes"


def duration(seconds: float | None) -> str:
    """A wait in the largest unit that keeps it readable: "40 s", "3 min", "1 h 20 min"."""
    if seconds is None:
        return NONE
    s = round(seconds)
    if s < 90:
        return f"{s} s"
    minutes = round(s / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60} min"
