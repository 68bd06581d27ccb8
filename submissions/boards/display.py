"""What pages show, computed from rows: charts, CSV rows, advice for a failure. No queries."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from evaluation import formats
from evaluation.inspect import runtime_limits
from submissions.boards import cells, ranking
from submissions.boards.cells import PageRow
from submissions.boards.charts import Chart, line_chart, scatter_chart, step_chart
from submissions.boards.row import COLUMNS, Column, LeaderboardRow, PageCell, page_cells
from submissions.lifecycle.selectors import ScoreRecord, SpeedPoint
from submissions.models import Submission, Task


def best_score_chart(records: Sequence[ScoreRecord]) -> Chart | None:
    def when(record: ScoreRecord) -> str:
        return timezone.localtime(record.at).strftime("%Y-%m-%d %H:%M")

    return step_chart(
        [r.at.timestamp() for r in records],
        [r.score for r in records],
        [f"{when(r)} · {formats.score(r.score)} · {r.username}" for r in records],
        (when(records[0]), timezone.localtime().strftime("%Y-%m-%d %H:%M"))
        if records
        else ("", ""),
    )


def _range(start: Any, end: Any, unit: str) -> str:
    if start is None and end is None:
        return ""
    if start == end or end is None:
        return f"{start} {unit}"
    return f"{start} → {end} {unit}"


def _device_time(timing: dict[str, Any]) -> str:
    """The seconds the timing held the device's lock, which no other worker's timing or scoring
    could use meanwhile; "" for results timed before it was recorded."""
    held = timing.get("held_s")
    if not isinstance(held, int | float) or held <= 0:
        return ""
    sessions = len(timing.get("session_p50s_ms") or []) or 1
    return f"{held:.2f} s held" + (f" over {sessions} sessions" if sessions > 1 else "")


def timing_facts(submission: Submission) -> list[tuple[str, str]]:
    """How the model was timed, as (label, value) pairs for the submission page."""
    timing = submission.timing or {}
    if not timing:
        return []
    c = timing.get("conditions", {})
    start, end = c.get("start", {}), c.get("end", {})
    protocol = timing.get("protocol", {})
    exclusive = (
        "the device was held exclusively"
        if timing.get("exclusive")
        else "timed without exclusivity (the device's lock was not free in time)"
    )
    facts = [
        (
            "Timing",
            f"{timing.get('batches', 0):,} batches in {protocol.get('passes', '?')} passes "
            f"over {timing.get('duration_s', 0):.2f} s; {exclusive}",
        ),
        ("Device time", _device_time(timing)),
        ("Device class", c.get("device_class", "")),
        ("Device", c.get("gpu_name") or c.get("device_name") or c.get("cpu_model", "")),
        ("Driver / CUDA", " / ".join(v for v in (c.get("driver"), c.get("cuda_driver")) if v)),
        (
            "Built with",
            " ".join(
                f"{name} {c[key]}"
                for name, key in (
                    ("onnxruntime", "onnxruntime"),
                    ("CUDA", "cuda_build"),
                    ("cuDNN", "cudnn_build"),
                )
                if c.get(key)
            ),
        ),
        ("SM clock", _range(start.get("sm_clock_mhz"), end.get("sm_clock_mhz"), "MHz")),
        ("Memory clock", _range(start.get("memory_clock_mhz"), end.get("memory_clock_mhz"), "MHz")),
        ("Temperature", _range(start.get("temperature_c"), end.get("temperature_c"), "°C")),
        ("CPU clock", _range(start.get("cpu_mhz"), end.get("cpu_mhz"), "MHz")),
        ("Load (1 min)", _range(start.get("load_1m"), end.get("load_1m"), "")),
    ]
    return [(label, value.strip()) for label, value in facts if value and value.strip()]


def measured_figures(s: Submission) -> dict[str, str]:
    """What the evaluation measured and counted, as every surface writes it (evaluation.formats):
    the pages, the API's ``display`` objects and ``oep``. "—" where there is no figure; the
    spreads read "" where there is none (one session: no spread between sessions)."""
    several = s.latency_sessions is not None and s.latency_sessions > 1
    return {
        "latency_p50": formats.latency(s.latency_p50_ms),
        "latency_spread": formats.spread(s.latency_spread),
        "latency_session_spread": formats.relative(s.latency_session_spread) if several else "",
        "throughput": formats.throughput(s.throughput),
        "peak_memory": formats.size(s.peak_memory_bytes),
        "parameters": formats.si(s.parameters),
        "flops": cells.flops_text(s),
        "energy_per_sample": formats.energy(s.energy_per_sample_j),
    }


def submission_figures(submission: Submission, *, scores: bool) -> dict[str, Any]:
    """A result's figures as every surface writes them: the submission page shows these, the API
    returns them as ``display`` and ``oep`` prints the same. Without ``scores`` (a blind board)
    the score and the metrics are left out."""
    s = submission
    figures: dict[str, Any] = {
        "metric_label": formats.metric_label(s.task.metric),
        **measured_figures(s),
    }
    if scores:
        figures["score"] = formats.score(s.score)
        figures["metrics"] = formats.metrics(s.metrics or {}, leave_out=s.task.metric)
    return figures


def run_report_rows(submission: Submission) -> list[dict[str, str]]:
    """The run report's time per operator type as the page writes it (evaluation.formats)."""
    operators = (submission.run_report or {}).get("operators") or []
    return [
        {
            "op": str(row.get("op", "")),
            "nodes": formats.count(row.get("nodes")),
            "time": formats.latency(float(row.get("us", 0)) / 1000),
            "share": formats.relative(row.get("share")),
        }
        for row in operators
        if isinstance(row, dict)
    ]


