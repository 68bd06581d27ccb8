"""Refuse an oversized request body from its Content-Length, before a byte of it is read.

Django's WSGI request reads at most CONTENT_LENGTH bytes (a body without one reads as empty), so
checking the header is enough to keep a 5 GB body from being read, parsed or written to disk;
the client gets 413 at once. Bodies under the cap are streamed to a temporary file by
TemporaryFileUploadHandler (FILE_UPLOAD_MAX_MEMORY_SIZE = 0), never held in memory, and the
task's own, smaller ``max_model_bytes`` is checked by inspection afterwards.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from evaluation.formats import size as _size


def _refuse(request: HttpRequest, message: str, status: int) -> HttpResponse:
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": message}, status=status)
    else:
        response = HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    # The rest of the body is never read: tell the client not to reuse this connection.
    response["Connection"] = "close"
    return response


class UploadSizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return _refuse(request, f"Content-Length {raw!r} is not a number.", 400)
        limit: int = settings.UPLOAD_MAX_BYTES
        if length > limit:
            return _refuse(
                request,
                f"The upload is {_size(length)}; the largest accepted is {_size(limit)}.",
                413,
            )
        return self.get_response(request)
