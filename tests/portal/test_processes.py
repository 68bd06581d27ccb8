"""What we start we stop: the demo, management commands and a test session leave nothing running.

Each test gives its processes a var/ directory of their own (no REDIS_URL, so they use the
embedded Redis there); a process is "ours" when its environment or command line names that
directory. Other people's processes on this machine are never looked at beyond that.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from tests.deploy.conftest import database_url

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def processes_of(var_dir: Path) -> list[psutil.Process]:
    """Live processes started for ``var_dir`` (zombies awaiting their parent are not running)."""
    found = []
    for process in psutil.process_iter():
        try:
            ours = process.environ().get("PORTAL_VAR_DIR") == str(var_dir) or any(
                str(var_dir) in part for part in process.cmdline()
            )
            if ours and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def describe(processes: list[psutil.Process]) -> list[str]:
    return [" ".join(p.cmdline())[:120] for p in processes if p.is_running()]


@pytest.fixture
def var_dir() -> Iterator[Path]:
    """A short path (the Redis unix socket lives under it); whatever is left is killed after."""
    path = Path(tempfile.mkdtemp(prefix="portal-procs-"))
    yield path
    for process in processes_of(path):
        process.kill()
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def demo_env(var_dir: Path, transactional_db: Any) -> dict[str, str]:
    """`make demo`'s environment on the test database: DEBUG, no REDIS_URL."""
    environ = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REDIS_URL_FILE")}
    return environ | {
        "DEBUG": "1",
        "PORTAL_VAR_DIR": str(var_dir),
        "DATABASE_URL": database_url(),
        "SECRET_KEY": "insecure-test-only-key",
        "EVAL_DEVICE": "cpu",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_demo(
    env: dict[str, str], port: int, workers: int, *, sigint_ignored: bool = False
) -> subprocess.Popen[bytes]:
    """`manage.py rundemo` as `make demo` runs it; its output (and its children's) goes to
    demo.log under the var directory, which outlives a demo killed outright.
    ``sigint_ignored``: as a script's background job (``make demo &``) inherits SIGINT."""
    command = [sys.executable, "manage.py", "rundemo", "--port", str(port)]
    with (Path(env["PORTAL_VAR_DIR"]) / "demo.log").open("wb") as log:
        return subprocess.Popen(
            [*command, "--workers", str(workers)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            if sigint_ignored
            else None,
        )


def demo_log(var_dir: Path) -> str:
    return (var_dir / "demo.log").read_text(errors="replace")


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def demo_ready(var_dir: Path, port: int, workers: int) -> Callable[[], bool]:
    """The web server answers and every worker has registered with the embedded Redis."""

    def ready() -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).close()
            client = redis.Redis(unix_socket_path=str(var_dir / "redis" / "redis.sock"))
            return int(client.scard("rq:workers")) >= workers + 1  # and the notifier
        except OSError:
            return False
        except redis.exceptions.RedisError:
            return False

    return ready


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["terminal", "background"])
def test_ctrl_c_on_the_demo_stops_the_web_server_the_workers_and_the_embedded_redis(
    var_dir: Path, demo_env: dict[str, str], sigint_ignored: bool
) -> None:
    port = free_port()
    demo = start_demo(demo_env, port, workers=2, sigint_ignored=sigint_ignored)
    wait_until(demo_ready(var_dir, port, workers=2), "the demo to start")
    assert len(processes_of(var_dir)) >= 5  # rundemo, web, two workers, notifier(s), redis-server

    os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole foreground group
    demo.wait(timeout=60)

    assert describe(processes_of(var_dir)) == [], demo_log(var_dir)
    # Stopped as asked, not as if a worker had crashed (they stop on SIGINT themselves).
    assert demo.returncode == 0 and "Stopping the demo" in demo_log(var_dir), demo_log(var_dir)
    assert not list((var_dir / "run").glob("*.pid"))


def test_the_demo_prints_its_banner_after_the_web_server_is_up(
    var_dir: Path, demo_env: dict[str, str]
) -> None:
    port = free_port()
    demo = start_demo(demo_env, port, workers=1)
    try:
        wait_until(lambda: "Logins:" in demo_log(var_dir), "the banner")
        log = demo_log(var_dir)
        # the web server's start-up lines (system checks) come before it, not over it
        assert log.index("Starting development server") < log.index("Logins:"), log
    finally:
        demo.terminate()
        demo.wait(timeout=60)
    assert describe(processes_of(var_dir)) == [], demo_log(var_dir)


