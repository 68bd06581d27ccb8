"""When an rq worker registration left by a previous process under the same name is provably dead.

rq refuses to start a worker whose name is still registered (the registration outlives a
``kill -9`` by its TTL, minutes). A worker restarted under its old name clears it only on proof:
the old process ran on this host and is gone (or its pid is now this very process, as after a
container restart, where the worker is pid 1 again), or its heartbeat went stale.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

import psutil
from django.conf import settings

from queueing.heartbeat import WorkerState


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process: a zombie (killed, not yet reaped by its parent, as a
    worker killed under a supervisor that has not waited for it) is not."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def dead_registration(
    fields: Mapping[str, str],
    state: WorkerState | None,
    *,
    host: str,
    pid: int | None = None,
    pid_alive: Callable[[int], bool] = process_alive,
    now: float | None = None,
) -> str | None:
    """Why rq's registration ``fields`` (its worker hash) belongs to a dead process, or None."""
    pid = os.getpid() if pid is None else pid
    try:
        old_pid = int(fields.get("pid", ""))
    except ValueError:
        old_pid = None
    if fields.get("hostname") == host and old_pid is not None:
        if old_pid == pid:
            return f"its pid {old_pid} on {host} is now this process"
        if not pid_alive(old_pid):
            return f"its process {old_pid} on {host} is gone"
        return None  # still running here: a second worker with the same name is a mistake
    if state is not None and state.pid == old_pid:
        age = (now if now is not None else time.time()) - state.last_heartbeat
        if state.state == "stopped" or age > settings.EVAL_HEARTBEAT_STALE_S:
            return f"no heartbeat from {fields.get('hostname')} pid {old_pid} for {age:.0f} s"
    return None
