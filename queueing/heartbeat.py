"""Worker heartbeats in Redis: each worker's latest state and an hour of stats for sparklines.

Redis may hold these because they rebuild themselves: every live worker rewrites its own within
one heartbeat interval, so a flushed or replaced Redis shows the whole fleet again seconds later.
Nothing here touches the database.

Keys (on the evaluation queue's Redis):
- ``eval:fleet:workers``: sorted set, worker name → last heartbeat (unix time);
- ``eval:fleet:worker:<name>``: hash, the worker's state (values JSON-encoded);
- ``eval:fleet:history:<name>``: list, newest first, one compact JSON sample per heartbeat,
  capped to cover ``EVAL_HEARTBEAT_HISTORY_S``;
- ``eval:fleet:class:<slug>``: sorted set, name → last heartbeat of each running worker that
  serves the device class (a stopping worker leaves it): how many are online is one ZCOUNT, which
  every upload and task page asks, without reading every worker's state.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from redis import Redis

PREFIX = "eval:fleet"
NAMES_KEY = f"{PREFIX}:workers"
# A worker gone for this long is dropped from the list altogether (its keys expire too).
FORGET_AFTER_S = 24 * 3600


def text(value: Any) -> str:
    """Redis answers bytes unless the client was made with decode_responses."""
    return value.decode() if isinstance(value, bytes) else str(value)


def worker_key(name: str) -> str:
    return f"{PREFIX}:worker:{name}"


def history_key(name: str) -> str:
    return f"{PREFIX}:history:{name}"


def class_key(device_class: str) -> str:
    return f"{PREFIX}:class:{device_class}"


def history_length() -> int:
    """Samples kept per worker: enough to cover the history window at the heartbeat interval."""
    interval = settings.EVAL_HEARTBEAT_INTERVAL_S
    return math.ceil(settings.EVAL_HEARTBEAT_HISTORY_S / interval) + 10


@dataclass
class WorkerState:
    """What one worker says about itself in each heartbeat."""

    name: str
    host: str
    pid: int
    state: str  # "idle", "busy" or "stopped"
    device: str  # "cuda" or "cpu": what a model process of this worker would use
    started_at: float
    last_heartbeat: float = 0.0
    submission_id: int | None = None
    busy_since: float | None = None
    horse_pid: int | None = None  # the running job's model process
    jobs_done: int = 0
    jobs_failed: int = 0
    memory_share: int | None = None  # bytes of GPU memory this worker may use
    device_classes: list[str] = field(default_factory=list)  # whose queues it listens to
    gpu: dict[str, Any] | None = None
    gpu_problem: str = ""
    no_gpu_reason: str = ""
    cuda_problem: str = ""  # why this worker does not use CUDA (its start-up self-test failed)
    host_stats: dict[str, Any] = field(default_factory=dict)
    # The protections its model processes get (evaluation.confine.Protections.as_dict).
    sandbox: dict[str, Any] | None = None

    @classmethod
    def from_hash(cls, raw: dict[Any, Any]) -> WorkerState | None:
        try:
            values = {text(k): json.loads(v) for k, v in raw.items()}
            known = {f for f in cls.__dataclass_fields__}
            return cls(**{k: v for k, v in values.items() if k in known})
        except (TypeError, ValueError):
            return None  # a half-written or foreign hash: ignore it rather than break the page


def sample_of(state: WorkerState) -> dict[str, Any]:
    """The few numbers a sparkline needs, keyed short: an hour of them per worker."""
    gpu = state.gpu or {}
    host = state.host_stats
    return {
        "t": round(state.last_heartbeat, 1),
        "util": gpu.get("utilization_gpu"),
        "mem_util": gpu.get("utilization_memory"),
        "mem": gpu.get("memory_used"),
        "temp": gpu.get("temperature_c"),
        "power": gpu.get("power_w"),
        "cpu": host.get("cpu_percent"),
        "ram": host.get("memory_used"),
        "busy": state.state == "busy",
    }


def publish(
    connection: Redis, state: WorkerState, *, with_sample: bool = True, now: float | None = None
) -> None:
    """Write the worker's state (and a history sample) in one round trip.

    One MULTI/EXEC: the hash is replaced whole (no field of an older state survives), and a
    reader between the delete and the write would see the worker missing, so none can be.
    """
    with connection.pipeline(transaction=True) as pipe:
        state.last_heartbeat = time.time() if now is None else now
        encoded = {k: json.dumps(v) for k, v in asdict(state).items()}
        pipe.delete(worker_key(state.name))
        pipe.hset(worker_key(state.name), mapping=encoded)  # type: ignore[arg-type]
        pipe.expire(worker_key(state.name), FORGET_AFTER_S)
        pipe.zadd(NAMES_KEY, {state.name: state.last_heartbeat})
        for device_class in state.device_classes:
            if state.state == "stopped":
                pipe.zrem(class_key(device_class), state.name)
            else:
                pipe.zadd(class_key(device_class), {state.name: state.last_heartbeat})
                # Workers that died without stopping: forgotten after a day, as in NAMES_KEY.
                pipe.zremrangebyscore(
                    class_key(device_class), "-inf", state.last_heartbeat - FORGET_AFTER_S
                )
                pipe.expire(class_key(device_class), FORGET_AFTER_S)
        if with_sample:
            pipe.lpush(history_key(state.name), json.dumps(sample_of(state)))
            pipe.ltrim(history_key(state.name), 0, history_length() - 1)
            pipe.expire(history_key(state.name), FORGET_AFTER_S)
        pipe.execute()


def read_states(connection: Redis) -> list[WorkerState]:
    """Every worker seen in the last day, by name; stale ones included (the caller decides)."""
    cutoff = time.time() - FORGET_AFTER_S
    connection.zremrangebyscore(NAMES_KEY, "-inf", cutoff)
    names = [text(n) for n in connection.zrange(NAMES_KEY, 0, -1)]
    with connection.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hgetall(worker_key(name))
        raws = pipe.execute()
    states = [WorkerState.from_hash(raw) for raw in raws if raw]
    return sorted((s for s in states if s is not None), key=lambda s: s.name)


def read_history(connection: Redis, names: list[str], *, limit: int) -> dict[str, list[dict]]:
    """Oldest-first samples per worker, the newest ``limit`` of them."""
    with connection.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.lrange(history_key(name), 0, max(limit - 1, 0))
        lists = pipe.execute()
    return {
        name: [json.loads(s) for s in reversed(raw)] for name, raw in zip(names, lists, strict=True)
    }


def online_in_class(connection: Redis, device_class: str, now: float | None = None) -> int:
    """Online workers serving ``device_class``, as ``is_online`` tells them: one ZCOUNT. A
    stopped worker has left the class's set; one that died leaves it by growing stale."""
    now = now if now is not None else time.time()
    fresh_since = now - settings.EVAL_HEARTBEAT_STALE_S
    return int(connection.zcount(class_key(device_class), fresh_since, "+inf"))


def is_online(state: WorkerState, now: float | None = None) -> bool:
    if state.state == "stopped":
        return False
    age = (now if now is not None else time.time()) - state.last_heartbeat
    return age <= settings.EVAL_HEARTBEAT_STALE_S


def lost_its_work(state: WorkerState | None, started_at: float | None, now: float) -> bool:
    """Whether the worker named on a running submission provably no longer evaluates it.

    Proof is a heartbeat that went stale or said "stopped", or a worker of that name that started
    after the submission did (restarted under the same name). No heartbeat at all proves nothing:
    Redis may just have lost them all.
    """
    if state is None:
        return False
    if not is_online(state, now):
        return True
    return started_at is not None and state.started_at > started_at + 1.0


def live_claims(connection: Redis, now: float | None = None) -> dict[int, str]:
    """submission id → name of the online worker that says it is evaluating it."""
    return {
        s.submission_id: s.name
        for s in read_states(connection)
        if s.submission_id is not None and is_online(s, now)
    }
