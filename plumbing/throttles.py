"""DRF throttles over the shared limiter in plumbing/ratelimit.py.

A refusal raises ``Throttled`` itself, so the 429 carries the same message the web form shows
and DRF adds ``Retry-After`` from ``wait``.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import Throttled
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from plumbing.ratelimit import Refusal, client_ip, rate_limit_hit


def upload_rate_hit(*, user: Any) -> Refusal | None:
    """Count one upload attempt; the web form and the API both call this."""
    return rate_limit_hit(scope="uploads", ident=str(user.pk))


class RateLimited(Throttled):
    """Throttled with our message as the whole detail (DRF would append its own sentence)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(wait=None, detail=refusal.message)
        self.wait = refusal.wait_s  # DRF turns this into the Retry-After header


def _refuse(refusal: Refusal | None) -> bool:
    if refusal is not None:
        raise RateLimited(refusal)
    return True


class ApiReadThrottle(BaseThrottle):
    """Reads (GET, HEAD, OPTIONS): per user when signed in, per client address when anonymous."""

    def allow_request(self, request: Request, view: Any) -> bool:
        if request.method not in SAFE_METHODS:
            return True
        if request.user and request.user.is_authenticated:
            return _refuse(rate_limit_hit(scope="api_user", ident=str(request.user.pk)))
        return _refuse(rate_limit_hit(scope="api_anon", ident=client_ip(request)))


class UploadThrottle(BaseThrottle):
    """POSTs to a view that says ``throttle_scope = "uploads"``, per user."""

    def allow_request(self, request: Request, view: Any) -> bool:
        if request.method != "POST" or getattr(view, "throttle_scope", None) != "uploads":
            return True
        if not (request.user and request.user.is_authenticated):
            return True  # the permission check has already refused it
        return _refuse(upload_rate_hit(user=request.user))
