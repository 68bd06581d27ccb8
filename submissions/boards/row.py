"""The leaderboard row: one model of an entry that the page, the CSV and the API all read, so a
column is added once (``COLUMNS``) and every reader shows the board's own numbers. A column says
its value, the API's type and description, the CSV's header and format, and (``PageCell``) the
page's header, place, sort field and cell: the API serializer, the CSV, the page's headers and
cells, and the sort fields are all derived from it. On the private board the score AND the
other metrics are the private ones, everywhere.

No queries: a row wraps a LeaderboardEntry's values and its submission (already loaded).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from submissions.boards import cells
from submissions.models import FactSheet, FinalistMeasurement, Submission
from submissions.models.ranking import submission_measures

BOARD_PUBLIC = "public"
BOARD_PRIVATE = "private"
FINAL_SELECTED = "selected"
FINAL_BY_PUBLIC_SCORE = "best by public score"


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int | None  # None: listed below the ranked entries, outside the task's ranking rule
    submission: Submission
    score: float  # the board's score: public or private
    entries: int
    last_submitted_at: datetime
    value: float | None = None  # what the rule ranks on: the score, or the composite score
    reason: str = ""  # why it is not ranked
    board: str = BOARD_PUBLIC
    finals: bool = False  # the board ranks each participant's finals (private, with a limit)
    fact_sheet: FactSheet | None = None  # the entrant's on this phase; None: none saved

    def sheet(self, name: str) -> str:
        """A field of the entrant's fact sheet; "" without one."""
        return getattr(self.fact_sheet, name, "") if self.fact_sheet is not None else ""

    @property
    def ranked(self) -> bool:
        return self.rank is not None

    @property
    def metrics(self) -> Mapping[str, Any]:
        """Every metric on this board's rows: the private ones on the private board."""
        s = self.submission
        return (s.metrics_private if self.board == BOARD_PRIVATE else s.metrics) or {}

    @property
    def final(self) -> str:
        """On a board of finals, how this entry became one: selected by its owner, or (none
        selected) among their best by public score; "" on other boards."""
        if not self.finals:
            return ""
        return FINAL_SELECTED if self.submission.selected else FINAL_BY_PUBLIC_SCORE

    @property
    def team(self) -> str:
        """The team's name on a team's row; "" for a participant alone or a baseline."""
        team = self.submission.team
        return team.name if team is not None else ""

    @property
    def timed_on_device_class(self) -> str | None:
        return submission_measures(self.submission, BOARD_PUBLIC).device_class

    @property
    def remeasurement(self) -> FinalistMeasurement | None:
        """The finalist's re-measurement that ranks it (on the task's device class); None for
        an entry ranked on its evaluation's own timing."""
        s = self.submission
        return s.remeasurement if s.remeasurement_id is not None else None

    @property
    def ranked_latency_p50_ms(self) -> float | None:
        """The p50 the board shows and ranks on: the re-measured one where there is one."""
        again = self.remeasurement
        return again.latency_p50_ms if again is not None else self.submission.latency_p50_ms


def _again(name: str) -> Callable[[LeaderboardRow], Any]:
    """A figure of the row's re-measurement; None without one."""
    return lambda row: getattr(row.remeasurement, name, None)


def _yes(flag: bool | None) -> str:
    return "" if flag is None else ("yes" if flag else "no")


def _yes_or_blank(flag: bool) -> str:
    return "yes" if flag else ""


def _of(name: str) -> Callable[[LeaderboardRow], Any]:
    return lambda row: getattr(row.submission, name)


@dataclass(frozen=True)
class PageCell:
    """How the board page shows a column: where, under which header, sorted how, drawn how."""

    place: int  # left to right on the page
    label: str  # the header; "{metric}", "{arrow}" and "{ranked}" are filled in by the page
    html: cells.Renderer  # the cell's content from the column's value
    sort: str = ""  # the name ``?sort=`` gives it; "" for a column the page cannot sort by
    order_by: str = ""  # the LeaderboardEntry field that sort orders by
    css: str = "num"  # the cell's classes; "num" aligns the header and the cell as numbers
    first_dir: str = "asc"  # the header's first click: "asc", "desc", or "best" first
    # shown only under a rule that ranks on a value of its own (a composite, one measure)
    composite_only: bool = False
    # Folded into the row's "More" cell rather than given a column of its own: a board of every
    # column was wider than a laptop's screen. Rank, name, score and latency keep columns.
    folded: bool = False

    @property
    def numeric(self) -> bool:
        return "num" in self.css.split()


