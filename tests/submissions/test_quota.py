"""Quotas: what counts, what is left, duplicates, the open window, and parallel uploads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
import requests
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.services import api_token_create
from submissions.lifecycle.quotas import quota_and_duplicate, quota_get
from submissions.lifecycle.selectors import task_get_for_upload
from submissions.models import Submission, Task
from submissions.teams.services import team_create
from tests.builders import linear_classifier
from tests.conftest import onnx_upload

Status = Submission.Status


def model_bytes(variant: int) -> bytes:
    """A valid digits model; each variant is a different file (a different sha256)."""
    return linear_classifier(np.eye(64, 10), np.full(10, float(variant)))


def api_as(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def upload(client: APIClient, slug: str, data: bytes, name: str = "m.onnx") -> Any:
    return client.post(
        "/api/submissions/", {"task": slug, "file": onnx_upload(data, name)}, format="multipart"
    )


def stored(task: Any, user: Any, **fields: Any) -> Submission:
    fields.setdefault("sha256", f"{Submission.objects.count():064d}")
    return Submission.objects.create(
        task=task, user=user, size_bytes=1, original_name="x.onnx", **fields
    )


@pytest.mark.django_db
def test_cancelled_and_system_failures_do_not_count_but_a_models_own_failure_does(
    alice: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=5)
    stored(task, alice, status=Status.CANCELLED)
    stored(task, alice, status=Status.FAILED, failed_by_system=True)
    stored(task, alice, status=Status.FAILED, error_message="NaN in output")
    stored(task, alice, status=Status.SUCCEEDED)
    stored(task, alice, status=Status.QUEUED)

    quota = quota_get(user=alice, task=task)

    # The queued one has not started: it is waiting, not used, but it holds its place.
    assert (quota.used_today, quota.waiting, quota.left_today, quota.left) == (2, 1, 2, 2)


@pytest.mark.django_db
def test_submissions_older_than_a_day_free_their_slot(alice: Any, make_task: Any) -> None:
    task = make_task(submissions_per_day=2)
    old = stored(task, alice, status=Status.SUCCEEDED)
    Submission.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=25))
    recent = stored(task, alice, status=Status.SUCCEEDED)

    quota = quota_get(user=alice, task=task)

    assert (quota.used_today, quota.used_total, quota.left) == (1, 2, 1)
    assert quota.next_slot_at == Submission.objects.get(pk=recent.pk).created_at + timedelta(days=1)


@pytest.mark.django_db(transaction=True)
def test_upload_over_the_daily_quota_is_refused_and_stores_nothing(
    alice: Any, make_task: Any, queue: Any
) -> None:
    task = make_task(submissions_per_day=1)
    client = api_as(alice)
    assert upload(client, task.slug, model_bytes(1)).status_code == 201

    response = upload(client, task.slug, model_bytes(2))

    assert response.status_code == 400
    assert response.json()["file"][0].startswith(
        "You have used your 1 submissions for the last 24 hours; the next one is possible at "
    )
    assert Submission.objects.count() == 1
    assert queue.count == 1


@pytest.mark.django_db(transaction=True)
def test_total_quota_counts_every_day(alice: Any, make_task: Any, queue: Any) -> None:
    task = make_task(submissions_per_day=10, submissions_total=2)
    old = stored(task, alice, status=Status.SUCCEEDED)
    Submission.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    client = api_as(alice)
    assert upload(client, task.slug, model_bytes(1)).status_code == 201

    response = upload(client, task.slug, model_bytes(2))

    assert response.status_code == 400
    assert response.json() == {
        "file": [
            "You have used all 2 submissions for this task. 1 of yours is still waiting to "
            "start; a submission counts once it starts, and cancelling it gives its place back."
        ]
    }


@pytest.mark.django_db(transaction=True)
def test_a_system_failure_gives_the_slot_back(alice: Any, make_task: Any, queue: Any) -> None:
    task = make_task(submissions_per_day=1)
    client = api_as(alice)
    first = upload(client, task.slug, model_bytes(1)).json()
    Submission.objects.filter(pk=first["id"]).update(status=Status.FAILED, failed_by_system=True)

    assert upload(client, task.slug, model_bytes(2)).status_code == 201


@pytest.mark.django_db(transaction=True)
def test_quotas_are_per_user_and_per_task(alice: Any, bob: Any, make_task: Any, queue: Any) -> None:
    digits = make_task(submissions_per_day=1)
    other = make_task(slug="other", submissions_per_day=1)
    assert upload(api_as(alice), digits.slug, model_bytes(1)).status_code == 201
    assert upload(api_as(bob), digits.slug, model_bytes(1)).status_code == 201
    assert upload(api_as(alice), other.slug, model_bytes(1)).status_code == 201


@pytest.mark.django_db(transaction=True)
def test_duplicate_upload_is_refused_with_a_link_to_the_first(
    alice: Any, make_task: Any, queue: Any
) -> None:
    task = make_task()
    client = api_as(alice)
    first = upload(client, task.slug, model_bytes(1), "first.onnx").json()

    response = upload(client, task.slug, model_bytes(1), "renamed.onnx")

    assert response.status_code == 400
    assert response.json() == {
        "file": [
            f"You already submitted this exact file to this task as submission {first['id']} "
            f"(/submissions/{first['id']}/)."
        ]
    }
    page = Client()
    page.force_login(alice)
    form = page.post(f"/tasks/{task.slug}/submit/", {"file": onnx_upload(model_bytes(1))})
    assert form.status_code == 400
    assert f'<a href="/submissions/{first["id"]}/">See it</a>' in form.content.decode()
    assert Submission.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_file_may_be_sent_again(alice: Any, make_task: Any, queue: Any) -> None:
    task = make_task()
    client = api_as(alice)
    first = upload(client, task.slug, model_bytes(1)).json()
    assert client.post(f"/api/submissions/{first['id']}/cancel/").status_code == 200

    assert upload(client, task.slug, model_bytes(1)).status_code == 201


@pytest.mark.django_db(transaction=True)
def test_the_same_file_from_another_user_or_for_another_task_is_no_duplicate(
    alice: Any, bob: Any, make_task: Any, queue: Any
) -> None:
    task, other = make_task(), make_task(slug="other")
    assert upload(api_as(alice), task.slug, model_bytes(1)).status_code == 201
    assert upload(api_as(bob), task.slug, model_bytes(1)).status_code == 201
    assert upload(api_as(alice), other.slug, model_bytes(1)).status_code == 201


@pytest.mark.django_db
def test_quota_api_and_upload_page_show_what_is_left(alice: Any, make_task: Any) -> None:
    task = make_task(submissions_per_day=3, submissions_total=10)
    stored(task, alice, status=Status.RUNNING, attempts=1)

    body = api_as(alice).get(f"/api/tasks/{task.slug}/quota/").json()
    page = Client()
    page.force_login(alice)
    html = page.get(f"/tasks/{task.slug}/submit/").content.decode()

    assert body["per_day"] == 3 and body["used_today"] == 1 and body["left_today"] == 2
    assert body["total"] == 10 and body["used_total"] == 1 and body["left_total"] == 9
    assert body["left"] == 2 and body["next_slot_at"] is not None
    assert "Submissions left: <strong>2</strong>" in html
    assert "2 of 3 for the last 24 hours, 9 of 10 in total" in html


@pytest.mark.django_db
def test_quota_api_needs_login(make_task: Any) -> None:
    task = make_task()
    assert APIClient().get(f"/api/tasks/{task.slug}/quota/").status_code == 401


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("opens", "closes", "message"),
    [
        (timedelta(hours=1), None, "This task opens for submissions at "),
        (None, -timedelta(seconds=1), "This task is closed for submissions."),
    ],
)
def test_upload_outside_the_open_window_is_refused(
    alice: Any, make_task: Any, opens: Any, closes: Any, message: str
) -> None:
    now = timezone.now()
    task = make_task(
        opens_at=now + opens if opens else None, closes_at=now + closes if closes else None
    )
    response = upload(api_as(alice), task.slug, model_bytes(1))
    assert response.status_code == 400
    assert response.json()["task"][0].startswith(message)
    assert Submission.objects.count() == 0


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="needs PostgreSQL: SQLite has no row locks (select_for_update) and serialises "
    "every write, so it cannot show what parallel uploads do; run with DATABASE_URL=postgres://",
)
@pytest.mark.django_db(transaction=True)
def test_twenty_parallel_uploads_against_a_quota_of_five_accept_exactly_five(
    alice: Any, make_task: Any, queue: Any, live_portal: str, settings: Any
) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "uploads": "1000/hour"}
    task = make_task(submissions_per_day=5)
    token = api_token_create(user=alice, name="parallel").secret
    start = threading.Barrier(20)

    def send(variant: int) -> tuple[int, Any]:
        start.wait()  # all twenty requests leave together
        response = requests.post(
            f"{live_portal}/api/submissions/",
            headers={"Authorization": f"Token {token}"},
            data={"task": task.slug},
            files={"file": (f"m{variant}.onnx", model_bytes(variant))},
            timeout=120,
        )
        return response.status_code, response.json()

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(send, range(20)))

    accepted = [body for code, body in results if code == 201]
    refused = [body for code, body in results if code == 400]
    assert len(accepted) == 5, results
    assert len(refused) == 15
    assert all(body["file"][0].startswith("You have used your 5 submissions") for body in refused)
    assert Submission.objects.filter(user=alice, task=task).count() == 5
    assert queue.count == 5


def entrant_rows(task: Any, user: Any, team_id: int | None = None) -> None:
    """One of each kind a quota tells apart, two of them older than a day."""
    for fields in (
        {"status": Status.QUEUED},
        {"status": Status.QUEUED, "attempts": 1},
        {"status": Status.RUNNING},
        {"status": Status.SUCCEEDED, "sha256": "a" * 64},
        {"status": Status.SUCCEEDED, "sha256": "a" * 64},
        {"status": Status.CANCELLED, "sha256": "b" * 64},
        {"status": Status.FAILED, "failed_by_system": True},
        {"status": Status.QUEUED, "priority": Submission.RESCORE_PRIORITY},
    ):
        stored(task, user, team_id=team_id, **fields)
    old = [stored(task, user, team_id=team_id, status=Status.SUCCEEDED) for _ in range(2)]
    Submission.objects.filter(pk__in=[s.pk for s in old]).update(
        created_at=timezone.now() - timedelta(hours=30)
    )


@pytest.mark.django_db
def test_the_uploads_one_read_counts_each_kind_alone_and_in_a_team(
    alice: Any, bob: Any, make_task: Any
) -> None:
    task = make_task(max_team_size=3, submissions_per_day=50)
    entrant_rows(task, alice)
    team = team_create(user=bob, task=task, name="Lab")
    entrant_rows(task, bob, team_id=team.pk)

    for user, team_id in ((alice, None), (bob, team.pk)):
        first_a = Submission.objects.filter(task=task, user=user, sha256="a" * 64).earliest("pk")
        # a cancelled submission's file may be sent again; a file never sent is new
        for sha256, duplicate in (("a" * 64, first_a.pk), ("b" * 64, None), ("c" * 64, None)):
            quota, found = quota_and_duplicate(user=user, task=task, team_id=team_id, sha256=sha256)
            assert found == duplicate
            assert quota.used_total == 7 and quota.used_today == 5  # the old two: not today
            assert quota.waiting == 1 and quota.active == 3
            assert quota.next_slot_at is not None and timezone.is_aware(quota.next_slot_at)
            assert quota.team == ("Lab" if team_id else "")


@pytest.mark.django_db
def test_the_upload_reads_a_hidden_task_for_staff_only(
    alice: Any, operator: Any, make_task: Any
) -> None:
    hidden = make_task(slug="hidden", is_hidden=True)
    open_task = make_task(slug="open")
    assert task_get_for_upload(slug="open", user=alice).pk == open_task.pk
    assert task_get_for_upload(slug="hidden", user=operator).pk == hidden.pk
    with pytest.raises(Task.DoesNotExist):
        task_get_for_upload(slug="hidden", user=alice)
    with pytest.raises(Task.DoesNotExist):
        task_get_for_upload(slug="no-such-task", user=operator)
