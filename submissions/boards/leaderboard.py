"""Keeping the leaderboard read models (LeaderboardEntry, LeaderboardRecord) in step with the
submissions. Every change that can move a submission on or off a board calls one of these in
the same transaction: a re-run, an operator's flag, a freeze, a metric change. A new result is
the one exception, since it is the hot path: its transaction only records it as pending
(``leaderboard_result_pending``), so the submitter sees the score when it commits, and the
refresh runs right after in a transaction of its own (``leaderboard_drain``). One process at a
time drains a task's pending results, all of them in one refresh per entrant; while jobs wait in
its queue a worker, after each job, leaves results younger than ``BOARD_LAG_S`` to the one after
the queue's last job, and takes the older ones once without looking again for newer ones, so a
burst of results costs a few refreshes, not one each; the queue's last job waits for a drain in
flight rather than leave its result to it. A result whose
process died before its refresh is drained by recovery; ``leaderboard_differences`` lists the
pending results it sees.

A task's tracks (``Track``: the same results ranked by a rule of their own) have entries of
their own, refreshed with the main board's, in the same transaction and under the same locks;
the chart is one per board, the same for every track.

Entries are always recomputed from Submission with the same window query the selectors define
(``selectors.best_rows_computed``), never patched by hand, so a refresh cannot drift from it.
The chart's steps follow a new result incrementally (``_record_add``: a running best only
improves, so one row is inserted and the later steps it beats are dropped); when a step may have
gone (deleted, flagged, re-scored, out of its owner's finals) the chart is recomputed.

Locks (PostgreSQL advisory locks, released at commit; keys are (task id, slot)):

- the board, slot 0: a result's refresh holds it SHARED, so two workers' results go on side by
  side; a whole-board recompute (``leaderboard_rebuild``, a composite's baseline) holds it
  EXCLUSIVE, and waits for the refreshes in flight, whose writes it then sees;
- the entrant, slot = user id: one refresh of a user's entries at a time (they are deleted and
  written again);
- the chart, slot -1 (public) or -2 (private): SHARED to decide that a result is no step, so
  EXCLUSIVE writers of the chart cannot be in flight and the decision stands until commit;
  EXCLUSIVE to add a step or recompute the chart.
- the drain, slot -3, a session lock (not released at commit): held by the one process that
  refreshes the task's pending results; another finds it taken and leaves its own result to it
  (the queue's last job waits for it instead: ``leaderboard_drain``'s ``wait_s``).

Every write also bumps the board's version (``submissions.boards.cache``), when it writes and once
the transaction commits: cached board fragments and ETags are keyed on it.
"""

from __future__ import annotations

import bisect
import time
import zlib
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from django.db import connection, models, transaction
from django.db.models import Q
from django.utils import timezone

from submissions.boards import cache as board_cache
from submissions.boards import ranking
from submissions.lifecycle.selectors import (
    BOARD_PRIVATE,
    BOARDS,
    best_rows_computed,
    board_eligible,
    entrant_of,
    entrants_filter,
    entrants_of_user,
    entrants_touched,
    records_computed,
    score_field,
)
from submissions.models import Submission, Task
from submissions.models.boards import LeaderboardEntry, LeaderboardPending, LeaderboardRecord
from submissions.models.ranking import (
    RankingRule,
    Track,
    rule_on,
    submission_measures,
    task_rule_row,
    task_tracks,
)


def _entry(task: Task, board: str, row: Submission, track: Track | None) -> LeaderboardEntry:
    verdict: ranking.Verdict = row.verdict  # type: ignore[attr-defined]
    return LeaderboardEntry(
        task=task,
        board=board,
        track=track,
        user_id=row.user_id,
        team_id=row.team_id,
        submission=row,
        score=getattr(row, score_field(board)),
        unranked=not verdict.ranked,
        value=verdict.value,
        reason=verdict.reason[:500],
        rank_key=verdict.rank_key,
        created_at=row.created_at,
        entries=row.entries,  # type: ignore[attr-defined]
        last_submitted_at=row.last_submitted_at,  # type: ignore[attr-defined]
        latency_p50_ms=verdict_latency(row),
        throughput=row.throughput,
        device_name=row.device_name,
        baseline=row.is_baseline,
    )


