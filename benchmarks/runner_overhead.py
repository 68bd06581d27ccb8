"""Runner vs a bare onnxruntime loop, on the same session, data and thread settings.

For each model the same InferenceSession is timed two ways, alternately, several times:

- bare: cut the dataset into fixed-shape batches (padding the last), the warm-up runs, then
  ``session.run`` on each batch with one ``RunOptions`` (an evaluator that can stop a run needs
  one) and one concatenation of the outputs, nothing else;
- runner: ``evaluation.runner.predict``, the runner's whole evaluation loop: batching and padding,
  warm-up, the watchdog, per-batch timing, shape checks, collecting the real rows, the NaN check.

The figure is the median over rounds of (runner time / bare time) within the same round, so
drift in machine load between rounds cancels. Each round also times the bare loop a second time:
the median of (second bare / first bare) is the noise control, and shows how far from 1.000 a
ratio strays on this machine when nothing differs at all. Scoring (metrics on the predictions) is
reported on its own: a bare loop computes no metric, so it has nothing to compare with.

Run: ``python -m benchmarks.runner_overhead``; ``make bench`` runs the same comparison as the
runner rows of the floor benchmark (``floor_bench --runner-seconds``).
"""

from __future__ import annotations

import argparse

from evaluation.runner import DeviceConfig
from workers.runner_overhead import measure, workloads


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="time budget per model")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: onnxruntime)")
    parser.add_argument("--cuda", action="store_true", help="ask for the CUDA provider")
    args = parser.parse_args(argv)
    device = DeviceConfig(use_cuda=args.cuda, intra_op_threads=args.threads, warmup_runs=2)
    rows = [measure(work, device, args.seconds) for work in workloads()]
    print(
        "| workload | provider | rounds | bare loop (median) | runner (median) "
        "| runner / bare | control: bare / bare | metrics, once |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['workload']} | {row['provider']} | {row['repeats']} | {row['bare_ms']:.2f} ms "
            f"| {row['runner_ms']:.2f} ms | {row['ratio']:.3f}× | {row['control']:.3f}× "
            f"| {row['scoring_ms']:.1f} ms |"
        )
    return rows


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()  # only for the demo's task table; the runner itself never touches Django
    main()
