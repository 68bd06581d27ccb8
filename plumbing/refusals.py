"""The one base of every refusal the product answers with a reason: an upload refused, a final
that cannot be selected, a team that is full, a token too many. Services raise its subclasses;
``plumbing.refusal_responses`` turns them into the API's responses and the pages' messages, so each
refusal is worded once, where the rule that refuses it lives.

Plain Python, no Django: any app's services may raise it.
"""

from __future__ import annotations


class Refused(Exception):
    """A request refused, with ``message`` for the person who made it.

    ``field`` names the input at fault (e.g. the upload's ``file``): the request was invalid.
    Without one, the request was fine but the state of things refuses it (a closed task, a
    full team). ``url`` is where the refusal points, e.g. the first copy of a duplicate upload.
    """

    def __init__(self, message: str, *, field: str = "", url: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.url = url


class Unavailable(Exception):
    """A request that cannot be served now, through no fault of its own (the server is busy):
    answered 503 with ``Retry-After: retry_after_s``, ``message`` for the person who made it."""

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


class NotAllowed(Refused):
    """A refusal of who asks rather than of what they ask (not registered for a challenge):
    the API answers 403 ``{"detail": why}``; a page shows it like any other refusal."""
