"""Run a worker with onnxruntime recording when each run of a model happened: the tests' seam for
checking that one worker's batches never run inside another worker's timing window.

``python -m tests.workers.batch_recorder OUT manage.py rqworker ...`` runs the given
manage.py command line after wrapping ``onnxruntime.InferenceSession.run`` (the timed batches on
the CPU provider) and the compiled run the runner scores with (``evaluation.runner._compiled_run``:
the warm-up and scored batches) so that each call appends the wall time at its start and at its
end to OUT. The work horses forked by the worker inherit the wrapped functions.
"""

from __future__ import annotations

import functools
import runpy
import sys
import time
from collections.abc import Callable
from typing import Any

import onnxruntime as ort


def _append(path: str) -> None:
    with open(path, "a") as out:  # appended at once: a killed horse loses nothing written
        out.write(f"{time.time():.6f}\n")


def _recording(run: Callable[..., Any], path: str) -> Callable[..., Any]:
    @functools.wraps(run)
    def recording_run(*args: Any, **kwargs: Any) -> Any:
        _append(path)
        try:
            return run(*args, **kwargs)
        finally:
            _append(path)

    return recording_run


def record_to(path: str) -> None:
    from evaluation import runner

    ort.InferenceSession.run = _recording(ort.InferenceSession.run, path)  # type: ignore[method-assign]
    compiled_run = runner._compiled_run
    runner._compiled_run = lambda session: _recording(compiled_run(session), path)


def recorded(path: str) -> list[float]:
    try:
        with open(path) as lines:
            return [float(line) for line in lines if line.strip()]
    except FileNotFoundError:
        return []


if __name__ == "__main__":
    out, script, *args = sys.argv[1:]
    record_to(out)
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")