def verdict_latency(row: Submission) -> float | None:
    """The p50 the board sorts its latency column on: the ranked one (a finalist's
    re-measurement where it has one, ``ranking_models.submission_measures``)."""
    return submission_measures(row, "public").latencies_ms.get("p50")


def _entries_computed(
    task: Task,
    board: str,
    entrants: list[str] | None,
    rule: ranking.Rule | None = None,
    track: Track | None = None,
) -> list[LeaderboardEntry]:
    """The entries a refresh writes, unsaved: one per entrant, judged by the task's ranking
    rule (``rule``, when the caller read it), or on a track by the track's."""
    if track is not None:
        rule = track.rule(task, board)
    return [
        _entry(task, board, row, track)
        for row in best_rows_computed(task=task, board=board, entrants=entrants, rule=rule)
    ]


def _records_computed(task: Task, board: str) -> list[LeaderboardRecord]:
    """The chart records a rebuild writes, unsaved."""
    return [
        LeaderboardRecord(
            task=task, board=board, submission_id=r.submission_id, score=r.score, at=r.at
        )
        for r in records_computed(task=task, board=board)
    ]


_BOARD_SLOT = 0
_CHART_SLOT = {BOARD_PRIVATE: -2}  # any other board: -1


def _lock(task_id: int, slot: int, *, shared: bool = False) -> None:
    """Wait for one of the advisory locks above; held until the transaction ends. SQLite has
    none and needs none: its transactions take the database's write lock up front, so one
    refresh runs at a time (portal.settings, the embedded default)."""
    if connection.vendor != "postgresql":
        return
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [task_id, slot])


def _lock_chart(task_id: int, board: str, *, shared: bool = False) -> None:
    _lock(task_id, _CHART_SLOT.get(board, -1), shared=shared)


def _entrant_slot(entrant: str) -> int:
    """An entrant's advisory lock slot: positive, so never the board's (0) or a chart's (< 0).
    Two entrants sharing a slot only wait for each other; they never see wrong rows."""
    return zlib.crc32(entrant.encode()) % 2_000_000_000 + 1


def _lock_board(task_id: int, entrants: list[str] | None) -> None:
    """Before a refresh: the whole board exclusively (``entrants`` None), else the board shared
    and each entrant's entries exclusively, in slot order so two refreshes cannot deadlock."""
    _lock(task_id, _BOARD_SLOT, shared=entrants is not None)
    for slot in sorted({_entrant_slot(e) for e in entrants or []}):
        _lock(task_id, slot)
    board_cache.board_changes(task_id=task_id)


def _refresh_entries(
    task: Task,
    board: str,
    entrants: list[str] | None,
    rule: ranking.Rule | None = None,
    tracks: list[Track] | None = None,
) -> None:
    """Recompute the entrants' entries (every entry: ``entrants`` None) on the main board and
    on each track (``tracks``, when the caller read them)."""
    if tracks is None:
        tracks = task_tracks(task)
    rows = _entries_computed(task, board, entrants, rule)
    for track in tracks:
        rows += _entries_computed(task, board, entrants, track=track)
    stale = LeaderboardEntry.objects.filter(task=task, board=board)  # every track's too
    if entrants is not None:
        stale = stale.filter(entrants_filter(entrants, baseline="baseline"))
    stale.delete()
    LeaderboardEntry.objects.bulk_create(rows, batch_size=2000)


def _rebuild_records(task: Task, board: str) -> None:
    LeaderboardRecord.objects.filter(task=task, board=board).delete()
    LeaderboardRecord.objects.bulk_create(_records_computed(task, board))


