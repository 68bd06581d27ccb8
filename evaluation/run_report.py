"""The participant's run report (issue 42): what onnxruntime said about their model, which
execution provider each node ran on, and a per-operator time profile of one batch.

Made in the model's process (``evaluation.model_process``), after the predictions and in their
scoring turn (before the timing phase), with a session of its own that onnxruntime's profiler
records: a warm-up run, then one profiled batch.
What onnxruntime writes to stderr while the model's sessions are made and run is captured
(``engine_log``) and kept to its own lines, with every absolute path cut to its last part, so the
report names no host, worker or other participant's detail.

On a GPU the profiler's time of a node is what launching its kernels took on the host, not their
time on the device (onnxruntime's GPU-side profiling is a build option the wheels leave out): the
report says so.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

LINES_KEPT = 50
OPERATORS_KEPT = 15
LOG_BYTES = 256 << 10
_ENGINE_LINE = re.compile(r"\[([EWIV]):onnxruntime:[^\]]*\]\s*(.*)")
_PATH = re.compile(r"(?<![\w.])/(?:[^\s/:'\"]+/)+([^\s/:'\"]*)")
_MEMCPY = ("MemcpyToHost", "MemcpyFromHost")


def _plain(line: str) -> str:
    """An engine log line without absolute paths (only their last part) or colour codes."""
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    return _PATH.sub(lambda m: m.group(1), line).strip()


def engine_lines(text: str) -> list[dict[str, str]]:
    """onnxruntime's own lines (its severity letter and message), at most LINES_KEPT."""
    found = []
    for raw in text.splitlines():
        match = _ENGINE_LINE.search(raw)
        if match:
            level = {"E": "error", "W": "warning", "I": "info", "V": "verbose"}[match.group(1)]
            found.append({"level": level, "text": _plain(match.group(2))[:500]})
    return found[:LINES_KEPT]


class EngineLog:
    """What was written to this process's stderr (fd 2) while ``capture`` ran: onnxruntime's
    native logger writes there, out of Python's reach. It is passed on to the real stderr too,
    so the worker's log keeps it."""

    def __init__(self) -> None:
        self.text = ""

    @contextlib.contextmanager
    def capture(self) -> Iterator[EngineLog]:
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield self
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                data = sink.read(LOG_BYTES)
                if data:
                    os.write(2, data)
                self.text += data.decode("utf-8", "replace")

    def lines(self) -> list[dict[str, str]]:
        return engine_lines(self.text)


def _last_run_nodes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The node events of the profile's last model run."""
    runs = [e for e in events if e.get("name") == "model_run"]
    if not runs:
        return []
    last = runs[-1]
    start, end = last["ts"], last["ts"] + last["dur"]
    return [
        e
        for e in events
        if e.get("cat") == "Node"
        and str(e.get("name", "")).endswith("_kernel_time")
        and start <= e.get("ts", -1) <= end
    ]


def summarise_profile(events: list[dict[str, Any]], main_provider: str) -> dict[str, Any]:
    """Nodes per execution provider, the operators placed off the main provider, and time per
    operator type, largest first."""
    nodes = _last_run_nodes(events)
    providers = collections.Counter(str(e["args"].get("provider", "")) for e in nodes)
    off_main_nodes = [
        e
        for e in nodes
        if e["args"].get("provider") != main_provider and e["args"].get("op_name") not in _MEMCPY
    ]
    off_main = sorted({str(e["args"].get("op_name", "")) for e in off_main_nodes})
    by_op: dict[str, list[float]] = collections.defaultdict(list)
    for e in nodes:
        by_op[str(e["args"].get("op_name", "?"))].append(float(e.get("dur", 0)))
    total = sum(sum(v) for v in by_op.values())
    off_main_us = sum(float(e.get("dur", 0)) for e in off_main_nodes)
    operators = [
        {
            "op": op,
            "nodes": len(durations),
            "us": round(sum(durations), 1),
            "share": round(sum(durations) / total, 4) if total else 0.0,
        }
        for op, durations in sorted(by_op.items(), key=lambda kv: -sum(kv[1]))
    ]
    return {
        "providers": dict(providers),
        "off_main_provider": off_main,
        "off_main_share": round(off_main_us / total, 4) if total else 0.0,
        "operators": operators[:OPERATORS_KEPT],
        "operators_left_out": max(0, len(operators) - OPERATORS_KEPT),
        "batch_us": round(total, 1),
    }


def profile_one_batch(
    model_bytes: bytes, batch: np.ndarray, device: Any, scratch: str
) -> dict[str, Any]:
    """The model's nodes on one batch, with onnxruntime's profiler and warnings on."""
    import onnxruntime as ort

    options = device.session_options()
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(scratch, "profile")
    options.log_severity_level = 2  # warnings: what onnxruntime says about the model
    log = EngineLog()
    with log.capture():
        session = ort.InferenceSession(model_bytes, options, providers=device.providers())
        feed = {session.get_inputs()[0].name: batch}
        session.run(None, feed)  # the warm-up; the report takes the last run
        session.run(None, feed)
        path = session.end_profiling()
    with open(path) as profile:
        events = json.load(profile)
    os.unlink(path)
    main = session.get_providers()[0]
    report = summarise_profile(events, main)
    report["main_provider"] = main
    report["warnings"] = [line["text"] for line in log.lines() if line["level"] == "warning"]
    report["host_time_only"] = main != "CPUExecutionProvider"
    return report
