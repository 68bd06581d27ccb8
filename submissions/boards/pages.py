"""The leaderboard part of the task page, the API page and the CSV, cached per board version.

What a board shows changes only when its read models are written or the task changes: the
rendered fragments are kept in the shared cache under the board's version
(``submissions.boards.cache``) and a digest of the task's own fields, so a result, an operator's
action or an edit of the task is seen on the next request, never a stale one. The viewer's own
row and "you" highlight are in the page's fragment, so its key holds the viewer's id.

Pollers get ETags built from the same version: an unchanged board answers 304 without work.
Anonymous readers of a public board may also keep a page for a few seconds
(``board_cache_control``): every one of them sees the same page, so a shared cache in front of
the site may serve it; a signed-in viewer's page (their own row) and a board that is not public
never are. The site keeps that answer itself for as long (``PublicAnswer``), and gives it, or a
304, to the next anonymous reader of the same board and query without reading the database,
while the board's version is still the one it was made under: a result, an operator's decision
and an edit of the task in the admin bump it and are seen at once; what moves with the clock
alone, and the counts, within ``PUBLIC_MAX_AGE_S``, as through any cache in front.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.forms.models import model_to_dict
from django.template.loader import render_to_string
from redis.exceptions import RedisError

from submissions.boards.cache import board_version, cached
from submissions.boards.charts import Chart
from submissions.boards.display import (
    best_score_chart,
    board_columns,
    leaderboard_rows_html,
    pareto_chart,
)
from submissions.boards.ranking import Rule, describe
from submissions.boards.row import BOARD_PUBLIC
from submissions.lifecycle import selectors
from submissions.models import Task, Track

FRAGMENT_TTL_S = 600  # a bound on memory only: a new version is a new key anyway
# How long a browser or a shared cache in front may keep an anonymous reader's public board:
# short, because a new result must show within a reload or two at a deadline.
PUBLIC_MAX_AGE_S = 5
PUBLIC_CONTROL = f"public, max-age={PUBLIC_MAX_AGE_S}"
T = TypeVar("T")
log = logging.getLogger(__name__)


def _task_digest(task: Task) -> str:
    """Changes whenever any of the task's own fields does (rule text, metric, freeze, ...)."""
    fields = model_to_dict(task)
    return hashlib.blake2b(repr(sorted(fields.items())).encode(), digest_size=8).hexdigest()


def board_state(task: Task, *parts: object) -> str:
    """A digest of the board's version, the task and ``parts`` (query, viewer): equal digests,
    equal board content."""
    raw = repr((board_version(task_id=task.pk), _task_digest(task), task.pk, parts))
    return hashlib.blake2b(raw.encode(), digest_size=12).hexdigest()


def board_etag(task: Task, *parts: object) -> str:
    return f'"{board_state(task, *parts)}"'


def board_cached(state: str, render: Callable[[], T]) -> T:
    """``render()``'s value for a board's ``state`` (``board_state``: its version, the task, and
    whatever else the value depends on), from the shared cache until the board or the task
    changes."""
    return cached("board:" + state, render, FRAGMENT_TTL_S)


def board_cache_control(*, task: Task, board: str, user: Any) -> str:
    """The Cache-Control of a board's page or API answer. Public for a few seconds only when
    anyone may see it as this viewer does: an anonymous viewer of a public task's public board.
    Otherwise private and revalidated each time (the ETag makes that cheap)."""
    anonymous = not getattr(user, "is_authenticated", False)
    if anonymous and board == BOARD_PUBLIC and task.leaderboard == Task.Leaderboard.PUBLIC:
        return PUBLIC_CONTROL
    return "private, no-cache"


@dataclass(frozen=True)
class PublicAnswer:
    """What an anonymous reader of a public board was answered, kept for the next one: good
    while the board's version is still ``version``, read before the answer was made (a write in
    between gives a newer version, so the answer is never taken for the newer board)."""

    task_id: int
    version: int
    etag: str
    content: Any  # the page's HTML, or the API's data


