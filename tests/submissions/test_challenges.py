"""Challenges: an ordered list of phases (tasks), a page with the timeline and the current phase,
the API's list and detail, private challenges invisible, and tasks without a challenge as ever."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from submissions.challenges.selectors import challenge_timeline
from submissions.lifecycle.services import submission_create
from submissions.models import Challenge, ChallengeRegistration
from submissions.teams.services import team_create, team_leave
from tests.builders import linear_classifier
from tests.conftest import onnx_upload
from tests.submissions.challenge_support import HOUR, registered, two_phase_challenge

pytestmark = pytest.mark.django_db


def test_the_challenge_page_shows_the_timeline_with_the_current_phase_and_links_each_board(
    make_task: Any,
) -> None:
    _, first, second = two_phase_challenge(make_task, overview="Classify **digits**.")

    page = Client().get("/challenges/digits-cup/").content.decode()

    assert "<strong>digits</strong>" in page
    assert 'data-phase="1" data-state="current" aria-current="step"' in page
    assert 'data-phase="2" data-state="upcoming"' in page
    assert page.index("Development") < page.index("Test")
    assert f'href="{first.get_absolute_url()}" data-board' in page
    assert f'href="{second.get_absolute_url()}" data-board' in page


def test_the_current_phase_follows_the_tasks_windows(make_task: Any) -> None:
    challenge, first, second = two_phase_challenge(make_task)
    later = timezone.now() + 30 * HOUR

    phases = challenge_timeline(challenge=challenge, now=later)

    assert [(p.number, p.task, p.state) for p in phases] == [
        (1, first, "closed"),
        (2, second, "current"),
    ]


def test_the_api_lists_challenges_and_their_phases_in_order(make_task: Any) -> None:
    two_phase_challenge(make_task)
    api = APIClient()

    assert [c["slug"] for c in api.get("/api/challenges/").json()] == ["digits-cup"]
    detail = api.get("/api/challenges/digits-cup/").json()
    assert detail["terms"] == "Be fair."
    assert [(p["number"], p["task"], p["state"]) for p in detail["phases"]] == [
        (1, "digits-dev", "current"),
        (2, "digits-test", "upcoming"),
    ]
    assert detail["phases"][0]["leaderboard"] == "/api/tasks/digits-dev/leaderboard/"
    assert (detail["registration"], detail["registered"]) == (None, False)


def test_a_private_challenge_is_a_404_to_anyone_not_registered_or_invited(
    make_task: Any, alice: Any, bob: Any, django_user_model: Any
) -> None:
    challenge, _, _ = two_phase_challenge(
        make_task, visibility="private", invited_emails="Carol@Lab.example\n"
    )
    carol = django_user_model.objects.create_user("carol", email="carol@lab.example")
    registered(challenge, alice)

    def sees(user: Any) -> tuple[int, int, list[str]]:
        web, api = Client(), APIClient()
        if user is not None:
            web.force_login(user)
            api.force_authenticate(user)
        listed = [c["slug"] for c in api.get("/api/challenges/").json()]
        return (
            web.get("/challenges/digits-cup/").status_code,
            api.get("/api/challenges/digits-cup/").status_code,
            listed,
        )

    assert sees(None) == (404, 404, [])
    assert sees(bob) == (404, 404, [])
    assert sees(alice) == (200, 200, ["digits-cup"])
    assert sees(carol) == (200, 200, ["digits-cup"])
    assert "digits-cup" not in Client().get("/challenges/").content.decode()


def test_a_task_without_a_challenge_takes_uploads_as_ever(make_task: Any, alice: Any) -> None:
    task = make_task()
    w, b = np.zeros((64, 10)), np.zeros(10)
    upload = onnx_upload(linear_classifier(w, b))

    submission = submission_create(user=alice, task=task, upload=upload)

    assert (submission.status, submission.carried_from) == ("queued", None)
    assert Challenge.objects.count() == 0
    assert Client().get(task.get_absolute_url()).status_code == 200


def test_the_phases_of_a_private_challenge_are_hidden_with_it(
    make_task: Any, alice: Any, bob: Any
) -> None:
    challenge, first, _ = two_phase_challenge(make_task, visibility="private")
    make_task(slug="alone", title="Alone")
    registered(challenge, alice)

    def tasks(user: Any) -> tuple[list[str], int]:
        api = APIClient()
        api.force_authenticate(user)
        listed = sorted(t["slug"] for t in api.get("/api/tasks/").json())
        return listed, api.get(f"/api/tasks/{first.slug}/").status_code

    assert tasks(bob) == (["alone"], 404)
    assert tasks(alice) == (["alone", "digits-dev", "digits-test"], 200)
    assert Client().get(first.get_absolute_url()).status_code == 404


def test_a_registration_made_for_a_team_its_maker_left_shows_them_nothing_private(
    make_task: Any, alice: Any, bob: Any
) -> None:
    """The list and the challenge's own page follow one rule (``speaks_for``): the team's
    registration speaks for its members now, not for who made it."""
    challenge, first, _ = two_phase_challenge(make_task, visibility="private")
    first.max_team_size = 2
    first.save()
    team = team_create(user=alice, task=first, name="Owls")
    team.memberships.create(task=first, user=bob)
    ChallengeRegistration.objects.create(
        challenge=challenge, user=alice, team=team, status="approved",
        terms_accepted_at=timezone.now(),
    )  # fmt: skip
    team_leave(user=alice, team=team)

    def sees(user: Any) -> tuple[int, list[str]]:
        api = APIClient()
        api.force_authenticate(user)
        listed = [c["slug"] for c in api.get("/api/challenges/").json()]
        return api.get("/api/challenges/digits-cup/").status_code, listed

    assert sees(alice) == (404, [])
    assert sees(bob) == (200, ["digits-cup"])
