"""Account workflows: API tokens (create, revoke, authenticate) and the log-in attempt guard."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, NotificationPreference
from plumbing.ratelimit import Refusal, client_ip, rate_limit_hit, rate_limit_undo
from plumbing.refusals import Refused

TOKEN_PREFIX = "oep_"
MAX_ACTIVE_TOKENS = 20
# last_used_at is written at most this often per token, not on every API request.
LAST_USED_PRECISION = timedelta(minutes=1)


class TokenLimitReached(Refused):
    """The user holds the most active tokens allowed."""


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str  # shown to the user once, never stored


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_token_create(*, user: Any, name: str) -> NewToken:
    """A new named token for ``user``; the returned secret exists nowhere else."""
    with transaction.atomic():
        get_user_model().objects.select_for_update(no_key=True).get(
            pk=user.pk
        )  # count, then create, in order
        if ApiToken.objects.filter(user=user).active().count() >= MAX_ACTIVE_TOKENS:
            raise TokenLimitReached(
                f"You already have {MAX_ACTIVE_TOKENS} active tokens; revoke one first."
            )
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = ApiToken.objects.create(
            user=user,
            name=name.strip()[:100] or "API token",
            prefix=secret[: len(TOKEN_PREFIX) + 6],
            digest=_digest(secret),
        )
    return NewToken(token=token, secret=secret)


def api_token_revoke(*, user: Any, token_id: int) -> bool:
    """Revoke one of ``user``'s tokens. False when it is not theirs or already revoked."""
    return bool(
        ApiToken.objects.filter(pk=token_id, user=user).active().update(revoked_at=timezone.now())
    )


def api_token_authenticate(*, secret: str) -> ApiToken | None:
    """The active token with this secret, its user loaded; None for anything else."""
    tokens = ApiToken.objects.active().select_related("user")
    try:  # every API request: get, not first, whose ORDER BY the digest's uniqueness makes moot
        token = tokens.get(digest=_digest(secret), user__is_active=True)
    except ApiToken.DoesNotExist:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def _login_idents(request: Any, username: str) -> list[tuple[str, str]]:
    account = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [("login_account", account), ("login_ip", client_ip(request))]


def login_attempt_begin(*, request: Any, username: str) -> Refusal | None:
    """Count a log-in attempt per account and per client address before checking the password.

    Counting first (atomically) rather than checking then counting means parallel guesses cannot
    slip past the limit; a successful log-in gives its count back with login_attempt_succeeded.
    """
    refusals = [rate_limit_hit(scope=s, ident=i) for s, i in _login_idents(request, username)]
    return next((r for r in refusals if r is not None), None)


def login_attempt_succeeded(*, request: Any, username: str) -> None:
    for scope, ident in _login_idents(request, username):
        rate_limit_undo(scope=scope, ident=ident)


def notification_preference_set(
    *, user: Any, email_on_failure: bool, email_on_success: bool, email_announcements: bool = True
) -> NotificationPreference:
    preference, _ = NotificationPreference.objects.update_or_create(
        user=user,
        defaults={
            "email_on_failure": email_on_failure,
            "email_on_success": email_on_success,
            "email_announcements": email_announcements,
        },
    )
    return preference
