"""The one exception every ``oep`` command raises for a failure the user should read."""

from __future__ import annotations


class ClientError(Exception):
    """``str(exc)`` is printed as is; ``exit_status`` becomes the process's."""

    def __init__(self, message: str, exit_status: int = 1) -> None:
        super().__init__(message)
        self.exit_status = exit_status
