"""Filters for measured figures; the formatting rules themselves live in evaluation.formats,
which the API's display fields, the CSV and the ``oep`` client share."""

from __future__ import annotations

from django import template

from evaluation import formats

register = template.Library()
register.filter("latency", formats.latency)
register.filter("spread", formats.spread)
register.filter("score", formats.score)
register.filter("si", formats.si)
register.filter("count", formats.count)
register.filter("size", formats.size)
register.filter("throughput", formats.throughput)
register.filter("metric_label", formats.metric_label)
register.filter("duration", formats.duration)
