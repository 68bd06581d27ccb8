"""Inspection in a short-lived process of its own: ``inspect_out_of_process`` gives the verdict of
``inspect_model`` without parsing the model in the caller.

Parsing a model, inferring its shapes and counting its costs hold the whole graph in memory,
about twice the file's size. A web process that did it would keep much of that memory after
the request (the allocator does not give it back), per concurrent upload. Here a fresh Python
process (exec'd, not forked from a large parent) does the work and exits, and its memory goes
back to the system with it.

The parent sends the task's spec (pickle: the child trusts its parent) and the file's path; the
child answers one JSON line (never pickle: it has parsed an untrusted file). Run as
``python -m evaluation.inspect_process PATH`` with the pickled spec on stdin.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evaluation.costs import StaticCosts
from evaluation.inspect import ModelInfo, ModelRejected, inspect_model
from evaluation.spec import TaskSpec

ROOT = Path(__file__).resolve().parent.parent
# The largest model the portal takes (2 GiB) parses, infers and counts well within this.
INSPECT_TIMEOUT_S = 600
# Environment the child may see: locale and library paths, none of the web's secrets; it parses
# a file a stranger wrote.
PASSED_ENV = ("LD_LIBRARY_PATH", "LANG", "TZ", "PATH")
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class InspectionFailed(RuntimeError):
    """The inspecting process failed on our side (a bug): not the submitter's to fix."""


def _environment() -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env.update(SINGLE_THREADED)
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    return env


def _info_from(found: dict[str, Any]) -> ModelInfo:
    """The ModelInfo the child found, rebuilt from JSON (its lists back into tuples)."""
    costs = found.pop("costs")
    if costs is not None:
        costs["not_counted"] = tuple(tuple(pair) for pair in costs["not_counted"])
        costs = StaticCosts(**costs)
    return ModelInfo(**found, costs=costs)


def _ended_abnormally(returncode: int, stderr: str) -> Exception:
    if returncode < 0:  # killed: out of memory, or a crash in a parser the file may have caused
        name = signal.Signals(-returncode).name
        return ModelRejected(
            f"The model could not be inspected: the inspection ended with {name}. Check that "
            "it loads with onnx.load and onnx.checker.check_model, then upload it again."
        )
    return InspectionFailed(f"inspection exited with status {returncode}: {stderr[-2000:]}")


def inspect_out_of_process(
    path: Path, spec: TaskSpec, *, timeout_s: float = INSPECT_TIMEOUT_S
) -> ModelInfo:
    """``inspect_model(path, spec)``, run in a child process: the same ModelInfo, or the same
    ModelRejected. Raises InspectionFailed when the child fails for a reason of ours."""
    command = [sys.executable, "-s", "-m", "evaluation.inspect_process", str(path)]
    try:
        done = subprocess.run(
            command,
            input=pickle.dumps(spec),
            capture_output=True,
            env=_environment(),
            cwd=ROOT,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:  # subprocess.run has killed and reaped the child
        raise ModelRejected(
            f"The model could not be inspected within {timeout_s:.0f} s; it is too complex "
            "to accept."
        ) from None
    stderr = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        raise _ended_abnormally(done.returncode, stderr)
    verdict = json.loads(done.stdout)
    if "refused" in verdict:
        raise ModelRejected(verdict["refused"])
    return _info_from(verdict["info"])


def main() -> None:
    spec = pickle.loads(sys.stdin.buffer.read())
    assert isinstance(spec, TaskSpec)
    try:
        verdict: dict[str, Any] = {"info": asdict(inspect_model(Path(sys.argv[1]), spec))}
    except ModelRejected as exc:
        verdict = {"refused": str(exc)}
    sys.stdout.write(json.dumps(verdict))


if __name__ == "__main__":
    main()
