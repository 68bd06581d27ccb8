"""A database outage on the site answers a plain "down for a moment" page (503, Retry-After)
instead of Django's 500.

The API answers its own JSON 503 (``plumbing.refusal_responses.api_exception_handler``); both
ask the one rule ``database_unavailable``. The page is rendered without the request, so no
context processor runs: none may reach for the user, the session or the messages, which all
live in the database that is down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from plumbing.refusal_responses import DATABASE_RETRY_AFTER_S, database_unavailable

log = logging.getLogger(__name__)
API_PREFIX = "/api/"  # the API's views answer for themselves, in JSON


def database_unavailable_page() -> HttpResponse:
    response = HttpResponse(render_to_string("portal/database_unavailable.html"), status=503)
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
    response["Cache-Control"] = "no-store"  # a proxy must not keep serving the outage
    return response


class DatabaseOutageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if request.path.startswith(API_PREFIX) or not database_unavailable(exc):
            return None
        log.warning("%s failed: the database is unavailable: %s", request.path, exc)
        return database_unavailable_page()
