"""Runner vs a bare onnxruntime loop, on the same session, data and thread settings.

For each model the same InferenceSession is timed two ways, alternately, several times:

- bare: cut the dataset into fixed-shape batches (padding the last), the warm-up runs, then
  ``InferenceSession.run`` on each batch with one ``RunOptions`` (an evaluator that can stop a run
  needs one) and one concatenation of the outputs, nothing else; on CUDA, ``run_with_iobinding``;
- runner: ``evaluation.runner.predict`` as a worker's model process runs it: batching and
  padding, warm-up, the watchdog, shape checks, collecting the real rows, the NaN check, and the
  progress callback and scoring gate of a model process, answered by the worker's code with the
  scoring turn in Redis (``workers.runner_overhead``). Each of the three starts right after the
  worker has answered a scoring turn's start, as ``predict`` does in a model process: both sides
  start from the caches that round trip leaves.

A second set of rows times ``predict`` alone (no gate, no progress) back to back with the bare
loops, as the rows before it were measured: the runner's loop itself, its caches warm.

Both make the same onnxruntime call: one round of each counts the session's run calls, and the
benchmark fails (exit status 1) when they differ, when the predictions differ, or, with
``--cuda``, when the session did not run on CUDA.

The figure is the median over rounds of (runner time / bare time) within the same round, so
drift in machine load between rounds cancels. Each round also times the bare loop a second time:
the median of (second bare / first bare) is the noise control, and shows how far from 1.000 a
ratio strays on this machine when nothing differs at all. Scoring (metrics on the predictions) is
reported on its own: a bare loop computes no metric, so it has nothing to compare with.

Run: ``python -m benchmarks.runner_overhead``; ``make bench`` runs the same comparison as the
runner rows of the floor benchmark (``floor_bench --runner-seconds``). It needs the settings'
Redis (the scoring turn), or the embedded one.
"""

from __future__ import annotations

import argparse

from evaluation.runner import CUDA, DeviceConfig


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="time budget per model")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: onnxruntime)")
    parser.add_argument("--cuda", action="store_true", help="ask for the CUDA provider")
    args = parser.parse_args(argv)
    from workers.runner_overhead import measure, shown, workloads  # it needs Django's settings

    device = DeviceConfig(use_cuda=args.cuda, intra_op_threads=args.threads, warmup_runs=2)
    rows = [
        measure(work, device, args.seconds, as_worker=as_worker)
        for as_worker in (True, False)
        for work in workloads()
    ]
    print(
        "| workload | runner | provider | calls, each side | rounds | bare loop (median) "
        "| runner (median) | runner / bare | control: bare / bare | metrics, once |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        counted = ", ".join(f"{n} × {m}" for m, n in row["runner_calls"].items())  # type: ignore[attr-defined]
        runner = "as a worker runs it" if row["as_worker"] else "alone, back to back"
        print(
            f"| {row['workload']} | {runner} | {row['provider']} | {counted} | {row['repeats']} "
            f"| {row['bare_ms']:.2f} ms | {row['runner_ms']:.2f} ms | {row['ratio']:.3f}× "
            f"| {row['control']:.3f}× | {row['scoring_ms']:.1f} ms |"
        )
    unshown = [
        f"{row['workload']}: {why}"
        for row in rows
        if (why := shown(row, provider=CUDA if args.cuda else None)) is not None
    ]
    if unshown:
        raise SystemExit("not shown: " + "; ".join(unshown))
    return rows


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()  # only for the demo's task table; the runner itself never touches Django
    main()
