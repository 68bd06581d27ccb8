from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from accounts.models import ApiToken, NotificationPreference


def api_tokens_of(*, user: Any, active_only: bool = False) -> QuerySet[ApiToken]:
    """The tokens of ``user``, newest first; revoked ones too unless ``active_only``."""
    tokens = ApiToken.objects.filter(user=user)
    return tokens.filter(revoked_at__isnull=True) if active_only else tokens


def notification_preference_of(*, user: Any) -> NotificationPreference:
    """The user's saved preferences, or the defaults (unsaved) when they never chose."""
    found = NotificationPreference.objects.filter(user=user).first()
    return found if found is not None else NotificationPreference(user=user)
