"""Read-side queries: leaderboards, a user's submissions, visible tasks."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    F,
    Max,
    Min,
    OrderBy,
    Q,
    QuerySet,
    Value,
    When,
    Window,
)
from django.db.models.functions import Coalesce, NullIf, RowNumber

from queueing import queues
from submissions.boards import ranking
from submissions.boards.cache import cached
from submissions.boards.row import BOARD_PRIVATE, BOARD_PUBLIC, SORT_FIELDS, LeaderboardRow
from submissions.challenges.registration import can_see
from submissions.challenges.selectors import challenge_list_visible
from submissions.lifecycle import turns
from submissions.models import FactSheet, Submission, Task, TaskQuerySet
from submissions.models.boards import LeaderboardEntry, LeaderboardRecord, entrant_key
from submissions.models.ranking import Track, submission_measures, task_rule
from submissions.models.task_files import TaskFile
from submissions.models.teams import Team, TeamMembership


def task_list_visible(*, user: Any) -> QuerySet[Task]:
    # pages show requires_gpu and its name, whether the dataset was ever replaced, and the
    # challenge a phase belongs to
    tasks = Task.objects.select_related("device_class", "current_dataset", "challenge")
    return _visible_to(tasks, user=user)


def _is_staff(user: Any) -> bool:
    return bool(getattr(user, "is_staff", False))


def _visible_to(tasks: TaskQuerySet, *, user: Any) -> TaskQuerySet:
    """Staff see hidden tasks too; the phases of a private challenge are seen only by whoever
    may see the challenge (submissions/challenges/registration.py)."""
    if _is_staff(user):
        return tasks
    return tasks.visible().filter(
        Q(challenge__isnull=True) | Q(challenge__in=challenge_list_visible(user=user))
    )


def _may_see(task: Task, user: Any) -> bool:
    """``_visible_to``'s rule for one task already read: a page, the board's API and an upload
    each ask it of one task by its slug, without the rule's challenge subqueries (only a
    challenge's phase asks ``can_see``, which reads its challenge)."""
    if _is_staff(user):
        return True
    if task.is_hidden:
        return False
    challenge = task.challenge  # no query for a task outside any challenge
    return challenge is None or can_see(user=user, challenge=challenge)


def _task_by_slug(tasks: QuerySet[Task], slug: str, user: Any) -> Task | None:
    try:
        task = tasks.get(slug=slug)
    except Task.DoesNotExist:
        return None
    return task if _may_see(task, user) else None


def task_get_visible(*, slug: str, user: Any) -> Task:
    """The task ``slug`` if this viewer may see it; else ``Task.DoesNotExist`` saying so."""
    tasks = Task.objects.select_related("device_class", "current_dataset", "challenge")
    task = _task_by_slug(tasks, slug, user)
    if task is None:
        raise Task.DoesNotExist(f"No task '{slug}'.")
    return task


def task_get_for_upload(*, slug: str, user: Any) -> Task:
    """``task_get_visible`` without the current dataset, which an upload never reads. The device
    class stays: the model's inspection asks whether the task needs a GPU, the notice names the
    class."""
    task = _task_by_slug(Task.objects.select_related("device_class"), slug, user)
    if task is None:
        raise Task.DoesNotExist(f"no task {slug!r} visible to this user")
    return task


@dataclass(frozen=True)
class TaskCounts:
    """Who takes part in a task: the one count every page says (task header, home card). The
    operators' baselines are counted apart: they are on the board but are not participants."""

    participants: int
    submissions: int
    baselines: int = 0


TASK_COUNTS_TTL_S = 30  # the task page's counts may be this old


