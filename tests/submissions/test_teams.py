"""Teams: created, joined by a single-use invite, merged under the task's quotas, left; one
quota and one board row for the whole team; a solo participant is untouched by all of it."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.services import api_token_create
from submissions.lifecycle.quotas import quota_get, team_id_of
from submissions.lifecycle.selectors import leaderboard, submissions_of
from submissions.models import Submission, Team
from submissions.models import TeamInvite as TeamInviteModel
from submissions.teams.services import (
    TeamRefused,
    team_create,
    team_disband,
    team_invite_create,
    team_join,
    team_leave,
    team_member_remove,
)
from submissions.web.serializers import LeaderboardRowSerializer
from tests.submissions.test_leaderboard_read_models import assert_in_step
from tests.submissions.test_quota import model_bytes
from tests.submissions.test_read_api import scored as scored_alone

pytestmark = pytest.mark.django_db


needs_row_locks = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs PostgreSQL row locks (select_for_update)"
)


@pytest.fixture
def carol(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("carol", password="pw-carol-123")


@pytest.fixture
def team_task(make_task: Any) -> Any:
    return make_task(max_team_size=3, submissions_total=5, submissions_per_day=5)


def scored(task: Any, user: Any, score: float) -> Submission:
    """A scored submission counted for the uploader's team, as an upload is."""
    return scored_alone(task, user, score, team_id=team_id_of(user=user, task=task))


def join(user: Any, team: Team) -> Team:
    inviter = team.memberships.first()
    assert inviter is not None
    return team_join(user=user, code=team_invite_create(user=inviter.user, team=team).code)


def names(task: Any, board: str = "public") -> list[str]:
    return [r.submission.board_name for r in leaderboard(task=task, board=board)]


def test_a_team_stands_on_the_board_as_one_row_under_its_name(
    team_task: Any, alice: Any, bob: Any, carol: Any
) -> None:
    scored(team_task, alice, 0.5)
    scored(team_task, carol, 0.4)
    team = team_create(user=alice, task=team_task, name="Lab A")
    assert names(team_task) == ["Lab A", "carol"]
    scored(team_task, bob, 0.6)
    join(bob, team)
    assert names(team_task) == ["Lab A", "carol"]
    row = leaderboard(task=team_task)[0]
    assert row.team == "Lab A" and row.entries == 2 and row.score == 0.6
    assert LeaderboardRowSerializer(row).data["team"] == "Lab A"
    carol_alone = leaderboard(task=team_task)[1]
    assert LeaderboardRowSerializer(carol_alone).data["team"] == ""  # carol alone: no team
    assert_in_step(team_task)


def test_a_team_and_a_participant_with_the_same_id_stand_apart(
    team_task: Any, alice: Any, bob: Any, carol: Any
) -> None:
    """The board groups by entrant: a team whose id is a participant's id is still another row
    (teams and users are told apart in the partition, not merged by number)."""
    team = Team.objects.create(pk=carol.pk, task=team_task, name="Lab Same", created_by=alice)
    team.memberships.create(task=team_task, user=alice)
    scored(team_task, alice, 0.7)  # the team's
    scored(team_task, carol, 0.5)  # carol alone, whose user id is the team's id
    assert sorted(names(team_task)) == ["Lab Same", "carol"]
    assert_in_step(team_task)


def test_an_invite_is_single_use(team_task: Any, alice: Any, bob: Any, carol: Any) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    code = team_invite_create(user=alice, team=team).code
    team_join(user=bob, code=code)
    with pytest.raises(TeamRefused, match="already used"):
        team_join(user=carol, code=code)


def test_a_team_is_no_bigger_than_the_task_allows(
    make_task: Any, alice: Any, bob: Any, carol: Any
) -> None:
    task = make_task(max_team_size=2)
    team = team_create(user=alice, task=task, name="Pair")
    join(bob, team)
    with pytest.raises(TeamRefused, match="at most 2 per team"):
        join(carol, team)


def test_a_task_without_teams_refuses_one(make_task: Any, alice: Any) -> None:
    with pytest.raises(TeamRefused, match="takes no teams"):
        team_create(user=alice, task=make_task(), name="Lab")


def test_every_members_upload_counts_against_the_teams_quota(
    team_task: Any, alice: Any, bob: Any
) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    join(bob, team)
    for user in (alice, bob, alice):
        scored(team_task, user, 0.1)
    assert quota_get(user=bob, task=team_task).used_total == 3
    assert quota_get(user=alice, task=team_task).left == 2
    assert quota_get(user=alice, task=team_task).team == "Lab A"


