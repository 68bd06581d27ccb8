"""Announcements: an operator posts one to a challenge in the admin; it shows on the challenge's
page, on each phase's page and in the API at once, and is e-mailed through the notifications
queue to every registered participant exactly once (a team's members included, the unapproved
not), skipping those who opted out, with each e-mail's status shown to the operator."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from accounts.services import notification_preference_set
from submissions.models import Announcement, AnnouncementDelivery, ChallengeRegistration
from submissions.notifications.announcements import announcement_send, announcements_sweep
from submissions.notifications.services import notifications_sweep
from submissions.teams.services import team_create
from tests.submissions.challenge_support import registered, two_phase_challenge
from tests.submissions.notify_support import notifications_queue, run_notifier

__all__ = ["notifications_queue"]  # fixture
pytestmark = pytest.mark.django_db


@pytest.fixture
def cup(make_task: Any, django_user_model: Any) -> Any:
    """A challenge with: alice registered alone, bob and carol registered as a team, dave
    registered but opted out, erin waiting for approval, and frank not registered."""
    challenge, first, _ = two_phase_challenge(make_task)
    first.max_team_size = 2
    first.save()
    people = {
        name: django_user_model.objects.create_user(name, email=f"{name}@example.org")
        for name in ("alice", "bob", "carol", "dave", "erin", "frank")
    }
    registered(challenge, people["alice"])
    registered(challenge, people["dave"])
    team = team_create(user=people["bob"], task=first, name="Owls")
    team.memberships.create(task=first, user=people["carol"])
    registration = registered(challenge, people["bob"])
    registration.team = team
    registration.save()
    ChallengeRegistration.objects.create(
        challenge=challenge, user=people["erin"], terms_accepted_at=registration.terms_accepted_at
    )
    opted_out = {"email_on_failure": True, "email_on_success": False, "email_announcements": False}
    notification_preference_set(user=people["dave"], **opted_out)
    return challenge


def post(operator: Any, challenge: Any, capture: Any, **fields: Any) -> Any:
    console = Client()
    console.force_login(operator)
    data = {"challenge": challenge.pk, "title": "Phase 2 data is out", "email": "on"}
    data["body"] = "The **test** data is published."
    data |= {"deliveries-TOTAL_FORMS": "0", "deliveries-INITIAL_FORMS": "0"}  # its inline
    with capture(execute=True):
        response = console.post("/admin/submissions/announcement/add/", {**data, **fields})
    assert response.status_code == 302, response.content.decode()[-2000:]
    return console


def test_an_announcement_is_mailed_once_to_each_registered_participant_who_wants_it(
    cup: Any, operator: Any, notifications_queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    post(operator, cup, django_capture_on_commit_callbacks)
    run_notifier(notifications_queue)
    run_notifier(notifications_queue)  # a second pass mails nobody again
    announcement_send(Announcement.objects.get().pk)  # nor does the job run once more

    assert sorted(m.to[0] for m in mail.outbox) == [
        "alice@example.org",
        "bob@example.org",
        "carol@example.org",
    ]
    message = mail.outbox[0]
    assert message.subject == "[Digits Cup] Phase 2 data is out"
    assert "The **test** data is published." in message.body
    assert "https://portal.test/challenges/digits-cup/" in message.body
    statuses = dict(AnnouncementDelivery.objects.values_list("user__username", "status"))
    assert statuses == {"alice": "sent", "bob": "sent", "carol": "sent", "dave": "not wanted"}


def test_the_operator_sees_each_emails_status(
    cup: Any, operator: Any, notifications_queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    console = post(operator, cup, django_capture_on_commit_callbacks)
    pending = console.get("/admin/submissions/announcement/").content.decode()
    run_notifier(notifications_queue)
    done = console.get("/admin/submissions/announcement/").content.decode()
    detail = console.get(
        f"/admin/submissions/announcement/{Announcement.objects.get().pk}/change/"
    ).content.decode()

    assert "4 pending" in pending
    assert "1 not wanted · 3 sent" in done
    assert "Not wanted (opted out)" in detail


def test_an_announcement_shows_on_the_challenge_its_phases_and_the_api(
    cup: Any, operator: Any, django_capture_on_commit_callbacks: Any, notifications_queue: Any
) -> None:
    page = Client().get("/challenges/digits-cup/").content.decode()
    kept = Client().get("/tasks/digits-dev/").content.decode()  # kept for anonymous readers
    post(operator, cup, django_capture_on_commit_callbacks, email="")

    challenge_page = Client().get("/challenges/digits-cup/").content.decode()
    phase_page = Client().get("/tasks/digits-dev/").content.decode()
    api = APIClient().get("/api/challenges/digits-cup/").json()

    assert "data-announcements" not in page and "Phase 2 data is out" not in kept
    assert "<strong>test</strong> data is published" in challenge_page
    assert "Phase 2 data is out" in phase_page and "#announcement-" in phase_page
    assert [a["title"] for a in api["announcements"]] == ["Phase 2 data is out"]
    assert not AnnouncementDelivery.objects.exists()  # not to be mailed: nobody is


def test_people_registered_later_are_mailed_by_the_action_and_nobody_twice(
    cup: Any,
    operator: Any,
    django_user_model: Any,
    notifications_queue: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    console = post(operator, cup, django_capture_on_commit_callbacks)
    run_notifier(notifications_queue)
    registered(cup, django_user_model.objects.create_user("gina", email="gina@example.org"))
    announcement = Announcement.objects.get()

    with django_capture_on_commit_callbacks(execute=True):
        console.post(
            "/admin/submissions/announcement/",
            {"action": "email_newcomers", "_selected_action": [str(announcement.pk)]},
        )
    run_notifier(notifications_queue)

    assert sorted(m.to[0] for m in mail.outbox)[-1] == "gina@example.org"
    assert len(mail.outbox) == 4


def test_emails_left_pending_by_a_redis_outage_are_swept_up(
    cup: Any, operator: Any, notifications_queue: Any, django_capture_on_commit_callbacks: Any
) -> None:
    post(operator, cup, django_capture_on_commit_callbacks)
    notifications_queue.empty()  # the job was lost with Redis

    assert announcements_sweep(older_than_s=60) == []  # too fresh to be called lost
    notifications_sweep(older_than_s=0)  # recovery's sweep takes them along
    run_notifier(notifications_queue)

    assert len(mail.outbox) == 3
