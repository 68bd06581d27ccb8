"""Typed environment helpers fail loudly, naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_choice, env_float, env_int, env_list, env_str


def test_bool_accepts_common_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw, expected in [("1", True), ("yes", True), ("off", False), ("FALSE", False)]:
        monkeypatch.setenv("X_FLAG", raw)
        assert env_bool("X_FLAG", not expected) is expected
    monkeypatch.delenv("X_FLAG")
    assert env_bool("X_FLAG", True) is True


def test_bad_values_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG", False)
    monkeypatch.setenv("X_INT", "ten")
    with pytest.raises(ImproperlyConfigured, match="X_INT='ten' is not an integer"):
        env_int("X_INT", 1)
    monkeypatch.setenv("X_INT", "-1")
    with pytest.raises(ImproperlyConfigured, match="X_INT=-1 must be at least 0"):
        env_int("X_INT", 1, minimum=0)
    monkeypatch.setenv("X_FRACTION", "1.5")
    with pytest.raises(ImproperlyConfigured, match=r"X_FRACTION=1.5 must be within \[0.01, 1.0\]"):
        env_float("X_FRACTION", 0.5, low=0.01, high=1.0)
    monkeypatch.setenv("X_MODE", "gpu")
    with pytest.raises(ImproperlyConfigured, match="X_MODE='gpu' must be one of auto, cpu"):
        env_choice("X_MODE", "auto", ("auto", "cpu"))


def test_secrets_can_come_from_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_str("X_SECRET") == "s3cr3t"
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match=r"X_SECRET_FILE=.* cannot be read"):
        env_str("X_SECRET")


def test_lists_are_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_HOSTS", "a.example, b.example,,")
    assert env_list("X_HOSTS", []) == ["a.example", "b.example"]


def test_a_blank_value_means_the_default_for_every_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    """`SESSION_COOKIE_SECURE=` in an env file must not turn secure cookies off."""
    for blank in ("", "  "):
        monkeypatch.setenv("X_BLANK", blank)
        assert env_bool("X_BLANK", True) is True
        assert env_int("X_BLANK", 7) == 7
        assert env_float("X_BLANK", 0.5) == 0.5
        assert env_str("X_BLANK", "fallback") == "fallback"
        assert env_str("X_BLANK") is None
        assert env_list("X_BLANK", ["a.example"]) == ["a.example"]
        assert env_choice("X_BLANK", "auto", ("auto", "cpu")) == "auto"


def test_a_blank_secret_file_name_falls_back_to_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("X_SECRET_FILE", "")
    monkeypatch.setenv("X_SECRET", "from-the-variable")
    assert env_str("X_SECRET") == "from-the-variable"
