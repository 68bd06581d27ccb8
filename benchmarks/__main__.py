"""``python -m benchmarks``: every benchmark of issue 3, each printing a Markdown table."""

from __future__ import annotations

import os

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()  # the runner needs no Django; the demo's task table and the queue do
    from benchmarks import queue_latency, runner_overhead

    print("## Runner vs bare onnxruntime loop\n")
    runner_overhead.main([])
    print("\n## Submission latency and throughput\n")
    queue_latency.main([])


if __name__ == "__main__":
    main()