def row_figures(row: LeaderboardRow, *, metric: str) -> dict[str, Any]:
    """A board row's figures as the board page writes them, for the leaderboard API's
    ``display``: the board's own score and metrics (the private ones on the private board),
    ``metric`` (the task's, shown as the score) left out of the metrics."""
    return {
        "score": formats.score(row.score),
        "metrics": formats.metrics(row.metrics, leave_out=metric),
        **measured_figures(row.submission),
        # the p50 the board ranks and shows: a finalist's re-measured one where it has one
        "latency_p50": formats.latency(row.ranked_latency_p50_ms),
        "remeasured": cells.remeasured_text(row.remeasurement),
    }


# A batch slower than this many times the 90th percentile is drawn on the chart's top edge: one
# stall flattened every other batch into a line along the bottom.
OUTLIER_FACTOR = 3.0


def latency_chart(submission: Submission) -> Chart | None:
    """Per-batch latency in the unit the page's text uses for these numbers (µs or ms, from
    evaluation.formats), outliers on the top edge, marked."""
    latencies = [float(v) for v in submission.batch_latencies_ms or []]
    if not latencies:
        return None
    p90_ms = sorted(latencies)[int(0.9 * (len(latencies) - 1))]
    # the unit of the typical batch, as the text's p50; a clipped stall must not decide it
    unit, factor = formats.latency_unit([p90_ms])
    values = [v * factor for v in latencies]
    p90 = p90_ms * factor
    return line_chart(
        values,
        [f"batch {i + 1}: {formats.latency(v)}" for i, v in enumerate(latencies)],
        ceiling=OUTLIER_FACTOR * p90 if p90 > 0 else None,
        y_unit=unit,
    )


