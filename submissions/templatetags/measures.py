"""Filters for measured figures; the formatting rules themselves live in evaluation.formats,
which the API's display fields, the CSV and the ``oep`` client share."""

from __future__ import annotations

from django import template

from evaluation import formats
from evaluation.sizes import mib_text

register = template.Library()
register.filter("latency", formats.latency)
register.filter("spread", formats.spread)
register.filter("score", formats.score)
register.filter("si", formats.si)
register.filter("count", formats.count)
register.filter("size", formats.size)
register.filter("mib", mib_text)  # a model's size, in the unit of the task's limit
register.filter("throughput", formats.throughput)
register.filter("metric_label", formats.metric_label)
register.filter("duration", formats.duration)
register.filter("energy", formats.energy)
register.filter("power", formats.power)
register.filter("relative", formats.relative)