def task_counts(*, task: Task) -> TaskCounts:
    """Submissions to ``task`` and the users who made them; the operators' baselines are not
    participants and their models are not counted, but how many baseline entrants there are is.
    Kept in the shared cache for ``TASK_COUNTS_TTL_S``: counting 100,000 submissions was most of
    a cached board page's time."""

    def count() -> tuple[int, int, int]:
        by_kind = Submission.objects.filter(task=task).aggregate(
            submissions=Count("pk", filter=Q(is_baseline=False)),
            participants=Count("user", distinct=True, filter=Q(is_baseline=False)),
            baselines=Count("pk", filter=Q(is_baseline=True)),  # each is its own entrant
        )
        return (by_kind["participants"], by_kind["submissions"], by_kind["baselines"])

    found = cached(_task_counts_key(task), count, TASK_COUNTS_TTL_S)
    return TaskCounts(*found)


def _task_counts_key(task: Task) -> str:
    return f"task-counts-3{settings.BOARD_CACHE_NAMESPACE}:{task.pk}"  # 3 numbers


def task_files_listed(*, task: Task, user: Any) -> QuerySet[TaskFile]:
    """The task page's data section: what ``user`` may see and download of ``task``'s files."""
    return TaskFile.objects.filter(task=task).listed_for(user)


BOARDS = (BOARD_PUBLIC, BOARD_PRIVATE)
LEADERBOARD_PAGE_SIZE = 50


@dataclass(frozen=True)
class LeaderboardPage:
    board: str
    track: Track | None  # None: the task's main board
    rows: list[LeaderboardRow]
    mine: LeaderboardRow | None  # the viewer's own row when it is not on this page
    own_submission_id: int | None  # the submission behind the viewer's (or their team's) row
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
    score = OrderBy(F(field), descending=task.direction.best_first_descending)
    return [score, F("created_at").asc(), F("id").asc()]


def leaderboard_boards(*, task: Task, user: Any) -> list[str]:
    """The tabs this viewer may open: private only once revealed (operators always)."""
    if task.private_revealed or getattr(user, "is_staff", False):
        return [BOARD_PUBLIC, BOARD_PRIVATE]
    return [BOARD_PUBLIC]


def leaderboard_refusal(*, task: Task, user: Any) -> str:
    """Why this viewer may not see the task's board (page, CSV, API, charts); "" when they may.
    Operators see every board; participants only a public one."""
    if getattr(user, "is_staff", False) or task.leaderboard == Task.Leaderboard.PUBLIC:
        return ""
    if task.leaderboard == Task.Leaderboard.BLIND:
        return (
            "Scores on this task are blind until the organisers reveal them: you see the status, "
            "errors and timing of your submissions, but no score."
        )
    return "The leaderboard of this task is hidden."


# --- Computed from Submission: the definition of the board, used to (re)build the read models.


def board_eligible(*, task: Task, board: str) -> QuerySet[Submission]:
    """The submissions that may stand on a board: THE definition, used by every rebuild, refresh
    and chart of the read models. Scored, visible submissions of the task; on a frozen board
    only those made before the freeze; only results on the task's current dataset version; on
    the private board of a task with a selection limit,
    only each participant's finals (``_finals``).

    Filters on the submissions themselves go before ``_finals``: the finals are chosen among
    the submissions that pass them."""
    eligible: QuerySet[Submission] = Submission.objects.on_leaderboard().filter(
        task=task,
        dataset_version_id=task.current_dataset_id,  # None: a task without versions
    )
    if board == BOARD_PRIVATE:
        eligible = eligible.filter(score_private__isnull=False)
    if task.leaderboard_frozen_at is not None:
        eligible = eligible.filter(created_at__lte=task.leaderboard_frozen_at)
    if board == BOARD_PRIVATE and task.final_selections:
        eligible = _finals(task, eligible)
    return eligible


# Who a board row belongs to: a team, a participant alone (a team of one without a Team row),
# or one baseline on its own; the window partitions of the board's queries. Two integers, the
# same groups as the keys of ``leaderboard_models.entrant_key`` ("b<id>", "t<team>", "u<user>"):
# a baseline's own id (else NULL), and its team negated or else its user (ids are positive, so
# a team never meets a user). Integers, not the "u<id>" strings: Django compiles this partition
# three times per query and twice per result, and the Concat/Cast form cost an eighth of a
# refresh.
ENTRANT = [
    Case(When(is_baseline=True, then=F("id")), output_field=BigIntegerField()),
    Case(
        When(team__isnull=False, then=-F("team_id")),
        default=F("user_id"),
        output_field=BigIntegerField(),
    ),
]


