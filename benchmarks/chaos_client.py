"""The fault suite's HTTP side (benchmarks/chaos.py): a burst of uploads over the API, and a
reader that keeps GETting pages whose data is in PostgreSQL; both note every answer.

An answer is judged by what was down while it was asked: a request that began or ended while
the database was down (or that spanned a "down" and an "up") may answer 503 with Retry-After; any
other 5xx, or no answer at all, is a failure of the portal.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import requests

EXPECTED_WHILE_DB_DOWN = "503 while db down"  # with Retry-After: the one fine 5xx
TIMEOUT = (5, 30)  # connect, read: an answer slower than this counts as none
# What a page-reading client keeps asking for during a fault; {slug} and {id} are filled in.
PAGES = {
    "task page": "/tasks/{slug}/",
    "board": "/tasks/{slug}/?board=public&sort=score&dir=desc",
    "leaderboard.csv": "/tasks/{slug}/leaderboard.csv",
    "leaderboard API": "/api/tasks/{slug}/leaderboard/",
    "workers page": "/workers/",
    "queue API": "/api/queue/",
    "submission API": "/api/submissions/{id}/",
}


class DatabaseState:
    """Whether the database is down now, and a counter of its ups and downs: a request that saw
    the counter move was answered across a change."""

    def __init__(self) -> None:
        self.down, self.changes = False, 0

    def set_down(self, down: bool) -> None:
        self.down, self.changes = down, self.changes + 1

    def mark(self) -> tuple[bool, int]:
        return self.down, self.changes


@dataclass
class Answers:
    """Every answer of one fault's window, counted by page and verdict."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)

    def note(self, page: str, answer: requests.Response | None, db_down: bool) -> None:
        self.counts.setdefault(page, Counter())[_verdict(answer, db_down)] += 1

    def total(self, verdict: str) -> int:
        return sum(c[verdict] for c in self.counts.values())

    def failures(self) -> dict[str, dict[str, int]]:
        """Per page, the verdicts that were not a plain answer."""
        return {
            page: {v: n for v, n in sorted(c.items()) if v not in ("ok", EXPECTED_WHILE_DB_DOWN)}
            for page, c in sorted(self.counts.items())
            if any(v not in ("ok", EXPECTED_WHILE_DB_DOWN) for v in c)
        }


def _verdict(answer: requests.Response | None, db_down: bool) -> str:
    where = "while db down" if db_down else "data reachable"
    if answer is None:
        return f"no answer, {where}"
    if answer.status_code < 500:
        return "ok"
    if db_down and answer.status_code == 503 and "Retry-After" in answer.headers:
        return EXPECTED_WHILE_DB_DOWN
    retry_after = "" if "Retry-After" in answer.headers else " without Retry-After"
    return f"{answer.status_code}{retry_after}, {where}"


def _ask(
    db: DatabaseState, session: requests.Session, method: str, url: str, **kwargs: Any
) -> tuple[requests.Response | None, bool]:
    """The answer (None when there was none) and whether the database was down meanwhile."""
    down_before, changes = db.mark()
    try:
        answer: requests.Response | None = session.request(method, url, timeout=TIMEOUT, **kwargs)
    except requests.RequestException:
        answer = None
    down_after, changes_after = db.mark()
    return answer, down_before or down_after or changes != changes_after


class PageReader(threading.Thread):
    """Reads ``PAGES`` round after round until ``stop()``; the answers go to ``answers``."""

    def __init__(self, base: str, token: str, slug: str, pk: int, db: DatabaseState) -> None:
        super().__init__(daemon=True)
        self.base, self.db, self.answers = base, db, Answers()
        self.urls = {page: path.format(slug=slug, id=pk) for page, path in PAGES.items()}
        self.headers = {"Authorization": f"Token {token}"}
        self._stop_event = threading.Event()

    def run(self) -> None:
        with requests.Session() as session:
            while not self._stop_event.is_set():
                for page, path in self.urls.items():
                    headers = self.headers if path.startswith("/api/") else {}
                    answer, down = _ask(self.db, session, "GET", self.base + path, headers=headers)
                    self.answers.note(page, answer, down)
                self._stop_event.wait(0.1)

    def stop(self) -> Answers:
        self._stop_event.set()
        self.join(timeout=60)
        return self.answers


@dataclass
class Burst:
    """What one burst of uploads got: the ids accepted, and why the others were lost."""

    accepted: list[int] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    client_retries: int = 0  # uploads asked again after a 503 with Retry-After


class Uploader(threading.Thread):
    """Uploads ``models`` spread evenly over ``spread_s``, each asked again after a 503 with
    Retry-After (as a well-behaved client does) until ``give_up_s`` after the burst began."""

    def __init__(
        self, base: str, token: str, slug: str, models: list[bytes], db: DatabaseState, *,
        answers: Answers, spread_s: float, give_up_s: float,
    ) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.base, self.slug, self.models, self.db, self.answers = base, slug, models, db, answers
        self.headers = {"Authorization": f"Token {token}"}
        self.spread_s, self.give_up_s = spread_s, give_up_s
        self.burst = Burst()

    def run(self) -> None:
        began = time.monotonic()
        with requests.Session() as session:
            for i, model in enumerate(self.models):
                time.sleep(
                    max(0.0, began + i * self.spread_s / len(self.models) - time.monotonic())
                )
                self._upload(session, model, began + self.give_up_s)

    def _upload(self, session: requests.Session, model: bytes, give_up_at: float) -> None:
        while True:
            files = {"file": ("chaos.onnx", model, "application/octet-stream")}
            answer, down = _ask(
                self.db, session, "POST", f"{self.base}/api/submissions/",
                headers=self.headers, data={"task": self.slug}, files=files,
            )  # fmt: skip
            self.answers.note("upload", answer, down)
            if answer is not None and answer.status_code == 201:
                self.burst.accepted.append(int(answer.json()["id"]))
                return
            wait = _retry_after(answer)
            if wait is None or time.monotonic() + wait > give_up_at:
                self.burst.lost.append(_why(answer))
                return
            self.burst.client_retries += 1
            time.sleep(wait)


def _retry_after(answer: requests.Response | None) -> float | None:
    if answer is None or answer.status_code != 503 or "Retry-After" not in answer.headers:
        return None
    return float(answer.headers["Retry-After"])


def _why(answer: requests.Response | None) -> str:
    if answer is None:
        return "no answer"
    return f"{answer.status_code}: {answer.text[:200]}"
