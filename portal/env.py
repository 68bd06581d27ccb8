"""Typed readers for environment variables.

Every setting comes through one of these so that a bad value fails at start-up with a message that
names the variable, instead of surfacing later as a confusing error deep inside Django.
A secret may also be given as ``NAME_FILE`` pointing at a file (Docker/Kubernetes secrets).

A variable that is unset or blank (``NAME=`` in an env file) means its default, for every helper:
an emptied line must never quietly turn a protection off.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    """The variable's value, or None when it is unset or blank."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    return raw


def env_str(name: str, default: str | None = None) -> str | None:
    file_name = _raw(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc}") from exc
    raw = _raw(name)
    return default if raw is None else raw


def env_required(name: str) -> str:
    value = env_str(name)
    if not value:
        raise ImproperlyConfigured(f"{name} must be set (or {name}_FILE).")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = _raw(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no).")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = _raw(name)
    return default if raw is None else _integer(f"{name}=", raw, minimum)


def _integer(where: str, raw: str, minimum: int | None) -> int:
    """``raw`` as an integer of at least ``minimum``; ``where`` starts each refusal."""
    try:
        value = int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{where}{raw!r} is not an integer.") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{where}{value} must be at least {minimum}.")
    return value


def env_float(
    name: str, default: float, *, low: float | None = None, high: float | None = None
) -> float:
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number.") from exc
    if (low is not None and value < low) or (high is not None and value > high):
        raise ImproperlyConfigured(f"{name}={value} must be within [{low}, {high}].")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = _raw(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = (_raw(name) or default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of {', '.join(choices)}.")
    return value


def env_int_list(name: str, default: list[int], *, minimum: int | None = None) -> list[int]:
    """A comma-separated list of integers, e.g. ``10,60,300``."""
    items = env_list(name, [str(v) for v in default])
    return [_integer(f"{name}: ", item, minimum) for item in items]
