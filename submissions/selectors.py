"""Read-side queries: leaderboards, a user's submissions, visible tasks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Max, Min, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from submissions.leaderboard_models import LeaderboardEntry, LeaderboardRecord
from submissions.models import Submission, Task


def task_list_visible(*, user: Any) -> QuerySet[Task]:
    tasks = Task.objects.all()
    return tasks if getattr(user, "is_staff", False) else tasks.visible()


def task_get_visible(*, slug: str, user: Any) -> Task:
    return task_list_visible(user=user).get(slug=slug)


BOARD_PUBLIC = "public"
BOARD_PRIVATE = "private"
BOARDS = (BOARD_PUBLIC, BOARD_PRIVATE)
LEADERBOARD_PAGE_SIZE = 50

# Columns a visitor may sort the board by -> the LeaderboardEntry field behind each.
SORT_FIELDS = {
    "rank": "rank_key",
    "user": "user__username",
    "score": "score",
    "latency": "latency_p50_ms",
    "throughput": "throughput",
    "device": "device_name",
    "entries": "entries",
    "last": "last_submitted_at",
}
SORT_COLUMNS = tuple(SORT_FIELDS)


@dataclass(frozen=True)
class LeaderboardRow:
    rank: int
    submission: Submission
    score: float
    entries: int
    last_submitted_at: datetime


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

    @property
    def listed(self) -> list[tuple[bool, LeaderboardRow]]:
        """(pinned, row) pairs: the page's rows, then the viewer's own row when off the page."""
        pinned = [(True, self.mine)] if self.mine is not None else []
        return [(False, row) for row in self.rows] + pinned


@dataclass(frozen=True)
class ScoreRecord:
    at: datetime
    score: float
    username: str
    submission_id: int


def score_field(board: str) -> str:
    return "score_private" if board == BOARD_PRIVATE else "score"


def _best_first(task: Task, field: str) -> list[Any]:
    score = F(field).desc() if task.higher_is_better else F(field).asc()
    return [score, F("created_at").asc(), F("id").asc()]


def leaderboard_boards(*, task: Task, user: Any) -> list[str]:
    """The tabs this viewer may open: private only once revealed (operators always)."""
    if task.private_revealed or getattr(user, "is_staff", False):
        return [BOARD_PUBLIC, BOARD_PRIVATE]
    return [BOARD_PUBLIC]


# --- Computed from Submission: the definition of the board, used to (re)build the read models.


def _eligible(task: Task, board: str) -> QuerySet[Submission]:
    """Scored, visible submissions of the task; on a frozen board only those made before it."""
    eligible = Submission.objects.on_leaderboard().filter(task=task)
    if board == BOARD_PRIVATE:
        eligible = eligible.filter(score_private__isnull=False)
    if task.leaderboard_frozen_at is not None:
        eligible = eligible.filter(created_at__lte=task.leaderboard_frozen_at)
    return eligible


def best_rows_computed(
    *, task: Task, board: str = BOARD_PUBLIC, user_ids: list[int] | None = None
) -> list[Submission]:
    """The best eligible submission per user, best first, annotated with ``entries`` and
    ``last_submitted_at``. Ties go to the earlier submission. One query: a window numbers each
    user's submissions best-first and only the first of each is kept."""
    by_user = [F("user_id")]
    eligible = _eligible(task, board)
    if user_ids is not None:
        eligible = eligible.filter(user_id__in=user_ids)
    best_first = _best_first(task, score_field(board))
    ranked = eligible.annotate(
        user_rank=Window(RowNumber(), partition_by=by_user, order_by=best_first),
        entries=Window(Count("id"), partition_by=by_user),
        last_submitted_at=Window(Max("created_at"), partition_by=by_user),
    )
    return list(ranked.filter(user_rank=1).select_related("user").order_by(*best_first))


