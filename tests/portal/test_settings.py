"""The settings module: one topic per section, and the rules it enforces at start-up."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
drop_authtoken = importlib.import_module(
    "accounts.migrations.0002_drop_unused_authtoken"
).drop_authtoken


def import_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Import the settings in a fresh process (not under pytest) with only these variables."""
    environ = {"PATH": os.environ["PATH"], "PORTAL_VAR_DIR": str(tmp_path / "var"), **env}
    code = "import portal.settings as s; print(s.SESSION_COOKIE_SECURE, s.REDIS_URL)"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True
    )


def test_production_without_redis_url_refuses_to_start_and_starts_no_redis(
    tmp_path: Path,
) -> None:
    result = import_settings(tmp_path, SECRET_KEY="production-secret", DEBUG="0")

    assert result.returncode != 0
    assert "ImproperlyConfigured: REDIS_URL must be set (or REDIS_URL_FILE) unless DEBUG=1" in (
        result.stderr
    )
    assert not (tmp_path / "var" / "redis").exists()


def test_a_blank_secure_cookie_setting_keeps_cookies_secure(tmp_path: Path) -> None:
    result = import_settings(
        tmp_path,
        SECRET_KEY="production-secret",
        REDIS_URL="redis://127.0.0.1:1/0",  # never connected to: importing settings only
        SESSION_COOKIE_SECURE="",
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "redis://127.0.0.1:1/0"]


def test_middleware_is_one_literal_list_in_request_order() -> None:
    assert settings.MIDDLEWARE[:5] == [
        "portal.health.HealthCheckMiddleware",  # before host validation: load balancers use IPs
        "django.middleware.security.SecurityMiddleware",
        "portal.upload_limits.UploadSizeLimitMiddleware",
        "portal.security_headers.ContentSecurityPolicyMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
    ]


def test_api_authentication_is_our_token_or_the_session_only() -> None:
    assert settings.REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] == [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ]
    assert not apps.is_installed("rest_framework.authtoken")


# Outside a test transaction: SQLite's schema editor cannot run inside one.
@pytest.mark.django_db(transaction=True)
def test_the_unused_authtoken_tables_are_dropped_from_an_old_database() -> None:
    with connection.schema_editor() as editor:
        editor.execute("CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY)")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_migrations (app, name, applied) VALUES (%s, %s, %s)",
            ["authtoken", "0001_initial", "2025-01-01 00:00:00"],
        )
    token_type = ContentType.objects.create(app_label="authtoken", model="token")
    Permission.objects.create(content_type=token_type, codename="add_token", name="Can add")

    with connection.schema_editor() as editor:
        drop_authtoken(apps, editor)

    assert "authtoken_token" not in connection.introspection.table_names()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_migrations WHERE app = 'authtoken'")
        assert cursor.fetchone() == (0,)
    assert not ContentType.objects.filter(app_label="authtoken").exists()
    assert not Permission.objects.filter(codename="add_token").exists()


@pytest.mark.django_db(transaction=True)
def test_dropping_authtoken_from_a_new_database_changes_nothing() -> None:
    tables = connection.introspection.table_names()

    with connection.schema_editor() as editor:
        drop_authtoken(apps, editor)

    assert connection.introspection.table_names() == tables
