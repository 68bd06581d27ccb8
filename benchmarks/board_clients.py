"""The leaderboard page under concurrent clients, served by gunicorn as production serves it.

Issue 12's target: p95 < 150 ms at 8 concurrent clients on the 100,000-submission board. It
needs the board ``benchmarks/leaderboard_bench.py --keep`` leaves (database ``<name>_bench``):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lbbench REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python benchmarks/leaderboard_bench.py --keep
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lbbench REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python -m benchmarks.board_clients --clients 8 --requests 2000

gunicorn runs with ``docker/gunicorn.conf.py`` (the web image's) on loopback, plain HTTP, with
production settings otherwise; the clients are threads of this process with keep-alive
connections, each asking for the anonymous board page, then ``/healthz`` the same way as the
floor: what the same server answers with no work at all. The board does not change meanwhile,
so after the first request of each client the page is served from the board's cached fragments.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from subprocess import DEVNULL

from benchmarks.leaderboard_bench import _bench_url
from benchmarks.site_load import SITE_ENV, _free_port, _stop, _wait_healthy

ROOT = Path(__file__).resolve().parent.parent


def _hammer(port: int, path: str, clients: int, total: int) -> tuple[list[float], float]:
    """``total`` GETs of ``path`` from ``clients`` threads; (latencies in ms, requests/s)."""
    latencies: list[float] = []
    lock = threading.Lock()
    per_client = total // clients
    start = threading.Barrier(clients + 1)

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        start.wait()
        for _ in range(per_client):
            began = time.perf_counter()
            connection.request("GET", path, headers={"Host": "127.0.0.1"})
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"{path} answered {response.status}")
            mine.append((time.perf_counter() - began) * 1000)
        connection.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    return latencies, len(latencies) / (time.perf_counter() - began)


def _row(name: str, latencies: list[float], rate: float) -> str:
    p95 = statistics.quantiles(latencies, n=100)[94]
    return (
        f"| {name} | {len(latencies)} | {statistics.median(latencies):.1f} | {p95:.1f} | "
        f"{max(latencies):.1f} | {rate:.0f} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=2000, help="per path, all clients")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn processes")
    parser.add_argument("--threads", type=int, default=4, help="gunicorn threads per process")
    args = parser.parse_args(argv)
    url, _, _ = _bench_url(os.environ["DATABASE_URL"])
    env = {**os.environ, **SITE_ENV, "DATABASE_URL": url, "DATABASE_CONN_MAX_AGE": "600"}
    env.setdefault("SECRET_KEY", "bench-only-" + "x" * 50)
    port = _free_port()
    gunicorn = [
        sys.executable, "-m", "gunicorn", "--config", "docker/gunicorn.conf.py",
        "--bind", f"127.0.0.1:{port}", "--workers", str(args.web_workers),
        "--threads", str(args.threads), "portal.wsgi:application",
    ]  # fmt: skip
    web = subprocess.Popen(gunicorn, cwd=ROOT, env=env, stdout=DEVNULL, stderr=DEVNULL)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", web)
        _hammer(port, "/tasks/digits/", args.clients, args.clients * 4)  # each worker warm
        load = os.getloadavg()[0]
        page = _hammer(port, "/tasks/digits/", args.clients, args.requests)
        floor = _hammer(port, "/healthz", args.clients, args.requests)
        print(
            f"gunicorn {args.web_workers} processes × {args.threads} threads, "
            f"{args.clients} clients, load average {load:.2f} → {os.getloadavg()[0]:.2f}\n"
        )
        print("| path | requests | p50 ms | p95 ms | max ms | requests/s |")
        print("|---|---|---|---|---|---|")
        print(_row("board page, anonymous", *page))
        print(_row("/healthz (floor)", *floor))
    finally:
        _stop(web)


if __name__ == "__main__":
    main()
