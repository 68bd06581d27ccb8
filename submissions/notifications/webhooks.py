"""Operators' webhooks: the JSON body, its signature, and the delivery job.

The body is Slack-compatible (a ``text`` field a Slack incoming webhook shows as the message)
with structured fields beside it for other receivers. Every POST is signed:

    X-Portal-Signature: t=<unix time>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>

A receiver recomputes v1 over the raw body it got and refuses old timestamps (replays).
A failed attempt raises, and rq tries again after WEBHOOK_RETRY_INTERVALS_S; every attempt is a
WebhookDelivery row in the admin. Nothing here can touch a submission's status.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

import requests
from django.conf import settings

from submissions.models.notifications import Notification, Webhook, WebhookDelivery
from submissions.notifications.services import submission_url

SIGNATURE_HEADER = "X-Portal-Signature"
EVENT_HEADER = "X-Portal-Event"
DELIVERY_HEADER = "X-Portal-Delivery"


class WebhookFailed(Exception):
    """The receiver did not answer 2xx; rq retries the job while it has retries left."""


def webhook_signature(*, secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def webhook_signature_valid(
    *, secret: str, body: bytes, header: str, now: float | None = None, tolerance_s: int = 300
) -> bool:
    """What a receiver does with the header (used by the tests, and a reference for operators)."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        return False
    expected = webhook_signature(secret=secret, body=body, timestamp=timestamp)
    return hmac.compare_digest(expected, f"t={timestamp},v1={parts.get('v1', '')}")


def webhook_payload(notification: Notification) -> dict[str, Any]:
    """What the task's own webhooks are told: the submitter's name, the outcome and the public
    score, as the task's operators see them; never a worker or host name."""
    submission = notification.submission
    task = submission.task
    status = notification.status
    url = submission_url(submission)
    if status == "succeeded":
        score = "no score" if submission.score is None else f"{submission.score:.6g}"
        outcome = f"succeeded: {task.metric} {score}"
    elif status == "failed":
        outcome = f"failed: {submission.error_message or 'no reason recorded'}"
    else:
        outcome = "was cancelled"
    text = (
        f"Submission <{url}|#{submission.pk}> by {submission.user.get_username()} "
        f"to {task.title} {outcome}"
    )
    return {
        "text": text,
        "event": f"submission.{status}",
        "notification_id": notification.pk,
        "occurred_at": notification.created_at.isoformat(),
        "task": {"slug": task.slug, "title": task.title, "metric": task.metric},
        "submission": {
            "id": submission.pk,
            "url": url,
            "run": notification.run,
            "status": status,
            "user": submission.user.get_username(),
            "original_name": submission.original_name,
            "score": submission.score if status == "succeeded" else None,
            "error_message": submission.error_message if status == "failed" else "",
            "failed_by_system": submission.failed_by_system if status == "failed" else False,
        },
    }


def webhook_deliver(notification_id: int, webhook_id: int) -> str:
    """The job: POST the notification to one webhook of its own task and log the attempt."""
    notification = (
        Notification.objects.select_related("submission__task", "submission__user")
        .filter(pk=notification_id)
        .first()
    )
    # Only the task's own hooks: a hidden task's submissions are told to nobody else.
    hook = Webhook.objects.filter(
        pk=webhook_id, active=True, task_id=notification.submission.task_id if notification else -1
    ).first()
    if notification is None or hook is None:
        return "gone"
    earlier = WebhookDelivery.objects.filter(notification=notification, webhook=hook)
    if earlier.filter(ok=True).exists():
        return "already delivered"
    body = json.dumps(webhook_payload(notification), separators=(",", ":")).encode()
    delivery = WebhookDelivery(notification=notification, webhook=hook, attempt=earlier.count() + 1)
    started = time.monotonic()
    try:
        response = requests.post(
            hook.url,
            data=body,
            headers={
                "Content-Type": "application/json",
                "User-Agent": "onnx-portal-webhook",
                EVENT_HEADER: f"submission.{notification.status}",
                DELIVERY_HEADER: str(notification.pk),
                SIGNATURE_HEADER: webhook_signature(
                    secret=hook.secret, body=body, timestamp=int(time.time())
                ),
            },
            timeout=settings.WEBHOOK_TIMEOUT_S,
            allow_redirects=False,  # a redirect would re-send elsewhere, or drop the body
        )
        delivery.status_code = response.status_code
        delivery.ok = 200 <= response.status_code < 300
        if not delivery.ok:
            delivery.error = f"HTTP {response.status_code}: {response.text[:200]}"
    except requests.RequestException as exc:
        delivery.error = f"{type(exc).__name__}: {exc}"[:500]
    delivery.duration_ms = (time.monotonic() - started) * 1000
    delivery.save()
    if not delivery.ok:
        raise WebhookFailed(f"webhook {hook.pk}, attempt {delivery.attempt}: {delivery.error}")
    return f"delivered on attempt {delivery.attempt}"
