"""API pagination with bounds, so no query string can ask the database for an impossible page."""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import LimitOffsetPagination

# PostgreSQL refuses an OFFSET beyond a 64-bit integer with an error (a 500 for the client);
# no real listing comes anywhere near this.
MAX_OFFSET = 10**9


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = 500

    def get_offset(self, request: Any) -> int:
        return min(super().get_offset(request), MAX_OFFSET)