def _board_name(path: str = "") -> Coalesce:
    """The name a board shows for a submission at ``path``: a baseline's display name, its
    team's name, else its owner's username (``Submission.board_name`` in SQL, for the charts'
    one-query reads)."""
    return Coalesce(
        NullIf(F(f"{path}display_name"), Value("")),
        F(f"{path}team__name"),
        F(f"{path}user__username"),
    )


def entrant_of(s: Submission) -> str:
    """The key of the group ``ENTRANT`` puts ``s`` in."""
    return entrant_key(
        baseline=s.is_baseline, submission_id=s.pk, team_id=s.team_id, user_id=s.user_id
    )


def entrants_touched(s: Submission) -> list[str]:
    """The entrants a change to ``s`` may move: its own, and the one it belongs to with its
    baseline flag flipped (marking a baseline moves it off its owner's row onto one of its own)."""
    return [
        entrant_key(baseline=flag, submission_id=s.pk, team_id=s.team_id, user_id=s.user_id)
        for flag in (False, True)
    ]


def team_of(*, user: Any, task: Task) -> Team | None:
    """The team ``user`` is in on ``task``; None: they enter alone."""
    if not getattr(user, "pk", None):
        return None
    return Team.objects.filter(task=task, memberships__user=user).first()


def entrants_of_user(*, task_id: int, user_id: int) -> list[str]:
    """The entrants whose rows a change to ``user_id``'s submissions may move: theirs alone,
    and their team's when they are in one."""
    teams = TeamMembership.objects.filter(task_id=task_id, user_id=user_id)
    return [f"u{user_id}", *(f"t{t}" for t in teams.values_list("team_id", flat=True))]


def entrants_filter(entrants: Collection[str], *, baseline: str = "is_baseline") -> Q:
    """The rows of these entrants, as a filter on Submission (or, with ``baseline="baseline"``
    and ``submission_id`` for ids, on LeaderboardEntry): each key's own columns, so indexes
    serve it."""
    found = Q(pk__in=[])
    id_field = "pk" if baseline == "is_baseline" else "submission_id"
    by_kind: dict[str, list[int]] = {"b": [], "t": [], "u": []}
    for key in entrants:
        by_kind[key[0]].append(int(key[1:]))
    if by_kind["b"]:
        found |= Q(**{baseline: True, f"{id_field}__in": by_kind["b"]})
    if by_kind["t"]:
        found |= Q(team_id__in=by_kind["t"])
    if by_kind["u"]:
        found |= Q(**{baseline: False}, team__isnull=True, user_id__in=by_kind["u"])
    return found


def _finals(task: Task, eligible: QuerySet[Submission]) -> QuerySet[Submission]:
    """Each participant's selected submissions among ``eligible``; for a participant who
    selected none of them, their best ``task.final_selections`` by public score (ties to the
    earlier). Computed from the rows alone, never from the clock, so the kept board always
    equals a rebuild; selecting is refused once the task closes, so what it shows then is final.
    """
    by_user = ENTRANT  # a baseline is an entrant of its own, its own final
    numbered = eligible.annotate(
        chosen=Window(Count("id", filter=Q(selected=True)), partition_by=by_user),
        public_place=Window(RowNumber(), partition_by=by_user, order_by=_best_first(task, "score")),
    ).filter(Q(selected=True) | Q(chosen=0, public_place__lte=task.final_selections))
    return eligible.filter(pk__in=numbered.values("pk"))