def leaderboard_csv_rows(
    *,
    task: Task,
    rule: ranking.Rule,
    rows: Sequence[LeaderboardRow],
    columns: Sequence[Column] = COLUMNS,
) -> Iterator[list[object]]:
    """Header then one line per user, ranked first, then those outside the rule (no rank, with
    the reason): the columns of ``board_row.COLUMNS``, every metric of the board in its own
    column. Latencies are ms per batch at full precision; the page rounds, the CSV does not."""
    metric_names = sorted({name for row in rows for name in row.metrics})
    names = {
        "metric": formats.metric_label(task.metric),  # the metrics' own columns keep their keys
        "direction": task.direction.word,
        "rule": rule.kind,
    }
    header: list[object] = []
    for column in columns:
        header += metric_names if column.key == "metrics" else [column.csv_header.format(**names)]
    yield header
    for row in rows:
        line: list[object] = []
        for column in columns:
            value = column.value(row)
            if column.key == "metrics":
                line += [value.get(name, "") for name in metric_names]
            else:
                line.append(column.csv(value) if column.csv else value)
        yield line


def _load_advice() -> str:
    """From the same limits the upload check applies, so the advice never drifts from it."""
    max_ir, max_opset = runtime_limits()
    return (
        "Check the file loads with onnxruntime locally, with opset ≤ "
        f"{max_opset} and IR version ≤ {max_ir}."
    )


# A failure's cause and what the submitter can do about it, keyed by a phrase of the runner's
# message: the submission page's advice and the host's failures-by-cause count read this table.
_CAUSES: list[tuple[str, str, str | Callable[[], str]]] = [
    (
        "time limit",
        "time limit",
        "Make the model faster (fewer or cheaper operators) and submit again.",
    ),
    (
        "output has shape",
        "output shape",
        "Make the first output [batch, *the task's output shape].",
    ),
    (
        "numeric tensor",
        "output type",
        "Make the first output a numeric tensor (float32 is safest).",
    ),
    (
        "nan or infinity",
        "NaN or infinity",
        "Look for divisions by zero, log of zero or overflow; clip or add an epsilon.",
    ),
    ("could not load", "model does not load", _load_advice),
    (
        "cannot be scored",
        "cannot be scored",
        "Check the output holds what the metric expects (e.g. class scores).",
    ),
    (
        "failed while running",
        "failed while running",
        "Run the model locally on a batch of the task's shape to see why.",
    ),
]
SYSTEM_CAUSE = "system (not the model)"
OTHER_CAUSE = "other"


def failure_cause(*, message: str, by_system: bool) -> str:
    """A failed submission's cause, in a few words, for the host's count of failures."""
    if by_system:
        return SYSTEM_CAUSE
    lowered = message.lower()
    return next((cause for phrase, cause, _ in _CAUSES if phrase in lowered), OTHER_CAUSE)


def failure_advice(submission: Submission) -> str:
    if submission.failed_by_system:
        return "This failure was not your model's fault and does not count in your quota."
    message = submission.error_message.lower()
    for phrase, _, advice in _CAUSES:
        if phrase.lower() in message:
            return advice if isinstance(advice, str) else advice()
    return "Fix what the message says, check the model locally with onnxruntime, and resubmit."


@dataclass(frozen=True)
class BoardColumn:
    key: str  # the name ``?sort=`` gives it; "" when the page cannot sort by it
    label: str
    next_dir: str  # what clicking the header asks for
    aria_sort: str  # "ascending", "descending" or "none"
    numeric: bool
    folded: tuple[BoardColumn, ...] = ()  # on "More": the folded columns, sortable by link


def _shown(rule: ranking.Rule, columns: Sequence[Column]) -> list[tuple[Column, PageCell]]:
    """The page's columns under this rule, left to right. The rule's value has a column when it
    ranks on one of its own, but for p50 latency, which has its column already; a board ranked
    on another measure (parameters, FLOPs, memory) folds the latency under "More" in its place,
    so it fits a phone as the main board does."""
    measure = rule.measure if rule.kind == ranking.MEASURE else ""
    own_value = rule.kind == ranking.COMPOSITE or (
        measure != "" and (measure, rule.percentile) != ("latency", "p50")
    )
    shown = []
    for column, cell in page_cells(columns):
        if cell.composite_only and not own_value:
            continue
        if measure not in ("", "latency") and column.key == "ranked_latency_p50_ms":
            cell = dataclasses.replace(cell, folded=True)
        shown.append((column, cell))
    return shown


