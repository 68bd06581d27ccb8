"""Where the runner's time goes on CUDA against a bare IOBinding loop, piece by piece.

Written when the acceptance check (``manage.py gpu_check``) found the runner over its limit
against a bare IOBinding loop on the depth conv model on a GPU, though within it on CPU
(docs/benchmarks-history.md). This times, on one
session and in rotating order, the bare loop, the bare loop with the runner's two IOBinding
synchronisations, the runner's batch loop alone (``_Executor.run_all``), and the whole
``predict`` (warm-up, the loop, the concatenation and the output checks); and the repeatability
of the conv model's p50 over fresh sessions with each cuDNN algorithm search.

Run on a GPU host: ``python -m benchmarks.cuda_probe`` (``benchmarks/gpu_figures.sh`` sets up
the environment the same way).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import onnxruntime as ort


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from evaluation.limits import TimeLimit
    from evaluation.runner import (
        CUDA,
        DeviceConfig,
        GiveWay,
        _check_finite,
        _Executor,
        create_session,
        padded_batches,
        predict,
    )
    from evaluation.timing import Alone
    from workers.runner_overhead import bare_loop, workloads

    work = workloads()[1]
    device = DeviceConfig(use_cuda=True, warmup_runs=2)
    session = create_session(work.model, device)
    assert session.get_providers()[0] == CUDA
    inputs = work.data.inputs.astype(work.spec.input_dtype)
    size = work.spec.batch_size
    name, out = session.get_inputs()[0].name, session.get_outputs()[0].name
    options = ort.RunOptions()

    def bare_synced() -> Any:
        outputs = []
        for batch in padded_batches(inputs, size):
            binding = session.io_binding()
            binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(batch, "cuda", 0))
            binding.bind_output(out, "cuda", 0)
            binding.synchronize_inputs()
            session.run_with_iobinding(binding, options)
            binding.synchronize_outputs()
            outputs.append(binding.copy_outputs_to_cpu()[0])
        return np.concatenate(outputs)

    def loop_only() -> Any:
        batches = padded_batches(inputs, size)
        with TimeLimit(60) as limit:
            return _Executor(session, limit, device).run_all(
                batches, work.spec, None, GiveWay(Alone(), 0.0)
            )

    preds = predict(session, inputs, work.spec, device)
    contestants: dict[str, Callable[[], Any]] = {
        "bare IOBinding loop": lambda: bare_loop(session, inputs, size, 0),
        "bare + synchronize_inputs/outputs": bare_synced,
        "runner batch loop (run_all)": loop_only,
        "runner predict (no warm-up)": lambda: predict(
            session, inputs, work.spec, replace(device, warmup_runs=0)
        ),
        "output check (_check_finite)": lambda: _check_finite(preds, size),
        "np.isfinite(preds).all()": lambda: np.isfinite(preds).all(),
    }
    times: dict[str, list[float]] = {k: [] for k in contestants}
    keys = list(contestants)
    for round_ in range(15):
        for key in keys[round_ % len(keys) :] + keys[: round_ % len(keys)]:
            start = time.perf_counter()
            contestants[key]()
            times[key].append(time.perf_counter() - start)
    print("| on one session, depth conv (32 images, batch 8) | median ms | min ms |")
    print("|---|---|---|")
    for key, values in times.items():
        print(f"| {key} | {statistics.median(values) * 1000:.2f} | {min(values) * 1000:.2f} |")

    from benchmarks.timing_bench import PROTOCOL, _first_batch
    from evaluation.runner import time_model
    from evaluation.timing import TimingHooks

    spec = replace(work.spec, timing=PROTOCOL)
    for search in ("EXHAUSTIVE", "HEURISTIC", "EXHAUSTIVE", "HEURISTIC"):
        config = replace(device, cudnn_conv_algo_search=search)
        p50s = []
        for _ in range(4):
            fresh = create_session(work.model, config)
            p50s.append(time_model(fresh, _first_batch(work), spec, config, TimingHooks()).p50_ms)
        spread = (max(p50s) - min(p50s)) / statistics.median(p50s)
        print(
            f"cudnn_conv_algo_search={search}: p50s (µs) {[round(p * 1000, 1) for p in p50s]}, "
            f"range {spread * 100:.1f} %"
        )


if __name__ == "__main__":
    main()
