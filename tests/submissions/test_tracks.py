"""Tracks: a phase's other boards. Each ranks the same results by a rule of its own (here an
efficiency track: p50 latency, lowest first, among entries with accuracy ≥ 0.75, as NTIRE ranks
runtime above a PSNR threshold), on the page's tabs, in the API and in the CSV, with read models
of its own that a new result refreshes and the rebuild check covers."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from submissions.boards.tracks import track_create
from submissions.challenges.services import challenge_phase_advance
from submissions.models import LeaderboardEntry, Submission, Task, Track
from tests.submissions.admin_support import task_change_data
from tests.submissions.challenge_support import two_phase_challenge
from tests.submissions.test_ranking_rules import board as board  # the fixture
from tests.submissions.test_ranking_rules import in_step, timed
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

EFFICIENCY = {
    "name": "Efficiency",
    "slug": "efficiency",
    "description": "Fastest model with accuracy at least 0.75.",
    "kind": "measure",
    "measure": "latency",
    "metric_threshold": 0.75,
}


@pytest.fixture
def efficiency(board: dict[str, Any]) -> Track:
    return track_create(task_id=board["task"].pk, **EFFICIENCY)


def ranked(path: str) -> list[tuple[int | None, str]]:
    return [(r["rank"], r["user"]) for r in APIClient().get(path).json()["rows"]]


def test_a_track_ranks_the_same_results_by_its_own_rule(efficiency: Track) -> None:
    main = ranked("/api/tasks/digits/leaderboard/")
    track = ranked("/api/tasks/digits/leaderboard/?track=efficiency")

    assert main == [(1, "bob"), (2, "operator"), (3, "alice")]
    assert track == [(1, "operator"), (2, "bob"), (None, "alice")]
    in_step()


def test_the_api_says_which_track_and_lists_them_all(efficiency: Track) -> None:
    shown = APIClient().get("/api/tasks/digits/leaderboard/?track=efficiency").json()
    alice = shown["rows"][-1]

    assert shown["track"] == "efficiency"
    assert shown["ranking"]["kind"] == "measure"
    assert shown["ranking"]["description"] == (
        "Ranked by p50 latency (lower is better) among entries with Top-1 accuracy ≥ 0.75."
    )
    assert shown["tracks"] == [
        {
            "slug": "efficiency",
            "name": "Efficiency",
            "description": EFFICIENCY["description"],
            "kind": "measure",
        }
    ]
    assert alice["ranking_value"] == 1.0  # its latency, what the track ranks on
    assert alice["not_ranked_because"] == "Top-1 accuracy 0.7 is below the minimum 0.75"
    assert APIClient().get("/api/tasks/digits/").json()["tracks"] == shown["tracks"]


def test_an_unknown_track_is_a_404_in_the_api_and_the_csv(efficiency: Track) -> None:
    response = APIClient().get("/api/tasks/digits/leaderboard/?track=speed")

    assert response.status_code == 404
    assert response.json() == {"detail": "No track 'speed' on this task."}
    assert Client().get("/tasks/digits/leaderboard.csv?track=speed").status_code == 404


def test_the_csv_of_a_track_is_in_its_order_and_named_after_it(efficiency: Track) -> None:
    response = Client().get("/tasks/digits/leaderboard.csv?track=efficiency")
    lines = list(csv.DictReader(io.StringIO(response.content.decode())))

    assert 'filename="digits-efficiency-public-leaderboard.csv"' in response["Content-Disposition"]
    assert [(r["rank"], r["user"]) for r in lines] == [
        ("1", "operator"),
        ("2", "bob"),
        ("", "alice"),
    ]
    assert "ranking (measure)" in lines[0]


def test_the_page_shows_a_tab_per_track_and_the_chosen_board(efficiency: Track) -> None:
    main = Client().get("/tasks/digits/").content.decode()
    track = Client().get("/tasks/digits/?track=efficiency").content.decode()

    assert 'data-track="efficiency"' in main and ">Main</a>" in main
    assert "Ranked by Top-1 accuracy" in main
    assert "Ranked by p50 latency (lower is better)" in track
    assert "P50 latency ↓" not in track  # what it ranks on has a column already: p50 / batch
    assert "leaderboard.csv?board=public&amp;track=efficiency" in track
    assert track.index('data-user="operator"') < track.index('data-user="alice"')
    # an old link to a track that is gone shows the main board
    assert "Ranked by Top-1 accuracy" in Client().get("/tasks/digits/?track=gone").content.decode()


def test_a_new_result_moves_its_entrant_on_every_track(
    efficiency: Track,
    board: dict[str, Any],
    django_user_model: Any,
) -> None:
    carol = django_user_model.objects.create_user("carol", password="pw")
    scored(board["task"], carol, 0.90, **timed(0.5))

    assert ranked("/api/tasks/digits/leaderboard/?track=efficiency")[0] == (1, "carol")
    assert ranked("/api/tasks/digits/leaderboard/")[1] == (2, "carol")
    in_step()


def test_the_rebuild_check_covers_every_track(efficiency: Track) -> None:
    LeaderboardEntry.objects.filter(track=efficiency, board="public").update(value=99.0)
    out = StringIO()

    with pytest.raises(CommandError):
        call_command("leaderboard_rebuild", "--check", stdout=out)
    assert "digits public entry on track efficiency" in out.getvalue()

    call_command("leaderboard_rebuild", stdout=StringIO())
    in_step()


def test_a_track_that_cannot_rank_is_refused(board: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="Choose the measure"):
        track_create(task_id=board["task"].pk, name="Speed", slug="speed", kind="measure")
    assert not Track.objects.exists()


def test_the_operator_adds_a_track_in_the_admin_and_it_is_ranked(
    board: dict[str, Any],
    operator: Any,
) -> None:
    console = Client()
    console.force_login(operator)
    task = board["task"]
    fields = {
        "name": "Parameters", "slug": "params", "position": "1", "kind": "measure",
        "measure": "parameters", "latency_percentile": "p50", "weights": "{}",
    }  # fmt: skip
    data = task_change_data(console, task.pk, **{
        "tracks-TOTAL_FORMS": "1", **{f"tracks-0-{k}": v for k, v in fields.items()},
    })  # fmt: skip

    response = console.post(f"/admin/submissions/task/{task.pk}/change/", data)

    assert response.status_code == 302, response.content.decode()[-3000:]
    assert ranked("/api/tasks/digits/leaderboard/?track=params") == [
        (1, "alice"),
        (2, "operator"),
        (3, "bob"),
    ]
    in_step()


def test_the_challenge_page_links_each_phases_tracks(make_task: Any) -> None:
    challenge, first, _ = two_phase_challenge(make_task)
    track_create(task_id=first.pk, name="Speed", slug="speed", kind="measure", measure="latency")

    page = Client().get(challenge.get_absolute_url()).content.decode()

    assert f'href="/tasks/{first.slug}/?track=speed" data-track-board="speed">Speed</a>' in page


def test_advancing_a_phase_carries_each_entrants_best_on_every_track(
    make_task: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    challenge, first, second = two_phase_challenge(make_task)
    strong = scored(first, alice, 0.95, **timed(40.0))
    fast = scored(first, alice, 0.80, **timed(1.0))
    scored(first, alice, 0.70, **timed(5.0))  # neither her best nor her fastest
    track_create(task_id=first.pk, name="Speed", slug="speed", kind="measure", measure="latency")
    Task.objects.filter(pk=first.pk).update(closes_at=timezone.now() - timedelta(minutes=1))
    Task.objects.filter(pk=second.pk).update(opens_at=timezone.now() - timedelta(minutes=1))

    with django_capture_on_commit_callbacks(execute=False):
        advanced = challenge_phase_advance(challenge_id=challenge.pk, carry="best")

    assert advanced.carried == 2
    carried = Submission.objects.filter(task=second).values_list("carried_from_id", flat=True)
    assert sorted(carried) == sorted([strong.pk, fast.pk])
