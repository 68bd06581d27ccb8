"""Telling people that a submission reached a final status: its submitter by e-mail (as their
preferences say) and the task's operators through their webhooks
(submissions/notifications/webhooks.py).

The path of one notification:

1. ``notification_record`` runs inside the transaction that makes the submission final and
   inserts a Notification row, unique per (submission, run): a result written twice, or a
   cancel racing a failure, cannot make a second one, and a re-run starts a new run.
2. After the commit the row's ``notification_dispatch`` job goes on the low-priority
   ``notifications`` queue, which only the notifier (a plain rq worker) serves: nothing here
   ever runs in, or waits for, an evaluation worker. With Redis down the row stays pending.
3. The job sends the e-mail, once, and enqueues one ``webhook_deliver`` job per interested
   webhook (retried with back-off by rq), then marks the row dispatched.
4. ``notifications_sweep`` (recovery, and ``manage.py notifications_send``) enqueues rows that
   are still pending after NOTIFICATIONS_SWEEP_AFTER_S, so nothing is lost to a Redis outage;
   it sweeps the challenges' announcement e-mails too (``announcements.py``).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from redis.exceptions import RedisError
from rq import Queue, Retry
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from accounts.selectors import notification_preference_of
from queueing.queues import enqueue_in_one_round_trip, queue_redis
from submissions.models import Submission
from submissions.models.notifications import Notification, Webhook

log = logging.getLogger(__name__)
# A job in one of these states will run (again): enqueuing its notification once more is waste.
_PENDING_JOB = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.SCHEDULED, JobStatus.DEFERRED}
SWEEP_BATCH = 500


def notification_record(
    *, submission_id: int, status: str | None = None, run: int | None = None
) -> Notification | None:
    """Call inside the transaction that made ``submission_id`` final (its row is locked by that
    UPDATE), with its new ``status`` and its ``run`` when the caller has read them. Returns the
    new Notification, or None when this run already has one (the one-per-run constraint:
    ``get_or_create`` inserts in a savepoint, so the caller's transaction carries on)."""
    if status is None or run is None:
        submission = Submission.objects.values("status", "runs").get(pk=submission_id)
        status, run = submission["status"], submission["runs"]
    notification, created = Notification.objects.get_or_create(
        submission_id=submission_id, run=run, defaults={"status": status}
    )
    if not created:
        return None
    transaction.on_commit(lambda: _enqueue_logging_redis_errors(notification.pk))
    return notification


def _enqueue_logging_redis_errors(notification_id: int) -> None:
    """The status change is committed whatever Redis says; a pending row is swept up later.
    The row is new: no job of it can be waiting yet (the sweep takes only rows older than
    ``NOTIFICATIONS_SWEEP_AFTER_S``, and a dispatch that runs twice sends nothing twice)."""
    try:
        notification_enqueue(notification_id=notification_id, new=True)
    except RedisError as exc:
        log.warning(
            "notification %s stays pending: Redis refused the enqueue (%s); the sweep sends it "
            "when Redis is back",
            notification_id,
            exc,
        )
    except Exception:  # never let a notification fail the change it reports (on_commit raises)
        log.exception("notification %s stays pending: its enqueue failed", notification_id)


def notifier_queue() -> Queue:
    """A plain rq Queue: django-rq's would wait for a commit that, in a job, may never come.
    Every caller here runs after the status change's commit already."""
    connection = queue_redis(settings.NOTIFICATIONS_QUEUE)  # one pool per process
    return Queue(settings.NOTIFICATIONS_QUEUE, connection=connection, default_timeout=300)


def job_pending(queue: Queue, job_id: str) -> bool:
    try:
        return Job.fetch(job_id, connection=queue.connection).get_status() in _PENDING_JOB
    except NoSuchJobError:
        return False


def notification_enqueue(*, notification_id: int, new: bool = False) -> bool:
    """Put the notification's dispatch job on the notifications queue, unless it is already
    waiting there (not asked for a ``new`` row, just committed: every evaluation records one,
    and the look cost the worker a round trip). The job goes in one MULTI/EXEC.
    Raises RedisError when Redis is down."""
    queue = notifier_queue()
    job_id = f"notification-{notification_id}"
    if not new and job_pending(queue, job_id):
        return False
    enqueue_in_one_round_trip(
        queue,
        "submissions.notifications.services.notification_dispatch",
        notification_id,
        job_id=job_id,
        result_ttl=86400,
        failure_ttl=7 * 86400,
    )
    return True


def notifications_sweep(*, older_than_s: float | None = None) -> list[int]:
    """Enqueue the notifications still pending ``older_than_s`` after they were recorded
    (default NOTIFICATIONS_SWEEP_AFTER_S). Returns the ids enqueued."""
    if older_than_s is None:
        older_than_s = settings.NOTIFICATIONS_SWEEP_AFTER_S
    # Announcements' e-mails ride the same queue and are swept with these (recovery runs this).
    from submissions.notifications.announcements import announcements_sweep  # it imports us

    announcements_sweep(older_than_s=older_than_s)
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    pending = Notification.objects.filter(dispatched_at__isnull=True, created_at__lte=cutoff)
    ids = list(pending.order_by("created_at").values_list("pk", flat=True)[:SWEEP_BATCH])
    return [pk for pk in ids if notification_enqueue(notification_id=pk)]


def notification_dispatch(notification_id: int) -> str:
    """The job: e-mail the submitter (once), hand the webhooks their deliveries, mark the row
    dispatched. Running it twice sends nothing twice."""
    with transaction.atomic():
        notification = (
            Notification.objects.select_for_update(of=("self",))
            .select_related("submission__task", "submission__user")
            .filter(pk=notification_id, dispatched_at__isnull=True)
            .first()
        )
        if notification is None:
            return "already dispatched"
        if not notification.email:
            notification.email = _email_send(notification)
            notification.save(update_fields=["email"])
    # Committed: a failure below (Redis) leaves the row pending with its e-mail already sent.
    hooks = Webhook.objects.filter(task_id=notification.submission.task_id, active=True)
    wanted = [hook for hook in hooks if hook.wants(notification.status)]
    for hook in wanted:
        _delivery_enqueue(notification_id=notification.pk, webhook_id=hook.pk)
    Notification.objects.filter(pk=notification.pk).update(dispatched_at=timezone.now())
    return f"e-mail: {notification.email}; webhooks: {len(wanted)}"


def _delivery_enqueue(*, notification_id: int, webhook_id: int) -> None:
    queue = notifier_queue()
    job_id = f"webhook-{notification_id}-{webhook_id}"
    if job_pending(queue, job_id):
        return
    intervals = list(settings.WEBHOOK_RETRY_INTERVALS_S)
    queue.enqueue(
        "submissions.notifications.webhooks.webhook_deliver",
        notification_id,
        webhook_id,
        job_id=job_id,
        retry=Retry(max=len(intervals), interval=intervals) if intervals else None,
        job_timeout=int(settings.WEBHOOK_TIMEOUT_S) + 30,
        result_ttl=86400,
        failure_ttl=7 * 86400,
    )


def submission_url(submission: Submission) -> str:
    return f"{settings.SITE_URL}{submission.get_absolute_url()}"


def _email_send(notification: Notification) -> str:
    """Mail the submitter, and only the submitter, if they want it. Returns what happened."""
    submission = notification.submission
    user = submission.user
    if not notification_preference_of(user=user).wants_email(notification.status):
        return "not wanted"
    if not user.email:
        return "no address"
    subject, body = email_text(submission, notification.status)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [user.email])
    except Exception:  # SMTP refused or unreachable: recorded, and never fails the webhooks
        log.exception("could not e-mail the submitter of submission %s", submission.pk)
        return "failed"
    return "sent"


