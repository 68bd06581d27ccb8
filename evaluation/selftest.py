"""The CUDA self-test a worker runs at start: does a session on its GPU really run on CUDA?

onnxruntime-gpu lists the CUDA provider as available even when its CUDA or cuDNN libraries cannot
be loaded, and then quietly runs the session on CPU; the reason is only in its log. So the test
creates a tiny model's session with the CUDA provider first, reads ``session.get_providers()``,
runs it once, and keeps onnxruntime's own log lines (warning level and up) as the explanation.

It runs in a forked child: the worker must never initialise CUDA itself (a CUDA context does not
survive a fork, and the worker stays small), and the child's stderr, where onnxruntime's C++
logger writes, can be captured.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from evaluation.runner import CPU, CUDA

log = logging.getLogger(__name__)
TIMEOUT_S = 120.0  # the first CUDA session of a host loads cuDNN and builds its kernels: slow
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MISSING_LIBRARY = re.compile(r"Failed to load library (\S+) with error: ([^\n]+)")
_LOG_LINE = re.compile(r"\[([EW]):onnxruntime:[^\]]*\]\s*(.*)")


@dataclass(frozen=True)
class SelfTest:
    ok: bool
    provider: str  # the provider the session really ran on; "" when none was created
    problem: str = ""  # for operators: why CUDA is not used ("" when ok)


def tiny_model() -> bytes:
    """y = x + 1 on a float vector: enough for a session to be placed and run on a device."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    graph = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "t", [x], [y], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def session_providers(session: ort.InferenceSession) -> list[str]:
    """The providers a session really got. The one seam the tests fake, as they fake NVML:
    this machine has no GPU, so a session here can only ever report CPU."""
    return list(session.get_providers())


def probe(device_id: int) -> dict[str, Any]:
    """In the child: create and run a CUDA session; what it really ran on."""
    ort.set_default_logger_severity(2)  # warnings: the fallback explanation is a warning
    options = {"device_id": device_id, "arena_extend_strategy": "kSameAsRequested"}
    session = ort.InferenceSession(tiny_model(), providers=[(CUDA, options), CPU])
    providers = session_providers(session)
    out = session.run(None, {"x": np.arange(4, dtype=np.float32)})[0]
    if not np.array_equal(out, np.arange(1, 5, dtype=np.float32)):
        return {"providers": providers, "error": f"wrong result from the test model: {out}"}
    return {"providers": providers, "error": ""}


def explain(onnxruntime_log: str) -> str:
    """The most useful line of onnxruntime's log: the library that failed to load, if any."""
    text = _ANSI.sub("", onnxruntime_log)
    missing = _MISSING_LIBRARY.search(text)
    if missing:
        library, error = os.path.basename(missing.group(1)), missing.group(2).strip()
        return f"{library} could not be loaded: {error}"
    lines = [m.group(2).strip() for m in _LOG_LINE.finditer(text)]
    errors = [m.group(2).strip() for m in _LOG_LINE.finditer(text) if m.group(1) == "E"]
    return (errors or lines or [""])[-1]


def classify(providers: list[str], onnxruntime_log: str, error: str) -> SelfTest:
    """The self-test's outcome from what the child saw. Pure."""
    first = providers[0] if providers else ""
    if error:
        why = explain(onnxruntime_log)
        return SelfTest(
            ok=False,
            provider=first,
            problem=f"CUDA self-test failed: {error}" + (f" ({why})" if why else ""),
        )
    if first == CUDA:
        return SelfTest(ok=True, provider=first)
    why = explain(onnxruntime_log) or "onnxruntime gave no reason"
    return SelfTest(
        ok=False,
        provider=first,
        problem=f"CUDA self-test: the session ran on {first or 'no provider'}, not CUDA: {why}",
    )


def _child(write_fd: int, log_path: str, device_id: int) -> None:
    """Never returns: reports on the pipe and leaves without running the parent's exit code."""
    code = 0
    try:
        with open(log_path, "wb") as sink:
            os.dup2(sink.fileno(), 2)
        try:
            report = probe(device_id)
        except Exception as exc:  # onnxruntime's pybind errors: no common base class
            report = {"providers": [], "error": f"{type(exc).__name__}: {exc}"}
        os.write(write_fd, json.dumps(report).encode())
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _read_report(read_fd: int, pid: int, timeout_s: float) -> tuple[bytes, str]:
    """The child's report, or an empty one and why, killing a child that hangs."""
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return b"", f"the self-test did not finish in {timeout_s:g} s"
        ready, _, _ = select.select([read_fd], [], [], left)
        if ready:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return b"", f"the self-test process died with signal {os.WTERMSIG(status)}"
    return b"".join(chunks), ""


def run_selftest(*, device_id: int = 0, timeout_s: float = TIMEOUT_S) -> SelfTest:
    """Fork, probe CUDA in the child, and classify what it saw; never initialises CUDA here."""
    with tempfile.NamedTemporaryFile(prefix="cuda-selftest-", suffix=".log") as log_file:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child leaves through os._exit
            os.close(read_fd)
            _child(write_fd, log_file.name, device_id)
        os.close(write_fd)
        try:
            raw, died = _read_report(read_fd, pid, timeout_s)
        finally:
            os.close(read_fd)
        onnxruntime_log = open(log_file.name, errors="replace").read()  # noqa: SIM115
    if died or not raw:
        return classify([], onnxruntime_log, died or "the self-test process exited early")
    report = json.loads(raw)
    result = classify(report["providers"], onnxruntime_log, report["error"])
    if not result.ok:
        log.debug("CUDA self-test log:\n%s", _ANSI.sub("", onnxruntime_log))
    return result
