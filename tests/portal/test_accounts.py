"""Accounts: sign-up, API tokens (created, shown once, stored hashed, revoked), password reset."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import MAX_ACTIVE_TOKENS, TokenLimitReached, api_token_create

pytestmark = pytest.mark.django_db


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def with_token(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def test_sign_up_creates_an_account_and_signs_in() -> None:
    client = Client()
    response = client.post(
        "/accounts/signup/",
        {
            "username": "carol",
            "email": "carol@example.org",
            "password1": "a-long-enough-passphrase-9",
            "password2": "a-long-enough-passphrase-9",
        },
    )
    assert response.status_code == 302 and response["Location"] == "/accounts/profile/"
    carol = get_user_model().objects.get(username="carol")
    assert carol.email == "carol@example.org"
    assert carol.password.startswith("argon2$")
    assert "carol" in client.get("/accounts/profile/").content.decode()


def test_sign_up_refuses_a_taken_name_and_a_weak_password(alice: Any) -> None:
    response = Client().post(
        "/accounts/signup/",
        {"username": "alice", "email": "a@example.org", "password1": "123", "password2": "123"},
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert "A user with that username already exists." in page
    assert "This password is too short." in page


def test_sign_ups_are_limited_per_address(settings: Any) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "signup_ip": "1/hour"}
    client = Client(REMOTE_ADDR="192.0.2.10")
    assert client.post("/accounts/signup/", {"username": "x"}).status_code == 400
    refused = client.post("/accounts/signup/", {"username": "y"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Too many sign-ups from your address" in refused.content.decode()


def test_a_new_token_is_shown_once_and_only_its_digest_is_stored(alice: Any) -> None:
    client = signed_in(alice)
    response = client.post("/accounts/tokens/new/", {"name": "laptop CLI"})
    secret = re.search(r'<code id="new-token">(oep_[\w-]+)</code>', response.content.decode())

    assert response.status_code == 200 and secret
    assert "no-store" in response["Cache-Control"]
    token = ApiToken.objects.get(user=alice)
    assert token.name == "laptop CLI"
    stored = [str(v) for v in ApiToken.objects.filter(pk=token.pk).values().get().values()]
    assert secret.group(1) not in stored  # neither the secret nor any column holding it
    assert token.prefix == secret.group(1)[:10]
    profile = client.get("/accounts/profile/").content.decode()
    assert secret.group(1) not in profile and f"{token.prefix}…" in profile


def test_a_token_authenticates_the_api_records_its_use_and_stops_when_revoked(
    alice: Any,
) -> None:
    new = api_token_create(user=alice, name="ci")
    api = with_token(new.secret)
    assert api.get("/api/submissions/").status_code == 200
    new.token.refresh_from_db()
    assert new.token.last_used_at is not None

    response = signed_in(alice).post(f"/accounts/tokens/{new.token.pk}/revoke/")

    assert response.status_code == 302
    refused = api.get("/api/submissions/")
    assert refused.status_code == 401
    assert refused.json() == {"detail": "Invalid or revoked token."}


def test_a_user_has_several_named_tokens_each_working(alice: Any) -> None:
    first = api_token_create(user=alice, name="laptop")
    second = api_token_create(user=alice, name="ci")
    assert first.secret != second.secret
    for new in (first, second):
        assert with_token(new.secret).get("/api/submissions/").status_code == 200
    assert with_token(first.secret + "x").get("/api/submissions/").status_code == 401


def test_the_token_endpoint_still_trades_a_password_for_a_token(alice: Any) -> None:
    response = APIClient().post(
        "/api/auth/token/", {"username": "alice", "password": "alice-password-1", "name": "cli"}
    )
    body = response.json()
    assert response.status_code == 200
    assert set(body) == {"token", "id", "name", "prefix", "created_at", "last_used_at"}
    assert body["name"] == "cli" and body["token"].startswith(body["prefix"])
    assert with_token(body["token"]).get("/api/submissions/").status_code == 200


def test_tokens_can_be_listed_and_revoked_through_the_api(alice: Any) -> None:
    new = api_token_create(user=alice, name="ci")
    api = with_token(new.secret)
    listed = api.get("/api/auth/tokens/").json()
    assert [t["name"] for t in listed] == ["ci"] and "token" not in listed[0]
    assert api.delete(f"/api/auth/tokens/{new.token.pk}/").status_code == 204
    assert api.get("/api/auth/tokens/").status_code == 401


def test_active_tokens_per_user_are_limited(alice: Any) -> None:
    for i in range(MAX_ACTIVE_TOKENS):
        api_token_create(user=alice, name=f"t{i}")
    with pytest.raises(TokenLimitReached, match="revoke one first"):
        api_token_create(user=alice, name="one more")


def test_an_inactive_users_token_stops_working(alice: Any) -> None:
    new = api_token_create(user=alice, name="ci")
    alice.is_active = False
    alice.save()
    assert with_token(new.secret).get("/api/submissions/").status_code == 401


def test_password_reset_mails_a_link_that_sets_a_new_password(alice: Any) -> None:
    alice.email = "alice@example.org"
    alice.save()
    client = Client()
    response = client.post("/accounts/password/reset/", {"email": "alice@example.org"})
    assert response.status_code == 302
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["alice@example.org"]
    link = re.search(r"http://testserver(/accounts/password/reset/\S+/)", mail.outbox[0].body)
    assert link

    form = client.get(link.group(1), follow=True)
    assert "Choose a new password" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "another-passphrase-42", "new_password2": "another-passphrase-42"},
    )

    assert done.status_code == 302
    assert Client().login(username="alice", password="another-passphrase-42")


def test_password_change_needs_the_old_password(alice: Any) -> None:
    client = signed_in(alice)
    wrong = client.post(
        "/accounts/password/change/",
        {
            "old_password": "nope",
            "new_password1": "x-9-long-pass",
            "new_password2": "x-9-long-pass",
        },
    )
    assert wrong.status_code == 200 and "Your old password was entered incorrectly" in (
        wrong.content.decode()
    )
    right = client.post(
        "/accounts/password/change/",
        {
            "old_password": "alice-password-1",
            "new_password1": "x-9-long-pass",
            "new_password2": "x-9-long-pass",
        },
    )
    assert right.status_code == 302
    assert Client().login(username="alice", password="x-9-long-pass")


def test_log_out_is_a_post(alice: Any) -> None:
    client = signed_in(alice)
    assert client.get("/accounts/logout/").status_code == 405
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/accounts/profile/").status_code == 302
