"""Headers Django's SecurityMiddleware does not set: a Content-Security-Policy for our pages.

Our pages load only their own static CSS and JS (no inline script, no CDN), so the policy can be
strict. The admin and the django-rq dashboard use inline scripts of their own; they are staff-only
and keep Django's defaults (X-Frame-Options, nosniff, referrer policy) without a CSP.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy: str = settings.CONTENT_SECURITY_POLICY
        if policy and not request.path.startswith("/admin/"):
            response.headers.setdefault("Content-Security-Policy", policy)
        return response
