"""What pages show, computed from rows: charts, CSV rows, advice for a failure. No queries."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from submissions.charts import Chart, line_chart, step_chart
from submissions.models import Submission, Task
from submissions.selectors import LeaderboardRow, ScoreRecord


def best_score_chart(records: Sequence[ScoreRecord]) -> Chart | None:
    def when(record: ScoreRecord) -> str:
        return timezone.localtime(record.at).strftime("%Y-%m-%d %H:%M")

    return step_chart(
        [r.at.timestamp() for r in records],
        [r.score for r in records],
        [f"{when(r)} · {r.score:.4f} · {r.username}" for r in records],
        (when(records[0]), timezone.localtime().strftime("%Y-%m-%d %H:%M"))
        if records
        else ("", ""),
    )


def latency_chart(submission: Submission) -> Chart | None:
    latencies = [float(v) for v in submission.batch_latencies_ms or []]
    return line_chart(latencies, [f"batch {i + 1}: {v:.2f} ms" for i, v in enumerate(latencies)])


def leaderboard_csv_rows(*, task: Task, rows: Sequence[LeaderboardRow]) -> Iterator[list[object]]:
    """Header then one line per ranked user; every metric of the task gets its own column."""
    metric_names = sorted({name for row in rows for name in row.submission.metrics})
    yield [
        "rank",
        "user",
        "baseline",
        f"score ({task.metric}, {'higher' if task.higher_is_better else 'lower'} is better)",
        *metric_names,
        "latency_p50_ms",
        "throughput_samples_per_s",
        "provider",
        "device",
        "entries",
        "submitted_at",
        "last_submission_at",
        "submission_id",
    ]
    for row in rows:
        s = row.submission
        yield [
            row.rank,
            s.user.username,
            "yes" if s.is_baseline else "",
            row.score,
            *[s.metrics.get(name, "") for name in metric_names],
            s.latency_p50_ms,
            s.throughput,
            s.provider,
            s.device_name,
            row.entries,
            s.created_at.isoformat(),
            row.last_submitted_at.isoformat(),
            s.pk,
        ]


# What the submitter can do about a failure, keyed by a phrase of the runner's message.
_ADVICE = [
    ("time limit", "Make the model faster (fewer or cheaper operators) and submit again."),
    ("output has shape", "Make the first output [batch, *the task's output shape]."),
    ("numeric tensor", "Make the first output a numeric tensor (float32 is safest)."),
    (
        "nan or infinity",
        "Look for divisions by zero, log of zero or overflow; clip or add an epsilon.",
    ),
    ("could not load", "Check the file loads with onnxruntime locally and uses opset ≤ 21."),
    ("cannot be scored", "Check the output holds what the metric expects (e.g. class scores)."),
    ("failed while running", "Run the model locally on a batch of the task's shape to see why."),
]


def failure_advice(submission: Submission) -> str:
    if submission.failed_by_system:
        return "This failure was not your model's fault and does not count in your quota."
    message = submission.error_message.lower()
    for phrase, advice in _ADVICE:
        if phrase.lower() in message:
            return advice
    return "Fix what the message says, check the model locally with onnxruntime, and resubmit."


@dataclass(frozen=True)
class BoardColumn:
    key: str
    label: str
    next_dir: str  # what clicking the header asks for
    aria_sort: str  # "ascending", "descending" or "none"
    numeric: bool


def board_columns(*, task: Task, sort: str, descending: bool) -> list[BoardColumn]:
    """The sortable headers; the score's first click goes best-first in the metric's direction."""
    arrow = "↑" if task.higher_is_better else "↓"
    spec = [
        ("rank", "#", True),
        ("user", "Participant", False),
        ("score", f"{task.metric_label} {arrow}", True),
        ("latency", "p50 ms/batch", True),
        ("throughput", "Samples/s", True),
        ("device", "Device", False),
        ("entries", "Entries", True),
        ("last", "Last entry", True),
    ]
    first_dir = {"score": "desc" if task.higher_is_better else "asc", "throughput": "desc"}
    columns = []
    for key, label, numeric in spec:
        if key == sort:
            next_dir = "asc" if descending else "desc"
            aria = "descending" if descending else "ascending"
        else:
            next_dir, aria = first_dir.get(key, "asc"), "none"
        columns.append(BoardColumn(key, label, next_dir, aria, numeric))
    return columns


def _num(value: float | None, places: int) -> str:
    return "" if value is None else f"{value:,.{places}f}".replace(",", "")


def leaderboard_rows_html(
    *, task: Task, rows: Sequence[tuple[bool, LeaderboardRow]], viewer_id: int | None
) -> SafeString:
    """The board's <tr>s. Built here rather than in the template: Django's template engine takes
    ~20 ms for 50 rows of 9 cells on a busy 2-core box, a third of the page's time budget,
    and format_html escapes every value the same way the template would."""
    parts: list[str] = []
    for pinned, row in rows:
        s = row.submission
        if pinned:
            parts.append('<tr class="gap" aria-hidden="true"><td colspan="9">⋯</td></tr>')
        mine = s.user_id == viewer_id
        chips = format_html(
            "{}{}",
            mark_safe(' <span class="chip chip-baseline">baseline</span>') if s.is_baseline else "",
            mark_safe(' <span class="chip chip-you">you</span>') if mine else "",
        )
        others = format_html_join(
            " ",
            "<span>{} {}</span>",
            ((name, _num(value, 4)) for name, value in s.metrics.items() if name != task.metric),
        )
        parts.append(
            format_html(
                '<tr class="{}{}" data-user="{}"><td class="num">{}</td><td>{}{}</td>'
                '<td class="num score">{}</td><td class="metrics">{}</td><td class="num">{}</td>'
                '<td class="num">{}</td><td>{}</td><td class="num">{}</td>'
                '<td class="num"><time datetime="{}">{}</time></td></tr>',
                "mine" if mine else "",
                " baseline" if s.is_baseline else "",
                s.user.username,
                row.rank,
                s.user.username,
                chips,
                _num(row.score, 4),
                others,
                _num(s.latency_p50_ms, 2),
                _num(s.throughput, 0),
                s.device_name or s.provider,
                row.entries,
                timezone.localtime(row.last_submitted_at).isoformat(),
                timezone.localtime(row.last_submitted_at).strftime("%Y-%m-%d %H:%M"),
            )
        )
    return mark_safe("\n".join(parts))  # every part was built by format_html