def test_a_merge_over_the_tasks_quota_is_refused_and_changes_nothing(
    team_task: Any, alice: Any, bob: Any
) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    for _ in range(3):
        scored(team_task, alice, 0.1)
        scored(team_task, bob, 0.2)
    with pytest.raises(TeamRefused, match="more than its 5 per team"):
        join(bob, team)
    assert list(team.memberships.values_list("user__username", flat=True)) == ["alice"]
    assert Submission.objects.filter(user=bob, team__isnull=True).count() == 3
    assert names(team_task) == ["bob", "Lab A"]


def test_a_merge_of_two_teams_brings_the_members_and_submissions_along(
    team_task: Any, alice: Any, bob: Any, carol: Any
) -> None:
    scored(team_task, alice, 0.3)
    scored(team_task, bob, 0.9)
    ours = team_create(user=alice, task=team_task, name="Lab A")
    theirs = team_create(user=bob, task=team_task, name="Lab B")
    join(carol, theirs)
    assert names(team_task) == ["Lab B", "Lab A"]
    team_join(user=bob, code=team_invite_create(user=alice, team=ours).code)
    assert sorted(ours.memberships.values_list("user__username", flat=True)) == [
        "alice",
        "bob",
        "carol",
    ]
    assert not Team.objects.filter(pk=theirs.pk).exists()
    assert names(team_task) == ["Lab A"]
    assert_in_step(team_task)


def test_after_the_merge_deadline_membership_is_frozen(
    make_task: Any, alice: Any, bob: Any
) -> None:
    task = make_task(max_team_size=3, team_merge_deadline=timezone.now() + timedelta(hours=1))
    team = team_create(user=alice, task=task, name="Lab A")
    code = team_invite_create(user=alice, team=team).code
    type(task).objects.filter(pk=task.pk).update(
        team_merge_deadline=timezone.now() - timedelta(minutes=1)
    )
    with pytest.raises(TeamRefused, match="frozen"):
        team_join(user=bob, code=code)
    with pytest.raises(TeamRefused, match="frozen"):
        team_leave(user=alice, team=team)


def test_leaving_takes_ones_own_uploads_back_and_the_board_follows(
    team_task: Any, alice: Any, bob: Any
) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    join(bob, team)
    scored(team_task, alice, 0.3)
    scored(team_task, bob, 0.8)
    assert names(team_task) == ["Lab A"]
    team_leave(user=bob, team=team)
    assert names(team_task) == ["bob", "Lab A"]
    assert_in_step(team_task)
    join(bob, team)
    team_member_remove(user=alice, team=team, member_id=bob.pk)
    assert names(team_task) == ["bob", "Lab A"]
    assert_in_step(team_task)


def test_only_the_creator_removes_members(team_task: Any, alice: Any, bob: Any, carol: Any) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    join(bob, team)
    join(carol, team)
    with pytest.raises(TeamRefused, match="creator"):
        team_member_remove(user=bob, team=team, member_id=carol.pk)


def test_disbanding_gives_every_submission_back_to_its_uploader(
    team_task: Any, alice: Any, bob: Any
) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    join(bob, team)
    scored(team_task, alice, 0.3)
    scored(team_task, bob, 0.8)
    team_disband(team_id=team.pk)
    assert names(team_task) == ["bob", "alice"]
    assert_in_step(team_task)


def test_members_see_the_teams_submissions_and_nobody_else_does(
    team_task: Any, alice: Any, bob: Any, carol: Any
) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    join(bob, team)
    mine = scored(team_task, alice, 0.3)
    assert list(submissions_of(user=bob)) == [mine]
    assert list(submissions_of(user=carol)) == []


def test_a_solo_participant_is_shown_and_counted_as_before(team_task: Any, alice: Any) -> None:
    scored(team_task, alice, 0.3)
    assert names(team_task) == ["alice"]
    assert LeaderboardRowSerializer(leaderboard(task=team_task)[0]).data["team"] == ""
    assert quota_get(user=alice, task=team_task).team == ""
    assert not Team.objects.exists()