@dataclass(frozen=True)
class Column:
    """One column of the board: its value, and how the API, the CSV and the page show it."""

    key: str  # the API's field name, and the CSV's header unless ``header`` says otherwise
    value: Callable[[LeaderboardRow], Any]
    type: type  # of the API's values: int, float, bool, str, datetime or dict
    null: bool = False  # the API's value may be null
    help: str = ""  # the API schema's description
    choices: tuple[str, ...] = ()  # the only values it takes, for the API schema
    header: str = ""  # "{metric}", "{direction}" and "{rule}" are filled in by the CSV
    csv: Callable[[Any], Any] | None = None  # how the CSV writes the value, when not as is
    page: PageCell | None = None  # how the board page shows it; None: not on the page

    @property
    def csv_header(self) -> str:
        return self.header or self.key


COSTS_COMPLETE_HELP = (
    "False: the MACs and FLOPs leave out nodes that multiply-accumulate (a lower bound, never "
    "ranked against a FLOPs budget or in a composite); null: no costs."
)
COSTS_INCOMPLETE_HELP = "Which nodes the MACs and FLOPs leave out; '' when complete."


def _stored(key: str, type_: type, **options: Any) -> Column:
    """A column of a value the submission keeps under the column's own name."""
    return Column(key, _of(key), type_, **options)


