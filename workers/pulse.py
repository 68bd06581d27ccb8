"""A thread that calls one function every interval until it is stopped: the worker's heartbeat,
which must go on while a job runs in the worker's own thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django import db

log = logging.getLogger(__name__)


class Pulse:
    """Calls ``beat`` every ``interval_s`` in a daemon thread of its own, from ``start`` until
    ``stop``. An exception from ``beat`` is logged and the next beat comes all the same. The
    database connections ``beat`` opened in the thread are closed when it ends."""

    def __init__(self, beat: Callable[[], None], interval_s: float, name: str) -> None:
        self.beat = beat
        self.interval_s = interval_s
        self.name = name
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start beating; nothing changes when it beats already."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stopped.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop beating, and wait for a beat under way to end."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _run(self) -> None:
        try:
            while not self._stopped.wait(self.interval_s):
                try:
                    self.beat()
                except Exception:
                    log.exception("%s: a beat failed; the next one comes all the same", self.name)
        finally:
            db.connections.close_all()  # this thread's own
