"""Record when each run of a model happened, inside a worker's model processes: the tests' seam
for checking that one worker's batches never run inside another worker's timing window.

A worker started with ``EVAL_SANDBOX_TEST_HOOK=RECORDING_HOOK`` runs it in each model process
before the model's session is made: it wraps ``onnxruntime.InferenceSession.run`` (on the CPU
provider the warm-up, scored and timed batches alike) so that each call writes
the wall time at its start and at its end to stderr, which is the worker's log (the confined
process can write nowhere else). ``recorded`` reads them back from that log.
"""

from __future__ import annotations

import re
from pathlib import Path

RECORDING_HOOK = r"""
import functools, sys, time
import onnxruntime as ort

def _mark():
    sys.stderr.write(f"batch-run-at {time.time():.6f}\n")
    sys.stderr.flush()

def _recording(run):
    @functools.wraps(run)
    def recording_run(*args, **kwargs):
        _mark()
        try:
            return run(*args, **kwargs)
        finally:
            _mark()
    return recording_run

ort.InferenceSession.run = _recording(ort.InferenceSession.run)
"""
_MARK = re.compile(r"^batch-run-at (\d+\.\d+)$", re.MULTILINE)


def recorded(log_path: Path) -> list[float]:
    """The times the recording hook wrote to a worker's log, in order."""
    try:
        return [float(t) for t in _MARK.findall(log_path.read_text(errors="replace"))]
    except FileNotFoundError:
        return []