# In the CSV's and the API's order; ``PageCell.place`` orders the page. ``metrics`` is one
# column in the API and one CSV column per metric.
COLUMNS: tuple[Column, ...] = (
    Column(
        "rank",
        lambda r: r.rank,
        int,
        null=True,
        help="Null: listed below the ranked entries, outside the rule.",
        csv=lambda v: v or "",
        page=PageCell(1, "#", cells.rank, "rank", "rank_key"),
    ),
    # the uploader, or a baseline's display name; a team's name is in "team"
    Column(
        "user",
        lambda r: r.submission.display_name or r.submission.user.username,
        str,
        help="Who uploaded the entry's best submission.",
        page=PageCell(2, "Participant", cells.participant, "user", "user__username", css=""),
    ),
    Column(
        "team",
        lambda r: r.team,
        str,
        help="The team whose row this is; '' for a participant alone.",
    ),
    _stored("is_baseline", bool, header="baseline", csv=_yes_or_blank),
    Column(
        "score",
        lambda r: r.score,
        float,
        help="The board's score: public or private.",
        header="score ({metric}, {direction} is better)",
        page=PageCell(3, "{metric} {arrow}", cells.score, "score", "score", "num score", "best"),
    ),
    Column(
        "metrics",
        lambda r: dict(r.metrics),
        dict,
        help="Every metric on the board's rows.",
        page=PageCell(5, "Other metrics", cells.other_metrics, css="metrics", folded=True),
    ),
    _stored(
        "latency_p50_ms",
        float,
        null=True,
        help="Its evaluation's own p50 per batch; a finalist re-measured ranks on "
        "ranked_latency_p50_ms.",
    ),
    _stored(
        "throughput",
        float,
        null=True,
        header="throughput_samples_per_s",
        page=PageCell(
            7,
            "Throughput",
            cells.throughput,
            "throughput",
            "throughput",
            "num",
            "desc",
            folded=True,
        ),
    ),
    _stored("provider", str),
    _stored(
        "device_name",
        str,
        header="device",
        page=PageCell(11, "Device", cells.device, "device", "device_name", css="", folded=True),
    ),
    Column(
        "entries",
        lambda r: r.entries,
        int,
        page=PageCell(12, "Entries", cells.plain, "entries", "entries", folded=True),
    ),
    Column("submitted_at", _of("created_at"), datetime, csv=lambda v: v.isoformat()),
    Column(
        "last_submitted_at",
        lambda r: r.last_submitted_at,
        datetime,
        header="last_submission_at",
        csv=lambda v: v.isoformat(),
        page=PageCell(13, "Last entry", cells.moment, "last", "last_submitted_at", folded=True),
    ),
    Column("submission_id", _of("pk"), int),
    Column(
        "ranked",
        lambda r: r.ranked,
        bool,
        header="ranking ({rule})",
        csv=lambda v: "ranked" if v else "not ranked",
    ),
    Column(
        "ranking_value",
        lambda r: r.value,
        float,
        null=True,
        help="What the rule ranks on: the score, the composite score or the one measure "
        "(these two lower is better).",
        page=PageCell(
            4, "{ranked} ↓", cells.ranked_value, "value", "value", "num value", composite_only=True
        ),
    ),
    Column("not_ranked_because", lambda r: r.reason, str),
    Column(
        "final",
        lambda r: r.final,
        str,
        help="On a private board of finals: how this entry became a final; '' elsewhere.",
        choices=("", FINAL_SELECTED, FINAL_BY_PUBLIC_SCORE),
    ),
    Column(
        "carried",
        lambda r: r.submission.carried_from_id is not None,
        bool,
        help="Carried over from the challenge's previous phase and scored on this one's data.",
        csv=_yes_or_blank,
    ),
    _stored("latency_p90_ms", float, null=True),
    _stored("latency_p95_ms", float, null=True),
    _stored("latency_p99_ms", float, null=True),
    _stored("latency_mean_ms", float, null=True),
    _stored("latency_spread", float, null=True),
    _stored("latency_unstable", bool, csv=_yes),
    _stored("latency_sessions", int, null=True),
    _stored("latency_session_spread", float, null=True),
    _stored("energy_per_sample_j", float, null=True),
    _stored("average_power_w", float, null=True),
    _stored(
        "timing_exclusive",
        bool,
        null=True,
        header="timed_exclusively",
        csv=_yes,
    ),
    Column(
        "timed_on_device_class",
        lambda r: r.timed_on_device_class,
        str,
        null=True,
        help="The device class it was timed on (null: not recorded).",
        csv=lambda v: v or "",
    ),
    _stored(
        "parameters",
        int,
        null=True,
        page=PageCell(
            8, "Params", cells.count, "parameters", "submission__parameters", folded=True
        ),
    ),
    _stored(
        "flops",
        int,
        null=True,
        page=PageCell(9, "FLOPs", cells.flops, "flops", "submission__flops", folded=True),
    ),
    _stored("macs", int, null=True),
    _stored("costs_complete", bool, null=True, help=COSTS_COMPLETE_HELP, csv=_yes),
    _stored("costs_incomplete_reason", str, help=COSTS_INCOMPLETE_HELP),
    _stored("activations", int, null=True),
    _stored(
        "peak_memory_bytes",
        int,
        null=True,
        page=PageCell(
            10,
            "Peak memory",
            cells.size,
            "memory",
            "submission__peak_memory_bytes",
            folded=True,
        ),
    ),
    # From the entrant's fact sheet on a challenge's phase; last, so earlier columns stay put.
    Column(
        "method_name",
        lambda r: r.sheet("method_name"),
        str,
        # on the page under the participant's name (cells.participant), with the links
        help="The method's name from the entrant's fact sheet on this phase; '' without one.",
    ),
    Column(
        "paper_url",
        lambda r: r.sheet("paper_url"),
        str,
        help="The paper link of the entrant's fact sheet; '' without one.",
    ),
    Column(
        "code_url",
        lambda r: r.sheet("code_url"),
        str,
        help="The code link of the entrant's fact sheet; '' without one.",
    ),
    # Finalists re-measured (submissions/boards/finalists.py): what ranks, and how it was taken.
    Column(
        "ranked_latency_p50_ms",
        lambda r: r.ranked_latency_p50_ms,
        float,
        null=True,
        help="The p50 per batch that latency rules rank on and the page shows: the finalist's "
        "re-measurement where it has one, else latency_p50_ms.",
        page=PageCell(6, "p50 / batch", cells.latency, "latency", "latency_p50_ms"),
    ),
    Column(
        "remeasured_latency_p50_ms",
        _again("latency_p50_ms"),
        float,
        null=True,
        help="A finalist's re-measured p50: the median of its sessions' p50s; null if not "
        "re-measured.",
    ),
    Column("remeasured_sessions", _again("sessions"), int, null=True),
    Column(
        "remeasured_session_spread",
        _again("session_spread"),
        float,
        null=True,
        help="(max - min) / median of the re-measured sessions' p50s.",
    ),
    Column(
        "remeasured_at",
        _again("taken_at"),
        datetime,
        null=True,
        csv=lambda v: v.isoformat() if v else "",
    ),
)


def page_cells(columns: Sequence[Column] = COLUMNS) -> list[tuple[Column, PageCell]]:
    """The columns the page shows, left to right, each with its cell."""
    shown = [(c, c.page) for c in columns if c.page is not None]
    return sorted(shown, key=lambda pair: pair[1].place)


# The board's sort names (``?sort=``) -> the LeaderboardEntry field behind each.
SORT_FIELDS = {cell.sort: cell.order_by for _, cell in page_cells() if cell.sort}
SORT_COLUMNS = tuple(SORT_FIELDS)
