"""What a work horse's evaluation costs the host, forked from a Django worker or from a slim parent.

A work horse is forked for every job. Forked from our worker, it is a copy of a process that holds
Django, its apps and the evaluation modules (about 90 MB), and every page it writes is copied
first: a minor page fault, each a cost of its own (``benchmarks.fork_cost`` measures it).
A fork server that holds only what the evaluation itself needs (numpy, onnxruntime,
``evaluation.runner``, which imports no Django) would fork smaller horses. This measures the
difference before anyone builds it: the same evaluation (session creation, scoring every row, a
one-batch timing phase as ``floor_bench`` runs it) in a child forked from each kind of parent,
the child's own CPU and minor faults (``getrusage`` in the child, whose counters start at zero at
the fork) and the fork call in the parent. Each parent is a fresh ``python`` started for it; the
two kinds alternate, ``--passes`` times, ``--forks`` children each, medians.

Run: ``python -m benchmarks.slim_horse`` (the demo's digits logistic regression; ``--workload
depth`` for the 3x3 conv on 448x448 images). No database: the model and data are written to a
temporary folder first.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.fork_cost import _anon_mb, _setup_django

ROOT = Path(__file__).resolve().parent.parent
PARENTS = ("django", "slim")


def write_workload(folder: Path, workload: str) -> None:
    """The demo model, its data and its task's spec, as files a parent of either kind reads."""
    import numpy as np

    from workers.runner_overhead import workloads

    work = workloads()[0 if workload == "digits" else 1]
    (folder / "model.onnx").write_bytes(work.model)
    np.savez(folder / "data.npz", inputs=work.data.inputs, targets=work.data.targets)
    # The task's spec with floor_bench's one-batch timing phase, as plain data (no Django needed
    # to read it back).
    from benchmarks.floor_bench import MINIMAL_TIMING

    spec = {k: v for k, v in asdict(work.spec).items() if k != "timing"}
    (folder / "spec.json").write_text(json.dumps({**spec, "timing": MINIMAL_TIMING}))


def parent(kind: str, folder: Path, forks: int) -> dict[str, Any]:
    """In a fresh process: load what a worker of ``kind`` holds, then fork ``forks`` horses that
    each evaluate the model once and report their own CPU and minor faults."""
    if kind == "django":
        _setup_django()
    import numpy as np

    from evaluation.runner import Dataset, DeviceConfig, evaluate
    from evaluation.spec import TaskSpec
    from evaluation.timing import TimingProtocol

    raw = json.loads((folder / "spec.json").read_text())
    raw["input_shape"], raw["output_shape"] = (
        tuple(raw[k]) for k in ("input_shape", "output_shape")
    )
    spec = TaskSpec(**{**raw, "timing": TimingProtocol.from_config(raw["timing"])})
    model = (folder / "model.onnx").read_bytes()
    with np.load(folder / "data.npz") as arrays:
        data = Dataset.from_arrays({"inputs": arrays["inputs"], "targets": arrays["targets"]})
    device = DeviceConfig(worker_name="slim-horse", intra_op_threads=1, warmup_runs=1)
    fork_ms, cpu_ms, faults, scores = [], [], [], set()
    for _ in range(forks):
        read_end, write_end = os.pipe()
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            result = evaluate(model, data, spec, device)
            usage = resource.getrusage(resource.RUSAGE_SELF)
            line = f"{(usage.ru_utime + usage.ru_stime) * 1000} {usage.ru_minflt} {result.score}"
            os.write(write_end, line.encode())
            os._exit(0)
        fork_ms.append((time.perf_counter() - start) * 1000)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            cpu, minflt, score = pipe.read().split()
        os.waitpid(pid, 0)
        cpu_ms.append(float(cpu))
        faults.append(int(minflt))
        scores.add(score)
    return {
        "kind": kind,
        "anon_mb": _anon_mb(),
        "fork_ms": statistics.median(fork_ms),
        "cpu_ms": statistics.median(cpu_ms),
        "faults": statistics.median(faults),
        "scores": sorted(scores),
    }


def main(argv: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("digits", "depth"), default="digits")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--forks", type=int, default=15)
    parser.add_argument("--parent", choices=PARENTS, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.parent:  # one parent, started by main below
        print(json.dumps(parent(args.parent, Path(args.folder), args.forks)))
        return {}
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()  # the demo's task table only
    from django.conf import settings

    # The Django parent loads the settings a worker does: the same Redis, never a second
    # embedded one started by its settings (nothing is sent to it).
    env = {**os.environ, "REDIS_URL": settings.REDIS_URL}
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in PARENTS}
    with tempfile.TemporaryDirectory() as folder:
        write_workload(Path(folder), args.workload)
        for _ in range(args.passes):
            for kind in PARENTS:
                command = [sys.executable, "-m", "benchmarks.slim_horse", "--parent", kind]
                command += ["--folder", folder, "--forks", str(args.forks)]
                done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
                if done.returncode:
                    raise RuntimeError(f"the {kind} parent failed:\n{done.stderr[-3000:]}")
                results[kind].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{args.workload}: {args.passes} passes of {args.forks} horses per parent, medians\n")
    print("| parent | anonymous memory | fork | horse's CPU | horse's minor faults | score |")
    print("|---|---|---|---|---|---|")
    for kind in PARENTS:
        rows = results[kind]

        def listed(key: str, digits: int, rows: list[dict[str, Any]] = rows) -> str:
            return ", ".join(f"{row[key]:.{digits}f}" for row in rows)

        print(
            f"| {kind} | {listed('anon_mb', 0)} MB | {listed('fork_ms', 2)} ms "
            f"| {listed('cpu_ms', 1)} ms | {listed('faults', 0)} "
            f"| {', '.join(sorted({s for row in rows for s in row['scores']}))} |"
        )
    return results


if __name__ == "__main__":
    main()
