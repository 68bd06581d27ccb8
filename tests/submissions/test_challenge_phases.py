"""Moving a challenge to its next phase: each participant's best (or selected) submission is
carried over, scored by a real worker on the next phase's dataset without costing quota, and the
board, its CSV and its API say the entry was carried."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.contrib import admin
from django.core.files.base import ContentFile
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from plumbing.refusals import Refused
from submissions.challenges.selectors import challenge_phases
from submissions.challenges.services import challenge_phase_advance
from submissions.lifecycle.quotas import quota_get
from submissions.lifecycle.selectors import leaderboard
from submissions.lifecycle.services import submission_create
from submissions.models import Challenge, Submission, Task
from tests.builders import digits_like, linear_classifier, linear_reference, npz_bytes
from tests.conftest import onnx_upload
from tests.submissions.challenge_support import registered, two_phase_challenge
from tests.submissions.test_read_api import scored


def public_accuracy(w: np.ndarray, b: np.ndarray, arrays: dict[str, np.ndarray]) -> float:
    public = arrays["split"] == "public"
    logits = linear_reference(w, b, arrays["inputs"])
    return float(np.mean(logits[public].argmax(1) == arrays["targets"][public]))


def close_first_phase(first: Task, second: Task) -> None:
    """Phase 1 has just closed and phase 2 is open."""
    now = timezone.now()
    Task.objects.filter(pk=first.pk).update(closes_at=now - timedelta(minutes=1))
    Task.objects.filter(pk=second.pk).update(opens_at=now - timedelta(minutes=1))


@pytest.mark.django_db(transaction=True)
def test_advancing_carries_the_best_submission_re_scored_on_the_next_phase_without_quota(
    make_task: Any, alice: Any, queue: Any, run_worker: Any
) -> None:
    challenge, first, second = two_phase_challenge(make_task)
    second_data = digits_like(n=80, seed=7)
    second.dataset.save("digits-test.npz", ContentFile(npz_bytes(second_data)), save=True)
    registered(challenge, alice)
    rng = np.random.default_rng(3)
    weights = [(rng.normal(size=(64, 10)), rng.normal(size=10)) for _ in range(2)]
    uploads = [
        submission_create(user=alice, task=first, upload=onnx_upload(linear_classifier(w, b)))
        for w, b in weights
    ]
    run_worker()
    best = leaderboard(task=first)[0].submission
    close_first_phase(first, second)
    quota_before = quota_get(user=alice, task=second)

    advanced = challenge_phase_advance(challenge_id=challenge.pk, carry="best")
    run_worker()

    assert (advanced.source, advanced.target, advanced.carried) == (first, second, 1)
    carried = Submission.objects.get(task=second)
    assert (carried.carried_from_id, carried.status, carried.sha256) == (
        best.pk,
        "succeeded",
        best.sha256,
    )
    w, b = weights[[s.pk for s in uploads].index(best.pk)]
    assert carried.score == pytest.approx(public_accuracy(w, b, second_data), abs=1e-12)
    assert quota_get(user=alice, task=second) == quota_before
    assert quota_before.used_total == 0
    (row,) = leaderboard(task=second)
    assert row.submission == carried
    page = Client().get(second.get_absolute_url()).content.decode()
    assert 'class="chip chip-carried"' in page
    api_rows = APIClient().get(f"/api/tasks/{second.slug}/leaderboard/").json()["rows"]
    assert [r["carried"] for r in api_rows] == [True]
    # Advancing again carries nothing twice.
    assert challenge_phase_advance(challenge_id=challenge.pk).carried == 0


@pytest.mark.django_db
def test_carrying_the_selected_takes_each_participants_finals_else_their_best(
    make_task: Any, alice: Any, bob: Any, django_capture_on_commit_callbacks: Any
) -> None:
    challenge, first, second = two_phase_challenge(make_task)
    first.final_selections = 2
    first.save()
    a_best, a_chosen = scored(first, alice, 0.9), scored(first, alice, 0.5, selected=True)
    b_best = scored(first, bob, 0.7)
    scored(first, bob, 0.6)
    close_first_phase(first, second)

    with django_capture_on_commit_callbacks(execute=False):
        advanced = challenge_phase_advance(challenge_id=challenge.pk, carry="selected")

    assert advanced.carried == 2
    carried = Submission.objects.filter(task=second).order_by("carried_from_id")
    assert [s.carried_from_id for s in carried] == sorted([a_chosen.pk, b_best.pk])
    assert a_best.pk not in [s.carried_from_id for s in carried]
    assert all(s.priority == Submission.RESCORE_PRIORITY for s in carried)
    assert carried[0].owner_notices() == [
        "Carried over from the previous phase; being scored on this one."
    ]


@pytest.mark.django_db
def test_a_challenge_on_its_last_phase_has_nowhere_to_advance(make_task: Any) -> None:
    challenge, first, second = two_phase_challenge(make_task)
    Task.objects.filter(pk__in=[first.pk, second.pk]).update(
        opens_at=timezone.now() - timedelta(days=3), closes_at=timezone.now() - timedelta(days=1)
    )
    with pytest.raises(Refused, match="has no next phase"):
        challenge_phase_advance(challenge_id=challenge.pk)


@pytest.mark.django_db
def test_the_operator_advances_from_the_challenge_admin(
    make_task: Any, alice: Any, operator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    challenge, first, second = two_phase_challenge(make_task)
    scored(first, alice, 0.8)
    close_first_phase(first, second)
    console = Client()
    console.force_login(operator)

    with django_capture_on_commit_callbacks(execute=False):
        response = console.post(
            "/admin/submissions/challenge/",
            {"action": "advance_best", "_selected_action": [challenge.pk]},
            follow=True,
        )

    assert "1 submission(s) carried from Development to Test" in response.content.decode()
    assert Submission.objects.filter(task=second, carried_from__isnull=False).count() == 1
    assert admin.site.is_registered(Challenge)


@pytest.mark.django_db
def test_the_operator_makes_tasks_the_challenges_phases_in_the_admin(
    make_task: Any, operator: Any
) -> None:
    early = make_task(slug="early", title="Early", opens_at=timezone.now())
    late = make_task(slug="late", title="Late", opens_at=timezone.now() + timedelta(days=1))
    alone = make_task(slug="alone", title="Alone")
    console = Client()
    console.force_login(operator)
    form = {
        "title": "Cup",
        "slug": "cup",
        "visibility": "public",
        "tasks": [late.pk, early.pk],
        **{
            f"{prefix}-{k}": "0"
            for prefix in ("phases", "registrations")
            for k in ("TOTAL_FORMS", "INITIAL_FORMS")
        },
    }

    response = console.post("/admin/submissions/challenge/add/", form)

    assert response.status_code == 302, response.content.decode()[:2000]
    challenge = Challenge.objects.get(slug="cup")
    phases = challenge_phases(challenge=challenge)
    assert [(t.slug, t.phase_order) for t in phases] == [("early", 1), ("late", 2)]
    alone.refresh_from_db()
    assert alone.challenge is None
