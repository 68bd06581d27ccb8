"""How numbers read (evaluation/formats.py): one unit rule and one digit count per quantity."""

from __future__ import annotations

import pytest

from evaluation import formats


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0.01218, "12.2 µs"),
        (0.5, "500 µs"),
        (0.9996, "1.00 ms"),  # rounds up into ms, never "1,000 µs"
        (1.234, "1.23 ms"),
        (12.345, "12.3 ms"),
        (1234.5, "1,230 ms"),
        (None, "—"),
    ],
)
def test_latency_is_in_microseconds_below_a_millisecond_with_three_significant_digits(
    ms: float | None, text: str
) -> None:
    assert formats.latency(ms) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.97222, "0.9722"), (1.0, "1.000"), (0.0123456, "0.01235"), (12345.6, "12,350")],
)
def test_a_score_has_four_significant_digits_and_never_reads_as_a_bare_one(
    value: float, text: str
) -> None:
    assert formats.score(value) == text


def test_large_quantities_use_si_prefixes_and_counts_use_thousands_separators() -> None:
    assert formats.throughput(3692893.2) == "3.69 M samples/s"
    assert formats.si(41300) == "41.3 k" and formats.si(650) == "650"
    assert formats.count(245336) == "245,336"
    assert formats.size(1234567) == "1.18 MiB" and formats.size(100) == "100 bytes"


def test_metric_labels_come_from_the_registry_and_the_primary_metric_can_be_left_out() -> None:
    shown = formats.metrics({"accuracy": 0.97, "top5_accuracy": 1.0}, leave_out="accuracy")
    assert shown == {"Top-5 accuracy": "1.000"}
    assert formats.metric_label("abs_rel") == "Abs. relative error"
    assert formats.metric_label("not-a-metric") == "not-a-metric"


def test_a_charts_unit_is_the_one_its_largest_value_reads_in() -> None:
    assert formats.latency_unit([0.01, 0.2]) == ("µs", 1000.0)
    assert formats.latency_unit([0.2, 3.0]) == ("ms", 1.0)
