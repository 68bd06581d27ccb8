"""How refusals are answered: one DRF exception handler for the API and one helper for the
form views. Views call a service and let its refusal propagate (or ``attempt`` it); neither
builds an error response by hand.

The API (``api_exception_handler``, REST_FRAMEWORK's EXCEPTION_HANDLER):

- ``Refused`` with a field: 400 ``{field: [why]}``, as DRF answers invalid input;
- ``Refused`` without one: 409 ``{"detail": why}``;
- ``NotAllowed`` (who asks may not do this, e.g. not registered): 403 ``{"detail": why}``;
- a lookup that found nothing (``ObjectDoesNotExist``): 404 ``{"detail": what}``, the lookup's
  message naming what was not found;
- the database unreachable (``OperationalError``, ``InterfaceError``), or Redis for a view whose
  data lives there (the workers' heartbeats): 503 ``{"detail": why}`` with ``Retry-After``, JSON
  like every other answer of the API;
- ``Unavailable`` (the server busy, e.g. every upload inspection slot taken): 503
  ``{"detail": why}`` with its ``Retry-After``;
- everything else as DRF answers it (a throttle's 429 with Retry-After included).

A form view (``attempt``) shows a refusal on its form (its field, else the whole form) or, with
no form, as a message on the next page; a lookup that found nothing is a 404 there too
(``or_404``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist
from django.db import InterfaceError, OperationalError
from django.forms import BaseForm
from django.http import Http404, HttpRequest
from django.utils.html import format_html
from redis.exceptions import RedisError
from rest_framework import status
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler

from plumbing.refusals import NotAllowed, Refused, Unavailable

T = TypeVar("T")
log = logging.getLogger(__name__)
DATABASE_RETRY_AFTER_S = 5
DATABASE_UNAVAILABLE = "The database is unavailable for a moment; try again shortly."
REDIS_UNAVAILABLE = "Worker status is unavailable for a moment (Redis cannot be reached)."


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, NotAllowed):
        exc = PermissionDenied(exc.message)
    elif isinstance(exc, Refused):
        exc = ValidationError({exc.field: [exc.message]}) if exc.field else Conflict(exc.message)
    elif isinstance(exc, ObjectDoesNotExist):
        exc = NotFound(str(exc))
    elif isinstance(exc, Unavailable):
        return _unavailable(exc.message, exc.retry_after_s)
    elif database_unavailable(exc):
        log.warning("API request failed: the database is unavailable: %s", exc)
        return _unavailable(DATABASE_UNAVAILABLE)
    elif isinstance(exc, RedisError):
        log.warning("API request failed: Redis is unavailable: %s", exc)
        return _unavailable(REDIS_UNAVAILABLE)
    return exception_handler(exc, context)


def database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached now (down, restarting, refusing
    connections), as opposed to a query that is wrong: the API's 503 and the site's "down for a
    moment" page (``portal.database_outage``) both ask this."""
    return isinstance(exc, OperationalError | InterfaceError)


def _unavailable(why: str, retry_after_s: int = DATABASE_RETRY_AFTER_S) -> Response:
    return Response(
        {"detail": why},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(retry_after_s)},
    )


def or_404(lookup: Callable[[], T]) -> T:
    """For a page: what ``lookup`` finds, else a 404 saying what it did not find."""
    try:
        return lookup()
    except ObjectDoesNotExist as exc:
        raise Http404(str(exc)) from exc


def attempt(
    request: HttpRequest, action: Callable[[], T], *, form: BaseForm | None = None
) -> T | None:
    """What ``action`` (a service call) returns, or None when it was refused: the refusal is
    then shown on ``form`` when given, else as an error message on the next page."""
    try:
        return or_404(action)
    except Refused as exc:
        message = exc.message
        if exc.url:  # e.g. a duplicate upload: a link to the first copy
            message = format_html('{} <a href="{}">See it</a>.', exc.message, exc.url)
        if form is not None:
            form.add_error(exc.field if exc.field in form.fields else None, message)
        else:
            messages.error(request, message)
        return None
