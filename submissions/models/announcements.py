"""Announcements: an operator's message to a challenge, shown on its pages and e-mailed once to
each registered participant who wants it (one AnnouncementDelivery row per person, the
idempotency key, whose status the operator reads). Sending is
``submissions/notifications/announcements.py``'s job."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Announcement(models.Model):
    challenge = models.ForeignKey(
        "submissions.Challenge", on_delete=models.CASCADE, related_name="announcements"
    )
    title = models.CharField(max_length=200)
    body = models.TextField(help_text="Markdown.")
    email = models.BooleanField(
        default=True,
        verbose_name="e-mail it",
        help_text="E-mail it to every registered participant (once each; those who opted out "
        "on their profile are skipped).",
    )
    posted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    posted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-posted_at", "-id"]

    def __str__(self) -> str:
        return self.title


class AnnouncementDelivery(models.Model):
    """The announcement's e-mail to one participant: at most one per (announcement, user)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"
        NOT_WANTED = "not wanted", "Not wanted (opted out)"
        NO_ADDRESS = "no address", "No e-mail address"
        FAILED = "failed", "Failed"

    announcement = models.ForeignKey(
        Announcement, on_delete=models.CASCADE, related_name="deliveries"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["announcement", "id"]
        verbose_name_plural = "announcement deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["announcement", "user"], name="one_announcement_email_per_user"
            )
        ]
        indexes = [models.Index(fields=["status", "created_at"], name="announcement_pending")]

    def __str__(self) -> str:
        return f"{self.announcement_id} → user {self.user_id}: {self.status}"
