"""A deadline's reloading crowd: anonymous clients, each with its own keep-alive connection,
asking in turn for the board page, the leaderboard API, ``/healthz`` and the page and the API
again with the ETag each gave (conditional requests that hit), so that every path is measured
under the same load and ``/healthz`` (no work at all) is the floor of the others."""

from __future__ import annotations

import http.client
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Read:
    name: str
    url: str
    expect: int  # the status every answer must have
    etag_of: str = ""  # sent as If-None-Match: the ETag of this path's url, read at the start


class Reads:
    """The paths one client asks for, in turn, on ``base``'s task ``slug``."""

    def __init__(self, base: str, slug: str) -> None:
        parts = urlsplit(base)
        self.host, self.port = parts.hostname or "", parts.port or 80
        page, api = f"/tasks/{slug}/", f"/api/tasks/{slug}/leaderboard/"
        self.paths = [
            Read("board page", page, 200),
            Read("leaderboard API", api, 200),
            Read("/healthz", "/healthz", 200),
            Read("board page, If-None-Match hit", page, 304, etag_of=page),
            Read("leaderboard API, If-None-Match hit", api, 304, etag_of=api),
        ]

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=60)

    def etags(self) -> dict[str, str]:
        """Each path's current ETag (the board may have changed since the last round)."""
        connection, tags = self.connect(), {}
        for path in self.paths:
            if path.etag_of and path.etag_of not in tags:
                connection.request("GET", path.etag_of, headers={"Host": self.host})
                response = connection.getresponse()
                response.read()
                tags[path.etag_of] = response.getheader("ETag") or ""
        connection.close()
        return tags


def _client(reads: Reads, tags: dict[str, str], count: int, start: threading.Barrier) -> Any:
    """One client's ``count`` rounds of every path: {path name: [ms, ...]}."""
    connection = reads.connect()
    mine: dict[str, list[float]] = {p.name: [] for p in reads.paths}
    tags = dict(tags)  # this client's: it follows the board when the board changes
    start.wait()
    for _ in range(count):
        for path in reads.paths:
            headers = {"Host": reads.host}
            if path.etag_of:
                headers["If-None-Match"] = tags[path.etag_of]
            began = time.perf_counter()
            connection.request("GET", path.url, headers=headers)
            response = connection.getresponse()
            response.read()
            took = (time.perf_counter() - began) * 1000
            if path.etag_of and response.status == 200 and _changed(response, tags[path.etag_of]):
                # The board changed since the ETag was read (a count refreshed, a late result):
                # a miss, as a browser would have it; not a hit's time. The next asks anew.
                tags[path.etag_of] = response.getheader("ETag") or ""
                continue
            mine[path.name].append(took)
            if response.status != path.expect:
                raise RuntimeError(f"{path.name} answered {response.status}, not {path.expect}")
    connection.close()
    return mine


def _changed(response: http.client.HTTPResponse, sent: str) -> bool:
    return bool(response.getheader("ETag")) and response.getheader("ETag") != sent


def read_round(reads: Reads, clients: int, count: int) -> dict[str, dict[str, float]]:
    """``clients`` clients, ``count`` rounds each; per path: p50, p95 (ms), and its p95 over
    ``/healthz``'s; requests/s of all paths together."""
    tags = reads.etags()
    start = threading.Barrier(clients + 1)
    results: list[dict[str, list[float]]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(_client(reads, tags, count, start))
        except BaseException as exc:  # raised again in the caller's thread
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise errors[0]
    return _figures(reads, results, elapsed)


def _figures(
    reads: Reads, results: list[dict[str, list[float]]], elapsed: float
) -> dict[str, dict[str, float]]:
    merged = {p.name: [ms for r in results for ms in r[p.name]] for p in reads.paths}
    p95 = {name: statistics.quantiles(ms, n=100)[94] for name, ms in merged.items()}
    figures = {
        name: {"p50": statistics.median(ms), "p95": p95[name], "ratio": p95[name] / p95["/healthz"]}
        for name, ms in merged.items()
    }
    figures["all"] = {"rps": sum(len(ms) for ms in merged.values()) / elapsed}
    return figures
