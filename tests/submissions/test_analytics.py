"""Host analytics of a phase: submissions per day, participants and teams over time, failures by
cause, queue and evaluation times, the best score over time; drawn in the admin with the
project's SVG charts, returned by the API to operators and the challenge's hosts only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from submissions.models import Submission
from submissions.teams.services import team_create
from tests.submissions.challenge_support import two_phase_challenge
from tests.submissions.test_read_api import scored

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def failed(task: Any, user: Any, message: str, **fields: Any) -> Submission:
    return Submission.objects.create(
        task=task, user=user, sha256="0" * 64, size_bytes=1, original_name="m.onnx",
        status="failed", error_message=message, **fields,
    )  # fmt: skip


@pytest.fixture
def phase(make_task: Any, alice: Any, bob: Any, operator: Any) -> Any:
    """Two days ago alice scored (queued 10 s, evaluated 30 s); yesterday bob's team failed on
    the time limit and alice's model gave NaN; today a worker died under bob. A baseline is not
    participation."""
    challenge, first, _ = two_phase_challenge(make_task)
    first.max_team_size = 2
    first.save()
    now = timezone.now().replace(hour=12)
    start = now - 2 * DAY
    scored(
        first, alice, 0.8, created_at=start,
        started_at=start + timedelta(seconds=10), finished_at=start + timedelta(seconds=40),
    )  # fmt: skip
    team = team_create(user=bob, task=first, name="Owls")
    failed(first, bob, "The model ran past the time limit of 60 s.", team=team,
           created_at=now - DAY)  # fmt: skip
    failed(first, alice, "The model's output contains NaN or infinity (batch 1).",
           created_at=now - DAY)  # fmt: skip
    failed(first, bob, "The worker stopped.", failed_by_system=True, team=team, created_at=now)
    scored(first, operator, 0.5, is_baseline=True, created_at=start)
    challenge.hosts.add(alice)
    return first


def test_a_host_reads_the_phases_numbers_in_the_api(phase: Any, alice: Any) -> None:
    api = APIClient()
    api.force_authenticate(alice)  # a host of the challenge

    found = api.get(f"/api/tasks/{phase.slug}/analytics/").json()

    assert (found["submissions"], found["participants"], found["teams"]) == (4, 2, 1)
    assert [(d["submissions"], d["participants"], d["teams"]) for d in found["days"]] == [
        (1, 1, 0),
        (2, 2, 1),
        (1, 2, 1),
    ]
    assert found["failures"] == [
        {"cause": "NaN or infinity", "count": 1},
        {"cause": "system (not the model)", "count": 1},
        {"cause": "time limit", "count": 1},
    ]
    assert found["queue"] == {"count": 1, "median_s": 10.0, "p90_s": 10.0, "max_s": 10.0}
    assert found["evaluation"]["median_s"] == 30.0
    assert [step["score"] for step in found["best_score"]] == [0.8]


def test_a_participant_who_is_no_host_is_refused(phase: Any, bob: Any) -> None:
    api = APIClient()
    api.force_authenticate(bob)

    response = api.get(f"/api/tasks/{phase.slug}/analytics/")

    assert response.status_code == 403
    assert "hosts" in response.json()["detail"]


def test_the_operator_sees_the_charts_in_the_admin(phase: Any, operator: Any) -> None:
    console = Client()
    console.force_login(operator)

    change = console.get(f"/admin/submissions/task/{phase.pk}/change/").content.decode()
    page = console.get(f"/admin/submissions/task/{phase.pk}/analytics/").content.decode()

    assert f'href="/admin/submissions/task/{phase.pk}/analytics/"' in change
    assert page.count('class="chart-svg') == 4  # per day, participants, teams, best score
    assert "4 submissions by 2 participants (1 team)" in page
    assert "<td>time limit</td><td>1</td>" in page
    assert "10.0 s" in page and "30.0 s" in page
