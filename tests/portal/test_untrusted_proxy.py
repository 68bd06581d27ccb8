"""Behind a proxy with RATE_LIMIT_TRUSTED_PROXIES=0 every client shares the proxy's address, so
one client's failed log-ins lock everyone out. The portal says so: a system check at start-up
and in ``check --deploy``, and a warning logged once per process when a request arrives with
X-Forwarded-For that no trusted proxy vouches for."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client

from plumbing import ratelimit
from portal.checks import rate_limit_proxies_check

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.2"


@pytest.fixture
def fresh_process(monkeypatch: Any) -> None:
    """As in a process that has not warned yet."""
    monkeypatch.setattr(ratelimit, "_warned_untrusted_forwarding", False)


def failed_login(client: Client) -> int:
    return client.post("/accounts/login/", {"username": "nobody", "password": "x"}).status_code


def warnings_about_proxies(caplog: Any) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "RATE_LIMIT_TRUSTED_PROXIES" in r.getMessage()
    ]


def test_forwarded_requests_with_no_trusted_proxy_are_warned_about_once_per_process(
    fresh_process: None, settings: Any, caplog: Any
) -> None:
    settings.RATE_LIMIT_TRUSTED_PROXIES = 0
    caplog.set_level(logging.WARNING, logger="plumbing.ratelimit")

    for client_address in ("198.51.100.1", "198.51.100.2", "198.51.100.3"):
        failed_login(Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=client_address))

    (warning,) = warnings_about_proxies(caplog)
    assert warning.startswith(f"A request came through {PROXY} with X-Forwarded-For")
    assert "one client's failed log-ins lock them all out" in warning


def test_no_warning_when_the_proxy_is_trusted_or_there_is_none(
    fresh_process: None, settings: Any, caplog: Any
) -> None:
    caplog.set_level(logging.WARNING, logger="plumbing.ratelimit")
    settings.RATE_LIMIT_TRUSTED_PROXIES = 1
    failed_login(Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.1"))
    settings.RATE_LIMIT_TRUSTED_PROXIES = 0
    failed_login(Client(REMOTE_ADDR="198.51.100.9"))

    assert warnings_about_proxies(caplog) == []


def test_with_the_proxy_trusted_one_clients_failed_log_ins_lock_out_only_that_client(
    alice: Any, settings: Any
) -> None:
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login_ip": "3/15m"}
    settings.RATE_LIMIT_TRUSTED_PROXIES = 1
    attacker = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.66")
    for _ in range(3):
        assert failed_login(attacker) == 200
    assert failed_login(attacker) == 429

    neighbour = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.67")
    signed_in = neighbour.post(
        "/accounts/login/", {"username": "alice", "password": "alice-password-1"}
    )
    assert signed_in.status_code == 302


def test_the_system_check_flags_a_tls_proxy_with_no_trusted_proxies(settings: Any) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.RATE_LIMIT_TRUSTED_PROXIES = 0
    (warning,) = rate_limit_proxies_check()
    assert warning.id == "portal.W001" and "RATE_LIMIT_TRUSTED_PROXIES" in warning.hint

    settings.RATE_LIMIT_TRUSTED_PROXIES = 1
    assert rate_limit_proxies_check() == []
    settings.SECURE_PROXY_SSL_HEADER = None
    settings.RATE_LIMIT_TRUSTED_PROXIES = 0
    assert rate_limit_proxies_check() == []
