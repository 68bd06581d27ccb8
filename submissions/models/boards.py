"""Read models of the leaderboard, kept by ``submissions.boards.leaderboard``: each user's best
entry
and the record-breaking submissions, so that a page reads one index range instead of ranking
every submission (100,000 submissions would take hundreds of ms per request).

They hold nothing that cannot be rebuilt from Submission rows (``manage.py leaderboard_rebuild``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class LeaderboardEntry(models.Model):
    """One user's best eligible submission on one board (public or private) of one task, on its
    main board or one of its tracks (``track``); a baseline is an entry of its own
    (``baseline``), however many its uploader made."""

    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="+")
    board = models.CharField(max_length=8)
    # None: the task's main board, ranked by its own rule; else a track's, ranked by the track's.
    track = models.ForeignKey(
        "submissions.Track", on_delete=models.CASCADE, null=True, related_name="+"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="+"
    )
    score = models.FloatField()
    # Under the task's ranking rule (submissions/boards/ranking.py): entries outside its budgets (or
    # missing a measure it needs) are listed below the ranked ones, with the reason.
    unranked = models.BooleanField(default=False)
    value = models.FloatField(null=True)  # what the rule ranks on: the score or the composite
    reason = models.CharField(max_length=500, blank=True)
    # the rule's value (the score negated when higher is better; a composite as is), or for an
    # unranked entry its score so ordered; ranking is always ascending, so one index serves it
    rank_key = models.FloatField()
    created_at = models.DateTimeField()  # the best submission's, which breaks ties
    entries = models.PositiveIntegerField()
    last_submitted_at = models.DateTimeField()
    latency_p50_ms = models.FloatField(null=True)
    throughput = models.FloatField(null=True)
    device_name = models.CharField(max_length=200, blank=True)
    baseline = models.BooleanField(default=False)
    # The team whose row this is; None: a participant alone (``user``) or a baseline.
    team = models.ForeignKey(
        "submissions.Team", on_delete=models.CASCADE, null=True, related_name="+"
    )

    class Meta:
        # Conditions, not a nullable column in the keys: NULL tracks would never collide.
        constraints = [
            models.UniqueConstraint(
                fields=["task", "board", "user"],
                condition=models.Q(baseline=False, team__isnull=True, track__isnull=True),
                name="one_entry_per_user",
            ),
            models.UniqueConstraint(
                fields=["task", "board", "team"],
                condition=models.Q(team__isnull=False, track__isnull=True),
                name="one_entry_per_team",
            ),
            models.UniqueConstraint(
                fields=["track", "board", "user"],
                condition=models.Q(baseline=False, team__isnull=True, track__isnull=False),
                name="one_track_entry_per_user",
            ),
            models.UniqueConstraint(
                fields=["track", "board", "team"],
                condition=models.Q(team__isnull=False, track__isnull=False),
                name="one_track_entry_per_team",
            ),
        ]
        indexes = [
            models.Index(
                fields=["task", "board", "unranked", "rank_key", "created_at", "submission"],
                condition=models.Q(track__isnull=True),
                name="leaderboard_rank",
            ),
            models.Index(
                fields=["track", "board", "unranked", "rank_key", "created_at", "submission"],
                condition=models.Q(track__isnull=False),
                name="leaderboard_track_rank",
            ),
        ]

    def __str__(self) -> str:
        track = f" track {self.track_id}" if self.track_id is not None else ""
        return f"{self.task_id}/{self.board}{track}: user {self.user_id} {self.score}"

    @property
    def entrant(self) -> str:
        """Whose row this is, as ``selectors.ENTRANT`` partitions: the baseline, the team, or the
        participant alone."""
        return entrant_key(
            baseline=self.baseline,
            submission_id=self.submission_id,
            team_id=self.team_id,
            user_id=self.user_id,
        )


def entrant_key(*, baseline: bool, submission_id: int, team_id: int | None, user_id: int) -> str:
    """``b<submission>`` for a baseline, ``t<team>`` for a team, ``u<user>`` for a participant
    alone: one key space, so a team and a user with the same id are never one entrant."""
    if baseline:
        return f"b{submission_id}"
    return f"t{team_id}" if team_id is not None else f"u{user_id}"


class LeaderboardRecord(models.Model):
    """A submission that beat every earlier eligible one: a step of the best-score chart. One
    chart per task and board, tracks included: they rank the same results, whose best score
    over time is the same whatever the ranking."""

    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="+")
    board = models.CharField(max_length=8)
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="+"
    )
    score = models.FloatField()
    at = models.DateTimeField()
    # No copy of the username: pages read it through the submission, so a rename shows at once.

    class Meta:
        indexes = [models.Index(fields=["task", "board", "at"], name="leaderboard_record_time")]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.board}: {self.score} at {self.at:%Y-%m-%d %H:%M}"


class LeaderboardPending(models.Model):
    """A result whose board refresh has not run yet. Written in the result's own transaction, so
    the submitter sees their score at once; deleted by the refresh that covers it
    (``leaderboard.leaderboard_drain``), which the result's worker runs at the end of its job,
    another worker of the same task runs for it meanwhile, or recovery runs when the process
    died in between."""

    task = models.ForeignKey("submissions.Task", on_delete=models.CASCADE, related_name="+")
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["task", "id"], name="leaderboard_pending_task")]

    def __str__(self) -> str:
        return f"{self.task_id}: submission {self.submission_id} since {self.created_at}"
