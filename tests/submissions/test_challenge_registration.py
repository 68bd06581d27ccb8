"""Registration: a participant registers for a challenge and accepts its terms before the first
upload to any of its phases; the operator may have to approve; an allow-list of e-mail domains;
a team registers as one, its members with it. Unregistered uploads are refused with a 403 that
says what to do, through the API and the form alike."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.test import Client
from rest_framework.test import APIClient

from plumbing.refusals import Refused
from submissions.challenges.registration import RegistrationRequired, is_registered
from submissions.challenges.services import challenge_register, registrations_decide
from submissions.lifecycle.services import submission_create
from submissions.models import ChallengeRegistration, Submission
from submissions.teams.services import team_create
from tests.builders import linear_classifier
from tests.conftest import onnx_upload
from tests.submissions.challenge_support import two_phase_challenge

pytestmark = pytest.mark.django_db


def model(seed: float = 0.0) -> Any:
    w, b = np.full((64, 10), seed), np.zeros(10)
    return onnx_upload(linear_classifier(w, b))


def test_an_unregistered_upload_is_refused_with_a_403_saying_to_register(
    make_task: Any, alice: Any
) -> None:
    _, first, _ = two_phase_challenge(make_task)
    api = APIClient()
    api.force_authenticate(alice)

    response = api.post("/api/submissions/", {"task": first.slug, "file": model()})

    assert response.status_code == 403
    assert response.json()["detail"] == (
        "This task is a phase of the challenge 'Digits Cup': register for the challenge and "
        "accept its terms before submitting (/challenges/digits-cup/)."
    )
    assert Submission.objects.count() == 0


def test_the_upload_form_shows_the_same_refusal(make_task: Any, alice: Any) -> None:
    _, first, _ = two_phase_challenge(make_task)
    web = Client()
    web.force_login(alice)

    response = web.post(f"/tasks/{first.slug}/submit/", {"file": model()})

    assert response.status_code == 400
    assert "register for the challenge and accept its terms" in response.content.decode()
    assert Submission.objects.count() == 0


def test_registering_needs_the_terms_accepted_and_then_uploads_are_taken(
    make_task: Any, alice: Any
) -> None:
    _, first, _ = two_phase_challenge(make_task)
    api = APIClient()
    api.force_authenticate(alice)
    url = "/api/challenges/digits-cup/registration/"

    refused = api.post(url, {"accept_terms": False}, format="json")
    assert refused.status_code == 400
    why = "You must accept the challenge's terms to register."
    assert refused.json() == {"accept_terms": [why]}

    accepted = api.post(url, {"accept_terms": True}, format="json")
    assert accepted.status_code == 201
    assert accepted.json()["status"] == "approved"
    assert accepted.json()["terms_accepted_at"]
    upload = api.post("/api/submissions/", {"task": first.slug, "file": model()})
    assert upload.status_code == 201, upload.json()


def test_registering_on_the_page_with_the_terms_box(make_task: Any, alice: Any) -> None:
    challenge, _, _ = two_phase_challenge(make_task)
    web = Client()
    web.force_login(alice)
    assert "Be fair." in web.get("/challenges/digits-cup/").content.decode()

    unticked = web.post("/challenges/digits-cup/register/", follow=True)
    assert "You must accept the challenge" in unticked.content.decode()
    assert not is_registered(user=alice, challenge=challenge)

    page = web.post("/challenges/digits-cup/register/", {"accept_terms": "on"}, follow=True)
    assert 'data-registration="approved"' in page.content.decode()
    assert is_registered(user=alice, challenge=challenge)


def test_a_challenge_that_asks_for_approval_takes_uploads_only_once_approved(
    make_task: Any, alice: Any
) -> None:
    challenge, first, _ = two_phase_challenge(make_task, requires_approval=True)
    registration = challenge_register(user=alice, challenge_id=challenge.pk, accept_terms=True)
    assert registration.status == "pending"

    with pytest.raises(RegistrationRequired, match="waiting for the organisers' approval"):
        submission_create(user=alice, task=first, upload=model())

    registrations_decide(registration_ids=[registration.pk], approve=False)
    with pytest.raises(RegistrationRequired, match="was not approved"):
        submission_create(user=alice, task=first, upload=model())

    assert registrations_decide(registration_ids=[registration.pk], approve=True) == 1
    assert submission_create(user=alice, task=first, upload=model()).status == "queued"


def test_the_operator_approves_registrations_in_the_admin(
    make_task: Any, alice: Any, operator: Any
) -> None:
    challenge, _, _ = two_phase_challenge(make_task, requires_approval=True)
    registration = challenge_register(user=alice, challenge_id=challenge.pk, accept_terms=True)
    console = Client()
    console.force_login(operator)

    response = console.post(
        "/admin/submissions/challengeregistration/",
        {"action": "approve", "_selected_action": [registration.pk]},
        follow=True,
    )

    assert "1 registration(s) approved." in response.content.decode()
    assert is_registered(user=alice, challenge=challenge)
    assert console.get(f"/admin/submissions/challenge/{challenge.pk}/change/").status_code == 200


def test_only_the_allowed_email_domains_may_register(
    make_task: Any, django_user_model: Any
) -> None:
    challenge, _, _ = two_phase_challenge(make_task, allowed_email_domains="uni.example\n")
    inside = django_user_model.objects.create_user("in", email="in@UNI.example")
    outside = django_user_model.objects.create_user("out", email="out@elsewhere.example")
    api = APIClient()
    api.force_authenticate(outside)

    response = api.post(
        "/api/challenges/digits-cup/registration/", {"accept_terms": True}, format="json"
    )

    assert response.status_code == 403
    assert "not at a domain this challenge admits" in response.json()["detail"]
    assert not ChallengeRegistration.objects.filter(user=outside).exists()
    assert challenge_register(user=inside, challenge_id=challenge.pk, accept_terms=True).approved


def test_a_team_registers_as_a_team_and_its_members_may_upload(
    make_task: Any, alice: Any, bob: Any
) -> None:
    challenge, first, _ = two_phase_challenge(make_task)
    first.max_team_size = 2
    first.save()
    team = team_create(user=alice, task=first, name="Owls")
    with pytest.raises(Refused, match="Only a member of a team can register it"):
        challenge_register(user=bob, challenge_id=challenge.pk, accept_terms=True, team_id=team.pk)

    challenge_register(user=alice, challenge_id=challenge.pk, accept_terms=True, team_id=team.pk)
    team.memberships.create(task=first, user=bob)  # joined after the registration

    assert is_registered(user=bob, challenge=challenge)
    upload = submission_create(user=bob, task=first, upload=model())
    assert upload.team == team
