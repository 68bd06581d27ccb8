"""The model process server: a clean interpreter with the engine imported, that forks each model
process (``evaluation.model_process``) instead of a fresh interpreter exec'ing and importing
numpy and onnxruntime again for every job.

Started by the worker exactly as a model process is (``python -s -m evaluation.model_server``,
the same clean environment, no file descriptor but its control socket and stderr, dying with
the worker), it imports numpy, onnxruntime and the engine, creates no session and no thread,
and waits. For each request (a scratch directory, and the two ends of the model process's
channel passed as file descriptors) it forks a child that takes the channel as its stdin and
stdout, closes every other descriptor, dies with the server, and from then on is a model
process: it confines itself, warms up, serves one job and ends. The server reaps its children
and reports how each ended (the worker cannot wait for a grandchild). It never runs a model:
each child is a fresh fork of the same clean state.

``ModelServer`` is the worker's side; ``ForkedProcess`` a model process it started, with the
``poll``/``wait``/``kill`` of ``subprocess.Popen`` that ``evaluation.sandbox`` uses.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

PR_SET_PDEATHSIG = 1
MESSAGE_MAX = 1 << 16
STOP_WAIT_S = 10.0
SPAWN_WAIT_S = 60.0  # the first request waits for the server's imports


class ServerUnavailable(Exception):
    """The server is gone, or refused to fork: the caller starts the model process directly."""


# The server's side.


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def serve() -> None:
    """Import the engine, then fork a model process per request until the worker goes."""
    control = socket.socket(fileno=0)  # the worker's end of a SOCK_SEQPACKET pair
    os.dup2(2, 1)  # a library's print must not land anywhere but the log
    import numpy  # noqa: F401  (the model process's own imports, done once here)

    from evaluation import model_process

    base_vm = model_process._vm_size()  # what a model process maps before onnxruntime
    import onnxruntime  # noqa: F401

    from evaluation import runner, spec, timing  # noqa: F401

    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        ready, _, _ = select.select([control.fileno(), *children], [], [])
        for pidfd in [fd for fd in ready if fd in children]:
            _report_exit(control, children.pop(pidfd), pidfd)
        if control.fileno() in ready and not _answer(control, children, base_vm):
            break
    for pidfd, pid in children.items():  # the worker is gone: so are its model processes
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.waitpid(pid, 0)


def _report_exit(control: socket.socket, pid: int, pidfd: int) -> None:
    _, status, usage = os.wait4(pid, 0)
    os.close(pidfd)
    report = {"op": "exit", "pid": pid, "returncode": os.waitstatus_to_exitcode(status)}
    report["cpu_s"] = usage.ru_utime + usage.ru_stime
    with contextlib.suppress(OSError):
        control.send(json.dumps(report).encode())


def _answer(control: socket.socket, children: dict[int, int], base_vm: int) -> bool:
    """Fork the model process asked for; False once the worker has closed its end."""
    data, fds, _, _ = socket.recv_fds(control, MESSAGE_MAX, 2)
    if not data:
        return False
    request = json.loads(data)
    reply: dict[str, Any]
    try:
        if len(fds) != 2 or request.get("op") != "fork":
            reply = {"op": "refused", "why": "not a fork request with two descriptors"}
        elif _threads() != 1:  # a fork copies one thread: the locks of the others stay held
            reply = {"op": "refused", "why": f"the server runs {_threads()} threads"}
        else:
            pid = _fork(request["scratch"], fds[0], fds[1], base_vm)
            children[os.pidfd_open(pid)] = pid
            reply = {"op": "forked", "pid": pid}
    finally:
        for fd in fds:
            os.close(fd)
    control.send(json.dumps(reply).encode())
    return True


def _fork(scratch: str, read_fd: int, write_fd: int, base_vm: int) -> int:
    server = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: from here on a model process, as one started by exec would be
        _die_with(server)
        os.chdir(scratch)
        os.environ.update(HOME=scratch, TMPDIR=scratch)
        os.dup2(read_fd, 0)
        os.dup2(write_fd, 1)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the server's socket, its other children's
        _reseed()
        from evaluation import model_process

        model_process.main(base_vm)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(70)


def _die_with(server: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != server:  # the server died before the line above
        os._exit(70)


def _reseed() -> None:
    """A fork copies its parent's random state: each model process gets fresh entropy, as a
    fresh interpreter would."""
    import numpy as np

    random.seed()
    np.random.seed()


# The worker's side.


class ModelServer:
    """The worker's model process server: started at once; ``spawn`` a model process, ``stop``."""

    def __init__(self, env: Mapping[str, str], cwd: str, preexec_fn: Callable[[], None]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = ours
        self.lock = threading.Lock()  # a cancel (rq's command thread) asks how a process ended
        self.exits: dict[int, tuple[int, float]] = {}  # pid -> (returncode, CPU seconds)
        self.gone = False
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-s", "-m", "evaluation.model_server"],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                env=dict(env),
                cwd=cwd,
                close_fds=True,
                preexec_fn=preexec_fn,
            )

    def alive(self) -> bool:
        return not self.gone and self.process.poll() is None

    def spawn(self, scratch: str, read_fd: int, write_fd: int) -> ForkedProcess:
        """A model process forked with this channel (the worker keeps its own ends)."""
        request = json.dumps({"op": "fork", "scratch": scratch}).encode()
        with self.lock:
            try:
                socket.send_fds(self.control, [request], [read_fd, write_fd])
                reply = self._next_reply(time.monotonic() + SPAWN_WAIT_S)
            except OSError as exc:
                self.gone = True
                raise ServerUnavailable(f"the model process server is gone ({exc})") from exc
            if reply.get("op") != "forked":
                raise ServerUnavailable(f"the model process server refused: {reply.get('why')}")
            pid = int(reply["pid"])
            self.exits.pop(pid, None)  # an earlier process's, whose pid this one reuses
        return ForkedProcess(self, pid)

    def _next_reply(self, deadline: float) -> dict[str, Any]:
        while True:
            message = self._read(max(deadline - time.monotonic(), 0.0))
            if message is None:
                self.gone = True  # gone, or so slow that the worker starts its own
                raise ServerUnavailable("the model process server is gone or does not answer")
            if message.get("op") != "exit":
                return message

    def _read(self, timeout_s: float | None) -> dict[str, Any] | None:
        """One message (exit reports kept aside); None when the server is gone or, with a
        timeout, nothing came."""
        ready, _, _ = select.select([self.control], [], [], timeout_s)
        if not ready:
            return None
        data = self.control.recv(MESSAGE_MAX)
        if not data:
            self.gone = True
            return None
        message: dict[str, Any] = json.loads(data)
        if message.get("op") == "exit":
            self.exits[int(message["pid"])] = (
                int(message["returncode"]),
                float(message["cpu_s"]),
            )
        return message

    def exit_of(self, pid: int, timeout_s: float) -> tuple[int, float] | None:
        """How the model process ``pid`` ended, as the server reports it once it reaped it."""
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while pid not in self.exits and not self.gone:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._read(left)
            return self.exits.get(pid)

    def forget(self, pid: int) -> None:
        with self.lock:
            self.exits.pop(pid, None)

    def stop(self) -> None:
        """Close the control socket: the server kills and reaps its children, then exits."""
        self.gone = True
        with contextlib.suppress(OSError):
            self.control.close()
        try:
            self.process.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ForkedProcess:
    """A model process the server forked: watched through a pidfd (it is not our child), its
    end reported by the server."""

    def __init__(self, server: ModelServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None
        self.cpu_s: float | None = None
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # it ended at once and the server has reaped it already
            self.pidfd = None

    def poll(self) -> int | None:
        if self.returncode is None and (self.pidfd is None or _readable(self.pidfd, 0)):
            self._ended(STOP_WAIT_S)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if self.pidfd is not None and not _readable(self.pidfd, timeout):
                raise subprocess.TimeoutExpired("model process", timeout or 0.0)
            self._ended(STOP_WAIT_S)
        assert self.returncode is not None
        return self.returncode

    def _ended(self, timeout_s: float) -> None:
        """It has exited: its status from the server; should the server be gone, its children
        were killed with it."""
        found = self.server.exit_of(self.pid, timeout_s)
        self.returncode, self.cpu_s = found if found else (-signal.SIGKILL, None)

    def kill(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(ProcessLookupError):  # ended: the pidfd keeps its pid
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def close(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
        self.server.forget(self.pid)


def _readable(fd: int, timeout_s: float | None) -> bool:
    ready, _, _ = select.select([fd], [], [], timeout_s)
    return bool(ready)


if __name__ == "__main__":
    serve()