def _whole_board_moves(task: Task, submissions: Iterable[Submission]) -> bool:
    """Whether every entry may move: a composite's baseline changed (its ratios are relative
    to it), or the rule lost its baseline (deleted); the task's rule or a track's."""
    composites = [
        *RankingRule.objects.filter(task=task, kind=ranking.COMPOSITE).values_list(
            "baseline_id", flat=True
        ),
        *Track.objects.filter(task=task, kind=ranking.COMPOSITE).values_list(
            "baseline_id", flat=True
        ),
    ]
    ids = {s.pk for s in submissions}
    return any(baseline is None or baseline in ids for baseline in composites)


def leaderboard_rebuild(*, task_id: int) -> None:
    """Recompute every entry and record of a task: after a freeze, a metric change, a ranking
    rule change, or repair. It covers the results pending so far, which it then forgets."""
    with transaction.atomic():
        _lock_board(task_id, None)
        task = Task.objects.get(pk=task_id)
        # Read before the recompute, which therefore sees each of their results; one pending
        # from a result committed later is left for its drain.
        covered = list(_pending(task_id).values_list("pk", flat=True))
        for board in BOARDS:
            _refresh_entries(task, board, None)
            _rebuild_records(task, board)
        LeaderboardPending.objects.filter(pk__in=covered).delete()


def _fields(model: type[models.Model]) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if f.attname not in {"id", "task_id"}]


def _differences(
    what: str, key: str, kept: Sequence[models.Model], rebuilt: Sequence[models.Model]
) -> list[str]:
    """One line per difference, rows matched by ``key`` (unique within one board)."""
    fields = _fields(type((*kept, *rebuilt)[0])) if kept or rebuilt else []
    old = {getattr(r, key): r for r in kept}
    new = {getattr(r, key): r for r in rebuilt}
    lines = []
    for k in sorted(old.keys() | new.keys()):
        label = f"{what} {key}={k}"
        if k not in new:
            lines.append(f"{label}: kept, but a rebuild has no such row")
        elif k not in old:
            lines.append(f"{label}: missing, a rebuild writes it")
        else:
            lines += [
                f"{label}: {f} is {getattr(old[k], f)!r}, a rebuild writes {getattr(new[k], f)!r}"
                for f in fields
                if getattr(old[k], f) != getattr(new[k], f)
            ]
    return lines


def leaderboard_differences(*, task_id: int) -> list[str]:
    """How the kept rows of a task differ from what a rebuild would write; [] when in step.

    Reads only: ``manage.py leaderboard_rebuild --check`` reports these and changes nothing.
    """
    task = Task.objects.get(pk=task_id)
    found: list[str] = []
    pending = _pending(task_id).order_by("pk")
    for waiting in pending.values_list("submission_id", "created_at"):
        found.append(
            f"{task.slug} result of submission {waiting[0]}: its board refresh has not run yet "
            f"(pending since {waiting[1]:%Y-%m-%d %H:%M:%S.%f})"
        )
    for board in BOARDS:
        for track in [None, *task_tracks(task)]:
            where = f" on track {track.slug}" if track is not None else ""
            found += _differences(
                f"{task.slug} {board} entry{where}",
                "entrant",
                list(LeaderboardEntry.objects.filter(task=task, board=board, track=track)),
                _entries_computed(task, board, None, track=track),
            )
        found += _differences(
            f"{task.slug} {board} record",
            "submission_id",
            list(LeaderboardRecord.objects.filter(task=task, board=board)),
            _records_computed(task, board),
        )
    return found


def _beats_before(task: Task, board: str, submission: Submission, score: float) -> bool:
    """Whether the submission beats the step of the chart before it (ties are no steps)."""
    at, pk = submission.created_at, submission.pk
    before = (
        LeaderboardRecord.objects.filter(task=task, board=board)
        .filter(Q(at__lt=at) | Q(at=at, submission_id__lt=pk))
        .order_by("-at", "-submission_id")
        .values_list("score", flat=True)
        .first()
    )
    return before is None or task.direction.beats(score, before)