def final_selection_text(*, task: Task, board: str) -> str:
    """What the board ranks, said on the page and in the API; empty when nothing to say."""
    if board != BOARD_PRIVATE or not task.final_selections:
        return ""
    n = task.final_selections
    finals = "submission" if n == 1 else f"{n} submissions"
    return (
        f"This board ranks each participant's selected final {finals} only; a participant "
        f"who selected none is ranked on their best {n} by public score."
    )


def _best_key(s: Submission) -> tuple[bool, float, datetime, int]:
    verdict: ranking.Verdict = s.verdict  # type: ignore[attr-defined]
    return (not verdict.ranked, verdict.rank_key, s.created_at, s.pk)


def best_rows_computed(
    *,
    task: Task,
    board: str = BOARD_PUBLIC,
    entrants: Collection[str] | None = None,
    rule: ranking.Rule | None = None,
) -> list[Submission]:
    """The best eligible submission per user under the task's ranking rule, best first (ranked
    ones, then the others), annotated with ``verdict`` (submissions.boards.ranking.Verdict),
    ``entries`` and ``last_submitted_at``. Ties go to the earlier submission.

    Under the primary metric this is one query: a window numbers each user's submissions
    best-first and only the first of each is kept. Other rules judge every eligible submission
    (``ranking.judge``) and keep each user's best."""
    if rule is None:  # else the caller read it already (one query for both boards)
        rule = task_rule(task, board)
    by_user = ENTRANT
    eligible = board_eligible(task=task, board=board)
    if entrants is not None:
        eligible = eligible.filter(entrants_filter(entrants))
    counted = eligible.annotate(
        entries=Window(Count("id"), partition_by=by_user),
        last_submitted_at=Window(Max("created_at"), partition_by=by_user),
    ).select_related("remeasurement")  # what submission_measures reads; entries need ids only
    rows: list[Submission]
    if rule.kind == ranking.PRIMARY:
        best_first = _best_first(task, score_field(board))
        ranked = counted.annotate(
            user_rank=Window(RowNumber(), partition_by=by_user, order_by=best_first)
        )
        rows = list(ranked.filter(user_rank=1).order_by(*best_first))
    else:
        rows = list(counted)
    best: dict[str, Submission] = {}
    for row in rows:
        row.verdict = ranking.judge(rule, submission_measures(row, board))  # type: ignore[attr-defined]
        key = entrant_of(row)
        if key not in best or _best_key(row) < _best_key(best[key]):
            best[key] = row
    return sorted(best.values(), key=_best_key)


def records_computed(*, task: Task, board: str = BOARD_PUBLIC) -> list[ScoreRecord]:
    """Each submission that beat the best score so far, oldest first: the steps of the chart.
    The running best is a window in the database, so only record-breaking rows travel."""
    field = score_field(board)
    running = (Max if task.direction.best_first_descending else Min)(field)
    records = (
        board_eligible(task=task, board=board)
        .annotate(best_so_far=Window(running, order_by=[F("created_at").asc(), F("id").asc()]))
        .filter(**{field: F("best_so_far")})
        .order_by("created_at", "id")
        .values_list("created_at", field, _board_name(), "id")
    )
    steps: list[ScoreRecord] = []
    for at, score, username, submission_id in records:
        if not steps or score != steps[-1].score:  # equal scores are ties, not new records
            steps.append(ScoreRecord(at, score, username, submission_id))
    return steps


# --- Read from the read models (kept by submissions.boards.leaderboard): what pages and the API
# use.


def _entries(task: Task, board: str, track: Track | None = None) -> QuerySet[LeaderboardEntry]:
    return LeaderboardEntry.objects.filter(task=task, board=board, track=track)


def leaderboard_tracks(*, task: Task) -> list[Track]:
    """The task's tracks in tab order: the boards beside its main one."""
    return list(Track.objects.filter(task=task))


def leaderboard_track(*, task: Task, slug: str) -> Track | None:
    """The track ``slug`` of the task; None for "" (the main board); else ``Track.DoesNotExist``
    saying so."""
    if not slug:
        return None
    track = Track.objects.filter(task=task, slug=slug).select_related("baseline").first()
    if track is None:
        raise Track.DoesNotExist(f"No track '{slug}' on this task.")
    return track


