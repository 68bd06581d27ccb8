"""Filters for measured figures; the formatting rules themselves live in
submissions.boards.display."""

from __future__ import annotations

from django import template

from evaluation.sizes import mib_text, size_text
from submissions.boards.cells import format_latency, format_spread

register = template.Library()
# Sizes in binary units named as such (Django's filesizeformat writes MB for 2**20 bytes).
register.filter("size", size_text)
register.filter("mib", mib_text)
register.filter("latency", format_latency)
register.filter("spread", format_spread)