def records_computed(*, task: Task, board: str = BOARD_PUBLIC) -> list[ScoreRecord]:
    """Each submission that beat the best score so far, oldest first: the steps of the chart.
    The running best is a window in the database, so only record-breaking rows travel."""
    field = score_field(board)
    running = Max(field) if task.higher_is_better else Min(field)
    records = (
        _eligible(task, board)
        .annotate(best_so_far=Window(running, order_by=[F("created_at").asc(), F("id").asc()]))
        .filter(**{field: F("best_so_far")})
        .order_by("created_at", "id")
        .values_list("created_at", field, "user__username", "id")
    )
    steps: list[ScoreRecord] = []
    for at, score, username, submission_id in records:
        if not steps or score != steps[-1].score:  # equal scores are ties, not new records
            steps.append(ScoreRecord(at, score, username, submission_id))
    return steps


# --- Read from the read models (kept by submissions.leaderboard): what pages and the API use.


def _entries(task: Task, board: str) -> QuerySet[LeaderboardEntry]:
    return LeaderboardEntry.objects.filter(task=task, board=board)


_RANK_ORDER = ["rank_key", "created_at", "submission_id"]


def _row(entry: LeaderboardEntry, rank: int) -> LeaderboardRow:
    return LeaderboardRow(
        rank, entry.submission, entry.score, entry.entries, entry.last_submitted_at
    )


def leaderboard(*, task: Task, board: str = BOARD_PUBLIC) -> list[LeaderboardRow]:
    """Every ranked user with the full best submission (for the CSV export). One query."""
    entries = _entries(task, board).select_related("submission__user").order_by(*_RANK_ORDER)
    return [_row(entry, index + 1) for index, entry in enumerate(entries)]


def _own_row(task: Task, board: str, user: Any) -> LeaderboardRow | None:
    if not getattr(user, "pk", None):
        return None
    entry = _entries(task, board).filter(user=user).select_related("submission__user").first()
    if entry is None:
        return None
    better = _entries(task, board).filter(
        Q(rank_key__lt=entry.rank_key)
        | Q(rank_key=entry.rank_key, created_at__lt=entry.created_at)
        | Q(
            rank_key=entry.rank_key,
            created_at=entry.created_at,
            submission_id__lt=entry.submission_id,
        )
    )
    return _row(entry, better.count() + 1)


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
    """One page of the board sorted by any column, with each row's rank. A fixed number of
    queries whatever the board's size: count, the page (rank is a window over the board's
    entries, computed before the sort and the LIMIT), and the viewer's own row and rank."""
    entries = _entries(task, board)
    total = entries.count()
    pages = max(1, -(-total // page_size))
    page = min(max(1, page), pages)
    field = SORT_FIELDS.get(sort, "rank_key")
    order = [F(field).desc(nulls_last=True) if descending else F(field).asc(nulls_last=True)]
    # Rank is a window over all the board's entries, computed before the ORDER BY and LIMIT;
    # only the page's ids and ranks travel, then the page's rows are read by id.
    ranked = (
        entries.annotate(rank=Window(RowNumber(), order_by=[F(n).asc() for n in _RANK_ORDER]))
        .order_by(*order, *_RANK_ORDER)
        .values_list("pk", "rank")
    )
    ranks = dict(ranked[(page - 1) * page_size : page * page_size])
    by_id = LeaderboardEntry.objects.select_related("submission__user").in_bulk(list(ranks))
    shown = [_row(by_id[pk], rank) for pk, rank in ranks.items()]
    own = _own_row(task, board, user)
    on_page = own is not None and any(r.submission.pk == own.submission.pk for r in shown)
    return LeaderboardPage(
        board=board,
        rows=shown,
        mine=None if on_page else own,
        total=total,
        page=page,
        pages=pages,
        sort=sort if sort in SORT_FIELDS else "rank",
        descending=descending,
        frozen_at=task.leaderboard_frozen_at,
    )


def leaderboard_best_over_time(*, task: Task, board: str = BOARD_PUBLIC) -> list[ScoreRecord]:
    """The steps of the best-score chart, oldest first (one query on the kept records)."""
    records = LeaderboardRecord.objects.filter(task=task, board=board).order_by("at", "id")
    return [ScoreRecord(r.at, r.score, r.username, r.submission_id) for r in records]


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
