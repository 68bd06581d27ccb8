"""Filters for measured figures; the formatting rules themselves live in
submissions.boards.display."""

from __future__ import annotations

from django import template

from submissions.boards.cells import format_latency, format_spread

register = template.Library()
register.filter("latency", format_latency)
register.filter("spread", format_spread)
