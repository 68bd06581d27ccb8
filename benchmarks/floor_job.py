"""The floor: a bare rq evaluator, what anyone would write with rq and onnxruntime alone.

A plain ``rq.Worker`` (forking a work horse per job, as rq does by default) whose parent has
imported numpy and onnxruntime once, running one job per model: load the model file and the
dataset file, create a CPU session, run the dataset at the task's fixed batch shape (the last
batch padded), and return the accuracy on each split. No database, no quota, no leaderboard, no
timing phase, no limits: the result stays in Redis, where rq keeps it.

The session is made one of two ways, which ``floor_bench --floor`` chooses:

- ``ours`` (the default): with the options our workers give theirs (``SessionOptions``: the same
  intra- and inter-op thread counts, graph optimisation and sequential execution, idle threads
  that sleep instead of spinning), warmed up with as many runs of the first batch as ours, in a
  horse whose parent made one tiny session at start (``--set-up``), so that horses inherit
  onnxruntime's process-wide set-up, as our model processes inherit their server's imports.
  What is left between the floor and ours is then the portal's own work, not onnxruntime's
  configuration;
- ``defaults``: onnxruntime's defaults (idle threads spinning), no warm-up and no set-up in the
  parent: the floor as the benchmark first measured it.

``python -m benchmarks.floor_job QUEUE NAME [--set-up]`` starts one such worker on
``REDIS_URL``; ``benchmarks/floor_bench.py`` runs it beside ours.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import onnxruntime as ort


def session_options(options: dict[str, Any] | None) -> ort.SessionOptions:
    """onnxruntime's defaults when ``options`` is None; else ``options`` (``floor_bench``'s
    ``floor_options``: ours, read from our DeviceConfig) set with onnxruntime's own calls."""
    made = ort.SessionOptions()
    if options is None:
        return made
    made.graph_optimization_level = getattr(ort.GraphOptimizationLevel, options["optimization"])
    made.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    made.intra_op_num_threads = options["intra_op_threads"]
    made.inter_op_num_threads = options["inter_op_threads"]
    spinning = "1" if options["intra_op_spinning"] else "0"
    made.add_session_config_entry("session.intra_op.allow_spinning", spinning)
    return made


def score(
    model_path: str, dataset_path: str, batch_size: int, options: dict[str, Any] | None = None
) -> dict[str, float]:
    """Accuracy of the model at ``model_path`` on the ``.npz`` dataset, per split."""
    session = ort.InferenceSession(
        model_path, session_options(options), providers=["CPUExecutionProvider"]
    )
    name, out = session.get_inputs()[0].name, [session.get_outputs()[0].name]
    with np.load(dataset_path) as data:
        inputs = data["inputs"].astype(np.float32)
        targets, split = data["targets"], data["split"].astype(str)
    batches = []
    for start in range(0, len(inputs), batch_size):
        batch = inputs[start : start + batch_size]
        if len(batch) < batch_size:
            batch = np.concatenate([batch, np.repeat(batch[-1:], batch_size - len(batch), 0)])
        batches.append(batch)
    for _ in range(options["warmup_runs"] if options else 0):
        session.run(out, {name: batches[0]})
    outputs = [session.run(out, {name: batch})[0] for batch in batches]
    predicted = np.concatenate(outputs)[: len(inputs)].argmax(axis=1)
    correct = predicted == targets
    return {part: float(correct[split == part].mean()) for part in ("public", "private")}


def set_up_onnxruntime() -> None:
    """One session of a one-node model made and run, then dropped, as our worker does at start
    (one thread, so no pool of onnxruntime's outlives it into the forks): its horses inherit
    onnxruntime's process-wide set-up instead of each paying it at its first session."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "set-up", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    session.run(None, {"x": np.zeros(4, dtype=np.float32)})


def main(argv: list[str]) -> None:
    import importlib

    from redis import Redis
    from rq import Queue, Worker

    importlib.import_module("benchmarks.floor_job")  # the job's module, once, in the parent
    queue_name, worker_name, *flags = argv
    if "--set-up" in flags:
        set_up_onnxruntime()
    connection = Redis.from_url(os.environ["REDIS_URL"])
    queue = Queue(queue_name, connection=connection)
    Worker([queue], connection=connection, name=worker_name).work()


if __name__ == "__main__":
    main(sys.argv[1:])
