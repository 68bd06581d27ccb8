"""Notifications of final statuses: the submitter's e-mail (as their settings say) and the task's
webhooks (signed, retried), exactly one per submission run, sent by a real rq worker on the
notifications queue after the status change committed, never able to change that status."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.core import mail
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from accounts.models import NotificationPreference
from queueing.queues import evaluation_redis
from submissions.lifecycle.services import (
    submission_cancel,
    submission_fail,
    submission_rerun,
    submission_start,
    submission_succeed,
)
from submissions.models import Notification, Submission, Webhook, WebhookDelivery
from submissions.models.boards import LeaderboardPending
from submissions.notifications.services import notification_dispatch
from submissions.notifications.webhooks import SIGNATURE_HEADER, webhook_signature_valid
from tests.submissions.notify_support import (
    notifications_queue,
    receiver,
    result,
    run_notifier,
    running,
)
from tests.submissions.test_upload_redis_down import closed_port
from workers import recovery
from workers.worker import worker_command

__all__ = ["notifications_queue", "receiver"]  # fixtures
pytestmark = pytest.mark.django_db
SECRET = "s3cret-for-the-test"


@pytest.fixture
def carol(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(
        "carol", email="carol@example.org", password="carol-password-1"
    )


def fail(submission: Submission, capture: Any, message: str = "Output shape is wrong.") -> bool:
    with capture(execute=True):
        return submission_fail(submission_id=submission.pk, message=message)


def succeed(submission: Submission, capture: Any, score: float = 0.9) -> bool:
    with capture(execute=True):
        return submission_succeed(submission_id=submission.pk, result=result(score))


def test_a_failure_is_mailed_to_its_submitter_once_even_when_written_twice(
    make_task: Any, carol: Any, notifications_queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    submission = running(make_task(), carol)
    assert fail(submission, django_capture_on_commit_callbacks)
    assert not fail(submission, django_capture_on_commit_callbacks, "a second, late write")
    run_notifier(notifications_queue)
    run_notifier(notifications_queue)  # and a second pass of the notifier finds nothing to do

    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["carol@example.org"]
    assert message.subject == f"[Digits] Submission #{submission.pk} failed"
    assert "Output shape is wrong." in message.body
    assert f"https://portal.test/submissions/{submission.pk}/" in message.body
    assert "gpu-host-7" not in message.body  # never a worker or host name
    assert Notification.objects.get().email == "sent"


def test_a_second_record_of_the_same_run_is_refused_and_the_transaction_carries_on(
    make_task: Any, carol: Any
) -> None:
    """The unique constraint refuses a second record for the run, inside a savepoint, so the
    status change around it still commits."""
    from django.db import transaction

    from submissions.notifications.services import notification_record

    submission = running(make_task(), carol)
    with transaction.atomic():
        first = notification_record(submission_id=submission.pk, status="failed", run=1)
        second = notification_record(submission_id=submission.pk, status="cancelled", run=1)
        Submission.objects.filter(pk=submission.pk).update(error_message="still writable")
    assert first is not None and second is None
    assert Notification.objects.get().pk == first.pk
    assert Notification.objects.get().status == "failed"  # the first one's
    assert Submission.objects.get(pk=submission.pk).error_message == "still writable"


def test_a_success_is_mailed_only_to_those_who_asked_for_it(
    make_task: Any,
    carol: Any,
    django_user_model: Any,
    notifications_queue: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    dave = django_user_model.objects.create_user("dave", email="dave@example.org")
    NotificationPreference.objects.create(user=dave, email_on_success=True)
    task = make_task()
    succeed(running(task, carol), django_capture_on_commit_callbacks)  # default: no success mail
    mine = running(task, dave)
    succeed(mine, django_capture_on_commit_callbacks, score=0.8125)
    run_notifier(notifications_queue)

    assert [m.to for m in mail.outbox] == [["dave@example.org"]]
    assert "Score (accuracy, public rows): 0.8125" in mail.outbox[0].body
    assert sorted(Notification.objects.values_list("email", flat=True)) == ["not wanted", "sent"]


def test_a_submitter_who_opted_out_of_failure_mail_gets_none(
    make_task: Any, carol: Any, notifications_queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    NotificationPreference.objects.create(user=carol, email_on_failure=False)
    fail(running(make_task(), carol), django_capture_on_commit_callbacks)
    run_notifier(notifications_queue)
    assert mail.outbox == []


def test_a_rerun_that_reaches_a_final_status_again_is_a_new_notification(
    make_task: Any, carol: Any, notifications_queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    submission = running(make_task(), carol)
    fail(submission, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):  # no evaluation job is wanted here
        assert submission_rerun(submission_id=submission.pk)
    assert submission_start(submission_id=submission.pk, worker_name="w") is not None
    fail(submission, django_capture_on_commit_callbacks, "Failed again.")
    fail(submission, django_capture_on_commit_callbacks, "A duplicate write of the second run.")
    run_notifier(notifications_queue)

    assert list(Notification.objects.order_by("run").values_list("run", "status")) == [
        (1, "failed"),
        (2, "failed"),
    ]
    assert len(mail.outbox) == 2 and "Failed again." in mail.outbox[1].body


def test_a_rerun_that_succeeds_records_its_new_run_and_owes_its_board_a_refresh(
    make_task: Any, carol: Any, notifications_queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """A job's success (its board refresh left pending, as the job leaves it to its worker)
    carries the run that the job started: the re-run's, not the first one's."""
    submission = running(make_task(), carol)
    fail(submission, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        assert submission_rerun(submission_id=submission.pk)
    started = submission_start(submission_id=submission.pk, worker_name="w")
    assert started is not None and started.runs == 2
    with django_capture_on_commit_callbacks(execute=True):
        submission_succeed(submission_id=submission.pk, result=result(0.8), drain=False)
    run_notifier(notifications_queue)
    assert list(Notification.objects.order_by("run").values_list("run", "status")) == [
        (1, "failed"),
        (2, "succeeded"),
    ]
    assert LeaderboardPending.objects.filter(
        task_id=started.task_id, submission_id=submission.pk
    ).exists()


def test_the_webhook_gets_a_signed_slack_compatible_body_and_the_attempt_is_logged(
    make_task: Any,
    carol: Any,
    receiver: Any,
    notifications_queue: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    hook_server = receiver()
    task = make_task()
    hook = Webhook.objects.create(task=task, url=hook_server.url, secret=SECRET)
    submission = running(task, carol)
    succeed(submission, django_capture_on_commit_callbacks, score=0.75)
    run_notifier(notifications_queue)

    [request] = hook_server.requests
    assert webhook_signature_valid(
        secret=SECRET, body=request.body, header=request.headers[SIGNATURE_HEADER]
    )
    assert not webhook_signature_valid(
        secret="another secret", body=request.body, header=request.headers[SIGNATURE_HEADER]
    )
    assert not webhook_signature_valid(
        secret=SECRET, body=request.body + b" ", header=request.headers[SIGNATURE_HEADER]
    )
    body = request.json()
    assert body["text"].startswith(f"Submission <https://portal.test/submissions/{submission.pk}/")
    assert "by carol to Digits succeeded: accuracy 0.75" in body["text"]
    assert body["event"] == "submission.succeeded"
    assert body["submission"]["score"] == 0.75 and body["task"]["slug"] == "digits"
    assert "gpu-host-7" not in request.body.decode()
    assert "score_private" not in request.body.decode()
    [delivery] = WebhookDelivery.objects.filter(webhook=hook)
    assert delivery.ok and delivery.status_code == 200 and delivery.attempt == 1


def test_a_failing_receiver_is_retried_with_back_off_until_it_answers(
    make_task: Any,
    carol: Any,
    receiver: Any,
    notifications_queue: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.WEBHOOK_RETRY_INTERVALS_S = [1, 1, 1]
    hook_server = receiver(failures=2)
    task = make_task()
    hook = Webhook.objects.create(task=task, url=hook_server.url, secret=SECRET)
    submission = running(task, carol)
    fail(submission, django_capture_on_commit_callbacks)
    run_notifier(notifications_queue, until=lambda: len(hook_server.requests) == 3)
    run_notifier(notifications_queue)  # nothing more is sent once it was delivered

    assert len(hook_server.requests) == 3
    assert all(
        webhook_signature_valid(secret=SECRET, body=r.body, header=r.headers[SIGNATURE_HEADER])
        for r in hook_server.requests
    )
    log = WebhookDelivery.objects.filter(webhook=hook).order_by("attempt")
    assert [(d.attempt, d.ok, d.status_code) for d in log] == [
        (1, False, 500),
        (2, False, 500),
        (3, True, 200),
    ]
    assert log[0].error == "HTTP 500: down for a moment"
    assert Submission.objects.get(pk=submission.pk).status == "failed"


def test_a_receiver_that_never_answers_is_given_up_and_changes_nothing(
    make_task: Any,
    carol: Any,
    notifications_queue: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.WEBHOOK_RETRY_INTERVALS_S = [0, 0]
    task = make_task()
    hook = Webhook.objects.create(task=task, url=f"http://127.0.0.1:{closed_port()}/", secret="x")
    submission = running(task, carol)
    succeed(submission, django_capture_on_commit_callbacks)
    run_notifier(notifications_queue)

    log = WebhookDelivery.objects.filter(webhook=hook)
    assert sorted(log.values_list("attempt", flat=True)) == [1, 2, 3]
    assert not log.filter(ok=True).exists() and "ConnectionError" in log.first().error  # type: ignore[union-attr]
    assert Submission.objects.get(pk=submission.pk).status == "succeeded"


def test_webhooks_hear_only_about_their_own_task_and_the_events_they_chose(
    make_task: Any,
    carol: Any,
    receiver: Any,
    notifications_queue: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    hidden = make_task(slug="hidden", title="Hidden", leaderboard="hidden")
    other = make_task(slug="other", title="Other")
    mine, theirs, failures_only = receiver(), receiver(), receiver()
    Webhook.objects.create(task=hidden, url=mine.url, secret=SECRET, on_cancelled=True)
    Webhook.objects.create(task=other, url=theirs.url, secret=SECRET)
    Webhook.objects.create(task=hidden, url=failures_only.url, secret=SECRET, on_succeeded=False)
    Webhook.objects.create(task=hidden, url=theirs.url, secret=SECRET, active=False)
    succeed(running(hidden, carol), django_capture_on_commit_callbacks)
    cancelled = running(hidden, carol)
    with django_capture_on_commit_callbacks(execute=True):
        assert submission_cancel(submission_id=cancelled.pk, user=carol)
    run_notifier(notifications_queue)

    assert [r.json()["event"] for r in mine.requests] == [
        "submission.succeeded",
        "submission.cancelled",
    ]
    assert theirs.requests == [] and failures_only.requests == []


def test_redis_down_at_the_status_change_keeps_it_and_the_sweep_sends_the_mail_later(
    make_task: Any,
    carol: Any,
    notifications_queue: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    working = settings.RQ_QUEUES
    settings.RQ_QUEUES = {
        **working,
        settings.NOTIFICATIONS_QUEUE: {"URL": f"redis://127.0.0.1:{closed_port()}/0"},
    }
    submission = running(make_task(), carol)
    with caplog.at_level(logging.WARNING, logger="submissions.notifications.services"):
        assert fail(submission, django_capture_on_commit_callbacks)
    assert Submission.objects.get(pk=submission.pk).status == "failed"
    assert "stays pending: Redis refused the enqueue" in caplog.text
    assert Notification.objects.get().dispatched_at is None

    settings.RQ_QUEUES = working
    call_command("notifications_send")
    run_notifier(notifications_queue)
    assert len(mail.outbox) == 1
    assert Notification.objects.get().dispatched_at is not None


def test_a_dispatch_job_run_twice_mails_once(
    make_task: Any, carol: Any, notifications_queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    fail(running(make_task(), carol), django_capture_on_commit_callbacks)
    notification = Notification.objects.get()
    notification_dispatch(notification.pk)
    assert notification_dispatch(notification.pk) == "already dispatched"
    assert len(mail.outbox) == 1


def test_the_profile_page_saves_the_notification_settings(carol: Any) -> None:
    client = Client()
    client.force_login(carol)
    page = client.get("/accounts/profile/").content.decode()
    assert ticked(page) == {"email_on_failure": True, "email_on_success": False}  # the defaults

    response = client.post("/accounts/notifications/", {"email_on_success": "on"})

    assert response.status_code == 302
    saved = NotificationPreference.objects.get(user=carol)
    assert (saved.email_on_failure, saved.email_on_success) == (False, True)
    page = client.get("/accounts/profile/").content.decode()
    assert ticked(page) == {"email_on_failure": False, "email_on_success": True}


def ticked(page: str) -> dict[str, bool]:
    boxes = re.findall(r'<input type="checkbox" name="(email_on_\w+)"([^>]*)>', page)
    return {name: " checked" in rest for name, rest in boxes}


def test_evaluation_workers_never_serve_the_notifications_queue(settings: Any) -> None:
    assert settings.NOTIFICATIONS_QUEUE not in worker_command("w")


def test_operators_add_a_webhook_in_the_admin_and_read_its_delivery_log(
    make_task: Any,
    carol: Any,
    operator: Any,
    notifications_queue: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    down_url = f"http://127.0.0.1:{closed_port()}/down"
    task = make_task()
    console = Client()
    console.force_login(operator)
    response = console.post(
        "/admin/submissions/webhook/add/",
        {
            "task": task.pk,
            "url": down_url,
            "secret": SECRET,
            "on_failed": "on",
            "active": "on",
            "deliveries-TOTAL_FORMS": "0",  # the (read-only) delivery log inline
            "deliveries-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    hook = Webhook.objects.get()
    assert (hook.on_succeeded, hook.on_failed, hook.on_cancelled) == (False, True, False)
    fail(running(task, carol), django_capture_on_commit_callbacks)
    run_notifier(notifications_queue)  # the first attempt fails; its retry waits 10 s

    page = console.get(f"/admin/submissions/webhook/{hook.pk}/change/").content.decode()
    assert "ConnectionError" in page and SECRET in page
    assert console.get("/admin/submissions/webhookdelivery/").status_code == 200
    assert console.get("/admin/submissions/notification/").status_code == 200


def test_recovery_enqueues_a_notification_left_pending_and_the_notifier_sends_it(
    make_task: Any, carol: Any, notifications_queue: Any, settings: Any
) -> None:
    submission = running(make_task(), carol)
    submission_fail(submission_id=submission.pk, message="Lost its enqueue.")  # no commit hook ran
    assert recovery.reconcile(blocking=True).skipped is False
    assert notifications_queue.count == 0  # recorded just now: its own enqueue may still come

    Notification.objects.update(created_at=timezone.now() - timedelta(minutes=5))
    recovery.reconcile(blocking=True)
    recovery.reconcile(blocking=True)  # a second sweep does not queue it twice
    assert notifications_queue.job_ids == [f"notification-{Notification.objects.get().pk}"]
    run_notifier(notifications_queue)
    assert len(mail.outbox) == 1 and "Lost its enqueue." in mail.outbox[0].body


def test_every_enqueue_of_a_process_shares_one_redis_client() -> None:
    """django_rq.get_connection opens a new pool, and a new TCP connection, per call: once per
    finished evaluation before the notifications reused the process's client."""
    from submissions.notifications import services as notifications

    assert notifications.notifier_queue().connection is notifications.notifier_queue().connection
    # The evaluation queue is on the same server: one client, so a worker opens one
    # connection for its job and its notification, not one each.
    assert notifications.notifier_queue().connection is evaluation_redis()


def test_a_new_notification_goes_to_redis_in_one_transaction_without_a_look_first(
    make_task: Any, carol: Any, notifications_queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    submission = running(make_task(), carol)
    watcher = redis.Redis.from_url(django_settings.REDIS_URL, socket_timeout=10)
    with watcher.monitor() as monitor:
        with django_capture_on_commit_callbacks(execute=True):  # the commit's enqueue
            submission_fail(submission_id=submission.pk, message="Broken.")
        commands: list[str] = []
        while "RPUSH" not in commands or commands[-1] != "EXEC":
            commands.append(monitor.next_command()["command"].split()[0].upper())

    assert commands.count("MULTI") == 1 and "HGETALL" not in commands
    assert notifications_queue.job_ids == [f"notification-{Notification.objects.get().pk}"]
