from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from portal.accounts.models import ApiToken


def api_tokens_of(*, user: Any, active_only: bool = False) -> QuerySet[ApiToken]:
    """The tokens of ``user``, newest first; revoked ones too unless ``active_only``."""
    tokens = ApiToken.objects.filter(user=user)
    return tokens.filter(revoked_at__isnull=True) if active_only else tokens
