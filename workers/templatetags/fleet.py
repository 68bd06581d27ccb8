"""Template tags for worker cards: the cards themselves and server-drawn SVG sparklines.

The cards partial computes its own data through ``fleet_cards``, so any page can show worker
cards with one ``{% include "workers/partials/worker_cards.html" %}`` and no view changes.
"""

from __future__ import annotations

import logging
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString
from redis.exceptions import RedisError

from workers import fleet

log = logging.getLogger(__name__)
register = template.Library()
WIDTH, HEIGHT = 120, 28


@register.simple_tag(takes_context=True)
def fleet_cards(context: template.Context, task: Any = None) -> list[fleet.WorkerCard]:
    """The cards as the page's viewer may see them (a hidden task is named to staff only); none
    while Redis, which holds the heartbeats, cannot be reached: the page around them still
    answers from the database."""
    try:
        return fleet.worker_cards(
            viewer=context.get("user"), task=task if hasattr(task, "requires_gpu") else None
        )
    except RedisError as exc:
        log.warning("worker cards left out, Redis is unavailable: %s", exc)
        return []


@register.simple_tag
def fleet_gpu_plans() -> list[dict[str, Any]]:
    """The GPUs' memory plans; none while Redis cannot be reached, as ``fleet_cards``."""
    try:
        return [plan.as_dict() for plan in fleet.gpu_plans()]
    except RedisError as exc:
        log.warning("GPU memory plans left out, Redis is unavailable: %s", exc)
        return []


def _points(values: list[float], lo: float | None, hi: float | None) -> str:
    low = min(values) if lo is None else lo
    high = max(values) if hi is None else hi
    span = (high - low) or 1.0
    step = WIDTH / max(len(values) - 1, 1)
    return " ".join(
        f"{i * step:.1f},{HEIGHT - (min(max(v, low), high) - low) / span * HEIGHT:.1f}"
        for i, v in enumerate(values)
    )


@register.simple_tag
def sparkline(
    history: list[dict[str, Any]], key: str, label: str, lo: Any = None, hi: Any = None
) -> SafeString:
    """An inline SVG line of one heartbeat field over the kept history (gaps are skipped)."""
    values = [float(s[key]) for s in history if s.get(key) is not None]
    if len(values) < 2:
        return format_html('<span class="sparkline-empty">{}: not enough data yet</span>', label)
    lo_f = float(lo) if lo is not None else None
    hi_f = float(hi) if hi is not None else None
    return format_html(
        '<svg class="sparkline" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
        'aria-label="{}, last {} samples, now {}"><polyline fill="none" points="{}"/></svg>',
        WIDTH,
        HEIGHT,
        WIDTH,
        HEIGHT,
        label,
        len(values),
        f"{values[-1]:g}",
        _points(values, lo_f, hi_f),
    )


@register.filter
def percent(fraction: float | None) -> str:
    return "" if fraction is None else f"{fraction * 100:.0f}%"


@register.filter
def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
