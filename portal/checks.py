"""System checks for settings that are each valid alone but wrong together.

Registered without ``deploy=True`` so they also run at start-up (``migrate``, ``runserver``),
not only under ``manage.py check --deploy``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, register
from django.core.checks import Warning as CheckWarning


@register(Tags.security)
def rate_limit_proxies_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Behind a TLS-terminating proxy (SECURE_PROXY_SSL_HEADER) with no trusted proxies, the
    rate limits see one address, the proxy's, for every client."""
    if settings.SECURE_PROXY_SSL_HEADER and not settings.RATE_LIMIT_TRUSTED_PROXIES:
        return [
            CheckWarning(
                "SECURE_PROXY_SSL_HEADER says a proxy stands in front of Django, but "
                "RATE_LIMIT_TRUSTED_PROXIES=0: every client then shares the proxy's address, "
                "and one client's failed log-ins lock everyone out.",
                hint="Set RATE_LIMIT_TRUSTED_PROXIES to the number of proxies in front of "
                "Django (1 for one nginx or load balancer).",
                id="portal.W001",
            )
        ]
    return []
