"""Server-rendered SVG charts: pure geometry, no Django, so pages need no chart library or CDN.

Each function returns the numbers a template needs to draw the chart (a path, points, axis
labels) in a fixed viewBox that CSS scales to the page width.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

WIDTH = 640
HEIGHT = 220
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 76, 16, 12, 36


@dataclass(frozen=True)
class ChartPoint:
    x: float
    y: float
    label: str
    highlight: bool = False  # e.g. on the Pareto front
    clipped: bool = False  # above the axis's top: drawn on the top edge, marked
    text: str = ""  # written beside the point (a Pareto point's name)


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    path: str
    points: list[ChartPoint]
    y_ticks: list[tuple[float, str]]  # (y position, label)
    x_labels: list[tuple[float, str]]  # (x position, label): the first starts, the last ends
    plot_left: int
    plot_right: int
    plot_bottom: int
    y_from: float = 0.0  # the y axis's ends, for a caption that says where it starts
    y_to: float = 0.0
    y_unit: str = ""

    @property
    def y_note(self) -> str:
        """Said under a chart whose y axis does not start at zero, so a small change that
        fills the plot is not read as a large one."""
        if self.y_from <= 0 <= self.y_to or self.y_from == self.y_to:
            return ""
        return f"The y axis runs from {self.y_from:g} to {self.y_to:g}, not from 0."

    @property
    def clipped_note(self) -> str:
        clipped = sum(p.clipped for p in self.points)
        if not clipped:
            return ""
        return (
            f"{clipped} point{'s' if clipped > 1 else ''} above the top of the axis "
            f"({self.y_to:g}{' ' + self.y_unit if self.y_unit else ''}) "
            f"{'are' if clipped > 1 else 'is'} drawn on its edge, in red; "
            "hover for the value."
        )


def _scale(value: float, low: float, high: float, start: float, end: float) -> float:
    if high == low:
        return (start + end) / 2
    return start + (value - low) / (high - low) * (end - start)


def nice_axis(low: float, high: float, count: int = 4) -> tuple[float, float, list[float]]:
    """Ends and ticks of an axis covering [low, high] at a round step (1, 2 or 5 times a power
    of 10), about ``count`` steps: evenly spaced ticks whose labels stay short (0.968, 0.97,
    0.972)."""
    if high == low:
        return low, high, [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    start, end = math.floor(low / step) * step, math.ceil(high / step) * step
    ticks = [start + i * step for i in range(round((end - start) / step) + 1)]
    # rounding to the step's own digits keeps 0.30000000000000004 off the axis
    digits = max(0, -math.floor(math.log10(step)))
    return start, end, [round(t, digits) for t in ticks]


def _y_ticks(
    ticks: Sequence[float], low: float, high: float, top: float, bottom: float, unit: str = ""
) -> list[tuple[float, str]]:
    suffix = f" {unit}" if unit else ""
    return [(round(_scale(v, low, high, bottom, top), 1), f"{v:g}{suffix}") for v in ticks]


def step_chart(
    xs: Sequence[float], ys: Sequence[float], labels: Sequence[str], x_text: tuple[str, str]
) -> Chart | None:
    """A step line through (x, y) pairs, each y holding until the next x: the best score so far.

    ``xs`` are numbers (timestamps); ``labels`` describe each point for its tooltip; ``x_text``
    labels the two ends of the x axis.
    """
    return _chart(xs, ys, labels, x_text, steps=True)


def time_chart(
    xs: Sequence[float], ys: Sequence[float], labels: Sequence[str], x_text: tuple[str, str]
) -> Chart | None:
    """A line through (x, y) pairs at their times (``xs``: timestamps): a count per day."""
    return _chart(xs, ys, labels, x_text, steps=False)


def line_chart(
    ys: Sequence[float], labels: Sequence[str], *, ceiling: float | None = None, y_unit: str = ""
) -> Chart | None:
    """A line through ys at evenly spaced x: one point per batch for per-batch latency. Values
    above ``ceiling`` are drawn on the top edge and marked, so one outlier does not flatten the
    rest."""
    x_text = ("1", str(len(ys)))
    xs = [float(i) for i in range(len(ys))]
    return _chart(xs, ys, labels, x_text, steps=False, ceiling=ceiling, y_unit=y_unit)


def _path(points: list[ChartPoint], *, steps: bool, right: int) -> str:
    commands = [f"M{points[0].x},{points[0].y}"]
    for point in points[1:]:
        commands.append(f"H{point.x} V{point.y}" if steps else f"L{point.x},{point.y}")
    if steps:
        commands.append(f"H{right}")  # the latest record still holds now
    return " ".join(commands)


def _chart(
    xs: Sequence[float],
    ys: Sequence[float],
    labels: Sequence[str],
    x_text: tuple[str, str],
    *,
    steps: bool,
    ceiling: float | None = None,
    y_unit: str = "",
) -> Chart | None:
    if not ys:
        return None
    left, right = PAD_LEFT, WIDTH - PAD_RIGHT
    top, bottom = PAD_TOP, HEIGHT - PAD_BOTTOM
    x_low, x_high = min(xs), max(xs)
    top_value = min(max(ys), ceiling) if ceiling is not None else max(ys)
    y_low, y_high, ticks = nice_axis(min(ys), top_value)
    # One point (or all at one time) would sit mid-plot; pin it to the left edge instead.
    x_end = right if x_high > x_low else left
    points = [
        ChartPoint(
            round(_scale(x, x_low, x_high, left, x_end) if x_high > x_low else left, 1),
            round(_scale(min(y, y_high), y_low, y_high, bottom, top), 1),
            label,
            clipped=y > y_high,
        )
        for x, y, label in zip(xs, ys, labels, strict=True)
    ]
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        path=_path(points, steps=steps, right=right),
        points=points,
        y_ticks=_y_ticks(ticks, y_low, y_high, top, bottom, y_unit),
        x_labels=[(left, x_text[0]), (right, x_text[1])],
        plot_left=left,
        plot_right=right,
        plot_bottom=bottom,
        y_from=y_low,
        y_to=y_high,
        y_unit=y_unit,
    )


def scatter_chart(
    xs: Sequence[float],
    ys: Sequence[float],
    labels: Sequence[str],
    front: Sequence[int],
    *,
    x_unit: Callable[[float], str],
    texts: Sequence[str] = (),
) -> Chart | None:
    """Points at (x, y), the points of ``front`` (indices, in x order) highlighted and joined
    by the path: score against latency with its Pareto front; ``texts`` are written beside the
    points (names). When x spans more than a factor of 10 it is drawn on a log scale (a tiny
    model and a large one on one plot), its ends labelled; otherwise at round, even ticks."""
    if not ys:
        return None
    log = min(xs) > 0 and max(xs) / min(xs) > 10
    left, right = PAD_LEFT, WIDTH - PAD_RIGHT
    top, bottom = PAD_TOP, HEIGHT - PAD_BOTTOM
    if log:
        scaled = [math.log10(x) for x in xs]
        x_low, x_high = min(scaled), max(scaled)
        x_labels = [
            (float(left), x_unit(min(xs))),
            (float(right), f"{x_unit(max(xs))} (log scale)"),
        ]
    else:
        scaled = list(xs)
        x_low, x_high, x_ticks = nice_axis(min(xs), max(xs), count=3)
        x_labels = [(round(_scale(t, x_low, x_high, left, right), 1), x_unit(t)) for t in x_ticks]
    y_low, y_high, y_ticks = nice_axis(min(ys), max(ys))
    on_front = set(front)
    names = list(texts) or [""] * len(xs)
    points = [
        ChartPoint(
            round(_scale(x, x_low, x_high, left, right), 1),
            round(_scale(y, y_low, y_high, bottom, top), 1),
            label,
            i in on_front,
            text=name,
        )
        for i, (x, y, label, name) in enumerate(zip(scaled, ys, labels, names, strict=True))
    ]
    line = [points[i] for i in front]
    path = " ".join(f"{'M' if n == 0 else 'L'}{p.x},{p.y}" for n, p in enumerate(line))
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        path=path,
        points=points,
        y_ticks=_y_ticks(y_ticks, y_low, y_high, top, bottom),
        x_labels=x_labels,
        plot_left=left,
        plot_right=right,
        plot_bottom=bottom,
        y_from=y_low,
        y_to=y_high,
    )
