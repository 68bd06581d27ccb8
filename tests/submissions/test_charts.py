"""Charts that do not mislead (submissions/boards/charts.py, display.py): round, even ticks; a
y axis that says when it does not start at 0; outliers on the edge, marked; units as the text's;
no Pareto front through timing noise."""

from __future__ import annotations

from typing import Any

import pytest

from submissions.boards import display
from submissions.boards.charts import line_chart, nice_axis, step_chart
from submissions.boards.ranking import Rule
from submissions.lifecycle.selectors import SpeedPoint
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db


def test_an_axis_has_round_evenly_spaced_ticks() -> None:
    low, high, ticks = nice_axis(0.9683, 0.9721)
    assert (low, high) == (0.968, 0.973)
    assert ticks == [0.968, 0.969, 0.97, 0.971, 0.972, 0.973]
    assert nice_axis(0.0, 7.3)[2] == [0, 2, 4, 6, 8]


def test_a_zoomed_y_axis_says_it_does_not_start_at_zero() -> None:
    zoomed = step_chart([1.0, 2.0], [0.968, 0.972], ["a", "b"], ("then", "now"))
    assert zoomed is not None
    assert zoomed.y_note == "The y axis runs from 0.968 to 0.972, not from 0."
    from_zero = line_chart([0.0, 5.0], ["a", "b"])
    assert from_zero is not None and from_zero.y_note == ""


def test_an_outlier_is_drawn_on_the_top_edge_and_marked() -> None:
    chart = line_chart([10.0, 11.0, 12.0, 500.0], list("abcd"), ceiling=36.0, y_unit="µs")
    assert chart is not None
    assert [p.clipped for p in chart.points] == [False, False, False, True]
    assert chart.points[3].y == min(p.y for p in chart.points)  # on the top edge
    assert chart.y_to < 500 and "drawn on its edge" in chart.clipped_note
    assert all(text.endswith(" µs") for _, text in chart.y_ticks)


def test_the_latency_chart_uses_the_unit_of_the_pages_text(make_task: Any, alice: Any) -> None:
    # a stall of over a millisecond among µs batches: the axis stays in µs, the stall clipped
    tiny = scored(make_task(), alice, 0.9, batch_latencies_ms=[0.0123, 0.0131, 0.0125, 1.64])
    chart = display.latency_chart(tiny)
    assert chart is not None
    assert all(text.endswith(" µs") for _, text in chart.y_ticks)  # the text says "12.3 µs"
    assert chart.points[0].label == "batch 1: 12.3 µs"
    assert chart.points[3].clipped and "µs) is drawn on its edge" in chart.clipped_note


def test_no_pareto_front_is_drawn_through_timing_noise(make_task: Any) -> None:
    task = make_task()
    points = [
        SpeedPoint("a", 0.97, 0.00353, None, 0.009),
        SpeedPoint("b", 0.96, 0.00359, None, 0.02),  # 1.7 % slower, inside a 2 % spread
    ]
    noisy = display.pareto_chart(task=task, rule=Rule(), points=points)
    assert noisy is not None and noisy.front == 0
    assert "less than their timing spread" in noisy.note
    apart = [SpeedPoint("a", 0.97, 0.0035, None, 0.009), SpeedPoint("b", 0.98, 0.007, None, 0.02)]
    drawn = display.pareto_chart(task=task, rule=Rule(), points=apart)
    assert drawn is not None and drawn.front == 2 and drawn.note == ""
    assert [p.text for p in drawn.chart.points] == ["a", "b"]
