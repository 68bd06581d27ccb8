"""The points of a server-rendered SVG chart (``submissions.boards.charts``), for
``partials/chart.html``.

Written here rather than as a loop in the template: a board's score-against-latency chart has a
point per entrant, and the template engine took most of a board page's render to draw a thousand.
The markup is the loop's, character for character: each coordinate as the template writes a
number (``_number``), the labels escaped, a label's offset from its point as the ``add`` filter
computes it (whole pixels).
"""

from __future__ import annotations

from django import template
from django.utils.formats import localize
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from submissions.boards.charts import Chart, ChartPoint

register = template.Library()

CLIPPED_TITLE = " (above the chart's top: drawn on its edge)"


@register.filter
def chart_points(chart: Chart, kind: str) -> SafeString:
    """Each point as a circle with its title, and its text beside it when it has one; the step
    and scatter charts' points are larger than the line's."""
    radius = "4" if kind in ("step", "scatter") else "2.5"
    # Safe: _point escapes every label and text; the rest is numbers and constants.
    return mark_safe("".join(_point(p, radius) for p in chart.points))


def _point(p: ChartPoint, radius: str) -> str:
    css = "dot" + (" front" if p.highlight else "") + (" clipped" if p.clipped else "")
    x, y = _number(p.x), _number(p.y)
    marked, title = (" data-clipped", CLIPPED_TITLE) if p.clipped else ("", "")
    circle = (
        f'<circle class="{css}" cx="{x}" cy="{y}" r="{radius}"{marked}>'
        f"<title>{escape(p.label)}{title}</title></circle>"
    )
    if not p.text:
        return circle
    left, up = int(p.x) + 6, int(p.y) - 6
    return circle + (f'<text class="point-label" x="{left}" y="{up}">{escape(p.text)}</text>')


def _number(value: float) -> str:
    """A coordinate as the template writes it: ``localize``'s text, which for this site's
    locale (en-us, no thousands separator) is ``str``'s unless that is in exponent form
    (``1e-07``)."""
    text = str(value)
    return text if "e" not in text else localize(value)