def public_answer_key(request: Any, *parts: object) -> str | None:
    """Where the answer to this request is kept: ``parts`` say what it answers (the view, the
    task's slug, the validated query, never the raw query string, so junk parameters share one
    entry). None when it is not kept: not a GET, or a reader signed in."""
    if request.method != "GET" or getattr(request.user, "is_authenticated", True):
        return None
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()
    return f"public-answer{settings.BOARD_CACHE_NAMESPACE}:{digest}"


def public_answer(key: str | None) -> PublicAnswer | None:
    """The answer kept under ``key`` while its board is unchanged; None otherwise, or while the
    cache cannot be reached."""
    if key is None:
        return None
    try:
        kept = cache.get(key)
    except RedisError:
        return None
    if not (isinstance(kept, tuple) and len(kept) == len(fields(PublicAnswer))):
        return None  # none kept, or kept by a release that kept something else
    answer = PublicAnswer(*kept)
    return answer if board_version(task_id=answer.task_id) == answer.version else None


def public_answer_keep(key: str | None, answer: PublicAnswer) -> None:
    """Keep ``answer`` for ``PUBLIC_MAX_AGE_S``, as a cache in front may keep it: as a tuple of
    plain values, which any release reads back, where a pickled class of ours is read only by
    one whose class has not moved."""
    if key is None:
        return
    kept = tuple(getattr(answer, field.name) for field in fields(PublicAnswer))
    try:
        cache.set(key, kept, PUBLIC_MAX_AGE_S)
    except RedisError as exc:
        log.warning("cache unavailable, a public board answer not kept: %s", exc)


def board_fragments(
    *,
    task: Task,
    board: str,
    user: Any,
    sort: str,
    descending: bool,
    page: int,
    track: Track | None = None,
) -> dict[str, Any]:
    """The board's context for the task page (its main board, or ``track``'s): the page, its
    rows' HTML, the charts."""
    viewer = getattr(user, "pk", None)
    slug = track.slug if track is not None else ""
    key = "board-page:" + board_state(task, board, slug, sort, descending, page, viewer)

    def render() -> dict[str, Any]:
        shown = selectors.leaderboard_page(
            task=task,
            board=board,
            track=track,
            user=user,
            sort=sort,
            descending=descending,
            page=page,
        )
        rule = selectors.leaderboard_rule(task=task, board=board, track=track)
        return {
            "page": shown,
            "rule_text": describe(rule),
            "finals_text": selectors.final_selection_text(task=task, board=board),
            "columns": board_columns(
                task=task, rule=rule, sort=shown.sort, descending=shown.descending
            ),
            "rows_html": leaderboard_rows_html(
                task=task,
                rule=rule,
                rows=shown.listed,
                own_submission_id=shown.own_submission_id,
                by_rank=shown.sort == "rank" and not shown.descending,
            ),
            **_charts(task, board, rule, track),
        }

    return cached(key, render, FRAGMENT_TTL_S)


def _charts(task: Task, board: str, rule: Rule, track: Track | None) -> dict[str, Any]:
    """The best-score and score-against-latency charts: the same for every viewer and page.
    A track's: the same steps, its own entries' points (drawn in its rank order)."""
    key = "board-charts:" + board_state(task, board, track.slug if track is not None else "")

    def render() -> dict[str, Any]:
        records = selectors.leaderboard_best_over_time(task=task, board=board)
        points = selectors.leaderboard_speed_points(task=task, board=board, track=track)
        chart = best_score_chart(records)
        pareto = pareto_chart(task=task, rule=rule, points=points)
        # Rendered here, once per version: thousands of points take the template engine
        # hundreds of milliseconds, the whole page's budget.
        return {
            "chart_html": _chart_html(chart, kind="step"),
            "pareto_html": _chart_html(
                pareto.chart if pareto else None, kind="scatter", label="score against latency"
            ),
            "pareto_note": pareto.note if pareto else "",
        }

    return cached(key, render, FRAGMENT_TTL_S)


def _chart_html(chart: Chart | None, **options: str) -> str:
    if chart is None:
        return ""
    return render_to_string("partials/chart.html", {"chart": chart, **options})
