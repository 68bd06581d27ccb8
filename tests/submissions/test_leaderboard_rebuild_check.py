"""``manage.py leaderboard_rebuild --check``: the kept read models equal a rebuild after every
path that moves a submission on or off a board, and a drift is reported, not repaired."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from submissions.admin.services import submission_flag_set
from submissions.lifecycle.selectors import leaderboard_best_over_time
from submissions.lifecycle.services import (
    submission_cancel,
    submission_rerun,
    submission_start,
    submission_succeed,
)
from submissions.models import Submission
from submissions.models.boards import LeaderboardEntry, LeaderboardRecord
from tests.submissions.test_leaderboard_read_models import result, running
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db


def check() -> str:
    out = StringIO()
    call_command("leaderboard_rebuild", "--check", stdout=out)
    return out.getvalue()


def kept_rows() -> list[tuple[Any, ...]]:
    entries = LeaderboardEntry.objects.order_by("board", "user_id").values_list()
    records = LeaderboardRecord.objects.order_by("board", "submission_id").values_list()
    return [*entries, *records]


def test_kept_rows_equal_a_rebuild_after_results_flags_reruns_and_cancels(
    make_task: Any, alice: Any, bob: Any, operator: Any
) -> None:
    task = make_task()
    first = running(task, alice)
    submission_succeed(submission_id=first.pk, result=result(0.6))
    better = running(task, alice)
    submission_succeed(submission_id=better.pk, result=result(0.9))
    theirs = scored(task, bob, 0.8, score_private=0.7)
    scored(task, operator, 0.7, score_private=0.9)
    assert "in step" in check()

    submission_flag_set(submission_ids=[better.pk], flag="hidden", value=True, reason="copied")
    assert "in step" in check()
    submission_flag_set(
        submission_ids=[theirs.pk], flag="disqualified", value=True, reason="two accounts"
    )
    assert "in step" in check()
    submission_flag_set(submission_ids=[better.pk], flag="hidden", value=False)
    assert submission_rerun(submission_id=first.pk)  # off the board while it runs again
    assert "in step" in check()
    assert submission_cancel(submission_id=first.pk, user=alice)  # and stays off
    assert "in step" in check()
    assert submission_rerun(submission_id=better.pk)
    assert submission_start(submission_id=better.pk, worker_name="w") is not None
    assert submission_succeed(submission_id=better.pk, result=result(0.5))
    assert "in step" in check()

    before = kept_rows()
    call_command("leaderboard_rebuild", stdout=StringIO())
    assert [row[1:] for row in kept_rows()] == [row[1:] for row in before]  # ids aside


def test_a_drifted_row_is_reported_and_left_as_it_is(make_task: Any, alice: Any, bob: Any) -> None:
    task = make_task()
    mine = scored(task, alice, 0.9)
    theirs = scored(task, bob, 0.5)
    LeaderboardEntry.objects.filter(submission=theirs, board="public").update(score=0.1)
    LeaderboardRecord.objects.filter(submission=mine, board="public").delete()
    drifted = kept_rows()
    out = StringIO()

    with pytest.raises(CommandError) as refused:
        call_command("leaderboard_rebuild", "--check", stdout=out)

    assert refused.value.returncode == 1
    assert out.getvalue().splitlines() == [
        f"digits public entry entrant=u{bob.pk}: score is 0.1, a rebuild writes 0.5",
        f"digits public record submission_id={mine.pk}: missing, a rebuild writes it",
    ]
    assert kept_rows() == drifted  # a check changes nothing
    call_command("leaderboard_rebuild", "digits", stdout=StringIO())
    assert "in step" in check()


def test_an_unknown_task_slug_is_refused(db: Any) -> None:
    with pytest.raises(CommandError, match="no task with the slug nope"):
        call_command("leaderboard_rebuild", "--check", "nope")


def test_a_renamed_user_appears_under_the_new_name_on_the_chart(make_task: Any, alice: Any) -> None:
    task = make_task()
    scored(task, alice, 0.9)
    alice.username = "alicia"
    alice.save()

    assert [r.username for r in leaderboard_best_over_time(task=task)] == ["alicia"]
    assert Submission.objects.get().user.username == "alicia"
