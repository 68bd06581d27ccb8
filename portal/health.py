"""``GET /healthz``: is this web process able to serve, i.e. are the database and Redis reachable?

It is a middleware placed first, not a view, because container healthchecks and load balancers
call it by IP address: it must answer before ``ALLOWED_HOSTS`` validation, sessions and CSRF,
and it must not depend on anything else in the stack working.
"""

from __future__ import annotations

from collections.abc import Callable

import redis
from django.conf import settings
from django.db import DatabaseError, connections
from django.http import HttpRequest, HttpResponse, JsonResponse

from plumbing.redis_client import redis_client

HEALTH_PATH = "/healthz"
# A health probe must answer quickly even when Redis is unreachable (a dropped packet would
# otherwise block the probe until the kernel gives up).
REDIS_TIMEOUT_S = 2.0


def _database_ok() -> str:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return f"unreachable ({type(exc).__name__})"
    return "ok"


def _redis_ok() -> str:
    try:
        redis_client(settings.REDIS_URL, REDIS_TIMEOUT_S).ping()
    except (redis.exceptions.RedisError, OSError) as exc:
        return f"unreachable ({type(exc).__name__})"
    return "ok"


def health_response() -> JsonResponse:
    checks = {"database": _database_ok(), "redis": _redis_ok()}
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unhealthy", **checks}, status=200 if healthy else 503
    )


class HealthCheckMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path == HEALTH_PATH and request.method in ("GET", "HEAD"):
            response = health_response()
            response["Cache-Control"] = "no-store"
            return response
        return self.get_response(request)