def _beats_steps(
    task: Task, steps: list[tuple[datetime, int, float]], submission: Submission, score: float
) -> bool:
    """``_beats_before`` against the chart's steps read once ((at, submission id, score),
    oldest first): one query for every candidate of a drain, not one each."""
    at = bisect.bisect_left(steps, (submission.created_at, submission.pk))
    return at == 0 or task.direction.beats(score, steps[at - 1][2])


def _record_add(task: Task, board: str, submission: Submission, score: float) -> None:
    """Make an eligible submission a step of the chart when it beats the step before it, and
    drop the later steps it beats or ties. Exact: adding a row only raises the running best,
    so no other row becomes a step."""
    if not _beats_before(task, board, submission, score):
        return
    at, pk = submission.created_at, submission.pk
    later = LeaderboardRecord.objects.filter(task=task, board=board).filter(
        Q(at__gt=at) | Q(at=at, submission_id__gt=pk)
    )
    beaten = [r.pk for r in later.only("score") if not task.direction.beats(r.score, score)]
    LeaderboardRecord.objects.filter(pk__in=beaten).delete()
    LeaderboardRecord.objects.create(
        task=task, board=board, submission=submission, score=score, at=at
    )


def _steps_gone(task: Task, board: str, mine: list[Submission]) -> bool:
    """Whether a step of the chart may have gone: one of ``mine`` is a step (re-scored,
    flagged), or a step of their owners is no longer eligible (e.g. out of their finals)."""
    users = {s.user_id for s in mine}
    teams = {s.team_id for s in mine if s.team_id is not None}  # a teammate's step may go too
    owners = Q(submission__user_id__in=users) | Q(submission__team_id__in=teams)
    steps = dict(
        LeaderboardRecord.objects.filter(owners, task=task, board=board).values_list(
            "submission_id", "score"
        )
    )
    if not steps:
        return False
    if steps.keys() & {s.pk for s in mine}:
        return True
    still = dict(
        board_eligible(task=task, board=board)
        .filter(pk__in=list(steps))
        .values_list("pk", score_field(board))
    )
    return still != steps


def _records_follow(task: Task, board: str, mine: list[Submission]) -> None:
    """Keep the chart of ``board`` in step after ``mine`` changed (their owners' entries are
    already refreshed): a new step added in place, the chart recomputed when a step may have
    gone, nothing (under the shared chart lock) when no step changes."""
    if _steps_gone(task, board, mine):
        _lock_chart(task.pk, board)
        _rebuild_records(task, board)
        return
    field = score_field(board)
    on_board = dict(
        board_eligible(task=task, board=board)
        .filter(pk__in=[s.pk for s in mine], **{f"{field}__isnull": False})
        .values_list("pk", field)
    )
    candidates = [s for s in mine if s.pk in on_board]
    if not candidates:
        return
    # Decide under the shared lock: a step is then only ever added after this commits.
    _lock_chart(task.pk, board, shared=True)
    steps = list(
        LeaderboardRecord.objects.filter(task=task, board=board)
        .order_by("at", "submission_id")
        .values_list("at", "submission_id", "score")
    )
    if not any(_beats_steps(task, steps, s, on_board[s.pk]) for s in candidates):
        return
    # Can't upgrade a shared lock without risking a deadlock: recompute under an exclusive one.
    # (Reached only when a result breaks the record: rare on a board of any size.)
    _lock_chart(task.pk, board)
    for s in sorted(candidates, key=lambda s: (s.created_at, s.pk)):
        _record_add(task, board, s, on_board[s.pk])


