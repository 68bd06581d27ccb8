"""What the fault suite (benchmarks/chaos.py) reports per fault, and its Markdown table."""

from __future__ import annotations

from collections import Counter
from typing import Any

from benchmarks.chaos_client import EXPECTED_WHILE_DB_DOWN, Answers, Burst
from benchmarks.chaos_stack import Exit
from benchmarks.queue_latency import FINAL


def fault_result(
    fault: str, submitted: int, burst: Burst, rows: list[dict[str, Any]], answers: Answers, *,
    exits: list[Exit], running: set[str], workers: list[str], fault_s: float,
    recovered_s: float | None, notes: list[str],
) -> dict[str, Any]:  # fmt: skip
    """One fault's figures, as the table and the JSON give them."""
    final = [r for r in rows if r["status"] in FINAL]
    verdicts: Counter[str] = Counter()
    for counts in answers.counts.values():
        verdicts.update(counts)
    return {
        "fault": fault,
        "submitted": submitted,
        "accepted": len(burst.accepted),
        "finished": len(final),
        "failed": Counter(r["error_message"] for r in final if r["status"] != "succeeded"),
        "stuck": Counter(r["status"] for r in rows if r["status"] not in FINAL),
        "retried": sum(1 for r in rows if r["attempts"] > 1),
        "lost": len(burst.lost) + len(burst.accepted) - len(rows),
        "lost_why": burst.lost,
        "client_retries_after_503": burst.client_retries,
        "answers": sum(verdicts.values()),
        "5xx_data_reachable": sum(n for v, n in verdicts.items() if v.endswith("data reachable")),
        "db_down_503": verdicts[EXPECTED_WHILE_DB_DOWN],
        "db_down_other": sum(
            n for v, n in verdicts.items() if "while db down" in v and v != EXPECTED_WHILE_DB_DOWN
        ),
        "failures_by_page": answers.failures(),
        "worker_exits": [vars(e) for e in exits],
        "exited_for_good": [w for w in workers if w not in running],
        "fault_s": round(fault_s, 1),
        "recovered_s": None if recovered_s is None else round(recovered_s, 1),
        "notes": notes,
    }


def _finished(r: dict[str, Any]) -> str:
    failed = sum(r["failed"].values())
    return f"{r['finished']}/{r['accepted']}" + (f" ({failed} failed)" if failed else "")


def _exits(r: dict[str, Any]) -> str:
    gone = r["exited_for_good"]
    for_good = f"for good: {', '.join(gone)}" if gone else "none for good"
    return f"{len(r['worker_exits'])} ({for_good})"


def _recovered(r: dict[str, Any]) -> str:
    return "not recovered" if r["recovered_s"] is None else f"{r['recovered_s']:.1f} s"


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| fault | submitted | finished | stuck | retried | lost | 5xx, data reachable "
        "| db down: 503 / other 5xx | workers exited | recovered in |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['fault']} | {r['submitted']} | {_finished(r)} | {sum(r['stuck'].values())} "
            f"| {r['retried']} | {r['lost']} | {r['5xx_data_reachable']} "
            f"| {r['db_down_503']} / {r['db_down_other']} | {_exits(r)} | {_recovered(r)} |"
        )
    return "\n".join(lines)


def one_line(r: dict[str, Any]) -> str:
    return (
        f"{r['fault']}: {_finished(r)} finished, {sum(r['stuck'].values())} stuck, "
        f"{r['lost']} lost, {r['5xx_data_reachable']} 5xx with data reachable, "
        f"workers exited {_exits(r)}, {_recovered(r)}"
    )


def details(results: list[dict[str, Any]]) -> str:
    """Per fault: what was done, and every failure the table only counts."""
    out = []
    for r in results:
        out.append(f"### {r['fault']}\n")
        out += [f"- {note}" for note in r["notes"]]
        out += [f"- stuck: {dict(r['stuck'])}"] if r["stuck"] else []
        out += [f"- failed {n}: {why}" for why, n in r["failed"].items()]
        out += [f"- lost: {why}" for why in r["lost_why"]]
        if r["client_retries_after_503"]:
            out.append(f"- uploads asked again after a 503: {r['client_retries_after_503']}")
        out += [f"- {page}: {counts}" for page, counts in r["failures_by_page"].items()]
        if r["restarted_after"]:
            out.append(f"- started again by the suite after the fault: {r['restarted_after']}")
        for e in r["worker_exits"]:
            out.append(f"- worker {e['name']} exited ({e['returncode']}); its last error:")
            out += ["", "```", *(e["cause"] or e["log_tail"][-3:]), "```", ""]
        out.append("")
    return "\n".join(out)


def passed(results: list[dict[str, Any]]) -> bool:
    """Issue 37's bar: every submission finished, no worker gone for good, no 5xx from a page
    whose data was reachable (nor anything but a 503 with Retry-After while it was not)."""
    return all(
        not r["stuck"] and not r["lost"] and not r["exited_for_good"]
        and not r["5xx_data_reachable"] and not r["db_down_other"]
        for r in results
    )  # fmt: skip
