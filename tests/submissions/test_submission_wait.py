"""``GET /api/submissions/<id>/?wait=S``: the answer waits until the submission is final, and
comes as soon as a worker's result, a failure or a cancellation commits, not when the wait ends.
Real PostgreSQL (committed transactions: the waiter reads from its own connection) and Redis."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from submissions.lifecycle import settled
from submissions.lifecycle.services import submission_cancel, submission_fail, submission_succeed
from submissions.models import Submission
from tests.submissions.test_leaderboard_read_models import result, running
from tests.submissions.test_upload_redis_down import closed_port

pytestmark = pytest.mark.django_db(transaction=True)
LONG_WAIT_S = 15  # what each waiter asks for; an answer long before it was woken


def client(user: Any) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def waited(user: Any, pk: int, wait: float) -> tuple[dict[str, Any], float]:
    """The answer to a waiting GET and how long it took."""
    began = time.monotonic()
    response = client(user).get(f"/api/submissions/{pk}/", {"wait": wait})
    assert response.status_code == 200, response.content
    return response.json(), time.monotonic() - began


def in_thread(user: Any, pk: int, wait: float) -> tuple[threading.Thread, dict[str, Any]]:
    answer: dict[str, Any] = {}

    def run() -> None:
        try:
            answer["data"], answer["took"] = waited(user, pk, wait)
        finally:
            connection.close()  # this thread's own database connection

    thread = threading.Thread(target=run)
    thread.start()
    return thread, answer


FINISHES = {
    "succeeded": lambda s, user: submission_succeed(submission_id=s.pk, result=result(0.9)),
    "failed": lambda s, user: submission_fail(submission_id=s.pk, message="Out of memory."),
    "cancelled": lambda s, user: submission_cancel(submission_id=s.pk, user=user),
}


@pytest.mark.parametrize("status", sorted(FINISHES))
def test_a_waiting_request_answers_as_soon_as_the_submission_is_final(
    make_task: Any, alice: Any, status: str
) -> None:
    submission = running(make_task(), alice)
    thread, answer = in_thread(alice, submission.pk, LONG_WAIT_S)
    time.sleep(0.5)  # the request reads the row, finds it running and waits
    assert thread.is_alive()
    assert FINISHES[status](submission, alice)
    thread.join(LONG_WAIT_S + 5)
    assert answer["data"]["status"] == status
    assert answer["took"] < LONG_WAIT_S / 2  # woken by the commit, not by the end of the wait


def test_a_final_submission_is_answered_at_once_and_an_unfinished_one_after_its_wait(
    make_task: Any, alice: Any
) -> None:
    task = make_task()
    done = running(task, alice)
    submission_succeed(submission_id=done.pk, result=result(0.5))
    data, took = waited(alice, done.pk, LONG_WAIT_S)
    assert data["status"] == "succeeded" and data["score"] == 0.5 and took < LONG_WAIT_S / 2
    data, took = waited(alice, running(task, alice).pk, 0.3)
    assert data["status"] == "running" and took >= 0.3


def test_with_every_waiting_slot_taken_a_request_is_answered_at_once(
    make_task: Any, alice: Any, settings: Any
) -> None:
    submission = running(make_task(), alice)
    taken = 0
    while settled._waiters.acquire(blocking=False):  # every slot of this process
        taken += 1
    try:
        data, took = waited(alice, submission.pk, LONG_WAIT_S)
    finally:
        for _ in range(taken):
            settled._waiters.release()
    assert taken == settings.SUBMISSION_WAITERS_PER_PROCESS
    assert data["status"] == "running" and took < LONG_WAIT_S / 2


@pytest.mark.parametrize("wait", ["-1", "21", "soon"])
def test_a_bad_wait_is_refused_saying_what_it_may_be(make_task: Any, alice: Any, wait: str) -> None:
    submission = running(make_task(), alice)
    response = client(alice).get(f"/api/submissions/{submission.pk}/", {"wait": wait})
    assert response.status_code == 400
    assert "wait" in response.json()


def test_nobody_waits_on_another_users_submission(make_task: Any, alice: Any, bob: Any) -> None:
    submission = running(make_task(), alice)
    began = time.monotonic()
    response = client(bob).get(f"/api/submissions/{submission.pk}/", {"wait": LONG_WAIT_S})
    assert response.status_code == 404 and time.monotonic() - began < LONG_WAIT_S / 2


def test_with_redis_down_a_waiter_is_answered_at_once_and_a_result_still_commits(
    make_task: Any, alice: Any, settings: Any, caplog: Any
) -> None:
    submission = running(make_task(), alice)
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port()}/0"  # refuses connections
    data, took = waited(alice, submission.pk, LONG_WAIT_S)
    assert data["status"] == "running" and took < LONG_WAIT_S / 2
    assert submission_succeed(submission_id=submission.pk, result=result(0.7))
    assert Submission.objects.get(pk=submission.pk).status == "succeeded"
    assert f"submission {submission.pk} final, its waiters not woken" in caplog.text


def test_a_stalled_redis_holds_a_saved_result_up_no_longer_than_the_wake_timeout(
    make_task: Any, alice: Any, settings: Any, caplog: Any
) -> None:
    """A Redis that takes the connection and never answers: the worker's commit is not held
    for the waiter's long timeout."""
    submission = running(make_task(), alice)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections wait in the backlog; nothing ever answers them
        settings.REDIS_URL = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        began = time.monotonic()
        assert submission_succeed(submission_id=submission.pk, result=result(0.7))
        took = time.monotonic() - began
    assert settled.WAKE_TIMEOUT_S <= took < settled.WAKE_TIMEOUT_S + 5
    assert Submission.objects.get(pk=submission.pk).status == "succeeded"
    assert "its waiters not woken" in caplog.text