def leaderboard_submissions_changed(
    *, submission_ids: Iterable[int], new_results: bool = False
) -> None:
    """Refresh the entries of the submissions' owners, and the chart when it may have moved.
    No task-wide lock: results of different users are kept side by side (see the locks above);
    a composite's baseline moves every entry, so that one takes the board exclusively.
    ``new_results``: the submissions only gained a result (the drain), so no baseline flag
    moved and each touches its own entrant only, not also the one with its flag flipped."""
    with transaction.atomic():
        submissions = list(Submission.objects.filter(pk__in=list(submission_ids)))
        touched = (lambda s: [entrant_of(s)]) if new_results else entrants_touched
        for task_id in sorted({s.task_id for s in submissions}):
            mine = [s for s in submissions if s.task_id == task_id]
            users: list[str] | None = sorted({e for s in mine for e in touched(s)})
            task = Task.objects.get(pk=task_id)
            if _whole_board_moves(task, mine):
                users = None
            _lock_board(task_id, users)
            task = Task.objects.get(pk=task_id)  # as it is now we hold the lock
            rule_row = task_rule_row(task)  # both boards' rule in one query
            tracks = task_tracks(task)  # and the tracks' in one more
            for board in BOARDS:
                _refresh_entries(task, board, users, rule_on(rule_row, task, board), tracks)
                if users is None:
                    _rebuild_records(task, board)
                else:
                    _records_follow(task, board, mine)


def leaderboard_user_refresh(*, task_id: int, user_id: int) -> None:
    """After a submission was deleted: its owner's (or their team's) next best moves up; the
    chart is rebuilt since the deleted row may have been one of its steps. Every entry is
    refreshed when the deleted row was a composite's baseline."""
    with transaction.atomic():
        task = Task.objects.get(pk=task_id)
        mine = entrants_of_user(task_id=task_id, user_id=user_id)
        users = None if _whole_board_moves(task, []) else mine
        _lock_board(task_id, users)
        task = Task.objects.get(pk=task_id)
        for board in BOARDS:
            _refresh_entries(task, board, users)
            _lock_chart(task_id, board)
            _rebuild_records(task, board)


def leaderboard_selection_changed(*, task_id: int, user_id: int) -> None:
    """After a participant's (or their team's) finals changed: that private entry, and the
    private chart."""
    with transaction.atomic():
        mine = entrants_of_user(task_id=task_id, user_id=user_id)
        _lock_board(task_id, mine)
        task = Task.objects.get(pk=task_id)
        _refresh_entries(task, BOARD_PRIVATE, mine)
        _lock_chart(task_id, BOARD_PRIVATE)
        _rebuild_records(task, BOARD_PRIVATE)


def leaderboard_entrants_changed(*, task_id: int, entrants: list[str]) -> None:
    """After submissions moved between entrants (a team joined, left, merged or disbanded):
    their entries on both boards, and the charts (the finals of a private board may change)."""
    with transaction.atomic():
        moved = sorted(set(entrants))
        _lock_board(task_id, moved)
        task = Task.objects.get(pk=task_id)
        for board in BOARDS:
            _refresh_entries(task, board, moved)
            _lock_chart(task_id, board)
            _rebuild_records(task, board)


# --- A new result: recorded as pending in its own transaction, refreshed right after it.

_DRAIN_SLOT = -3
DRAIN_BATCH = 200  # pending results refreshed in one transaction
DRAIN_BUDGET_S = 5.0  # one process drains this long at most, then leaves the rest
# While more results are on their way (a queue with jobs waiting), a worker refreshes after a job
# only the results pending longer than this, and after the queue's last job all of them: a burst of
# results costs a few refreshes, not one each, and its board is at most about this late.
BOARD_LAG_S = 1.0
DRAIN_LOOK_S = 0.01  # how often a drain that waits for the lock looks again
# How long the queue's last job waits for another process's drain: one drain runs at most
# DRAIN_BUDGET_S and then lets go.
DRAIN_WAIT_S = DRAIN_BUDGET_S + 1.0


def _pending(task_id: int) -> models.QuerySet[LeaderboardPending]:
    return LeaderboardPending.objects.filter(task_id=task_id)


