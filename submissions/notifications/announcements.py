"""E-mailing a challenge's announcements to its registered participants, through the
notifications queue that already carries the submission e-mails (``services.py``).

1. ``announcement_post`` saves a new announcement and, when it is to be e-mailed, one pending
   AnnouncementDelivery per registered participant (unique per announcement and user: nobody is
   mailed twice, however often it runs), in one transaction.
2. After the commit its ``announcement_send`` job goes on the ``notifications`` queue; with
   Redis down the rows stay pending, and ``announcements_sweep`` (run with the notifications'
   sweep, by recovery and ``manage.py notifications_send``) enqueues them again.
3. The job takes the pending rows under a row lock, mails each person who wants it (their
   profile's opt-out), and records per row what happened: the status the operator reads.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone
from redis.exceptions import RedisError

from accounts.selectors import notification_preference_of
from queueing.queues import enqueue_in_one_round_trip
from submissions.challenges.registration import registered_users
from submissions.models import Announcement, AnnouncementDelivery
from submissions.notifications import services as notifications

log = logging.getLogger(__name__)
SEND_BATCH = 200  # deliveries mailed in one transaction
Status = AnnouncementDelivery.Status


def announcement_post(*, announcement: Announcement) -> int:
    """Save a new announcement and queue its e-mails; how many people it will be mailed to."""
    with transaction.atomic():
        announcement.full_clean()
        announcement.save()
        return announcement_deliveries_create(announcement=announcement)


def announcement_deliveries_create(*, announcement: Announcement) -> int:
    """One pending delivery for each registered participant who has none for it yet (people
    registered since it was posted, when run again); its job is enqueued after the commit.
    How many deliveries are new."""
    if not announcement.email:
        return 0
    users = registered_users(challenge=announcement.challenge).exclude(
        pk__in=announcement.deliveries.values("user_id")
    )
    new = [AnnouncementDelivery(announcement=announcement, user=u) for u in users]
    AnnouncementDelivery.objects.bulk_create(new, ignore_conflicts=True)
    if new:
        transaction.on_commit(lambda: _enqueue_logging_redis_errors(announcement.pk))
    return len(new)


def _enqueue_logging_redis_errors(announcement_id: int) -> None:
    try:
        announcement_enqueue(announcement_id=announcement_id)
    except RedisError as exc:
        log.warning(
            "announcement %s stays pending: Redis refused the enqueue (%s); the sweep sends it",
            announcement_id,
            exc,
        )
    except Exception:  # never fail the operator's save over the queue (on_commit raises)
        log.exception("announcement %s stays pending: its enqueue failed", announcement_id)


def announcement_enqueue(*, announcement_id: int) -> bool:
    """Put the announcement's send job on the notifications queue, unless it waits there
    already. Raises RedisError."""
    queue = notifications.notifier_queue()
    job_id = f"announcement-{announcement_id}"
    if notifications.job_pending(queue, job_id):
        return False
    enqueue_in_one_round_trip(
        queue,
        "submissions.notifications.announcements.announcement_send",
        announcement_id,
        job_id=job_id,
        result_ttl=86400,
        failure_ttl=7 * 86400,
    )
    return True


def announcements_sweep(*, older_than_s: float | None = None) -> list[int]:
    """Enqueue the announcements with deliveries pending ``older_than_s`` after they were made
    (default NOTIFICATIONS_SWEEP_AFTER_S). The ids enqueued."""
    if older_than_s is None:
        older_than_s = settings.NOTIFICATIONS_SWEEP_AFTER_S
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    waiting = AnnouncementDelivery.objects.filter(status=Status.PENDING, created_at__lte=cutoff)
    ids = sorted(set(waiting.values_list("announcement_id", flat=True)))
    return [pk for pk in ids if announcement_enqueue(announcement_id=pk)]


def announcement_send(announcement_id: int) -> str:
    """The job: mail each pending delivery of the announcement once and record what happened.
    Running it twice, or two at once, mails nobody twice (locked rows are skipped)."""
    done: Counter[str] = Counter()
    while True:
        with transaction.atomic():
            batch = list(
                AnnouncementDelivery.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(announcement_id=announcement_id, status=Status.PENDING)
                .select_related("user", "announcement__challenge")
                .order_by("pk")[:SEND_BATCH]
            )
            for delivery in batch:
                delivery.status = _email_send(delivery)
                delivery.done_at = timezone.now()
                done[delivery.status] += 1
            AnnouncementDelivery.objects.bulk_update(batch, ["status", "done_at"])
        if len(batch) < SEND_BATCH:
            break
    return ", ".join(f"{status}: {count}" for status, count in sorted(done.items())) or "none"


def _email_send(delivery: AnnouncementDelivery) -> str:
    user = delivery.user
    if not notification_preference_of(user=user).email_announcements:
        return Status.NOT_WANTED
    if not user.email:
        return Status.NO_ADDRESS
    subject, body = email_text(delivery.announcement)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [user.email])
    except Exception:  # SMTP refused or unreachable: recorded for the operator; no address logged
        log.exception(
            "could not e-mail announcement %s to user %s", delivery.announcement_id, user.pk
        )
        return Status.FAILED
    return Status.SENT


def email_text(announcement: Announcement) -> tuple[str, str]:
    """Subject and body: the announcement as posted, where to read it, and how to opt out."""
    challenge = announcement.challenge
    page = f"{settings.SITE_URL}{challenge.get_absolute_url()}"
    profile = f"{settings.SITE_URL}{reverse('profile')}"
    body = (
        f"{announcement.body}\n\nRead it on the challenge's page: {page}\n\n"
        f"You receive this e-mail because you are registered for {challenge.title}; you can "
        f"turn these e-mails off in your notification settings: {profile}\n"
    )
    return f"[{challenge.title}] {announcement.title}", body


def delivery_counts(announcement: Announcement) -> dict[str, int]:
    """How many of its e-mails are in each status (for the operator): one grouped query."""
    rows = AnnouncementDelivery.objects.filter(announcement=announcement).order_by()
    return dict(rows.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