_RANK_ORDER = ["unranked", "rank_key", "created_at", "submission_id"]
# What a board row reads besides its entry: the name, the team, a finalist's re-measurement.
ROW_RELATED = ("submission__user", "submission__team", "submission__remeasurement")


def _fact_sheets(task: Task, entries: Collection[LeaderboardEntry]) -> dict[str, FactSheet]:
    """The entrants' fact sheets on a challenge's phase, by entrant key: one query (none off a
    challenge, where nobody is asked for one). A baseline has none."""
    teams = {e.team_id for e in entries if e.team_id is not None}
    users = {e.user_id for e in entries if e.team_id is None and not e.baseline}
    if task.challenge_id is None or not (teams or users):
        return {}
    sheets = FactSheet.objects.filter(task=task).filter(
        Q(team_id__in=teams) | Q(team__isnull=True, user_id__in=users)
    )
    return {
        entrant_key(baseline=False, submission_id=0, team_id=s.team_id, user_id=s.user_id): s
        for s in sheets
    }


def _row(
    task: Task, entry: LeaderboardEntry, rank: int, sheets: dict[str, FactSheet] | None = None
) -> LeaderboardRow:
    return LeaderboardRow(
        None if entry.unranked else rank,
        entry.submission,
        entry.score,
        entry.entries,
        entry.last_submitted_at,
        entry.value,
        entry.reason,
        board=entry.board,
        finals=entry.board == BOARD_PRIVATE and bool(task.final_selections),
        fact_sheet=(sheets or {}).get(entry.entrant),
    )


def leaderboard(
    *, task: Task, board: str = BOARD_PUBLIC, track: Track | None = None
) -> list[LeaderboardRow]:
    """Every ranked user with the full best submission (for the CSV export). One query; on a
    challenge's phase one more, for the entrants' fact sheets."""
    entries = _entries(task, board, track).select_related(*ROW_RELATED).order_by(*_RANK_ORDER)
    listed = list(entries)
    sheets = _fact_sheets(task, listed)
    return [_row(task, entry, index + 1, sheets) for index, entry in enumerate(listed)]


def _own_row(
    task: Task, board: str, user: Any, track: Track | None = None
) -> LeaderboardRow | None:
    if not getattr(user, "pk", None):
        return None
    teams = Team.objects.filter(task=task, memberships__user=user).values("pk")
    entry = (
        _entries(task, board, track)
        .filter(Q(team__in=teams) | Q(user=user, team__isnull=True, baseline=False))
        .select_related(*ROW_RELATED)
        .first()
    )
    if entry is None:
        return None
    better = _entries(task, board, track).filter(
        Q(unranked__lt=entry.unranked)
        | Q(unranked=entry.unranked, rank_key__lt=entry.rank_key)
        | Q(unranked=entry.unranked, rank_key=entry.rank_key, created_at__lt=entry.created_at)
        | Q(
            unranked=entry.unranked,
            rank_key=entry.rank_key,
            created_at=entry.created_at,
            submission_id__lt=entry.submission_id,
        )
    )
    return _row(task, entry, better.count() + 1, _fact_sheets(task, [entry]))


@dataclass(frozen=True)
class TaskCard:
    """A task as the home page shows it: counts, the board's leader and the viewer's own best
    (both None where the viewer may not see the board's scores)."""

    task: Task
    counts: TaskCounts
    leader: LeaderboardRow | None
    own: LeaderboardRow | None


