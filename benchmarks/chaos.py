"""The fault suite (issue 37): kill Redis, PostgreSQL's connections and workers during bursts of
uploads, and report per fault what became of the submissions and of the pages.

Everything runs on its own and is stopped on every exit path (Ctrl-C and SIGTERM included): a
redis-server on a free port that keeps nothing on disk, a database ``chaos_<pid>`` on the machine's
PostgreSQL (CHAOS_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres; dropped at
the end), a TCP proxy in front of it (benchmarks/chaos_proxy.py: PostgreSQL itself is shared and
is never restarted), gunicorn with production settings and two EvaluationWorkers, the portal's
processes reaching the database through the proxy. Heartbeat and recovery intervals are
kill_recovery's ``--fast`` ones, so that each fault is over in bounded time.

Each fault begins during a burst of uploads over the API (a client that asks again after a 503
with Retry-After) of kill_recovery's slow digits model (a Loop of MatMuls, ``--iterations`` per
batch: jobs last long enough for a fault to find some running and some queued), while a reader
keeps GETting pages whose data is in PostgreSQL:

- ``worker-kill``: ``kill -9`` of a worker mid-job; started again after ``--duration`` s;
- ``redis-down``: redis-server SIGKILLed, started again (empty) after ``--duration`` s;
- ``postgres-down``: the proxy drops every connection and refuses new ones for ``--duration`` s;
- ``worker-restart-redis-down``: Redis killed, a worker restarted (SIGTERM, start) meanwhile.

Then it waits (at most ``--recover-timeout`` s) until every accepted submission is final. A
worker that exits on its own is not started again until the next fault (each fault begins with
the whole fleet): that exit is what the suite is there to find. It prints a Markdown table and
the details (each exit's last error; the logs are kept in ``--logs``), and exits 1 unless issue
37's bar is met. Usage (``make chaos``):

    SECRET_KEY=x .venv/bin/python -m benchmarks.chaos [--faults a,b] [--duration 8] [--json out]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn
from urllib.parse import SplitResult, urlsplit, urlunsplit

from benchmarks import chaos_report, kill_recovery, queue_latency, site_load
from benchmarks.chaos_client import Answers, DatabaseState, PageReader, Uploader
from benchmarks.chaos_proxy import FaultProxy
from benchmarks.chaos_stack import Fleet, RedisServer, own_database, web

ROOT = Path(__file__).resolve().parent.parent
WORKERS = ["chaos-a", "chaos-b"]
LEAD_S = 2.0  # the burst runs this long before the fault, so that jobs are queued and running
UPLOAD_GIVE_UP_S = 30.0  # after the fault: a client stops asking again after 503s
POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/postgres"  # the server, not a database


@dataclass
class Stage:
    """What the faults act on and the clients talk to."""

    redis: RedisServer
    proxy: FaultProxy
    fleet: Fleet
    db: DatabaseState
    base: str
    token: str
    model: bytes
    detail_pk: int


def _busy_worker(stage: Stage, timeout_s: float) -> str | None:
    """A worker of ours evaluating a submission now, waited for."""
    from submissions.models import Submission

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = Submission.objects.filter(
            status="running", worker_name__in=list(stage.fleet.procs)
        )
        name = running.values_list("worker_name", flat=True).first()
        if name:
            return str(name)
        time.sleep(0.05)
    return None


def kill_worker(stage: Stage, duration: float) -> list[str]:
    name = _busy_worker(stage, timeout_s=10)
    if name is None:
        return ["no worker was evaluating within 10 s: nothing killed"]
    stage.fleet.kill(name)
    time.sleep(duration)
    stage.fleet.start(name)
    return [f"{name} SIGKILLed mid-job, started again {duration:g} s later"]


def redis_down(stage: Stage, duration: float) -> list[str]:
    stage.redis.kill()
    time.sleep(duration)
    stage.redis.start()
    return [f"redis-server SIGKILLed, started again empty {duration:g} s later"]


def postgres_down(stage: Stage, duration: float) -> list[str]:
    stage.db.set_down(True)
    dropped = stage.proxy.down()
    time.sleep(duration)
    stage.proxy.up()
    stage.db.set_down(False)
    return [f"proxy dropped {dropped} open connections, refused new ones for {duration:g} s"]


def restart_while_redis_down(stage: Stage, duration: float) -> list[str]:
    name = _busy_worker(stage, timeout_s=5) or WORKERS[0]
    stage.redis.kill()
    time.sleep(duration / 3)
    how = stage.fleet.restart(name)
    time.sleep(duration - duration / 3)
    stage.redis.start()
    return [
        f"redis-server SIGKILLed; {duration / 3:.1f} s later {name} restarted ({how}); "
        f"Redis started again empty {duration:g} s after it was killed"
    ]


FAULTS: dict[str, Callable[[Stage, float], list[str]]] = {
    "worker-kill": kill_worker,
    "redis-down": redis_down,
    "postgres-down": postgres_down,
    "worker-restart-redis-down": restart_while_redis_down,
}


def _rows(ids: list[int]) -> list[dict[str, Any]]:
    from submissions.models import Submission

    fields = ("pk", "status", "attempts", "error_message", "failed_by_system")
    return list(Submission.objects.filter(pk__in=ids).values(*fields))


def _wait_final(stage: Stage, ids: list[int], deadline: float) -> tuple[float | None, list[str]]:
    """When every one of ``ids`` was final (monotonic), or None at the deadline; and why the
    wait ended early, if it did."""
    while time.monotonic() < deadline:
        stage.fleet.reap()
        rows = _rows(ids)
        if len(rows) == len(ids) and all(r["status"] in queue_latency.FINAL for r in rows):
            return time.monotonic(), []
        if not stage.fleet.procs:
            return None, ["no worker of ours left running: stopped waiting for recovery"]
        time.sleep(0.25)
    return None, []


def run_fault(stage: Stage, fault: str, args: argparse.Namespace) -> dict[str, Any]:
    """One fault during one burst; what became of the burst, the pages and the workers."""
    exits_before = len(stage.fleet.exits)
    slug = site_load.TASK_SLUG
    reader = PageReader(stage.base, stage.token, slug, stage.detail_pk, stage.db)
    uploader = Uploader(
        stage.base, stage.token, slug, queue_latency._variants(stage.model, args.burst),
        stage.db, answers=reader.answers, spread_s=LEAD_S + args.duration,
        give_up_s=LEAD_S + args.duration + UPLOAD_GIVE_UP_S,
    )  # fmt: skip
    reader.start()
    uploader.start()
    time.sleep(LEAD_S)
    began = time.monotonic()
    notes = FAULTS[fault](stage, args.duration)
    ended = time.monotonic()
    uploader.join()
    ids = uploader.burst.accepted
    finished, why = _wait_final(stage, ids, ended + args.recover_timeout)
    answers = reader.stop()
    stage.fleet.reap()
    return chaos_report.fault_result(
        fault, args.burst, uploader.burst, _rows(ids), answers,
        exits=stage.fleet.exits[exits_before:], running=set(stage.fleet.procs),
        workers=WORKERS, fault_s=ended - began,
        recovered_s=None if finished is None else finished - ended, notes=notes + why,
    )  # fmt: skip


def restore_fleet(fleet: Fleet) -> list[str]:
    """Start again the workers that exited, so that the next fault begins with all of them."""
    dead = [name for name in WORKERS if name not in fleet.procs]
    for name in dead:
        fleet.start(name)
    missing = fleet.wait_registered(WORKERS)
    if missing:
        raise RuntimeError(f"workers {missing} did not start; see {fleet.log_dir}")
    return dead


def _portal_env(redis_url: str, database_url: str, var_dir: Path) -> dict[str, str]:
    return {
        **site_load.SITE_ENV,
        **kill_recovery.FAST,
        **kill_recovery.FAST_RECOVERY,
        "REDIS_URL": redis_url,
        "DATABASE_URL": database_url,
        "PORTAL_VAR_DIR": str(var_dir),
        "MEDIA_ROOT": str(var_dir / "media"),
        "SECRET_KEY": os.environ.get("SECRET_KEY") or "insecure-chaos-only-" + "x" * 40,
        "LOG_LEVEL": "INFO",  # the workers' logs are the evidence when one exits
    }


def _seed_and_warm_up(base: str, model: bytes) -> tuple[str, int]:
    """The task and a participant (site_load's seed), two submissions scored through the whole
    stack; the participant's token and a submission id for the reader."""
    from submissions.models import Task

    (account,) = site_load.seed(accounts=1, ranked=50)
    # The bursts are one participant's: the daily and queued limits are not what is measured.
    Task.objects.filter(slug=site_load.TASK_SLUG).update(
        submissions_per_day=100_000, queued_per_user=100_000
    )
    uploader = Uploader(
        base, account["token"], site_load.TASK_SLUG, queue_latency._variants(model, 2),
        DatabaseState(), answers=Answers(), spread_s=0, give_up_s=0,
    )  # fmt: skip
    uploader.run()
    if uploader.burst.lost:
        raise RuntimeError(f"warm-up upload refused: {uploader.burst.lost}")
    queue_latency._wait_scored(uploader.burst.accepted, poll_s=0.1, timeout_s=120)
    return account["token"], uploader.burst.accepted[0]


def _url(server: SplitResult, host_port: str, database: str) -> str:
    """``server``'s URL with its user, at ``host_port``, for ``database``."""
    user = server.netloc.rpartition("@")[0]
    netloc = f"{user}@{host_port}" if user else host_port
    return urlunsplit(server._replace(netloc=netloc, path=f"/{database}"))


def _log(log_dir: Path, name: str) -> IO[bytes]:
    return (log_dir / f"{name}.log").open("ab")


def set_up(stack: contextlib.ExitStack, args: argparse.Namespace) -> Stage:
    """Every process of the suite, each one's stop pushed on ``stack``."""
    log_dir = Path(args.logs)
    log_dir.mkdir(parents=True, exist_ok=True)
    for old in log_dir.glob("*.log"):  # the folder holds the last run's logs, appended to by it
        old.unlink()
    var_dir = log_dir / "var"  # uploads and the workers' caches: nothing worth keeping
    shutil.rmtree(var_dir, ignore_errors=True)
    stack.callback(shutil.rmtree, var_dir, ignore_errors=True)
    redis = RedisServer(site_load._free_port(), stack.enter_context(_log(log_dir, "redis")))
    stack.callback(redis.stop)
    redis.start()
    admin = urlsplit(os.environ.get("CHAOS_POSTGRES_URL") or POSTGRES_URL)
    proxy = FaultProxy(admin.hostname or "127.0.0.1", admin.port or 5432)
    stack.callback(proxy.close)
    proxy_port = proxy.start()
    name, server = f"chaos_{os.getpid()}", admin.netloc.rpartition("@")[2]
    env = _portal_env(redis.url, _url(admin, f"127.0.0.1:{proxy_port}", name), var_dir)
    # This process reads the rows directly, so that its counting never waits on a fault.
    os.environ.update(env, DATABASE_URL=_url(admin, server, name))
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    import django

    django.setup()
    from django.core.management import call_command

    stack.enter_context(own_database(_url(admin, server, "postgres"), name))
    call_command("migrate", verbosity=0)
    from tests.workers.fleet_support import slow_classifier

    model = slow_classifier(args.iterations)
    base = stack.enter_context(
        web({**os.environ, **env}, stack.enter_context(_log(log_dir, "web")))
    )
    fleet = Fleet({**os.environ, **env}, log_dir)
    stack.enter_context(fleet)
    restore_fleet(fleet)
    token, detail_pk = _seed_and_warm_up(base, model)
    return Stage(redis, proxy, fleet, DatabaseState(), base, token, model, detail_pk)


def _interrupted(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: every process of ours is stopped


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"of {', '.join(FAULTS)}")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds each fault lasts")
    parser.add_argument("--burst", type=int, default=8, help="uploads per fault")
    parser.add_argument(
        "--iterations", type=int, default=5_000, help="Loop trips per batch of the model"
    )
    parser.add_argument("--recover-timeout", type=float, default=60.0, help="seconds")
    parser.add_argument("--logs", default=str(ROOT / "var" / "chaos"), help="log folder")
    parser.add_argument("--json", help="write the results here as JSON")
    args = parser.parse_args(argv)
    faults = args.faults.split(",")
    if unknown := set(faults) - set(FAULTS):
        parser.error(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
    signal.signal(signal.SIGTERM, _interrupted)
    results: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        stage = set_up(stack, args)
        for i, fault in enumerate(faults):
            if i:
                results[-1]["restarted_after"] = restore_fleet(stage.fleet)
            results.append({**run_fault(stage, fault, args), "restarted_after": []})
            print(chaos_report.one_line(results[-1]), flush=True)
    print("\n" + chaos_report.table(results) + "\n\n" + chaos_report.details(results))
    print(f"\nLogs: {args.logs}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    sys.exit(0 if chaos_report.passed(main()) else 1)
