"""Run a worker with the runner's clock recording when each batch ran: the tests' seam for
checking that one worker's batches never run inside another worker's timing window.

``python -m tests.evaluation.batch_recorder OUT manage.py rqworker ...`` runs the given
manage.py command line after wrapping ``evaluation.runner.perf_counter`` (the clock read at the
start and the end of every scored or timed batch) so that each call also appends the wall time
to OUT. The work horses forked by the worker inherit the wrapped clock.
"""

from __future__ import annotations

import runpy
import sys
import time

import evaluation.runner as runner


def record_to(path: str) -> None:
    clock, wall = runner.perf_counter, time.time

    def recording_clock() -> float:
        with open(path, "a") as out:  # appended at once: a killed horse loses nothing written
            out.write(f"{wall():.6f}\n")
        return clock()

    runner.perf_counter = recording_clock


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