def test_sigterm_to_the_demo_alone_stops_everything_it_started(
    var_dir: Path, demo_env: dict[str, str]
) -> None:
    port = free_port()
    demo = start_demo(demo_env, port, workers=1)
    wait_until(demo_ready(var_dir, port, workers=1), "the demo to start")

    demo.terminate()
    demo.wait(timeout=60)

    assert describe(processes_of(var_dir)) == [], demo_log(var_dir)


def test_the_demo_on_a_port_in_use_starts_nothing_and_leaves_nothing(
    var_dir: Path, demo_env: dict[str, str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        demo = start_demo(demo_env, port, workers=2)
        demo.wait(timeout=60)

    output = demo_log(var_dir)
    assert demo.returncode != 0
    assert f"Port {port} on 127.0.0.1 is already in use" in output
    assert f"make demo PORT={port + 1}" in output
    assert describe(processes_of(var_dir)) == []


def test_make_stop_stops_what_a_demo_killed_outright_left_behind(
    var_dir: Path, demo_env: dict[str, str]
) -> None:
    port = free_port()
    demo = start_demo(demo_env, port, workers=1)
    wait_until(demo_ready(var_dir, port, workers=1), "the demo to start")
    demo.kill()  # SIGKILL: no clean-up of its own
    demo.wait(timeout=30)
    # its web server, its worker, its notifier and the notifier's rq scheduler, embedded Redis
    # (the worker's model process has a clean environment: it dies with the worker)
    assert len(processes_of(var_dir)) == 5

    result = subprocess.run(
        ["make", "-s", "stop", f"VAR_DIR={var_dir}"], cwd=ROOT, capture_output=True, text=True
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Stopped: ")
    assert "demo-web (pid" in result.stdout and "demo-notifier (pid" in result.stdout
    assert describe(processes_of(var_dir)) == []
    assert not (var_dir / "redis" / "redis.pid").exists()


def test_a_management_command_stops_the_embedded_redis_it_started(
    var_dir: Path, demo_env: dict[str, str]
) -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=demo_env, capture_output=True
    )

    assert result.returncode == 0, result.stderr
    assert (var_dir / "redis" / "redis.log").exists()  # it did start one
    assert describe(processes_of(var_dir)) == []


def test_a_test_session_stops_the_embedded_redis_it_started(
    var_dir: Path, demo_env: dict[str, str]
) -> None:
    env = {k: v for k, v in demo_env.items() if k != "DEBUG"}  # tests run with DEBUG off
    pytest_command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [*pytest_command, "tests/portal/test_env.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )

    assert result.returncode == 0, result.stdout[-2000:]
    assert (var_dir / "redis" / "redis.log").exists()
    assert describe(processes_of(var_dir)) == []


def test_a_redis_started_by_someone_else_is_left_running(var_dir: Path) -> None:
    """Only the process that started the embedded Redis stops it: the demo's workers and a second
    command sharing the directory find it running and leave it for its owner."""
    from portal.embedded_redis import embedded_redis_stop, embedded_redis_url

    directory = var_dir / "redis"
    url = embedded_redis_url(directory)  # this test process starts it, so it owns it
    try:
        guest = subprocess.run(
            [sys.executable, "-c", _GUEST.format(directory=str(directory))],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert guest.returncode == 0, guest.stderr
        assert guest.stdout.strip() == url
        assert redis.Redis.from_url(url).ping()  # the guest's exit left it running
    finally:
        assert embedded_redis_stop(directory)


_GUEST = (
    "from pathlib import Path; from portal.embedded_redis import embedded_redis_url; "
    "print(embedded_redis_url(Path({directory!r})))"
)


def test_jobs_queued_before_the_embedded_redis_stops_are_there_when_it_starts_again(
    var_dir: Path,
) -> None:
    """`make demo` runs seed_demo (which queues the baselines and stops its Redis on exit) before
    rundemo starts it again: the queue is saved to var/ in between."""
    from portal.embedded_redis import embedded_redis_stop, embedded_redis_url

    directory = var_dir / "redis"
    redis.Redis.from_url(embedded_redis_url(directory)).rpush("rq:queue:evaluation", "job-1")
    assert embedded_redis_stop(directory)

    url = embedded_redis_url(directory)
    try:
        assert redis.Redis.from_url(url).lrange("rq:queue:evaluation", 0, -1) == [b"job-1"]
    finally:
        embedded_redis_stop(directory)