def board_columns(
    *,
    task: Task,
    rule: ranking.Rule,
    sort: str,
    descending: bool,
    columns: Sequence[Column] = COLUMNS,
) -> list[BoardColumn]:
    """The page's headers; the score's first click goes best-first in the metric's direction."""
    best_first = "desc" if task.direction.best_first_descending else "asc"
    headers: list[BoardColumn] = []
    folded: list[BoardColumn] = []
    shown = _shown(rule, columns)
    for _, cell in shown:
        label = _label(task, cell, rule)
        if cell.sort and cell.sort == sort:
            next_dir = "asc" if descending else "desc"
            aria = "descending" if descending else "ascending"
        else:
            next_dir = best_first if cell.first_dir == "best" else cell.first_dir
            aria = "none"
        column = BoardColumn(cell.sort, label, next_dir, aria, cell.numeric)
        (folded if cell.folded else headers).append(column)
    if folded:
        headers.append(BoardColumn("", "More", "", "none", False, tuple(folded)))
    return headers


def _label(task: Task, cell: PageCell, rule: ranking.Rule) -> str:
    label = rule.measure_label
    ranked = label[:1].upper() + label[1:] if rule.kind == ranking.MEASURE else "Composite"
    return cell.label.format(metric=task.metric_label, arrow=task.direction.arrow, ranked=ranked)


def _td_open(cell: PageCell) -> str:
    return format_html('<td class="{}">', cell.css) if cell.css else "<td>"


def _more_html(at: PageRow, folded: Sequence[tuple[Column, PageCell, str]]) -> str:
    """The row's folded columns as a list under a "More" disclosure, in their page order."""
    items = "".join(
        f"<dt>{conditional_escape(_label(at.task, cell, at.rule))}</dt>"
        f"<dd>{conditional_escape(cell.html(column.value(at.row), at))}</dd>"
        for column, cell, _ in folded
    )
    return f'<td class="more"><details><summary>More</summary><dl>{items}</dl></details></td>'


def _row_html(at: PageRow, shown: Sequence[tuple[Column, PageCell, str]]) -> SafeString:
    """One <tr>: a cell per shown column, its content escaped unless built as HTML, then the
    folded columns in one "More" cell."""
    s = at.row.submission
    flags = (("mine", at.mine), ("baseline", s.is_baseline), ("unranked", not at.row.ranked))
    classes = " ".join(css for css, on in flags if on)
    tds = "".join(
        f"{td_open}{conditional_escape(cell.html(column.value(at.row), at))}</td>"
        for column, cell, td_open in shown
        if not cell.folded
    )
    folded = [item for item in shown if item[1].folded]
    if folded:
        tds += _more_html(at, folded)
    return format_html(
        '<tr class="{}" data-user="{}">{}</tr>', classes, s.user.username, mark_safe(tds)
    )


def leaderboard_rows_html(
    *,
    task: Task,
    rule: ranking.Rule,
    rows: Sequence[tuple[bool, LeaderboardRow]],
    own_submission_id: int | None,
    by_rank: bool = True,
    columns: Sequence[Column] = COLUMNS,
) -> SafeString:
    """The board's <tr>s, with a divider above the first entry outside the rule when sorted by
    rank. Built here rather than in the template, which was a large part of the page's time;
    every value is escaped the same way the template would."""
    shown = [(column, cell, _td_open(cell)) for column, cell in _shown(rule, columns)]
    unfolded = sum(not cell.folded for _, cell, _ in shown)
    width = unfolded + (unfolded < len(shown))  # the "More" cell
    parts: list[str] = []
    ranked_before = False
    for pinned, row in rows:
        if pinned:
            parts.append(f'<tr class="gap" aria-hidden="true"><td colspan="{width}">⋯</td></tr>')
        elif by_rank and not row.ranked and (ranked_before or not parts):
            parts.append(
                f'<tr class="gap unranked-gap"><td colspan="{width}">Not ranked under this '
                "board's rule (the reason is under each name)</td></tr>"
            )
        ranked_before = row.ranked
        # "you": the viewer's own row, or their team's whoever uploaded its best entry
        mine = row.submission.pk == own_submission_id
        parts.append(_row_html(PageRow(task, rule, row, mine), shown))
    return mark_safe("\n".join(parts))  # every part was built by format_html


