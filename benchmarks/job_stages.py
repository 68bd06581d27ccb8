"""Where one evaluation's time goes: the stages of a worker's job, timed in process, against the
floor's whole job on the same model.

Issue 40 asks where the rest goes once the portal's submit-to-scored is set beside the bare rq +
onnxruntime floor's. This runs the worker's job function (``workers.jobs.evaluate_submission``)
in this process, as an rq worker calls it, on the bench's digits task with the timing phase cut
to one batch (``floor_bench.MINIMAL_TIMING``), each job's model process started ahead and warmed
as an idle worker does, and times each stage from the job's start:

- claimed: ``submission_start`` (queued → running, the row and its task read back);
- evaluated: the model process's run (the job and its arrays sent, the session, warm-up,
  scoring, the one-batch timing under the device's lock, the run report's profile of a batch,
  the predictions back) and the scores computed here (``_evaluate``);
- saved: ``submission_succeed`` (the result, its board refresh owed, its notification);
- reaped: the model process's exit;
- board refreshed: the read models of the task's boards (``refresh_boards``), after the result
  is visible to its submitter;
- next started ahead: the next model process forked, confined and warmed, while the worker is
  idle (not on a submission's path).

The floor's figure is ``floor_job.score`` (load the model and data, a session made as ours,
warm-up, every row) timed in this process, as its work horse runs it. Each figure is the median
of ``--jobs`` after ``--warm`` unrecorded ones. It creates ``bench-user`` and ``bench-digits``
and deletes them; run it against a database and Redis that no worker serves.

Run: ``DATABASE_URL=postgres://... REDIS_URL=redis://... python -m benchmarks.job_stages``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import floor_bench, queue_latency

STAGES = ("claimed", "evaluated", "saved", "reaped", "board refreshed")


def _timed(marks: dict[str, float], name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        finally:
            marks[name] = time.perf_counter()

    return timed


def our_stages(jobs: int, warm: int) -> dict[str, list[float]]:
    """Seconds per stage of each recorded job, and ``next started ahead``."""
    from workers import jobs as worker_jobs
    from workers import sandboxing
    from workers.device import device_config
    from workers.worker import worker_name

    user, task, model = queue_latency._fixtures()
    task.timing = floor_bench.MINIMAL_TIMING
    task.save(update_fields=["timing"])
    client = queue_latency._client(user)
    ids = [
        queue_latency._submit(client, task, m) for m in queue_latency._variants(model, jobs + warm)
    ]
    marks: dict[str, float] = {}
    originals = (
        worker_jobs.services.submission_start,
        worker_jobs._evaluate,
        worker_jobs._save,
        sandboxing.reap_stopped,
        worker_jobs._refresh_boards,
    )
    # Each stage's end is marked when its function returns; the module's own names are the ones
    # the job calls, so wrapping them there times what it does.
    worker_jobs.services.submission_start = _timed(marks, "claimed", originals[0])
    worker_jobs._evaluate = _timed(marks, "evaluated", originals[1])
    worker_jobs._save = _timed(marks, "saved", originals[2])
    sandboxing.reap_stopped = _timed(marks, "reaped", originals[3])
    worker_jobs._refresh_boards = _timed(marks, "board refreshed", originals[4])
    device = device_config(worker_name())
    stages: dict[str, list[float]] = {name: [] for name in (*STAGES, "next started ahead")}
    try:
        sandboxing.prepare_ahead(device)
        for n, pk in enumerate(ids):
            marks.clear()
            began = time.perf_counter()
            worker_jobs.evaluate_submission(pk)
            ended = time.perf_counter()
            done = dict(marks)  # starting ahead reaps too: the job's own marks only
            sandboxing.prepare_ahead(device)
            ahead = time.perf_counter() - ended
            if n < warm:
                continue
            previous = began
            for name in STAGES:
                stages[name].append(done[name] - previous)
                previous = done[name]
            stages["next started ahead"].append(ahead)
    finally:
        (
            worker_jobs.services.submission_start,
            worker_jobs._evaluate,
            worker_jobs._save,
            sandboxing.reap_stopped,
            worker_jobs._refresh_boards,
        ) = originals
        sandboxing.stop_spare()
        sandboxing.stop_server()
        queue_latency._cleanup()
    return stages


def floor_job_s(jobs: int, warm: int) -> list[float]:
    """Seconds of the floor's job function on the same model and data, in this process."""
    import io

    import numpy as np

    from benchmarks import floor_job
    from submissions.demo import baselines, datasets

    model = next(
        b
        for b in baselines.digits_baselines(datasets.load_digits_train())
        if b.name == "logistic-regression"
    )
    work = Path(floor_bench.__file__).resolve().parent.parent / "var" / "job-stages"
    work.mkdir(parents=True, exist_ok=True)
    model_path, data_path = work / "model.onnx", work / "digits.npz"
    model_path.write_bytes(model.onnx_bytes)
    buffer = io.BytesIO()
    np.savez(buffer, **datasets.load_digits_test())  # type: ignore[arg-type]
    data_path.write_bytes(buffer.getvalue())
    options = floor_bench.floor_options()
    times = []
    for n in range(jobs + warm):
        began = time.perf_counter()
        floor_job.score(str(model_path), str(data_path), 32, options)
        if n >= warm:
            times.append(time.perf_counter() - began)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--warm", type=int, default=5)
    args = parser.parse_args(argv)
    queue_latency._setup_django()
    ours = our_stages(args.jobs, args.warm)
    floor = floor_job_s(args.jobs, args.warm)

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.1f} ms"

    to_result = [sum(ours[s][i] for s in STAGES[:3]) for i in range(args.jobs)]
    print(f"One job's stages, median of {args.jobs} (digits, timing cut to one batch):\n")
    print("| stage | ours |\n|---|---|")
    for name in (*STAGES, "next started ahead"):
        print(f"| {name} | {ms(ours[name])} |")
    print(f"| from the job's start to its result saved | **{ms(to_result)}** |")
    print(f"| the floor's job function (`floor_job.score`) | **{ms(floor)}** |")


if __name__ == "__main__":
    main()