@needs_row_locks
@pytest.mark.django_db(transaction=True)
def test_three_members_uploading_in_parallel_share_a_quota_of_five(
    team_task: Any, alice: Any, bob: Any, carol: Any, queue: Any, live_portal: str, settings: Any
) -> None:
    """Each request runs in the live server's own thread and PostgreSQL connection; the team's
    row lock makes the members' uploads count one after another."""
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "uploads": "1000/hour"}
    team = team_create(user=alice, task=team_task, name="Lab A")
    join(bob, team)
    join(carol, team)
    tokens = [api_token_create(user=u, name="parallel").secret for u in (alice, bob, carol)]
    start = threading.Barrier(12)

    def send(variant: int) -> int:
        start.wait()
        response = requests.post(
            f"{live_portal}/api/submissions/",
            headers={"Authorization": f"Token {tokens[variant % 3]}"},
            data={"task": team_task.slug},
            files={"file": (f"m{variant}.onnx", model_bytes(variant))},
            timeout=120,
        )
        return response.status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        codes = list(pool.map(send, range(12)))
    assert sorted(codes) == [201] * 5 + [400] * 7
    assert Submission.objects.filter(team=team).count() == 5
    assert Submission.objects.filter(task=team_task).count() == 5


@needs_row_locks
@pytest.mark.django_db(transaction=True)
def test_an_upload_that_waited_for_a_join_counts_for_the_team_it_joined(
    team_task: Any, alice: Any, bob: Any, queue: Any
) -> None:
    """A join holds the user's row until it commits; an upload waiting for that row must see
    the new membership once it has the lock. (Read in the statement that waited, the team would
    come from that statement's snapshot, taken before the join committed.)"""
    import psycopg2
    from django.db import connections

    from submissions.lifecycle.services import submission_create
    from tests.conftest import onnx_upload

    team = team_create(user=alice, task=team_task, name="Lab A")
    settings_dict = connection.settings_dict
    joiner = psycopg2.connect(
        dbname=settings_dict["NAME"],
        user=settings_dict["USER"],
        host=settings_dict["HOST"] or None,
        port=settings_dict["PORT"] or None,
        password=settings_dict["PASSWORD"] or None,
    )
    stored: dict[str, Any] = {}

    def upload() -> None:
        try:
            stored["row"] = submission_create(
                user=bob, task=team_task, upload=onnx_upload(model_bytes(7))
            )
        finally:
            connections.close_all()

    try:
        with joiner.cursor() as cursor:  # the join's transaction, as team_join orders it
            cursor.execute("SELECT id FROM auth_user WHERE id = %s FOR NO KEY UPDATE", [bob.pk])
            cursor.execute(
                "INSERT INTO submissions_teammembership (team_id, task_id, user_id, joined_at) "
                "VALUES (%s, %s, %s, now())",
                [team.pk, team_task.pk, bob.pk],
            )
            uploading = threading.Thread(target=upload)
            uploading.start()
            waiting = 0
            for _ in range(200):  # until the upload waits for bob's row
                cursor.execute("SELECT pg_stat_clear_snapshot()")  # else one per transaction
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
                waiting = cursor.fetchone()[0]
                if waiting:
                    break
                time.sleep(0.05)
            assert waiting, "the upload never waited for the user's row"
        joiner.commit()
        uploading.join(timeout=60)
    finally:
        joiner.close()
    assert stored["row"].team_id == team.pk
    assert Submission.objects.get(pk=stored["row"].pk).team_id == team.pk


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_invite_accept_and_leave_through_the_api(team_task: Any, alice: Any, bob: Any) -> None:
    created = api(alice).post("/api/tasks/digits/team/", {"name": "Lab A"}, format="json")
    assert created.status_code == 201 and created.json()["members"] == ["alice"]
    team_id = created.json()["id"]
    invite = api(alice).post(f"/api/teams/{team_id}/invites/").json()
    joined = api(bob).post("/api/teams/join/", {"code": invite["code"]}, format="json")
    assert joined.status_code == 200 and joined.json()["members"] == ["alice", "bob"]
    again = api(bob).post("/api/teams/join/", {"code": invite["code"]}, format="json")
    assert again.status_code == 409 and "already used" in again.json()["detail"]
    assert api(bob).get("/api/tasks/digits/team/").json()["name"] == "Lab A"
    assert api(bob).post(f"/api/teams/{team_id}/leave/").status_code == 204
    assert api(bob).get("/api/tasks/digits/team/").status_code == 404


