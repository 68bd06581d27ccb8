"""The table ``benchmarks.http_bench`` prints: each run's figures, their median, the target."""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from benchmarks.http_bench import PHASES

READ_TARGETS = {8: "≤ 2×", 64: "≤ 3×"}


def _each(values: list[float], fmt: str) -> str:
    return ", ".join(fmt.format(v) for v in values)


def _row(measure: str, values: list[float], fmt: str, target: str, ratio: bool = True) -> str:
    median = statistics.median(values)
    shown = f"**{fmt.format(median)}**" if ratio else fmt.format(median)
    return f"| {measure} | {_each(values, fmt)} | {shown} | {target} |"


def _path_rows(reads: list[dict[int, Any]], clients: int) -> list[str]:
    target = READ_TARGETS.get(clients, "—")
    rounds = [r[clients] for r in reads]
    rows = []
    for name in ("board page", "leaderboard API"):
        ratios = [r[name]["ratio"] for r in rounds]
        rows.append(
            _row(f"{name} p95 / `/healthz` p95, {clients} clients", ratios, "{:.2f}×", target)
        )
    for name in ("board page, If-None-Match hit", "leaderboard API, If-None-Match hit"):
        ratios = [r[name]["ratio"] for r in rounds]
        rows.append(
            _row(f"{name}: p95 / `/healthz` p95, {clients} clients", ratios, "{:.2f}×", "≈ 1×")
        )
    for name in ("board page", "leaderboard API", "/healthz", "leaderboard API, If-None-Match hit"):
        p95 = [r[name]["p95"] for r in rounds]
        rows.append(_row(f"{name} p95, {clients} clients", p95, "{:.1f} ms", "—", ratio=False))
    rate = [r["all"]["rps"] for r in rounds]
    rows.append(_row(f"requests/s, all paths, {clients} clients", rate, "{:.0f}", "—", ratio=False))
    return rows


def _cpu_rows(burst: list[dict[str, Any]]) -> list[str]:
    groups = ["this process", "web", "workers", "PostgreSQL", "Redis", "host"]
    lines = ["| | " + " | ".join(groups) + " |", "|---" * (len(groups) + 1) + "|"]
    for side in ("ours", "floor"):
        cells = []
        for group in groups:
            values = [r["cpu"][side][group] for r in burst if r["cpu"][side][group] is not None]
            cells.append(f"{statistics.median(values):.1f}" if values else "—")
        lines.append(f"| {side} | " + " | ".join(cells) + " |")
    return lines


def _gets(args: argparse.Namespace) -> str:
    if args.wait_s:
        return f"a GET of the submission over HTTP with ?wait={args.wait_s:g}, p50 (waits included)"
    return f"a GET of the submission over HTTP, p50 (one every {args.poll_ms:g} ms)"


def _path_figures(args: argparse.Namespace, results: dict[str, Any]) -> list[str]:
    latency, burst = results["latency"], results["burst"]
    ms = "{:.0f} ms"
    figures: list[tuple[str, list[float], str, str]] = [
        (f"submit-to-scored over HTTP / floor, p50 of {args.latency_count}",
         [r["ratio"] for r in latency], "{:.2f}×", "≤ 1.5×"),
        ("submit-to-scored over HTTP, p50", [r["ours"] * 1000 for r in latency], ms, ""),
        ("the floor's submit-to-scored, p50", [r["floor"] * 1000 for r in latency], ms, ""),
        ("an upload over HTTP, p50", [r["upload"] * 1000 for r in latency], "{:.1f} ms", ""),
        (_gets(args), [r["poll"] * 1000 for r in latency], "{:.1f} ms", ""),
        ("GETs of a submission until its result was seen, p50",
         [r["gets"] for r in latency], "{:.0f}", ""),
        *((f"submit-to-scored over HTTP, {name}, p50",
           [r["phases"][name] * 1000 for r in latency], "{:.1f} ms", "") for name in PHASES),
        (f"burst of {args.burst} uploaded over HTTP / floor", [r["ratio"] for r in burst],
         "{:.2f}×", "≥ 0.6×"),
        ("burst over HTTP, scored per second", [r["ours"] for r in burst], "{:.1f}/s", ""),
        ("the floor's burst, scored per second", [r["floor"] for r in burst], "{:.1f}/s", ""),
        ("burst over HTTP: seconds until every upload was answered",
         [r["sent_s"]["ours"] for r in burst], "{:.1f} s", ""),
    ]  # fmt: skip
    return [_row(m, v, f, t or "—", ratio=bool(t)) for m, v, f, t in figures]


def print_report(args: argparse.Namespace, results: dict[str, Any]) -> None:
    reads, burst = results["reads"], results["burst"]
    print(f"\n{args.runs} runs, alternated; {args.entrants} ranked entrants on the board.\n")
    print("| measure | each run | median | target |")
    print("|---|---|---|---|")
    print("\n".join(_path_figures(args, results)))
    for clients in args.clients:
        print("\n".join(_path_rows(reads, clients)))
    before, after = results["memory"]
    print(f"\ngunicorn workers replaced during the runs: {results['replaced']}; their memory "
          f"(RSS, MB) after the warm-up {_each(before, '{:.0f}')}, at the end "
          f"{_each(after, '{:.0f}')}")  # fmt: skip
    print("\nCPU per model in the burst, ms (median of the runs; web: gunicorn's workers; "
          "host: every process on the machine):\n")  # fmt: skip
    print("\n".join(_cpu_rows(burst)))
    print(f"\nLoad average at the end: {_each(list(results['load']), '{:.2f}')}")
