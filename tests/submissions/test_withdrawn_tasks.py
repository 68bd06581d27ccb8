"""A task the operators hide after people submitted to it is withdrawn for those participants
(``Task.withdrawn_for``): they still see that their submission exists and its status, but not
the task's title or slug, nor a link to its page, nor the submission's score, metrics or
latency; on My submissions, the submission page, the submission API (list and detail) and the
e-mail. Operators still see everything. Shown again, the task is named again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from submissions.models import Submission, Task
from submissions.notifications.services import email_text
from tests.submissions.admin_support import task_change_data
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

SLUG, TITLE, SCORE = "kestrel-task", "Kestrel Challenge", 0.8765
SECRETS = ("kestrel", "0.876")  # the slug and title (any case), and the score however rounded
RESULT_KEYS = {"score", "metrics", "latency_p50_ms", "throughput", "timing", "dataset_version"}


@pytest.fixture
def task(make_task: Any) -> Task:
    return make_task(slug=SLUG, title=TITLE, final_selections=2)


@pytest.fixture
def alices(task: Task, alice: Any) -> Submission:
    report = {"operators": [{"op": "KestrelConv", "nodes": 1, "us": 10.0, "share": 1.0}]}
    return scored(task, alice, SCORE, latency_p50_ms=12.5, throughput=900.0, run_report=report)


def operator_sets_hidden(operator: Any, task: Task, hidden: bool) -> None:
    """The operator ticks (or unticks) "Is hidden" on the task's admin page."""
    client = Client()
    client.force_login(operator)
    data = task_change_data(client, task.pk)
    if hidden:
        data["is_hidden"] = "on"
    else:
        data.pop("is_hidden", None)
    answer = client.post(f"/admin/submissions/task/{task.pk}/change/", data)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    task.refresh_from_db()
    assert task.is_hidden is hidden


def seen_by(user: Any, submission: Submission) -> dict[str, str]:
    """My submissions, the submission's page and the submission API (list and detail)."""
    client, api = Client(), APIClient()
    client.force_login(user)
    api.force_authenticate(user)
    return {
        "list page": client.get("/submissions/").content.decode(),
        "detail page": client.get(f"/submissions/{submission.pk}/").content.decode(),
        "api list": api.get("/api/submissions/").content.decode(),
        "api detail": api.get(f"/api/submissions/{submission.pk}/").content.decode(),
    }


def assert_named_with_results(seen: dict[str, str]) -> None:
    for where, body in seen.items():
        for secret in SECRETS:
            assert secret in body.lower(), f"{where} lacks {secret!r}"


def test_a_participant_keeps_her_submission_but_not_the_withdrawn_tasks_name_or_score(
    alices: Submission, task: Task, alice: Any, operator: Any
) -> None:
    operator_sets_hidden(operator, task, True)

    seen = seen_by(alice, alices)

    for where, body in seen.items():
        assert "KestrelConv" not in body, f"{where} shows the run report"  # a result too
        for secret in SECRETS:
            assert secret not in body.lower(), f"{where} shows {secret!r} to alice"
    for page in ("list page", "detail page"):
        assert "a withdrawn task" in seen[page]
        assert Submission.TASK_WITHDRAWN_NOTICE.replace("'", "&#x27;") in seen[page]
    assert f'href="/submissions/{alices.pk}/"' in seen["list page"]  # still hers, listed
    assert "<h2>Result</h2>" not in seen["detail page"]
    assert "Succeeded" in seen["detail page"]  # the status stays


def test_the_api_says_the_task_is_withdrawn_and_leaves_the_results_out(
    alices: Submission, task: Task, alice: Any, operator: Any
) -> None:
    operator_sets_hidden(operator, task, True)

    seen = seen_by(alice, alices)

    (listed,) = json.loads(seen["api list"])["results"]
    detail = json.loads(seen["api detail"])
    for answer in (listed, detail):
        assert answer["id"] == alices.pk and answer["status"] == "succeeded"
        assert answer["task"] is None and answer["task_withdrawn"] is True
        assert answer["notices"] == [Submission.TASK_WITHDRAWN_NOTICE]
        assert not RESULT_KEYS & answer.keys()


def test_an_operator_still_sees_the_withdrawn_task_and_its_scores(
    task: Task, alices: Submission, operator: Any
) -> None:
    own = scored(task, operator, SCORE)
    operator_sets_hidden(operator, task, True)

    assert_named_with_results(seen_by(operator, own))
    detail = json.loads(seen_by(operator, own)["api detail"])
    assert detail["task"] == SLUG and detail["task_withdrawn"] is False
    client = Client()
    client.force_login(operator)
    admin_page = client.get(f"/admin/submissions/submission/{alices.pk}/change/")
    assert TITLE in admin_page.content.decode()


def test_once_shown_again_the_task_is_named_with_her_score(
    alices: Submission, task: Task, alice: Any, operator: Any
) -> None:
    operator_sets_hidden(operator, task, True)
    operator_sets_hidden(operator, task, False)

    seen = seen_by(alice, alices)

    assert_named_with_results(seen)
    assert f'href="/tasks/{SLUG}/"' in seen["list page"]
    assert json.loads(seen["api detail"])["task_withdrawn"] is False


def test_finals_of_a_withdrawn_task_are_not_offered_and_not_changed(
    alices: Submission, task: Task, alice: Any, operator: Any
) -> None:
    operator_sets_hidden(operator, task, True)
    api = APIClient()
    api.force_authenticate(alice)

    answer = api.post(f"/api/submissions/{alices.pk}/select/")

    assert answer.status_code == 409
    assert "withdrawn" in answer.json()["detail"] and SLUG not in answer.content.decode()
    alices.refresh_from_db()
    assert alices.selected is False
    client = Client()
    client.force_login(alice)
    assert "data-finals-task" not in client.get("/submissions/").content.decode()


def test_the_email_about_a_withdrawn_tasks_submission_names_neither_it_nor_the_score(
    alices: Submission, task: Task, operator: Any
) -> None:
    operator_sets_hidden(operator, task, True)
    alices.refresh_from_db()

    subject, body = email_text(alices, Submission.Status.SUCCEEDED)

    for secret in SECRETS:
        assert secret not in (subject + body).lower()
    assert Submission.TASK_WITHDRAWN_NOTICE in body
