"""The production stack, built and run on this machine: `make stack-test` (docs/operations.md).

It builds the images, brings docker-compose.yml up with compose.override.yml (which swaps only
what cannot be pulled here), and does what an operator and a participant would: migrate and
create the demo, upload a model through the API, see the containerised CPU worker score it, read
the board, restart the web, worker and database containers and find nothing lost; then `down`
removes every container, network and volume of its compose project. One line per step; the
first failure stops it with exit status 1, after the same clean-up.

Python's standard library only, so that it runs from a fresh clone. As root it installs what is
missing (the Docker engine, a Compose implementation, debootstrap) from Debian's packages; it
starts dockerd when no daemon answers and stops it again at the end. The images and the local
base are kept for the next run (`docker image ls 'portal-stack-test-*'`).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PROJECT = "portal-stack-test"
BASE = "portal-stack-test-base:bookworm"
PACKAGES = {"dockerd": "docker.io", "debootstrap": "debootstrap"}
COMPOSE_PACKAGE = "docker-compose"
# Host ports that nothing else here uses (the site; PostgreSQL, Redis and S3 on loopback).
PORTS = {
    "WEB_PORT": 18471,
    "POSTGRES_PUBLISH_PORT": 18472,
    "REDIS_PUBLISH_PORT": 18473,
    "MINIO_PUBLISH_PORT": 18474,
    "MINIO_CONSOLE_PUBLISH_PORT": 18475,
}
SITE = f"http://127.0.0.1:{PORTS['WEB_PORT']}"
LONG_RUNNING = ["postgres", "redis", "minio", "web", "notifier", "worker-cpu"]
HEALTH_TIMEOUT_S = 300
SCORE_TIMEOUT_S = 900


class Failed(Exception):
    """A step failed; the message says why."""


def run(*command: str, timeout: float = 1800) -> str:
    done = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()[-25:]
        raise Failed(f"`{' '.join(command)}` exited {done.returncode}:\n  " + "\n  ".join(tail))
    return done.stdout.decode(errors="replace")


def succeeds(*command: str) -> bool:
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 2) -> Any:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            result = check()
        except Failed as exc:
            last = str(exc)
        else:
            if result:
                return result
        time.sleep(every)
    raise Failed(f"{what}: not after {timeout:.0f} s" + (f" ({last})" if last else ""))


class Stack:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.compose: list[str] = []
        self.daemon: subprocess.Popen[bytes] | None = None
        self.env_file = workdir / "stack.env"

    # --- tools and daemon --------------------------------------------------------------

    def install_tools(self) -> str:
        missing = [pkg for tool, pkg in PACKAGES.items() if not shutil.which(tool)]
        if self._compose_command() is None:
            missing.append(COMPOSE_PACKAGE)
        if missing:
            command = f"apt-get install -y --no-install-recommends {' '.join(missing)}"
            if os.geteuid() != 0:
                raise Failed(f"missing {', '.join(missing)}: as root, run `{command}`")
            run("apt-get", "update", "-qq")
            run(*command.split(), timeout=1200)
        self.compose = self._compose_command() or []
        if not self.compose:
            raise Failed("no Compose implementation after installing one")
        version = run(*self.compose, "version", "--short").strip()
        return f"{'installed ' + ', '.join(missing) + '; ' if missing else ''}compose {version}"

    @staticmethod
    def _compose_command() -> list[str] | None:
        docker = shutil.which("docker")
        if docker and succeeds(docker, "compose", "version"):
            return [docker, "compose"]
        legacy = shutil.which("docker-compose")
        return [legacy] if legacy else None

    def start_daemon(self) -> str:
        if self._daemon_answers():
            return "already running"
        if os.geteuid() != 0:
            raise Failed("no Docker daemon answers: as root, run `dockerd &`")
        log = (self.workdir / "dockerd.log").open("wb")
        self.daemon = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT)
        wait_for("dockerd answering", self._daemon_answers, timeout=60, every=1)
        return f"started dockerd (pid {self.daemon.pid}; stopped at the end)"

    @staticmethod
    def _daemon_answers() -> bool:
        return succeeds("docker", "info")

    def stop_daemon(self) -> None:
        if self.daemon is None:
            return
        self.daemon.terminate()
        try:
            self.daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        self.daemon = None

    # --- images -----------------------------------------------------------------------

    def build_base(self) -> str:
        """A Debian bookworm minbase image, trusting what this machine trusts (pip inside the
        builds goes through the same TLS as pip here)."""
        if succeeds("docker", "image", "inspect", BASE):
            return f"{BASE} (kept from an earlier run)"
        rootfs = self.workdir / "rootfs"
        run("debootstrap", "--variant=minbase", "bookworm", str(rootfs), timeout=900)
        shutil.copy("/etc/ssl/certs/ca-certificates.crt", rootfs / "etc/host-ca-certificates.crt")
        (rootfs / "etc/pip.conf").write_text("[global]\ncert = /etc/host-ca-certificates.crt\n")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "-", BASE], stdin=tar.stdout, capture_output=True, check=False
        )
        assert tar.stdout is not None
        tar.stdout.close()
        tar.wait()
        if tar.returncode or imported.returncode:
            raise Failed(f"docker import: {imported.stderr.decode(errors='replace')}")
        shutil.rmtree(rootfs)
        return f"{BASE} (debootstrap --variant=minbase bookworm, docker import)"

    def write_env(self) -> None:
        values = {
            "SECRET_KEY": secrets.token_hex(32),
            "POSTGRES_PASSWORD": secrets.token_hex(12),
            "REDIS_PASSWORD": secrets.token_hex(12),
            "AWS_ACCESS_KEY_ID": "stack-test",
            "AWS_SECRET_ACCESS_KEY": secrets.token_hex(12),
            "STACK_TEST_BASE": BASE,
            "WEB_IMAGE": "portal-stack-test-web:latest",
            "CPU_WORKER_IMAGE": "portal-stack-test-worker-cpu:latest",
            "COMPOSE_PROFILES": "cpu",
            "WORKER_HOST": "stack-test",
            "WEB_CONCURRENCY": "2",
            **{name: str(port) for name, port in PORTS.items()},
        }
        self.env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def dc(self, *args: str, timeout: float = 1800) -> str:
        files = ["-f", str(ROOT / "docker-compose.yml"), "-f", str(HERE / "compose.override.yml")]
        base = [*self.compose, "--project-name", PROJECT, "--env-file", str(self.env_file)]
        return run(*base, "--profile", "cpu", *files, *args, timeout=timeout)

    # --- state ------------------------------------------------------------------------

    def container(self, service: str) -> str:
        ids = self.dc("ps", "-q", service).split()
        if not ids:
            raise Failed(f"no container for {service}")
        return ids[0]

    def state(self, service: str) -> dict[str, Any]:
        inspected = json.loads(run("docker", "inspect", self.container(service)))
        return dict(inspected[0]["State"])

    def wait_healthy(self) -> str:
        started = time.monotonic()
        for one_shot in ("createbucket", "migrate"):
            state = wait_for(f"{one_shot} exits", partial(self._exited, one_shot), 300)
            if state["ExitCode"] != 0:
                raise Failed(f"{one_shot} exited {state['ExitCode']}: {self._logs(one_shot)}")
        for service in LONG_RUNNING:
            wait_for(f"{service} healthy", partial(self._healthy, service), HEALTH_TIMEOUT_S)
        return f"{', '.join(LONG_RUNNING)} healthy after {time.monotonic() - started:.0f} s"

    def users(self) -> str:
        """Every long-running container runs as a user other than root."""
        users = {}
        for service in LONG_RUNNING:
            uid = run("docker", "exec", self.container(service), "id", "-u").strip()
            if uid == "0":
                raise Failed(f"{service} runs as root")
            users[service] = uid
        return ", ".join(f"{service} {uid}" for service, uid in users.items())

    def _exited(self, service: str) -> dict[str, Any] | None:
        ids = self.dc("ps", "-a", "-q", service).split()
        if not ids:
            return None
        state = dict(json.loads(run("docker", "inspect", ids[0]))[0]["State"])
        return state if state["Status"] == "exited" else None

    def _healthy(self, service: str) -> bool:
        state = self.state(service)
        if state["Status"] in ("exited", "dead"):
            raise Failed(f"{service} stopped: {self._logs(service)}")
        return bool(state.get("Health", {}).get("Status") == "healthy")

    def _logs(self, service: str) -> str:
        with suppress(Failed):
            return self.dc("logs", "--no-color", "--tail", "20", service)
        return "(no logs)"

    def manage(self, *args: str) -> str:
        return self.dc("exec", "-T", "web", "python", "manage.py", *args)

    def leftovers(self) -> list[str]:
        label = f"label=com.docker.compose.project={PROJECT}"
        found = []
        for kind, command in [
            ("container", ["docker", "ps", "-a", "-q", "--filter", label]),
            ("network", ["docker", "network", "ls", "-q", "--filter", label]),
            ("volume", ["docker", "volume", "ls", "-q", "--filter", label]),
        ]:
            found += [f"{kind} {name}" for name in run(*command).split()]
        return found

    def down(self) -> None:
        self.dc("down", "--volumes", "--remove-orphans", "--timeout", "60", timeout=600)


# --- the participant, over HTTP ------------------------------------------------------------


def http(method: str, path: str, token: str = "", **form: str) -> Any:
    # The site sits behind a TLS proxy in production (SECURE_SSL_REDIRECT); this is that proxy.
    headers = {"X-Forwarded-Proto": "https", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    body = None
    if form:
        body = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    return _send(urllib.request.Request(SITE + path, body, headers, method=method))


def upload(token: str, task: str, name: str, model: bytes) -> Any:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="task"\r\n\r\n{task}\r\n'.encode(),
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode(),
        model,
        f"\r\n--{boundary}--\r\n".encode(),
    ]
    headers = {
        "X-Forwarded-Proto": "https",
        "Authorization": f"Token {token}",
        "Content-Type": f"multipart/form-data; boundary={boundary}",
    }
    request = urllib.request.Request(SITE + "/api/submissions/", b"".join(parts), headers)
    return _send(request)


def _send(request: urllib.request.Request) -> Any:
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise Failed(
            f"{request.method} {request.full_url}: {exc.code} {exc.read()[:500]!r}"
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise Failed(f"{request.method} {request.full_url}: {exc}") from exc


# A digits classifier of our own (nearest class mean), made in the web container from the
# demo's training rows: any other participant's file would be refused as a duplicate.
MODEL_SCRIPT = """
import base64
import numpy as np
from submissions.demo import baselines, datasets
train = datasets.load_digits_train()
x = train["inputs"].reshape(len(train["inputs"]), -1).astype(np.float64)
y = train["targets"]
means = np.stack([x[y == k].mean(axis=0) for k in range(10)])
weight, bias = 2.0 * means.T, -(means**2).sum(axis=1)
model = baselines.linear_model(weight, bias, baselines.DIGITS_INPUT_SHAPE, "stack_test")
print(base64.b64encode(model).decode())
"""

WAITING = (
    "from submissions.models import Submission; "
    "print(Submission.objects.filter(status__in=['queued', 'running']).count())"
)
WORKER_OF = (
    "from submissions.models import Submission; print(Submission.objects.get(pk={id}).worker_name)"
)

# --- the steps ------------------------------------------------------------------------------


class Smoke:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.token = ""
        self.submission: dict[str, Any] = {}
        self.board: list[dict[str, Any]] = []

    def images(self) -> str:
        self.stack.write_env()
        self.stack.dc("build", timeout=3600)
        tags = run("docker", "image", "ls", "--format", "{{.Repository}}", "portal-stack-test-*")
        return "built " + ", ".join(sorted(set(tags.split()) - {BASE.split(":")[0]}))

    def up(self) -> str:
        self.stack.dc("up", "-d", timeout=900)
        return f"compose project {PROJECT}, site on {SITE}"

    def migrate(self) -> str:
        out = self.stack.manage("migrate", "--noinput")
        return out.strip().splitlines()[-1].strip()

    def demo(self) -> str:
        return self.stack.manage("seed_demo").strip().splitlines()[-1]

    def upload(self) -> str:
        self.token = http("POST", "/api/auth/token/", username="alice", password="alice-demo-pass")[
            "token"
        ]
        model = base64.b64decode(self.stack.dc("exec", "-T", "web", "python", "-c", MODEL_SCRIPT))
        created = upload(self.token, "digits", "stack-test.onnx", model)
        self.submission = created
        return f"submission {created['id']} ({len(model)} bytes) {created['status']}"

    def scored(self) -> str:
        path = f"/api/submissions/{self.submission['id']}/"

        def final() -> Any:
            got = http("GET", path, self.token)
            return got if got["status"] in ("succeeded", "failed", "cancelled") else None

        got = wait_for("the upload scored", final, SCORE_TIMEOUT_S, every=5)
        if got["status"] != "succeeded":
            raise Failed(f"submission {got['id']} {got['status']}: {got.get('error_message')}")
        # Which worker ran it is for operators' eyes: the admin's, here the shell's.
        worker = self.stack.manage(
            "shell", "--verbosity", "0", "-c", WORKER_OF.format(id=got["id"])
        ).strip()
        if not worker.startswith("stack-test-cpu-"):
            raise Failed(f"scored by {worker!r}, not the compose project's worker-cpu")
        self.submission = got
        return f"succeeded, score {got['score']}, by {worker}"

    def read_board(self) -> str:
        # The demo's baselines first: the board stays as it is from then on.
        wait_for("the demo's baselines scored", self._queue_empty, SCORE_TIMEOUT_S, every=5)
        board = http("GET", "/api/tasks/digits/leaderboard/", self.token)
        self.board = [row for row in board["rows"] if row.get("user") == "alice"]
        if not self.board:
            raise Failed(f"alice is not on the digits board: {board['rows']}")
        return f"{board['count']} rows; alice ranked {self.board[0].get('rank')}"

    def _queue_empty(self) -> bool:
        return self.stack.manage("shell", "--verbosity", "0", "-c", WAITING).strip() == "0"

    def restart(self) -> str:
        self.stack.dc("restart", "web", "worker-cpu", "postgres", timeout=600)
        return self.stack.wait_healthy()

    def nothing_lost(self) -> str:
        again = http("GET", f"/api/submissions/{self.submission['id']}/", self.token)
        for field in ("status", "score", "finished_at", "sha256"):
            if again[field] != self.submission[field]:
                raise Failed(f"{field}: {self.submission[field]!r} before, {again[field]!r} after")
        rows = http("GET", "/api/tasks/digits/leaderboard/", self.token)["rows"]
        if [row for row in rows if row.get("user") == "alice"] != self.board:
            raise Failed(f"alice's row changed across the restart: {self.board} -> {rows}")
        fresh = http("POST", "/api/auth/token/", username="alice", password="alice-demo-pass")
        return (
            f"submission, board ({len(rows)} rows) and logins as before (token {fresh['prefix']})"
        )

    def down(self) -> str:
        self.stack.down()
        left = self.stack.leftovers()
        if left:
            raise Failed(f"left behind: {', '.join(left)}")
        return "no container, network or volume of the project left"


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stack-test-") as tmp:
        stack = Stack(Path(tmp))
        smoke = Smoke(stack)
        steps: list[tuple[str, Callable[[], str]]] = [
            ("tools", stack.install_tools),
            ("docker daemon", stack.start_daemon),
            ("local base image", stack.build_base),
            ("project images", smoke.images),
            ("compose up", smoke.up),
            ("health checks", stack.wait_healthy),
            ("non-root users", stack.users),
            ("migrate", smoke.migrate),
            ("demo", smoke.demo),
            ("upload through the API", smoke.upload),
            ("scored by the worker", smoke.scored),
            ("board", smoke.read_board),
            ("restart web, worker, database", smoke.restart),
            ("nothing lost", smoke.nothing_lost),
            ("compose down", smoke.down),
        ]
        with cleanup(stack):
            for number, (name, step) in enumerate(steps, 1):
                began = time.monotonic()
                try:
                    said = step()
                except Exception as exc:  # any error, ours or not, stops the run here
                    print(f"[{number:2}/{len(steps)}] {name}: FAILED: {exc!s}", flush=True)
                    if not isinstance(exc, Failed):
                        traceback.print_exc()
                    return 1
                took = time.monotonic() - began
                print(f"[{number:2}/{len(steps)}] {name}: ok ({took:.0f} s): {said}", flush=True)
    print(f"stack test passed in {time.monotonic() - started:.0f} s")
    return 0


@contextmanager
def cleanup(stack: Stack) -> Iterator[None]:
    """Whatever happens (a failure, Ctrl-C), the project goes down and our dockerd stops."""
    try:
        yield
    finally:
        if stack.compose and stack.env_file.exists() and stack._daemon_answers():
            with suppress(Failed, subprocess.TimeoutExpired):
                if stack.leftovers():
                    stack.down()
        stack.stop_daemon()


if __name__ == "__main__":
    sys.exit(main())
