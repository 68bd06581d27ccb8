"""How the board page draws a row's cells: the renderers that ``board_row.COLUMNS`` names for its
page cells, and the formats they share with other pages (latency, counts, bytes). No queries.

A renderer takes the column's value and the ``PageRow`` it stands in, and returns text (escaped
when the row is built) or HTML built with ``format_html`` (a SafeString).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from evaluation import formats
from submissions.boards import ranking
from submissions.models import FinalistMeasurement, Submission, Task
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


def flops_text(s: Submission) -> str:
    """FLOPs in SI units; a count that leaves nodes out reads "≥ n" (a lower bound)."""
    return f"≥ {formats.si(s.flops)}" if s.costs_incomplete_reason else formats.si(s.flops)


def format_flops(s: Submission) -> SafeString:
    """``flops_text``, with the reason a count leaves nodes out in its title."""
    reason = s.costs_incomplete_reason
    if not reason:
        return format_html("{}", flops_text(s))
    return format_html(
        '<span class="partial" title="Not counted in full: {}" data-costs-incomplete>{}</span>',
        reason,
        flops_text(s),
    )


def remeasured_text(m: FinalistMeasurement | None) -> str:
    """A finalist's re-measurement as every surface says it: "re-measured 5 sessions, ± 1.2 %,
    28 Nov 10:02" (the site's time zone); "" without one."""
    if m is None or m.taken_at is None:
        return ""
    sessions = f"{m.sessions} session{'s' if m.sessions != 1 else ''}"
    spread = f", {formats.spread(m.session_spread)}" if m.session_spread is not None else ""
    return f"re-measured {sessions}{spread}, {timezone.localtime(m.taken_at):%d %b %H:%M}"


def latency_marks(s: Submission, rule: ranking.Rule) -> list[tuple[str, str, str]]:
    """(css class, text, explanation) for what qualifies an entry's latency on the board."""
    marks = []
    if s.latency_unstable:
        allowed = (s.timing.get("protocol") or {}).get("unstable_session_spread")
        if s.latency_session_spread is not None and s.latency_session_spread > (allowed or 0):
            what = (
                f"the p50s of its {s.latency_sessions} timing sessions differ by "
                f"{formats.relative(s.latency_session_spread)}"
            )
        else:
            what = f"the medians of its timing passes differ by {formats.spread(s.latency_spread)}"
        why = (
            f"{what}, more than the task allows: its latency is less certain, its score is not "
            "affected"
        )
        marks.append(("chip-unstable", "unstable", why))
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


def significant(digits: int) -> Renderer:
    """A measured number to ``digits`` significant digits (evaluation.formats); "—" for none."""
    return lambda value, at: formats.NONE if value is None else formats.significant(value, digits)


def score(value: float | None, at: PageRow) -> str:
    return formats.score(value)


def ranked_value(value: float | None, at: PageRow) -> str:
    """What the rule ranks on, in the unit of its measure (a composite is a plain number)."""
    measure = at.rule.measure if at.rule.kind == ranking.MEASURE else ""
    if measure == "latency":
        return formats.latency(value)
    if measure == "peak_memory":
        return formats.size(None if value is None else int(value))
    if measure in ("parameters", "flops"):
        return formats.si(value)
    return formats.score(value)


def throughput(value: float | None, at: PageRow) -> str:
    return formats.throughput(value)


def plain(value: Any, at: PageRow) -> str:
    return str(value)


def rank(value: int | None, at: PageRow) -> str:
    return str(value) if value else "—"


def participant(value: str, at: PageRow) -> SafeString:
    """The board's name (a team links to its page) with its chips, the method of its fact sheet
    with the links, and why it is not ranked."""
    row, s = at.row, at.row.submission
    team = s.team if not s.is_baseline else None
    name = (
        format_html(
            '<a class="name" href="{}" data-team>{}</a>', team.get_absolute_url(), team.name
        )
        if team is not None
        else format_html('<span class="name">{}</span>', s.board_name)
    )
    return format_html(
        "{}{}{}{}{}{}{}",
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
        _method(row),
        format_html('<div class="reason">Not ranked: {}</div>', row.reason) if row.reason else "",
    )


def _method(row: LeaderboardRow) -> SafeString:
    """The fact sheet's method name with its paper and code links (``URLField`` keeps only
    http(s) and ftp ones); "" without a sheet."""
    name = row.sheet("method_name")
    urls = ((row.sheet(f"{link}_url"), link) for link in ("paper", "code"))
    links = format_html_join(
        "",
        ' · <a href="{}" rel="nofollow noopener" data-link="{}">{}</a>',
        ((url, link, link) for url, link in urls if url),
    )
    if not (name or links):
        return mark_safe("")
    return format_html('<div class="method" data-method>{}{}</div>', name or "method", links)


def other_metrics(value: dict[str, float], at: PageRow) -> SafeString:
    """Every metric of the board's rows but the task's own, which the score column shows."""
    return format_html_join(
        " ",
        "<span>{} {}</span>",
        formats.metrics(value, leave_out=at.task.metric).items(),
    )


def latency(value: float | None, at: PageRow) -> SafeString:
    """p50 in units that fit, its spread, and marks; the other percentiles in the tooltip."""
    s = at.row.submission
    others = " · ".join(
        f"{p} {formats.latency(getattr(s, f'latency_{p}_ms'))}"
        for p in ("p90", "p95", "p99", "mean")
        if getattr(s, f"latency_{p}_ms") is not None
    )
    if s.latency_sessions and s.latency_sessions > 1:
        others += (
            f" · the median of {s.latency_sessions} sessions, whose p50s differ by "
            f"{formats.relative(s.latency_session_spread)}"
        )
    marks = format_html_join(
        "",
        ' <span class="chip {}" title="{}">{}</span>',
        ((css, why, text) for css, text, why in latency_marks(s, at.rule)),
    )
    again = at.row.remeasurement
    if (
        again is not None
    ):  # the re-measured figure ranks: its spread and time, the first run's aside
        first = f"first timed: {formats.latency(s.latency_p50_ms)}"
        return format_html(
            '<span title="{}">{}</span> <small class="remeasured" data-remeasured>{}</small>{}',
            first,
            formats.latency(value),
            remeasured_text(again),
            marks,
        )
    if value is None:
        return format_html("—{}", marks)
    return format_html(
        '<span title="{}">{}</span> <small class="spread">{}</small>{}',
        others,
        formats.latency(value),
        formats.spread(s.latency_spread),
        marks,
    )


def count(value: int | None, at: PageRow) -> str:
    return formats.si(value)


def flops(value: int | None, at: PageRow) -> SafeString:
    return format_flops(at.row.submission)


def size(value: int | None, at: PageRow) -> str:
    return formats.size(value)


def device(value: str, at: PageRow) -> str:
    """The device's name, else the execution provider that ran it."""
    return value or at.row.submission.provider


def moment(value: Any, at: PageRow) -> SafeString:
    local = timezone.localtime(value)
    return format_html(
        '<time datetime="{}">{}</time>', local.isoformat(), local.strftime("%Y-%m-%d %H:%M")
    )
