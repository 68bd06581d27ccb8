"""Challenges: an ordered list of phases, each a Task as before, with the terms participants
accept when they register (``submissions/challenges/`` holds the workflows).

A task with no challenge is exactly what it was: no registration, no phases. A task in a
challenge is one of its phases (``Task.challenge``, ordered by ``Task.phase_order``); its window,
dataset, quotas and board are its own.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse


def _lines(text: str) -> list[str]:
    return [line.strip().lower() for line in text.splitlines() if line.strip()]


class Challenge(models.Model):
    class Visibility(models.TextChoices):
        PUBLIC = "public", "Public"
        # Invisible (404) to anyone neither registered, invited, a host nor an operator.
        PRIVATE = "private", "Private (registered and invited participants only)"

    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=200)
    overview = models.TextField(blank=True, help_text="Markdown.")
    rules = models.TextField(blank=True, help_text="Markdown.")
    terms = models.TextField(
        blank=True, help_text="Markdown; a participant accepts them when registering."
    )
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    hosts = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    visibility = models.CharField(
        max_length=8, choices=Visibility.choices, default=Visibility.PUBLIC
    )
    requires_approval = models.BooleanField(
        default=False, help_text="A registration counts only once an operator approves it."
    )
    allowed_email_domains = models.TextField(
        blank=True,
        help_text="One domain a line, e.g. 'uni.example'; only users whose e-mail is at one of "
        "them may register. Empty: anyone.",
    )
    invited_emails = models.TextField(
        blank=True,
        help_text="One e-mail address a line: they see a private challenge and may register "
        "whatever the domain list says.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("challenge-detail", args=[self.slug])

    @property
    def is_private(self) -> bool:
        return self.visibility == self.Visibility.PRIVATE

    def is_invited(self, user: Any) -> bool:
        email = (getattr(user, "email", "") or "").strip().lower()
        return bool(email) and email in _lines(self.invited_emails)

    def email_allowed(self, user: Any) -> bool:
        """Whether ``user``'s e-mail lets them register: an invitation, or a listed domain."""
        domains = _lines(self.allowed_email_domains)
        if not domains or self.is_invited(user):
            return True
        email = (getattr(user, "email", "") or "").strip().lower()
        return "@" in email and email.rsplit("@", 1)[1] in domains


class ChallengeRegistration(models.Model):
    """One participant's, or one team's, registration: the terms accepted by ``user``; with
    ``team``, every member of that team (a team of one of the challenge's phases) counts as
    registered."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for approval"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="registrations")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="challenge_registrations"
    )
    team = models.ForeignKey(
        "submissions.Team", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    terms_accepted_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["challenge", "user"],
                condition=Q(team__isnull=True),
                name="one_registration_per_user",
            ),
            models.UniqueConstraint(
                fields=["challenge", "team"],
                condition=Q(team__isnull=False),
                name="one_registration_per_team",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team or self.user} in {self.challenge}"

    @property
    def approved(self) -> bool:
        return self.status == self.Status.APPROVED


# The API schema names this choice set (settings.SPECTACULAR_SETTINGS, ENUM_NAME_OVERRIDES).
RegistrationStatus = ChallengeRegistration.Status


class FactSheet(models.Model):
    """What an entry is (per phase, per participant alone or per team): the method, the code
    and the data it used. A phase can require a complete one before finals are selected
    (``Task.requires_fact_sheet``); the operator exports a phase's sheets from the admin."""

    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="+")
    # The participant alone; with ``team``, the member who last saved the team's sheet.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(
        "submissions.Team", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    method_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(max_length=2000, blank=True)
    paper_url = models.URLField(blank=True)
    code_url = models.URLField(blank=True)
    training_data = models.TextField(max_length=2000, blank=True)
    extra_data = models.BooleanField(
        null=True, blank=True, help_text="Data beyond the published training rows; null: unsaid."
    )
    updated_at = models.DateTimeField(auto_now=True)

    # What a complete sheet must say (links and the description are optional).
    REQUIRED = ("method_name", "code_url", "training_data", "extra_data")

    class Meta:
        ordering = ["task", "method_name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "user"],
                condition=Q(team__isnull=True),
                name="one_fact_sheet_per_user",
            ),
            models.UniqueConstraint(
                fields=["task", "team"],
                condition=Q(team__isnull=False),
                name="one_fact_sheet_per_team",
            ),
        ]

    def __str__(self) -> str:
        return self.method_name or f"fact sheet {self.pk}"

    @property
    def missing(self) -> list[str]:
        """The required fields still empty; [] when complete."""
        return [f for f in self.REQUIRED if getattr(self, f) in ("", None)]
