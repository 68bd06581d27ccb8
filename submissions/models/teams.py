"""Teams: participants who enter a task together, share its quota and stand on its board as one
row (``submissions/teams/services.py`` holds the workflows).

Teams are per task, as on Kaggle: a lab may team up on one task and compete apart on another,
and a task's limits (team size, merge deadline, quotas) apply to one kind of team only. A
participant without a team is a team of one that has no row here: their submissions have no
``team`` and the board shows their username, exactly as before teams existed.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.urls import reverse


class Team(models.Model):
    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="teams")
    name = models.CharField(max_length=100)
    # Who may remove members; passes to the longest-standing member when the creator leaves.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="submissions.TeamMembership", related_name="teams"
    )

    class Meta:
        ordering = ["task", "name"]
        constraints = [
            models.UniqueConstraint(fields=["task", "name"], name="one_team_name_per_task")
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("team-detail", args=[self.pk])


class TeamMembership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    # The team's task, kept here so that "one team per participant per task" is a constraint.
    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships"
    )
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["joined_at", "id"]
        constraints = [models.UniqueConstraint(fields=["task", "user"], name="one_team_per_task")]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.team_id}"


def new_invite_code() -> str:
    return secrets.token_urlsafe(12)


class TeamInvite(models.Model):
    """A single-use code: whoever accepts it first joins the team; then it is spent."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invites")
    code = models.CharField(max_length=32, unique=True, default=new_invite_code)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    accepted_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"invite to {self.team_id}"

    def get_absolute_url(self) -> str:
        return reverse("team-join", args=[self.code])

    @property
    def spent(self) -> bool:
        return self.accepted_at is not None
