"""API tokens: several per user, named, stored only as a SHA-256 digest, revocable."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """The secret is shown once, when created; the database keeps only its digest.

    The secret has 256 bits of entropy, so a plain SHA-256 (not a slow password hash) is enough:
    nobody can guess a preimage, and looking a token up stays one indexed query per request.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The first characters, to recognise it.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class NotificationPreference(models.Model):
    """Which e-mails a user wants when their submissions finish, and whether they want the
    announcements of their challenges. No row: the defaults below, so a new account hears about
    failures and announcements and is not mailed about every success."""

    DEFAULT_ON_FAILURE = True
    DEFAULT_ON_SUCCESS = False

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    email_on_failure = models.BooleanField(
        default=DEFAULT_ON_FAILURE, help_text="E-mail me when a submission of mine fails."
    )
    email_on_success = models.BooleanField(
        default=DEFAULT_ON_SUCCESS, help_text="E-mail me when a submission of mine succeeds."
    )
    email_announcements = models.BooleanField(
        default=True,
        help_text="E-mail me the organisers' announcements of challenges I am registered for.",
    )

    def __str__(self) -> str:
        return f"notification preferences of user {self.user_id}"

    def wants_email(self, status: str) -> bool:
        """Cancelled submissions send no mail: their submitter or an operator stopped them."""
        if status == "failed":
            return self.email_on_failure
        if status == "succeeded":
            return self.email_on_success
        return False
