"""The leaderboard row: one model of an entry that the page, the CSV and the API all read, so a
column is added once (``COLUMNS``) and every reader shows the board's own numbers. On the
private board the score AND the other metrics are the private ones, everywhere.

No queries: a row wraps a LeaderboardEntry's values and its submission (already loaded).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from submissions.models import Submission
from submissions.ranking_models import submission_measures

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

    def record(self) -> dict[str, Any]:
        """The row as the API returns it: ``{column key: value}`` in column order."""
        return {c.key: c.value(self) for c in COLUMNS}


def _yes(flag: bool | None) -> str:
    return "" if flag is None else ("yes" if flag else "no")


def _of(name: str) -> Callable[[LeaderboardRow], Any]:
    return lambda row: getattr(row.submission, name)


@dataclass(frozen=True)
class Column:
    key: str  # the API's field name, and the CSV's header unless ``header`` says otherwise
    value: Callable[[LeaderboardRow], Any]
    header: str = ""  # "{metric}", "{direction}" and "{rule}" are filled in by the CSV
    csv: Callable[[Any], Any] | None = None  # how the CSV writes the value, when not as is

    @property
    def csv_header(self) -> str:
        return self.header or self.key


# In the CSV's order. ``metrics`` is one column in the API and one CSV column per metric.
COLUMNS: tuple[Column, ...] = (
    Column("rank", lambda r: r.rank, csv=lambda v: v or ""),
    # the uploader, or a baseline's display name; a team's name is in "team"
    Column("user", lambda r: r.submission.display_name or r.submission.user.username),
    Column("team", lambda r: r.team),
    Column("is_baseline", _of("is_baseline"), "baseline", lambda v: "yes" if v else ""),
    Column("score", lambda r: r.score, "score ({metric}, {direction} is better)"),
    Column("metrics", lambda r: dict(r.metrics)),
    Column("latency_p50_ms", _of("latency_p50_ms")),
    Column("throughput", _of("throughput"), "throughput_samples_per_s"),
    Column("provider", _of("provider")),
    Column("device_name", _of("device_name"), "device"),
    Column("entries", lambda r: r.entries),
    Column("submitted_at", _of("created_at"), csv=lambda v: v.isoformat()),
    Column(
        "last_submitted_at",
        lambda r: r.last_submitted_at,
        "last_submission_at",
        lambda v: v.isoformat(),
    ),
    Column("submission_id", _of("pk")),
    Column(
        "ranked", lambda r: r.ranked, "ranking ({rule})", lambda v: "ranked" if v else "not ranked"
    ),
    Column("ranking_value", lambda r: r.value),
    Column("not_ranked_because", lambda r: r.reason),
    Column("final", lambda r: r.final),
    Column("latency_p90_ms", _of("latency_p90_ms")),
    Column("latency_p95_ms", _of("latency_p95_ms")),
    Column("latency_p99_ms", _of("latency_p99_ms")),
    Column("latency_mean_ms", _of("latency_mean_ms")),
    Column("latency_spread", _of("latency_spread")),
    Column("latency_unstable", _of("latency_unstable"), csv=_yes),
    Column("timing_exclusive", _of("timing_exclusive"), "timed_exclusively", _yes),
    Column("timed_on_device_class", lambda r: r.timed_on_device_class, csv=lambda v: v or ""),
    Column("parameters", _of("parameters")),
    Column("flops", _of("flops")),
    Column("macs", _of("macs")),
    Column("costs_complete", _of("costs_complete"), csv=_yes),
    Column("costs_incomplete_reason", _of("costs_incomplete_reason")),
    Column("activations", _of("activations")),
    Column("peak_memory_bytes", _of("peak_memory_bytes")),
)