def task_cards(*, user: Any) -> list[TaskCard]:
    """The home page's cards, one per task the user may see: a few queries per task, read from
    the kept board rows and the cached counts, never from the submissions."""
    cards = []
    for task in task_list_visible(user=user):
        shown = not leaderboard_refusal(task=task, user=user) and task.scores_shown_to(user)
        first = (
            _entries(task, BOARD_PUBLIC).select_related(*ROW_RELATED)
            .order_by(*_RANK_ORDER).first()
            if shown else None
        )  # fmt: skip
        leader = _row(task, first, 1) if first is not None and not first.unranked else None
        own = _own_row(task, BOARD_PUBLIC, user) if shown else None
        cards.append(TaskCard(task, task_counts(task=task), leader, own))
    return cards


def leaderboard_page(
    *,
    task: Task,
    board: str = BOARD_PUBLIC,
    track: Track | None = None,
    user: Any = None,
    sort: str = "rank",
    descending: bool = False,
    page: int = 1,
    page_size: int = LEADERBOARD_PAGE_SIZE,
) -> LeaderboardPage:
    """One page of the board sorted by any column, with each row's rank. A fixed number of
    queries whatever the board's size: count, the page (rank is a window over the board's
    entries, computed before the sort and the LIMIT), and the viewer's own row and rank."""
    entries = _entries(task, board, track)
    total = entries.count()
    pages = max(1, -(-total // page_size))
    page = min(max(1, page), pages)
    field = SORT_FIELDS.get(sort, "rank_key")
    # By rank: the ranked entries, then those outside the rule (each group by its rank key).
    fields = ["unranked", field] if field == "rank_key" else [field]
    order = [
        F(f).desc(nulls_last=True) if descending else F(f).asc(nulls_last=True) for f in fields
    ]
    # Rank is a window over all the board's entries, computed before the ORDER BY and LIMIT;
    # only the page's ids and ranks travel, then the page's rows are read by id.
    ranked = (
        entries.annotate(rank=Window(RowNumber(), order_by=[F(n).asc() for n in _RANK_ORDER]))
        .order_by(*order, *_RANK_ORDER)
        .values_list("pk", "rank")
    )
    ranks = dict(ranked[(page - 1) * page_size : page * page_size])
    by_id = LeaderboardEntry.objects.select_related(*ROW_RELATED).in_bulk(list(ranks))
    sheets = _fact_sheets(task, list(by_id.values()))
    shown = [_row(task, by_id[pk], rank, sheets) for pk, rank in ranks.items()]
    own = _own_row(task, board, user, track)
    on_page = own is not None and any(r.submission.pk == own.submission.pk for r in shown)
    return LeaderboardPage(
        board=board,
        track=track,
        rows=shown,
        mine=None if on_page else own,
        own_submission_id=own.submission.pk if own is not None else None,
        total=total,
        page=page,
        pages=pages,
        sort=sort if sort in SORT_FIELDS else "rank",
        descending=descending,
        frozen_at=task.leaderboard_frozen_at,
    )


@dataclass(frozen=True)
class SpeedPoint:
    username: str
    score: float
    latency_p50_ms: float
    device_class: str | None  # where it was timed; None: not recorded
    latency_spread: float | None = None  # across its timing passes


def leaderboard_speed_points(
    *, task: Task, board: str = BOARD_PUBLIC, track: Track | None = None
) -> list[SpeedPoint]:
    """Score, p50 latency and its spread of each entry with a latency, for the
    score-versus-latency chart, in the board's rank order. One query of five columns, whatever
    the board's size."""
    rows = (
        _entries(task, board, track)
        .filter(latency_p50_ms__isnull=False)
        .order_by(*_RANK_ORDER)
        .values_list(
            _board_name("submission__"),
            "score",
            "latency_p50_ms",
            "submission__timing__conditions__device_class",
            "submission__latency_spread",
        )
    )
    return [
        SpeedPoint(u, score, float(ms or 0.0), c if isinstance(c, str) else None, spread)
        for u, score, ms, c, spread in rows
    ]


def leaderboard_rule(
    *, task: Task, board: str = BOARD_PUBLIC, track: Track | None = None
) -> ranking.Rule:
    """The ranking rule of the task's board (or of one of its tracks), for the page, the CSV
    and the API to describe."""
    return track.rule(task, board) if track is not None else task_rule(task, board)


def leaderboard_best_over_time(*, task: Task, board: str = BOARD_PUBLIC) -> list[ScoreRecord]:
    """The steps of the best-score chart, oldest first (one query on the kept records)."""
    records = (
        LeaderboardRecord.objects.filter(task=task, board=board)
        .order_by("at", "id")
        .values_list("at", "score", _board_name("submission__"), "submission_id")
    )
    # The name is read now, through the submission: a renamed user's records show the new name.
    return [ScoreRecord(*record) for record in records]


def submissions_of(*, user: Any, task: Task | None = None) -> QuerySet[Submission]:
    submissions = Submission.objects.for_user(user).select_related(
        "task", "user", "dataset_version"
    )
    return submissions.filter(task=task) if task is not None else submissions


NOT_YOURS = "No such submission of yours."


def submission_get_own(*, user: Any, pk: int) -> Submission:
    """One of ``user``'s submissions (a teammate's included); else ``Submission.DoesNotExist``
    saying so."""
    try:  # the row by its key, and whose it is judged on it (a poll reads one row)
        submission = Submission.objects.select_related("task", "dataset_version").get(pk=pk)
    except Submission.DoesNotExist:
        raise Submission.DoesNotExist(NOT_YOURS) from None
    if not submission.belongs_to(user):
        raise Submission.DoesNotExist(NOT_YOURS)
    if submission.user_id == user.pk and isinstance(user, get_user_model()):
        submission.user = user  # the owner is the viewer, already loaded
    return submission


@dataclass(frozen=True)
class FinalChoice:
    """One task where the viewer chooses finals: their submissions that may be chosen."""

    task: Task
    submissions: list[Submission]
    can_change: bool  # False once the task has closed
    scores_shown: bool  # False while the task's board is blind to this viewer

    @property
    def chosen(self) -> int:
        return sum(s.selected for s in self.submissions)


def final_choices(*, user: Any) -> list[FinalChoice]:
    """For "My submissions": each task with a selection limit where the viewer has a
    submission that succeeded (or one still selected), newest first; no withdrawn task
    (``Task.withdrawn_for``), whose name is not shown. One query."""
    rows = (
        submissions_of(user=user)
        .filter(task__final_selections__gt=0)
        .filter(Q(status=Submission.Status.SUCCEEDED) | Q(selected=True))
    )
    by_task: dict[int, FinalChoice] = {}
    for s in rows:
        if s.task.withdrawn_for(user):
            continue
        if s.task_id not in by_task:
            by_task[s.task_id] = FinalChoice(
                s.task, [], not s.task.has_closed(), s.task.scores_shown_to(user)
            )
        by_task[s.task_id].submissions.append(s)
    return list(by_task.values())


def task_device_notice(*, task: Task) -> str:
    """Said before an upload (page and task API) and after it, while no worker of the task's
    device class is online; empty otherwise."""
    return queues.device_notice(task.device_class_slug, task.device_class.name)


def submission_queue_place(*, submission: Submission) -> dict[str, Any] | None:
    """Position, estimated start, and whether it waits for a device (no worker of its class
    online), for a queued submission; None otherwise. No worker or host names."""
    if submission.status != Submission.Status.QUEUED:
        return None
    online = queues.workers_online(submission.task.device_class_slug)
    return turns.queue_place(submission=submission, workers_online=online or 0)


def task_rescoring_count(*, task: Task) -> int:
    """Submissions queued or running again on the task's replaced dataset: the board says how
    many results are still to come back (submissions/tasks/datasets.py). No query for a task
    whose dataset was never replaced (its version 1, or none)."""
    current = task.current_dataset
    if current is None or current.number <= 1:
        return 0
    return Submission.objects.filter(
        task=task,
        status__in=[Submission.Status.QUEUED, Submission.Status.RUNNING],
        priority=Submission.RESCORE_PRIORITY,
    ).count()
