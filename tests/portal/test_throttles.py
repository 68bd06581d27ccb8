"""One rate limiter behind the form and the API: 429 with Retry-After and the same message."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from rest_framework.test import APIClient

from plumbing.ratelimit import (
    Rate,
    parse_rate,
    rate_limit_hit,
    rate_limit_undo,
)
from submissions.models import Submission
from tests.conftest import onnx_upload

pytestmark = pytest.mark.django_db

UPLOAD_REFUSAL = re.compile(
    r"^Too many uploads: the limit is 2 per hour\. Try again in (\d+) seconds?\.$"
)


def limits(settings: Any, **rates: str) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, **rates}


def api_as(user: Any, **extra: Any) -> APIClient:
    client = APIClient(**extra)
    client.force_authenticate(user)
    return client


def retry_after(response: Any, longest: int) -> int:
    seconds = int(response["Retry-After"])
    assert 1 <= seconds <= longest
    return seconds


def test_rates_are_parsed_and_bad_ones_fail_loudly() -> None:
    assert parse_rate("20/hour") == Rate(20, 3600)
    assert parse_rate("5/15m") == Rate(5, 900)
    assert parse_rate("60/min") == Rate(60, 60)
    assert str(Rate(5, 900)) == "5 per 15 minutes"
    with pytest.raises(ImproperlyConfigured, match="'lots' must look like '20/hour'"):
        parse_rate("lots")


def test_api_uploads_over_the_hourly_limit_get_429_with_retry_after(
    alice: Any, make_task: Any, settings: Any
) -> None:
    limits(settings, uploads="2/hour")
    task = make_task()
    client = api_as(alice)
    for _ in range(2):  # refused uploads count too: the limit is on attempts
        assert (
            client.post(
                "/api/submissions/", {"task": task.slug, "file": onnx_upload(b"x")}
            ).status_code
            == 400
        )

    response = client.post("/api/submissions/", {"task": task.slug, "file": onnx_upload(b"x")})

    assert response.status_code == 429
    match = UPLOAD_REFUSAL.match(response.json()["detail"])
    assert match, response.json()
    assert int(match.group(1)) == retry_after(response, 3600)


def test_form_and_api_share_one_upload_limit_and_say_the_same(
    alice: Any, make_task: Any, settings: Any
) -> None:
    limits(settings, uploads="2/hour")
    task = make_task()
    api = api_as(alice)
    page = Client()
    page.force_login(alice)
    assert (
        api.post("/api/submissions/", {"task": task.slug, "file": onnx_upload(b"x")}).status_code
        == 400
    )
    assert page.post(f"/tasks/{task.slug}/submit/", {"file": onnx_upload(b"x")}).status_code == 400

    from_form = page.post(f"/tasks/{task.slug}/submit/", {"file": onnx_upload(b"x")})
    from_api = api.post("/api/submissions/", {"task": task.slug, "file": onnx_upload(b"x")})

    assert from_form.status_code == 429 and from_api.status_code == 429
    retry_after(from_form, 3600)
    message = from_api.json()["detail"]
    assert UPLOAD_REFUSAL.match(message)
    html = from_form.content.decode()
    shown = re.search(r"<div class=\"error\" role=\"alert\" data-refusal>([^<]*)</div>", html)
    assert shown and UPLOAD_REFUSAL.match(shown.group(1))
    assert Submission.objects.count() == 0


def test_the_upload_limit_is_per_user(alice: Any, bob: Any, make_task: Any, settings: Any) -> None:
    limits(settings, uploads="1/hour")
    task = make_task()
    data = {"task": task.slug, "file": onnx_upload(b"x")}
    assert api_as(alice).post("/api/submissions/", data).status_code == 400
    assert (
        api_as(alice).post("/api/submissions/", {**data, "file": onnx_upload(b"x")}).status_code
        == 429
    )
    assert (
        api_as(bob).post("/api/submissions/", {**data, "file": onnx_upload(b"x")}).status_code
        == 400
    )


def test_anonymous_api_reads_are_limited_per_address(make_task: Any, settings: Any) -> None:
    limits(settings, api_anon="3/min")
    make_task()
    here, there = APIClient(REMOTE_ADDR="203.0.113.7"), APIClient(REMOTE_ADDR="203.0.113.8")
    for _ in range(3):
        assert here.get("/api/tasks/").status_code == 200

    refused = here.get("/api/tasks/digits/")

    assert refused.status_code == 429
    assert refused.json()["detail"].startswith(
        "Too many API requests from your address: the limit is 3 per minute. Try again in "
    )
    retry_after(refused, 60)
    assert there.get("/api/tasks/").status_code == 200


def test_signed_in_api_reads_are_limited_per_user(
    alice: Any, bob: Any, make_task: Any, settings: Any
) -> None:
    limits(settings, api_user="2/min")
    make_task()
    for _ in range(2):
        assert api_as(alice).get("/api/submissions/").status_code == 200
    refused = api_as(alice).get("/api/tasks/")
    assert refused.status_code == 429
    retry_after(refused, 60)
    assert api_as(bob).get("/api/tasks/").status_code == 200


def test_the_counters_live_in_redis_where_every_web_process_sees_them(
    alice: Any, make_task: Any, settings: Any
) -> None:
    task = make_task()
    api_as(alice).post("/api/submissions/", {"task": task.slug, "file": onnx_upload(b"x")})

    raw = redis.Redis.from_url(django_settings.REDIS_URL)
    keys = list(raw.scan_iter(f"*rl:{settings.RATE_LIMIT_NAMESPACE}:uploads:{alice.pk}:*"))

    assert len(keys) == 1
    assert int(raw.get(keys[0])) == 1
    assert 0 < raw.ttl(keys[0]) <= 3601


def test_parallel_hits_never_share_the_last_slot_and_undo_gives_slots_back(
    settings: Any,
) -> None:
    limits(settings, uploads="5/hour")
    with ThreadPoolExecutor(max_workers=8) as pool:  # each thread: its own Redis connection
        refusals = list(pool.map(lambda _: rate_limit_hit(scope="uploads", ident="p"), range(12)))

    assert sum(r is None for r in refusals) == 5
    for _ in range(8):  # 12 counted, the limit 5: back to 4 allows one more
        rate_limit_undo(scope="uploads", ident="p")
    assert rate_limit_hit(scope="uploads", ident="p") is None
    assert rate_limit_hit(scope="uploads", ident="p") is not None


def login(client: Client, username: str, password: str) -> Any:
    return client.post("/accounts/login/", {"username": username, "password": password})


def test_failed_logins_are_throttled_per_account_on_the_page_and_the_api(
    alice: Any, settings: Any
) -> None:
    limits(settings, login_account="3/15m")
    for _ in range(3):
        assert login(Client(), "alice", "wrong").status_code == 200  # the form, with its error

    refused = login(Client(REMOTE_ADDR="198.51.100.1"), "ALICE", "alice-password-1")
    token = APIClient(REMOTE_ADDR="198.51.100.2").post(
        "/api/auth/token/", {"username": "alice", "password": "alice-password-1"}
    )

    assert refused.status_code == 429
    retry_after(refused, 900)
    assert "Too many failed log-ins for this account: the limit is 3 per 15 minutes." in (
        refused.content.decode()
    )
    assert "_auth_user_id" not in refused.client.session
    assert token.status_code == 429
    assert token.json()["detail"].startswith("Too many failed log-ins for this account")
    retry_after(token, 900)


def test_failed_logins_are_throttled_per_address(alice: Any, bob: Any, settings: Any) -> None:
    limits(settings, login_ip="3/15m")
    attacker = Client(REMOTE_ADDR="192.0.2.66")
    for name in ["carol", "dave", "erin"]:
        assert login(attacker, name, "guess").status_code == 200

    refused = login(attacker, "bob", "bob-password-1")

    assert refused.status_code == 429
    assert "Too many failed log-ins from your address" in refused.content.decode()
    assert login(Client(REMOTE_ADDR="192.0.2.67"), "bob", "bob-password-1").status_code == 302


def test_successful_logins_do_not_use_up_attempts(alice: Any, settings: Any) -> None:
    limits(settings, login_account="2/15m", login_ip="2/15m")
    for _ in range(5):
        assert login(Client(), "alice", "alice-password-1").status_code == 302


def test_the_client_address_comes_from_trusted_proxies_only(make_task: Any, settings: Any) -> None:
    limits(settings, api_anon="1/min")
    make_task()
    spoofer = {"REMOTE_ADDR": "10.0.0.1"}
    assert (
        APIClient(**spoofer, HTTP_X_FORWARDED_FOR="1.1.1.1").get("/api/tasks/").status_code == 200
    )
    # Without a trusted proxy the header is ignored: a new claimed address does not help.
    assert (
        APIClient(**spoofer, HTTP_X_FORWARDED_FOR="2.2.2.2").get("/api/tasks/").status_code == 429
    )

    settings.RATE_LIMIT_TRUSTED_PROXIES = 1
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    assert APIClient(**proxy, HTTP_X_FORWARDED_FOR="3.3.3.3").get("/api/tasks/").status_code == 200
    assert APIClient(**proxy, HTTP_X_FORWARDED_FOR="4.4.4.4").get("/api/tasks/").status_code == 200
    assert APIClient(**proxy, HTTP_X_FORWARDED_FOR="3.3.3.3").get("/api/tasks/").status_code == 429


def test_the_admin_log_in_page_shares_the_per_account_limit(operator: Any, settings: Any) -> None:
    limits(settings, login_account="2/15m")
    for _ in range(2):
        Client().post("/admin/login/", {"username": "operator", "password": "wrong"})

    response = Client().post(
        "/admin/login/", {"username": "operator", "password": "operator-password-1"}
    )

    assert response.status_code == 200  # the admin's own page, showing the refusal
    assert "Too many failed log-ins for this account" in response.content.decode()
    assert "_auth_user_id" not in response.client.session