def email_text(submission: Submission, status: str) -> tuple[str, str]:
    """Subject and body of the submitter's e-mail: what they can see on the submission's page,
    nothing about workers or hosts."""
    task = submission.task
    withdrawn = task.withdrawn_for(submission.user)
    named = "a withdrawn task" if withdrawn else f"“{task.title}”"
    what = f"Your submission #{submission.pk} ({submission.original_name}) to {named}"
    if status == Submission.Status.SUCCEEDED:
        score = "no score" if submission.score is None else f"{submission.score:.6g}"
        detail = f"{what} succeeded."
        if not withdrawn:  # a withdrawn task's results are not shown (Task.withdrawn_for)
            detail += f"\nScore ({task.metric}, public rows): {score}"
    else:
        detail = f"{what} failed.\n\n{submission.error_message or 'No reason was recorded.'}"
    if withdrawn:
        detail += f"\n\n{Submission.TASK_WITHDRAWN_NOTICE}"
    profile = f"{settings.SITE_URL}{reverse('profile')}"
    body = (
        f"{detail}\n\nDetails: {submission_url(submission)}\n\n"
        f"You receive this e-mail because of your notification settings: {profile}\n"
    )
    subject = "[withdrawn task]" if withdrawn else f"[{task.title}]"
    return f"{subject} Submission #{submission.pk} {status}", body
