"""The layered layout moved modules, not models: every model keeps its app label and table, no
migration is pending (the migrations are the ones that made the schema before the move; none was
added), and a database with a row in every table keeps every row when migrated with this code."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.apps import apps
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from accounts.models import ApiToken, NotificationPreference
from submissions.models import (
    Announcement,
    AnnouncementDelivery,
    Challenge,
    ChallengeRegistration,
    DatasetVersion,
    FactSheet,
    FinalistCampaign,
    FinalistMeasurement,
    LeaderboardPending,
    Notification,
    RankingRule,
    TaskFile,
    Team,
    TeamInvite,
    TeamMembership,
    Track,
    Webhook,
    WebhookDelivery,
)
from tests.submissions.test_read_api import scored

# The app label and table of every model of ours before the move (the same migrations made them).
TABLES_BEFORE = {
    ("accounts", "accounts_apitoken"),
    ("accounts", "accounts_notificationpreference"),
    ("submissions", "submissions_datasetversion"),
    ("submissions", "submissions_deviceclass"),
    ("submissions", "submissions_leaderboardentry"),
    ("submissions", "submissions_leaderboardpending"),
    ("submissions", "submissions_leaderboardrecord"),
    ("submissions", "submissions_notification"),
    ("submissions", "submissions_rankingrule"),
    ("submissions", "submissions_submission"),
    ("submissions", "submissions_task"),
    ("submissions", "submissions_taskfile"),
    ("submissions", "submissions_team"),
    ("submissions", "submissions_teaminvite"),
    ("submissions", "submissions_teammembership"),
    ("submissions", "submissions_webhook"),
    ("submissions", "submissions_webhookdelivery"),
}
# Tables added since, by migrations of their own (0022_challenges, 0023_fact_sheets,
# 0025_tracks, 0026_announcements, 0030_finalist_remeasure): new, not moved.
TABLES_ADDED = {
    ("submissions", "submissions_challenge"),
    ("submissions", "submissions_challengeregistration"),
    ("submissions", "submissions_factsheet"),
    ("submissions", "submissions_track"),
    ("submissions", "submissions_announcement"),
    ("submissions", "submissions_announcementdelivery"),
    ("submissions", "submissions_finalistcampaign"),
    ("submissions", "submissions_finalistmeasurement"),
}


def our_models() -> list[Any]:
    return [m for m in apps.get_models() if m._meta.app_label in ("accounts", "submissions")]


def test_every_model_keeps_its_app_label_and_table() -> None:
    tables = {(m._meta.app_label, m._meta.db_table) for m in our_models()}
    assert tables == TABLES_BEFORE | TABLES_ADDED


@pytest.mark.django_db
def test_no_migration_is_pending() -> None:
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_database_with_a_row_in_every_table_keeps_every_row(
    alice: Any, bob: Any, make_task: Any
) -> None:
    task = make_task()
    done = scored(task, alice, 0.9)  # the submission and its board entry and record
    DatasetVersion.objects.create(task=task, number=1, file=ContentFile(b"x", name="v1.npz"))
    TaskFile.objects.create(task=task, title="Notes", file=ContentFile(b"x", name="notes.txt"))
    LeaderboardPending.objects.create(task=task, submission=done)
    RankingRule.objects.create(task=task)
    Track.objects.create(task=task, name="Speed", slug="speed", kind="measure", measure="latency")
    team = Team.objects.create(task=task, name="The team")
    TeamMembership.objects.create(team=team, task=task, user=bob)
    TeamInvite.objects.create(team=team, created_by=bob)
    hook = Webhook.objects.create(task=task, url="https://example.org/hook", secret="s" * 32)
    note = Notification.objects.create(submission=done, run=1, status="succeeded")
    WebhookDelivery.objects.create(notification=note, webhook=hook, attempt=1)
    ApiToken.objects.create(user=alice, name="cli", prefix="oep_abcd", digest="0" * 64)
    NotificationPreference.objects.create(user=alice)
    challenge = Challenge.objects.create(slug="cup", title="Cup")
    ChallengeRegistration.objects.create(
        challenge=challenge, user=alice, terms_accepted_at=timezone.now()
    )
    FactSheet.objects.create(task=task, user=alice, method_name="Ridge")
    news = Announcement.objects.create(challenge=challenge, title="News", body="Data is out.")
    AnnouncementDelivery.objects.create(announcement=news, user=alice)
    campaign = FinalistCampaign.objects.create(task=task, device_class_id="cpu", top=1, sessions=5)
    FinalistMeasurement.objects.create(
        campaign=campaign, submission=done, position=0, device_class_id="cpu"
    )
    before = {m._meta.db_table: m.objects.count() for m in our_models()}
    assert all(before.values()), before

    call_command("migrate", verbosity=0)

    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
    assert {m._meta.db_table: m.objects.count() for m in our_models()} == before
