"""Production settings pass `check --deploy`; security headers, HTTPS, CSRF and argon2 are on."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
# Settings that tests or a developer's shell may set and production leaves to the defaults.
UNSET = [
    "DJANGO_ALLOW_ASYNC_UNSAFE",  # the browser tests set it for their session
    "DEBUG",
    "SECRET_KEY",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in UNSET}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def production_env(tmp_path: Path) -> dict[str, str]:
    secret_file = tmp_path / "secret_key"
    secret_file.write_text(secrets.token_urlsafe(64))
    return {
        "SECRET_KEY_FILE": str(secret_file),  # secrets may come from files (Docker secrets)
        "ALLOWED_HOSTS": "portal.example.org",
        "CSRF_TRUSTED_ORIGINS": "https://portal.example.org",
        "SECURE_PROXY_SSL_HEADER": "1",
        "RATE_LIMIT_TRUSTED_PROXIES": "1",  # the proxy that terminates TLS
        "DATABASE_URL": os.environ.get("DATABASE_URL", "sqlite:////tmp/unused.sqlite3"),
        "REDIS_URL": django_settings.REDIS_URL,
    }


def test_production_settings_pass_check_deploy_with_no_warnings(tmp_path: Path) -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", **production_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_debug_in_production_would_be_reported(tmp_path: Path) -> None:
    env = production_env(tmp_path) | {"DEBUG": "1"}
    result = manage("check", "--deploy", "--fail-level", "WARNING", **env)
    assert result.returncode != 0
    assert "security.W018" in result.stderr  # DEBUG on


def test_a_proxy_with_no_trusted_proxies_is_reported_by_check_deploy(tmp_path: Path) -> None:
    env = production_env(tmp_path) | {"RATE_LIMIT_TRUSTED_PROXIES": "0"}
    result = manage("check", "--deploy", "--fail-level", "WARNING", **env)
    assert result.returncode != 0
    assert "portal.W001" in result.stderr and "RATE_LIMIT_TRUSTED_PROXIES" in result.stderr


def test_production_refuses_to_start_without_a_secret_key() -> None:
    result = manage("check", ALLOWED_HOSTS="portal.example.org")
    assert result.returncode != 0
    assert "SECRET_KEY must be set (or SECRET_KEY_FILE) unless DEBUG=1." in result.stderr


@pytest.mark.django_db
def test_pages_carry_the_security_headers(settings: Any) -> None:
    response = Client().get("/", secure=True)
    assert response.status_code == 200
    assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "script-src" not in response["Content-Security-Policy"]  # default-src 'self' rules
    assert "default-src 'self'" in response["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]


@pytest.mark.django_db
def test_plain_http_is_redirected_to_https_and_the_proxy_header_is_believed_only_when_set(
    settings: Any,
) -> None:
    settings.SECURE_SSL_REDIRECT = True
    assert Client().get("/").headers["Location"] == "https://testserver/"
    assert Client().get("/", HTTP_X_FORWARDED_PROTO="https").status_code == 301
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert Client().get("/", HTTP_X_FORWARDED_PROTO="https").status_code == 200


@pytest.mark.django_db
def test_session_and_csrf_cookies_are_secure_and_the_session_cookie_http_only(
    alice: Any,
) -> None:
    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/", secure=True)
    csrf = page.cookies["csrftoken"]
    assert csrf["secure"]
    response = client.post(
        "/accounts/login/",
        {"username": "alice", "password": "alice-password-1", "csrfmiddlewaretoken": csrf.value},
        secure=True,
        HTTP_REFERER="https://testserver/accounts/login/",  # HTTPS CSRF checks the referer too
    )
    assert response.status_code == 302
    session = response.cookies["sessionid"]
    assert session["secure"] and session["httponly"]


@pytest.mark.django_db
def test_a_form_post_without_the_csrf_token_is_refused(alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "alice", "password": "x"})
    assert response.status_code == 403


def test_every_post_form_in_our_templates_carries_a_csrf_token() -> None:
    forms = 0
    for template in (ROOT / "templates").rglob("*.html"):
        text = template.read_text()
        for match in re.finditer(r'<form[^>]*method="post"[^>]*>(.{0,40})', text, re.S | re.I):
            forms += 1
            assert "{% csrf_token %}" in match.group(1), f"{template}: {match.group(0)}"
    assert forms >= 6


@pytest.mark.django_db
def test_passwords_are_hashed_with_argon2(alice: Any) -> None:
    assert alice.password.startswith("argon2$argon2id$")