def test_the_last_member_leaves_and_the_team_ends_with_the_board_in_step(
    team_task: Any, alice: Any
) -> None:
    created = api(alice).post("/api/tasks/digits/team/", {"name": "Lab A"}, format="json")
    team_id = created.json()["id"]
    scored(team_task, alice, 0.5)

    left = api(alice).post(f"/api/teams/{team_id}/leave/")

    assert left.status_code == 204
    assert not Team.objects.filter(pk=team_id).exists()
    assert names(team_task) == ["alice"]  # her upload is hers again, alone on the board
    assert_in_step(team_task)


def test_removing_someone_who_is_not_a_member_is_refused_not_an_error(
    team_task: Any, alice: Any, bob: Any
) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    for member_id in (999_999, bob.pk):  # no such user; a user who is not in the team
        removed = api(alice).delete(f"/api/teams/{team.pk}/members/{member_id}/")
        assert removed.status_code == 409, removed.content
        assert removed.json() == {"detail": "That participant is not in Lab A."}
    assert list(team.memberships.values_list("user__username", flat=True)) == ["alice"]


def test_a_non_member_sees_nothing_private_of_a_team(
    team_task: Any, alice: Any, bob: Any, carol: Any
) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    join(bob, team)
    theirs = scored(team_task, bob, 0.7)
    assert api(alice).get(f"/api/submissions/{theirs.pk}/").status_code == 200  # a member
    assert api(carol).get(f"/api/submissions/{theirs.pk}/").status_code == 404
    assert api(carol).get("/api/submissions/").json()["count"] == 0
    invite = api(carol).post(f"/api/teams/{team.pk}/invites/")
    assert invite.status_code == 409 and "Only a member" in invite.json()["detail"]
    removal = api(carol).delete(f"/api/teams/{team.pk}/members/{bob.pk}/")
    assert removal.status_code == 409
    public = api(carol).get(f"/api/teams/{team.pk}/").json()
    assert set(public) == {"id", "name", "task", "members", "created_by"}
    client = Client()
    client.force_login(carol)
    page = client.get(f"/teams/{team.pk}/").content.decode()
    assert "Lab A" in page and "bob" in page and "invite" not in page.lower()
    assert "Make an invite link" not in page


def test_the_team_page_creates_invites_and_the_link_joins(
    team_task: Any, alice: Any, bob: Any
) -> None:
    client = Client()
    client.force_login(alice)
    client.post("/tasks/digits/team/", {"action": "create", "name": "Lab A"})
    page = client.post("/tasks/digits/team/", {"action": "invite"}).content.decode()
    code = TeamInviteModel.objects.get().code
    assert f"/teams/join/{code}/" in page
    other = Client()
    other.force_login(bob)
    assert other.post(f"/teams/join/{code}/").status_code == 302
    assert "bob" in other.get("/tasks/digits/team/").content.decode()


def test_operators_see_and_disband_a_team_in_the_admin(
    team_task: Any, alice: Any, bob: Any, operator: Any
) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    join(bob, team)
    scored(team_task, bob, 0.8)
    client = Client()
    client.force_login(operator)
    listing = client.get("/admin/submissions/team/").content.decode()
    assert "Lab A" in listing
    assert "bob" in client.get(f"/admin/submissions/team/{team.pk}/change/").content.decode()
    client.post(
        "/admin/submissions/team/",
        {"action": "disband", "_selected_action": [team.pk]},
    )
    assert not Team.objects.exists()
    assert names(team_task) == ["bob"]
    assert_in_step(team_task)


def test_every_member_sees_the_teams_row_as_their_own(
    team_task: Any, alice: Any, bob: Any, carol: Any
) -> None:
    team = team_create(user=alice, task=team_task, name="Lab A")
    join(bob, team)
    scored(team_task, bob, 0.9)  # the team's best entry is bob's upload
    scored(team_task, carol, 0.5)

    def row_classes(user: Any) -> dict[str, str]:
        client = Client()
        client.force_login(user)
        page = client.get(team_task.get_absolute_url()).content.decode()
        rows = re.findall(r'<tr class="([^"]*)" data-user="(\w+)">', page)
        return {who: classes for classes, who in rows}

    assert row_classes(alice) == {"bob": "mine", "carol": ""}  # alice uploaded nothing herself
    assert row_classes(bob) == {"bob": "mine", "carol": ""}
    assert row_classes(carol) == {"bob": "", "carol": "mine"}
