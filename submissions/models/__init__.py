"""The app's models, one module per concern; Django registers them from here."""

from __future__ import annotations

from submissions.models.announcements import Announcement, AnnouncementDelivery
from submissions.models.boards import LeaderboardEntry, LeaderboardPending, LeaderboardRecord
from submissions.models.challenges import Challenge, ChallengeRegistration, FactSheet
from submissions.models.core import DeviceClass, Submission, SubmissionQuerySet, Task, TaskQuerySet
from submissions.models.datasets import DatasetVersion
from submissions.models.finalists import FinalistCampaign, FinalistMeasurement
from submissions.models.notifications import Notification, Webhook, WebhookDelivery
from submissions.models.ranking import RankingRule, Track
from submissions.models.task_files import TaskFile, TaskFileQuerySet
from submissions.models.teams import Team, TeamInvite, TeamMembership

__all__ = [
    "Announcement",
    "AnnouncementDelivery",
    "Challenge",
    "ChallengeRegistration",
    "DatasetVersion",
    "DeviceClass",
    "FactSheet",
    "FinalistCampaign",
    "FinalistMeasurement",
    "LeaderboardEntry",
    "LeaderboardPending",
    "LeaderboardRecord",
    "Notification",
    "RankingRule",
    "Submission",
    "SubmissionQuerySet",
    "Task",
    "TaskFile",
    "TaskFileQuerySet",
    "TaskQuerySet",
    "Team",
    "TeamInvite",
    "TeamMembership",
    "Track",
    "Webhook",
    "WebhookDelivery",
]
