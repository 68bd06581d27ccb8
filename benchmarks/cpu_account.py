"""Where a burst's CPU goes: CPU seconds by process group on this Linux host, from /proc.

A burst on a small host is bound by its cores, so the CPU each model costs, and who spends it,
says more than the rate alone: this process (the uploads, or the floor's enqueues), the
workers (their own CPU, and with their children, which count once reaped), PostgreSQL (every
backend now alive, and through the postmaster those that ended: a connection that ends
with its process) and Redis, when their servers run on this host, and the whole host's busy time.

``snapshot`` before and ``per_model`` after a burst give milliseconds (and minor faults) per
model. Figures of other processes on the host (a test suite, a browser) land in "host" only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


def _fields(pid: int) -> tuple[str, list[str]] | None:
    """(command name, the fields after it) of a live process's /proc stat line."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return raw[raw.index("(") + 1 : raw.rindex(")")], raw[raw.rindex(")") + 2 :].split()


def _stat(pid: int) -> tuple[str, int, list[int]] | None:
    """(command name, parent pid, [utime, stime, cutime, cstime] in ticks) of a live process."""
    read = _fields(pid)
    if read is None:
        return None
    name, fields = read
    return name, int(fields[1]), [int(f) for f in fields[11:15]]


def minor_faults(pid: int, *, reaped_children: bool = False) -> int:
    """Minor page faults of a live process itself (0 once it has gone), or with
    ``reaped_children`` those of its children that it reaped (a worker's model processes, the
    floor's work horses)."""
    read = _fields(pid)
    return 0 if read is None else int(read[1][8 if reaped_children else 7])


def _cpu_s(ticks: Iterable[int]) -> float:
    return sum(ticks) / TICK


def process_cpu_s(pid: int, *, reaped_children: bool) -> float:
    """A process's CPU seconds; with ``reaped_children``, also its children's that it reaped."""
    stat = _stat(pid)
    if stat is None:
        return 0.0
    times = stat[2]
    return _cpu_s(times if reaped_children else times[:2])


def tree_cpu_s(pid: int, stats: dict[int, tuple[str, int, list[int]]]) -> float:
    """A process's CPU seconds with its reaped children's, and the same of each child not yet
    reaped (a worker's model process server, whose model processes it reaps): a total that
    does not jump when a process is reaped."""
    stat = stats.get(pid)
    if stat is None:
        return 0.0
    children = [child for child, s in stats.items() if s[1] == pid]
    return _cpu_s(stat[2]) + sum(tree_cpu_s(child, stats) for child in children)


def _all_stats() -> dict[int, tuple[str, int, list[int]]]:
    stats = {int(p.name): _stat(int(p.name)) for p in PROC.iterdir() if p.name.isdigit()}
    return {pid: s for pid, s in stats.items() if s is not None}


def server_cpu_s(name: str) -> float | None:
    """CPU seconds of every live process named ``name`` (its own) and of the children that the
    top one of them reaped (a server's ended connections); None when none runs on this host."""
    stats = {int(p.name): _stat(int(p.name)) for p in PROC.iterdir() if p.name.isdigit()}
    mine = {pid: s for pid, s in stats.items() if s is not None and s[0] == name}
    if not mine:
        return None
    total = sum(_cpu_s(s[2][:2]) for s in mine.values())
    for s in mine.values():
        if s[1] not in mine:  # a top process (the postmaster): its reaped children count too
            total += _cpu_s(s[2][2:])
    return total


def host_busy_s() -> float:
    """Seconds of CPU the host's cores spent busy since boot: user, nice, system, irq, softirq
    (not idle or iowait, and not steal, a hypervisor's time for other guests)."""
    values = [int(v) for v in (PROC / "stat").read_text().splitlines()[0].split()[1:]]
    return (values[0] + values[1] + values[2] + values[5] + values[6]) / TICK


def snapshot(worker_pids: Iterable[int]) -> dict[str, float | None]:
    """CPU seconds by process group, and the workers' and their children's minor faults so far."""
    pids = list(worker_pids)
    stats = _all_stats()
    return {
        "this process": time.process_time(),
        "workers": sum(tree_cpu_s(p, stats) for p in pids),
        "workers' own": sum(process_cpu_s(p, reaped_children=False) for p in pids),
        "workers' own faults": sum(minor_faults(p) for p in pids),
        "children's faults": sum(minor_faults(p, reaped_children=True) for p in pids),
        "PostgreSQL": server_cpu_s("postgres"),
        "Redis": server_cpu_s("redis-server"),
        "host": host_busy_s(),
    }


def per_model(
    before: dict[str, float | None], after: dict[str, float | None], count: int
) -> dict[str, float | None]:
    """Milliseconds of CPU per model between two snapshots (None where a server is not here);
    for the fault counts, faults per model."""
    result: dict[str, Any] = {}
    for key, start in before.items():
        end = after[key]
        scale = 1 if key.endswith("faults") else 1000  # a count, or seconds into milliseconds
        result[key] = None if start is None or end is None else (end - start) * scale / count
    return result
