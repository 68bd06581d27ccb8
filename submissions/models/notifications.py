"""Notifications of final statuses: one Notification row per submission run that reached one
(inserted in the status change's own transaction, so it is the idempotency key), operators'
per-task webhooks, and one WebhookDelivery row per attempt to deliver to one of them.

Sending is submissions/notifications/services.py's job; these rows are what it reads and writes.
"""

from __future__ import annotations

from django.db import models


class Webhook(models.Model):
    """An operator's endpoint told about a task's submissions (Slack-compatible JSON, signed)."""

    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500, help_text="Receives a POST with a JSON body.")
    secret = models.CharField(
        max_length=200,
        help_text="Signs every body: X-Portal-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "
        "'<t>.' + body with this secret>.",
    )
    on_succeeded = models.BooleanField(default=True, verbose_name="succeeded")
    on_failed = models.BooleanField(default=True, verbose_name="failed")
    on_cancelled = models.BooleanField(default=False, verbose_name="cancelled")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "id"]

    def __str__(self) -> str:
        return f"{self.url} ({self.task_id})"

    def wants(self, status: str) -> bool:
        return self.active and bool(getattr(self, f"on_{status}", False))


ONE_PER_RUN = "one_notification_per_submission_run"  # at most one notification per run


class Notification(models.Model):
    """A submission run reached a final status; at most one row per (submission, run)."""

    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="notifications"
    )
    run = models.PositiveIntegerField(
        help_text="The submission's run: 1, then one more per re-run."
    )
    status = models.CharField(max_length=10)
    created_at = models.DateTimeField(auto_now_add=True)
    # Null while pending: its job has not run yet (Redis was down, or the notifier is behind);
    # the sweep (manage.py notifications_send, and recovery) enqueues pending rows again.
    dispatched_at = models.DateTimeField(null=True, blank=True, db_index=True)
    email = models.CharField(
        max_length=16, blank=True, help_text="sent, not wanted, no address, or failed: why"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["submission", "run"], name=ONE_PER_RUN)]

    def __str__(self) -> str:
        return f"submission {self.submission_id} run {self.run}: {self.status}"


class WebhookDelivery(models.Model):
    """One attempt to deliver one notification to one webhook: the delivery log."""

    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="deliveries"
    )
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    attempt = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    ok = models.BooleanField(default=False)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"notification {self.notification_id} → webhook {self.webhook_id} #{self.attempt}"
