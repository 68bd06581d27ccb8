"""Board visibility: a blind board shows participants the status, errors and timing of their
submissions but no score, their own included, anywhere (board page, charts, CSV, API, My
submissions, the submission page), until the operator reveals it by making it public."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from submissions.admin.services import task_leaderboard_set
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

SCORE = 0.8731  # distinctive: found in no page unless a score is shown


def signed_in(user: Any) -> tuple[Client, APIClient]:
    page, api = Client(), APIClient()
    page.force_login(user)
    api.force_authenticate(user)
    return page, api


def everything_alice_sees(s: Any) -> list[str]:
    page, api = signed_in(s.user)
    return [
        page.get("/tasks/digits/").content.decode(),
        page.get("/tasks/digits/?board=private").content.decode(),
        page.get("/tasks/digits/leaderboard.csv").content.decode(),
        page.get("/submissions/").content.decode(),
        page.get(s.get_absolute_url()).content.decode(),
        api.get("/api/tasks/digits/leaderboard/").content.decode(),
        api.get("/api/submissions/").content.decode(),
        api.get(f"/api/submissions/{s.pk}/").content.decode(),
    ]


@pytest.fixture
def blind(make_task: Any, alice: Any) -> Any:
    task = make_task(leaderboard="blind", private_revealed=True, final_selections=1)
    return scored(
        task,
        alice,
        SCORE,
        score_private=SCORE,
        metrics={"accuracy": SCORE, "macro_f1": SCORE},
        metrics_private={"accuracy": SCORE},
        latency_p50_ms=2.5,
    )


def test_a_blind_board_shows_its_owner_no_score_anywhere(blind: Any) -> None:
    seen = everything_alice_sees(blind)
    for text in seen:
        assert "0.873" not in text and "macro_f1" not in text
    board, _, csv, listing, detail, board_api, list_api, detail_api = seen
    assert "Scores on this task are blind until the organisers reveal them" in board
    assert '<figure class="chart"' not in board and "data-pareto" not in board  # no charts
    assert "blind until the organisers reveal them" in board_api and "Not Found" in csv
    assert "Succeeded" in listing and ">blind</span>" in listing
    assert "data-blind" in detail and "2.50 ms" in detail  # the timing is still shown
    assert '"scores_blind":true' in detail_api and '"latency_p50_ms":2.5' in detail_api
    assert '"status":"succeeded"' in list_api and '"score"' not in list_api


def test_the_blind_board_http_answers_are_not_found(blind: Any) -> None:
    page, api = signed_in(blind.user)
    assert page.get("/tasks/digits/leaderboard.csv").status_code == 404
    assert api.get("/api/tasks/digits/leaderboard/").status_code == 404


def test_operators_see_the_blind_board_with_its_scores(blind: Any, operator: Any) -> None:
    page, api = signed_in(operator)
    assert "0.8731" in page.get("/tasks/digits/").content.decode()
    assert api.get("/api/tasks/digits/leaderboard/").json()["rows"][0]["score"] == SCORE


def test_revealing_the_board_shows_the_owner_their_scores_again(blind: Any) -> None:
    task_leaderboard_set(task_ids=[blind.task_id], leaderboard="public")
    board, _, csv, listing, detail, board_api, _, detail_api = everything_alice_sees(blind)
    assert "0.8731" in board and "0.8731" in csv and "0.8731" in listing
    assert "0.8731" in detail and f'"score":{SCORE}' in board_api
    assert '"scores_blind":false' in detail_api and f'"score":{SCORE}' in detail_api


def test_a_hidden_board_still_shows_owners_their_own_scores(make_task: Any, alice: Any) -> None:
    s = scored(make_task(leaderboard="hidden"), alice, SCORE)
    page, api = signed_in(alice)
    assert "leaderboard of this task is hidden" in page.get("/tasks/digits/").content.decode()
    assert api.get(f"/api/submissions/{s.pk}/").json()["score"] == SCORE


def test_the_cli_shows_blind_instead_of_a_score(
    blind: Any, live_portal: str, tmp_path: Any
) -> None:
    from accounts.services import api_token_create
    from tests.portal.client_support import Oep

    token = api_token_create(user=blind.user, name="tests").secret
    oep = Oep(tmp_path, url=live_portal, token=token)
    listing, status = oep("submissions"), oep("status", str(blind.pk))
    assert listing.returncode == 0 and status.returncode == 0, listing.stderr + status.stderr
    assert "blind" in listing.stdout and "0.873" not in listing.stdout
    assert "Score:" in status.stdout and "blind" in status.stdout
    assert "0.873" not in status.stdout
