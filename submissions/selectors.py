"""Read-side queries: leaderboards, a user's submissions, visible tasks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Max, Min, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from submissions.models import Submission, Task


def task_list_visible(*, user: Any) -> QuerySet[Task]:
    tasks = Task.objects.all()
    return tasks if getattr(user, "is_staff", False) else tasks.visible()


def task_get_visible(*, slug: str, user: Any) -> Task:
    return task_list_visible(user=user).get(slug=slug)


BOARD_PUBLIC = "public"
BOARD_PRIVATE = "private"
LEADERBOARD_PAGE_SIZE = 50

# Sort keys a visitor may pick on the page: column name -> key on a _BoardEntry.
SORT_COLUMNS = ("rank", "user", "score", "latency", "throughput", "device", "entries", "last")


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int
    submission: Submission
    score: float
    entries: int
    last_submitted_at: datetime


@dataclass(frozen=True)
class _BoardEntry:
    """One ranked user, as few columns as the page needs to sort and paginate."""

    rank: int
    submission_id: int
    user_id: int
    username: str
    score: float
    latency: float | None
    throughput: float | None
    device: str
    entries: int
    last: datetime


@dataclass(frozen=True)
class LeaderboardPage:
    board: str
    rows: list[LeaderboardRow]
    mine: LeaderboardRow | None  # the viewer's own row when it is not on this page
    total: int
    page: int
    pages: int
    sort: str
    descending: bool
    frozen_at: datetime | None


def _score_field(board: str) -> str:
    return "score_private" if board == BOARD_PRIVATE else "score"


def _best_first(task: Task, field: str) -> list[Any]:
    score = F(field).desc() if task.higher_is_better else F(field).asc()
    return [score, F("created_at").asc(), F("id").asc()]


def leaderboard_boards(*, task: Task, user: Any) -> list[str]:
    """The tabs this viewer may open: private only once revealed (operators always)."""
    if task.private_revealed or getattr(user, "is_staff", False):
        return [BOARD_PUBLIC, BOARD_PRIVATE]
    return [BOARD_PUBLIC]


def _eligible(task: Task, board: str) -> QuerySet[Submission]:
    """Scored, visible submissions of the task; on a frozen board only those made before it."""
    eligible = Submission.objects.on_leaderboard().filter(task=task)
    if board == BOARD_PRIVATE:
        eligible = eligible.filter(score_private__isnull=False)
    if task.leaderboard_frozen_at is not None:
        eligible = eligible.filter(created_at__lte=task.leaderboard_frozen_at)
    return eligible


def _ranked_entries(task: Task, board: str) -> QuerySet[Submission]:
    by_user = [F("user_id")]
    return _eligible(task, board).annotate(
        user_rank=Window(
            RowNumber(), partition_by=by_user, order_by=_best_first(task, _score_field(board))
        ),
        entries=Window(Count("id"), partition_by=by_user),
        last_submitted_at=Window(Max("created_at"), partition_by=by_user),
    )


def leaderboard(*, task: Task, board: str = BOARD_PUBLIC) -> list[LeaderboardRow]:
    """The best visible, succeeded submission per user, ranked in the metric's direction.

    Ties go to the earlier submission. One query whatever the number of submissions: a window
    numbers each user's submissions best-first and only the first of each is kept. Returns every
    row with its full submission (for the CSV export); pages use ``leaderboard_page``.
    """
    field = _score_field(board)
    best = (
        _ranked_entries(task, board)
        .filter(user_rank=1)
        .select_related("user")
        .order_by(*_best_first(task, field))
    )
    return [
        LeaderboardRow(
            rank=index + 1,
            submission=row,
            score=getattr(row, field),
            entries=row.entries,  # type: ignore[attr-defined]
            last_submitted_at=row.last_submitted_at,  # type: ignore[attr-defined]
        )
        for index, row in enumerate(best)
    ]


def _board_entries(task: Task, board: str) -> list[_BoardEntry]:
    field = _score_field(board)
    columns = ("id", "user_id", "user__username", field, "latency_p50_ms", "throughput")
    best = (
        _ranked_entries(task, board)
        .filter(user_rank=1)
        .order_by(*_best_first(task, field))
        .values_list(*columns, "device_name", "entries", "last_submitted_at")
    )
    return [_BoardEntry(index + 1, *values) for index, values in enumerate(best)]


def _sorted(entries: list[_BoardEntry], sort: str, descending: bool) -> list[_BoardEntry]:
    if sort == "rank":
        return entries[::-1] if descending else entries
    if sort == "user":
        key: Any = lambda e: e.username.lower()  # noqa: E731
    elif sort == "device":
        key = lambda e: e.device.lower()  # noqa: E731
    else:
        attribute = sort
        key = lambda e: getattr(e, attribute)  # noqa: E731
    present = [e for e in entries if key(e) is not None]
    missing = [e for e in entries if key(e) is None]  # rows without a value always go last
    return sorted(present, key=key, reverse=descending) + missing


def leaderboard_page(
    *,
    task: Task,
    board: str = BOARD_PUBLIC,
    user: Any = None,
    sort: str = "rank",
    descending: bool = False,
    page: int = 1,
    page_size: int = LEADERBOARD_PAGE_SIZE,
) -> LeaderboardPage:
    """One page of the board, sorted by any column. Two queries whatever the board's size:
    the ranked users as bare values (sorted and cut into pages here), then the page's rows."""
    entries = _sorted(_board_entries(task, board), sort, descending)
    pages = max(1, -(-len(entries) // page_size))
    page = min(max(1, page), pages)
    shown = entries[(page - 1) * page_size : page * page_size]
    user_id = getattr(user, "pk", None)
    own = next((e for e in entries if e.user_id == user_id), None) if user_id else None
    pinned = own if own is not None and own not in shown else None
    wanted = [e.submission_id for e in shown] + ([pinned.submission_id] if pinned else [])
    by_id = Submission.objects.select_related("user").in_bulk(wanted)

    def row(entry: _BoardEntry) -> LeaderboardRow:
        return LeaderboardRow(
            entry.rank, by_id[entry.submission_id], entry.score, entry.entries, entry.last
        )

    return LeaderboardPage(
        board=board,
        rows=[row(e) for e in shown],
        mine=row(pinned) if pinned else None,
        total=len(entries),
        page=page,
        pages=pages,
        sort=sort,
        descending=descending,
        frozen_at=task.leaderboard_frozen_at,
    )


@dataclass(frozen=True)
class ScoreRecord:
    at: datetime
    score: float
    username: str


def leaderboard_best_over_time(*, task: Task, board: str = BOARD_PUBLIC) -> list[ScoreRecord]:
    """Each submission that beat the best score so far, oldest first: the steps of the chart.

    One query; the running best is a window in the database, so only record-breaking rows travel.
    """
    field = _score_field(board)
    running = Max(field) if task.higher_is_better else Min(field)
    records = (
        _eligible(task, board)
        .annotate(
            best_so_far=Window(running, order_by=[F("created_at").asc(), F("id").asc()]),
        )
        .filter(**{field: F("best_so_far")})
        .order_by("created_at", "id")
        .values_list("created_at", field, "user__username")
    )
    steps: list[ScoreRecord] = []
    for at, score, username in records:
        if not steps or score != steps[-1].score:  # equal scores are ties, not new records
            steps.append(ScoreRecord(at, score, username))
    return steps


def submissions_of(*, user: Any, task: Task | None = None) -> QuerySet[Submission]:
    submissions = Submission.objects.for_user(user).select_related("task")
    return submissions.filter(task=task) if task is not None else submissions


def submission_queue_position(*, submission: Submission) -> int | None:
    """1 for the next submission to start; None unless queued. Counted in the database, which
    is the truth even when Redis was lost and the queue is being rebuilt."""
    if submission.status != Submission.Status.QUEUED:
        return None
    ahead = Submission.objects.filter(status=Submission.Status.QUEUED).filter(
        Q(created_at__lt=submission.created_at)
        | Q(created_at=submission.created_at, id__lt=submission.id)
    )
    return ahead.count() + 1