def leaderboard_result_pending(*, task_id: int, submission_id: int) -> None:
    """In a new result's transaction: its board refresh is owed (``leaderboard_drain``)."""
    LeaderboardPending.objects.create(task_id=task_id, submission_id=submission_id)


def _try_drain_lock(task_id: int, wait_s: float = 0.0) -> bool:
    """Whether this process may drain the task now (SQLite: always; it writes one at a time).
    ``wait_s``: how long to wait for a process that holds it (looked at every few ms)."""
    if connection.vendor != "postgresql":
        return True
    deadline = time.monotonic() + wait_s
    with connection.cursor() as cursor:
        while True:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [task_id, _DRAIN_SLOT])
            if cursor.fetchone()[0]:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(DRAIN_LOOK_S)


def _drain_unlock(task_id: int) -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [task_id, _DRAIN_SLOT])


def _drain_batch(task_id: int) -> int:
    """Refresh the entrants of up to ``DRAIN_BATCH`` pending results and forget those: one
    transaction, whose refresh reads every result the pending rows it read stand for."""
    with transaction.atomic():
        pending = _pending(task_id).order_by("pk").values_list("pk", "submission_id")
        batch = list(pending[:DRAIN_BATCH])
        if batch:
            leaderboard_submissions_changed(submission_ids={s for _, s in batch}, new_results=True)
            LeaderboardPending.objects.filter(pk__in=[pk for pk, _ in batch]).delete()
        return len(batch)


def leaderboard_drain(
    *,
    task_id: int,
    budget_s: float = DRAIN_BUDGET_S,
    look_again: bool = True,
    wait_s: float = 0.0,
) -> int:
    """Refresh the board for the task's pending results; how many this call covered.

    Only one process drains a task at a time (the drain lock): one that finds it taken waits
    up to ``wait_s`` for it, then returns, and the holder covers its result too. No result is
    left behind: the holder looks for pending rows again after it lets go of the lock
    (``look_again``), and any result committed before another process failed to take the lock is
    committed before that release, so that look sees it. Only a drain that runs past
    ``budget_s`` (a flood of results) leaves the rest to the next result of the task, or to
    recovery.

    ``look_again=False`` is a worker's drain while more jobs wait in its queue
    (``leaderboard_drain_stale``): it refreshes what is pending when it takes the lock, in
    batches, and stops. Looking again there made a worker chase the other workers' results
    one refresh each (a refresh outlasts a small model's job) until its budget ran out, while
    it ran no job: the later jobs' drains cover those, and the queue's last job drains with
    ``wait_s``, so it is never the one left behind."""
    deadline = time.monotonic() + budget_s
    done = 0
    while _try_drain_lock(task_id, wait_s):
        try:
            while count := _drain_batch(task_id):
                done += count
                # A short batch took every pending row there was: no empty transaction to
                # find that out. One committed since is seen by the look after the release.
                if count < DRAIN_BATCH or time.monotonic() >= deadline:
                    break
        finally:
            _drain_unlock(task_id)
        if not look_again or time.monotonic() >= deadline or not _pending(task_id).exists():
            break
    return done


def leaderboard_drain_stale(
    *, older_than_s: float, look_again: bool = False, wait_s: float = 0.0
) -> dict[int, int]:
    """Drain every task with a result pending longer than ``older_than_s``: a worker's part
    after each job (``BOARD_LAG_S`` while jobs wait in its queue; after the queue's last job 0,
    ``look_again`` and ``wait_s``: every pending result, its own included, even when another
    process holds the drain), and recovery's (a process died between its result and the
    refresh). Each task's drain takes every result pending when it starts, fresh ones too (one
    refresh for all, ``leaderboard_drain``). The task id → results covered."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    tasks = (
        LeaderboardPending.objects.filter(created_at__lt=cutoff)
        .values_list("task_id", flat=True)
        .distinct()
    )
    return {
        task_id: leaderboard_drain(task_id=task_id, look_again=look_again, wait_s=wait_s)
        for task_id in sorted(set(tasks))
    }
