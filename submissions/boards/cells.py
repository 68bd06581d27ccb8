"""How the board page draws a row's cells: the renderers that ``board_row.COLUMNS`` names for its
page cells, and the formats they share with other pages (latency, counts, bytes). No queries.

A renderer takes the column's value and the ``PageRow`` it stands in, and returns text (escaped
when the row is built) or HTML built with ``format_html`` (a SafeString).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from submissions.boards import ranking
from submissions.models import Submission, Task
from submissions.models.ranking import submission_measures

if TYPE_CHECKING:
    from submissions.boards.row import LeaderboardRow


@dataclass(frozen=True)
class PageRow:
    """One row as the page draws it: the row, the task and rule it is judged by, and whether it
    is the viewer's own (or their team's, whoever uploaded its best entry)."""

    task: Task
    rule: ranking.Rule
    row: LeaderboardRow
    mine: bool


Renderer = Callable[[Any, PageRow], str]  # a SafeString is HTML, any other str text


def format_latency(ms: float | None) -> str:
    """A time per batch in units that fit: µs below a millisecond (a tiny model's batch reads in
    µs, not as "0.01 ms"), three significant figures, ms with two decimals above."""
    if ms is None:
        return "—"
    if ms < 1.0:
        return f"{ms * 1000:.3g} µs"
    return f"{ms:,.2f} ms"


def format_spread(spread: float | None) -> str:
    """The spread across timing passes as ``± 1.2 %``."""
    return "" if spread is None else f"± {spread * 100:.1f} %"


def format_count(n: int | None) -> str:
    """Parameters or FLOPs in SI units, three significant figures: 1.23 M, 4.56 G."""
    if n is None:
        return "—"
    for size, unit in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k")):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return str(n)


def format_flops(s: Submission) -> SafeString:
    """FLOPs in SI units; a count that leaves nodes out reads "≥ n", the reason in its title."""
    reason = s.costs_incomplete_reason
    if not reason:
        return format_html("{}", format_count(s.flops))
    return format_html(
        '<span class="partial" title="Not counted in full: {}" data-costs-incomplete>≥ {}</span>',
        reason,
        format_count(s.flops),
    )


def format_bytes(n: int | None) -> str:
    return "—" if n is None else str(filesizeformat(n))


def number(value: float | None, places: int) -> str:
    return "" if value is None else f"{value:,.{places}f}".replace(",", "")


def latency_marks(s: Submission, rule: ranking.Rule) -> list[tuple[str, str, str]]:
    """(css class, text, explanation) for what qualifies an entry's latency on the board."""
    marks = []
    if s.latency_unstable:
        marks.append(("chip-unstable", "unstable", "its timing passes disagreed"))
    if s.timing_exclusive is False:
        marks.append(("chip-shared", "shared", "timed without exclusivity"))
    measures = submission_measures(s, "public")
    if ranking.timed_elsewhere(rule, measures):
        marks.append(
            (
                "chip-elsewhere",
                f"on {measures.device_class}",
                f"timed on {measures.device_class}, not the task's {rule.device_class}: "
                "not ranked on latency",
            )
        )
    return marks


# --- Renderers: (the column's value, the row on the page) -> the cell's content.


def decimals(places: int) -> Renderer:
    """A number with ``places`` decimals, no thousands separator; empty for none."""
    return lambda value, at: number(value, places)


def plain(value: Any, at: PageRow) -> str:
    return str(value)


def rank(value: int | None, at: PageRow) -> str:
    return str(value) if value else "—"


def participant(value: str, at: PageRow) -> SafeString:
    """The board's name (a team links to its page) with its chips, and why it is not ranked."""
    row, s = at.row, at.row.submission
    team = s.team if not s.is_baseline else None
    name = (
        format_html('<a href="{}" data-team>{}</a>', team.get_absolute_url(), team.name)
        if team is not None
        else s.board_name
    )
    return format_html(
        "{}{}{}{}{}{}",
        name,
        mark_safe(' <span class="chip chip-baseline">baseline</span>') if s.is_baseline else "",
        mark_safe(
            ' <span class="chip chip-carried" title="Carried over from the previous phase">'
            "carried</span>"
        )
        if s.carried_from_id is not None
        else "",
        mark_safe(' <span class="chip chip-you">you</span>') if at.mine else "",
        format_html(
            ' <span class="chip chip-final" data-final="{}">{}</span>', row.final, row.final
        )
        if row.final
        else "",
        format_html('<div class="reason">Not ranked: {}</div>', row.reason) if row.reason else "",
    )


def other_metrics(value: dict[str, float], at: PageRow) -> SafeString:
    """Every metric of the board's rows but the task's own, which the score column shows."""
    return format_html_join(
        " ",
        "<span>{} {}</span>",
        ((name, number(v, 4)) for name, v in value.items() if name != at.task.metric),
    )


def latency(value: float | None, at: PageRow) -> SafeString:
    """p50 in units that fit, its spread, and marks; the other percentiles in the tooltip."""
    s = at.row.submission
    others = " · ".join(
        f"{p} {format_latency(getattr(s, f'latency_{p}_ms'))}"
        for p in ("p90", "p95", "p99", "mean")
        if getattr(s, f"latency_{p}_ms") is not None
    )
    marks = format_html_join(
        "",
        ' <span class="chip {}" title="{}">{}</span>',
        ((css, why, text) for css, text, why in latency_marks(s, at.rule)),
    )
    if value is None:
        return format_html("—{}", marks)
    return format_html(
        '<span title="{}">{}</span> <small class="spread">{}</small>{}',
        others,
        format_latency(value),
        format_spread(s.latency_spread),
        marks,
    )


def count(value: int | None, at: PageRow) -> str:
    return format_count(value)


def flops(value: int | None, at: PageRow) -> SafeString:
    return format_flops(at.row.submission)


def size(value: int | None, at: PageRow) -> str:
    return format_bytes(value)


def device(value: str, at: PageRow) -> str:
    """The device's name, else the execution provider that ran it."""
    return value or at.row.submission.provider


def moment(value: Any, at: PageRow) -> SafeString:
    local = timezone.localtime(value)
    return format_html(
        '<time datetime="{}">{}</time>', local.isoformat(), local.strftime("%Y-%m-%d %H:%M")
    )