# Entries drawn on the score-versus-latency chart besides its front: the best-ranked ones. Each
# point is an SVG element with its label; 10,000 of them made the page about a megabyte.
PARETO_OTHERS_DRAWN = 500


@dataclass(frozen=True)
class ParetoChart:
    chart: Chart
    front: int  # points on the front
    drawn: int  # points on the chart, the front's included
    entries: int  # entries timed on the task's device class (the front is taken over all)
    noise: bool = False  # no front: the latencies differ by less than their timing spread

    @property
    def note(self) -> str:
        """What the caption says when not every entry is drawn, or no front is."""
        said = []
        if self.noise:
            said.append(
                "No front is drawn: the entries' latencies differ by less than their timing "
                "spread, so which is faster is noise."
            )
        if self.drawn != self.entries:
            said.append(
                f"Drawn: the front and the {self.drawn - self.front:,} best-ranked of "
                f"{self.entries:,} entries."
            )
        return " ".join(said)


def pareto_chart(
    *, task: Task, rule: ranking.Rule, points: Sequence[SpeedPoint]
) -> ParetoChart | None:
    """Score against p50 latency of the board's entries timed on the task's device class, the
    Pareto front (no entry both faster and better) joined by the line. ``points`` come in rank
    order; on a large board the front is drawn with the ``PARETO_OTHERS_DRAWN`` best-ranked
    others only."""
    shown = [
        p
        for p in points
        if not ranking.timed_elsewhere(rule, ranking.Measures(None, device_class=p.device_class))
    ]
    front = ranking.pareto_front(
        [(p.latency_p50_ms, p.score) for p in shown], direction=task.direction
    )
    if _within_spread([p.latency_p50_ms for p in shown], [p.latency_spread for p in shown]):
        front = []  # a front drawn through timing noise would rank noise
    on_front = set(front)
    others = [i for i in range(len(shown)) if i not in on_front][:PARETO_OTHERS_DRAWN]
    drawn = sorted(on_front.union(others))
    position = {i: n for n, i in enumerate(drawn)}
    labels = [
        f"{shown[i].username} · {task.metric_label} {formats.score(shown[i].score)} · "
        f"{formats.latency(shown[i].latency_p50_ms)}"
        + (" · on the Pareto front" if i in on_front else "")
        for i in drawn
    ]
    chart = scatter_chart(
        [shown[i].latency_p50_ms for i in drawn],
        [shown[i].score for i in drawn],
        labels,
        [position[i] for i in front],
        x_unit=formats.latency,
        texts=[shown[i].username if i in on_front else "" for i in drawn],
    )
    if chart is None:
        return None
    return ParetoChart(
        chart, len(front), len(drawn), len(shown), noise=not front and len(shown) > 1
    )


def _within_spread(latencies: Sequence[float], spreads: Sequence[float | None]) -> bool:
    """Whether every latency lies within the timing spread of the others: the fastest and the
    slowest differ by no more than the largest spread measured among them."""
    if len(latencies) < 2 or min(latencies) <= 0:
        return False
    widest = max((s for s in spreads if s is not None), default=0.0)
    return max(latencies) / min(latencies) - 1 <= widest
