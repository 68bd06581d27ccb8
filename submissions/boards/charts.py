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


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    path: str
    points: list[ChartPoint]
    y_ticks: list[tuple[float, str]]  # (y position, label)
    x_labels: list[tuple[float, str]]  # (x position, label)
    plot_left: int
    plot_right: int
    plot_bottom: int


def _scale(value: float, low: float, high: float, start: float, end: float) -> float:
    if high == low:
        return (start + end) / 2
    return start + (value - low) / (high - low) * (end - start)


def _y_ticks(low: float, high: float, top: float, bottom: float) -> list[tuple[float, str]]:
    values = [low] if high == low else [low, (low + high) / 2, high]
    return [(round(_scale(v, low, high, bottom, top), 1), f"{v:.3g}") for v in values]


def step_chart(
    xs: Sequence[float], ys: Sequence[float], labels: Sequence[str], x_text: tuple[str, str]
) -> Chart | None:
    """A step line through (x, y) pairs, each y holding until the next x: the best score so far.

    ``xs`` are numbers (timestamps); ``labels`` describe each point for its tooltip; ``x_text``
    labels the two ends of the x axis.
    """
    return _chart(xs, ys, labels, x_text, steps=True)


def line_chart(ys: Sequence[float], labels: Sequence[str]) -> Chart | None:
    """A line through ys at evenly spaced x: one point per batch for per-batch latency."""
    x_text = ("1", str(len(ys)))
    return _chart([float(i) for i in range(len(ys))], ys, labels, x_text, steps=False)


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
) -> Chart | None:
    if not ys:
        return None
    left, right = PAD_LEFT, WIDTH - PAD_RIGHT
    top, bottom = PAD_TOP, HEIGHT - PAD_BOTTOM
    x_low, x_high = min(xs), max(xs)
    y_low, y_high = min(ys), max(ys)
    # One point (or all at one time) would sit mid-plot; pin it to the left edge instead.
    x_end = right if x_high > x_low else left
    points = [
        ChartPoint(
            round(_scale(x, x_low, x_high, left, x_end) if x_high > x_low else left, 1),
            round(_scale(y, y_low, y_high, bottom, top), 1),
            label,
        )
        for x, y, label in zip(xs, ys, labels, strict=True)
    ]
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        path=_path(points, steps=steps, right=right),
        points=points,
        y_ticks=_y_ticks(y_low, y_high, top, bottom),
        x_labels=[(left, x_text[0]), (right, x_text[1])],
        plot_left=left,
        plot_right=right,
        plot_bottom=bottom,
    )


def scatter_chart(
    xs: Sequence[float],
    ys: Sequence[float],
    labels: Sequence[str],
    front: Sequence[int],
    *,
    x_unit: Callable[[float], str],
) -> Chart | None:
    """Points at (x, y), the points of ``front`` (indices, in x order) highlighted and joined
    by the path: score against latency with its Pareto front. When x spans more than a factor
    of 10 it is drawn on a log scale (a tiny model and a large one on one plot)."""
    if not ys:
        return None
    log = min(xs) > 0 and max(xs) / min(xs) > 10
    scaled = [math.log10(x) if log else x for x in xs]
    left, right = PAD_LEFT, WIDTH - PAD_RIGHT
    top, bottom = PAD_TOP, HEIGHT - PAD_BOTTOM
    x_low, x_high, y_low, y_high = min(scaled), max(scaled), min(ys), max(ys)
    on_front = set(front)
    points = [
        ChartPoint(
            round(_scale(x, x_low, x_high, left, right), 1),
            round(_scale(y, y_low, y_high, bottom, top), 1),
            label,
            i in on_front,
        )
        for i, (x, y, label) in enumerate(zip(scaled, ys, labels, strict=True))
    ]
    line = [points[i] for i in front]
    path = " ".join(f"{'M' if n == 0 else 'L'}{p.x},{p.y}" for n, p in enumerate(line))
    scale = " (log scale)" if log else ""
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        path=path,
        points=points,
        y_ticks=_y_ticks(y_low, y_high, top, bottom),
        x_labels=[(left, x_unit(min(xs))), (right, f"{x_unit(max(xs))}{scale}")],
        plot_left=left,
        plot_right=right,
        plot_bottom=bottom,
    )
