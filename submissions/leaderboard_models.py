"""Read models of the leaderboard, kept by ``submissions.leaderboard``: each user's best entry
and the record-breaking submissions, so that a page reads one index range instead of ranking
every submission (100,000 submissions would take hundreds of ms per request).

They hold nothing that cannot be rebuilt from Submission rows (``manage.py leaderboard_rebuild``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class LeaderboardEntry(models.Model):
    """One user's best eligible submission on one board (public or private) of one task."""

    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="+")
    board = models.CharField(max_length=8)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="+"
    )
    score = models.FloatField()
    # score, negated when higher is better: ranking is always ascending, so one index serves it
    rank_key = models.FloatField()
    created_at = models.DateTimeField()  # the best submission's, which breaks ties
    entries = models.PositiveIntegerField()
    last_submitted_at = models.DateTimeField()
    latency_p50_ms = models.FloatField(null=True)
    throughput = models.FloatField(null=True)
    device_name = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "board", "user"], name="one_entry_per_user")
        ]
        indexes = [
            models.Index(
                fields=["task", "board", "rank_key", "created_at", "submission"],
                name="leaderboard_rank",
            )
        ]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.board}: user {self.user_id} {self.score}"


class LeaderboardRecord(models.Model):
    """A submission that beat every earlier eligible one: a step of the best-score chart."""

    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="+")
    board = models.CharField(max_length=8)
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="+"
    )
    score = models.FloatField()
    at = models.DateTimeField()
    username = models.CharField(max_length=150)

    class Meta:
        indexes = [models.Index(fields=["task", "board", "at"], name="leaderboard_record_time")]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.board}: {self.score} at {self.at:%Y-%m-%d %H:%M}"
