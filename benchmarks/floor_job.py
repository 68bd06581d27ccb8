"""The floor: a bare rq evaluator, what anyone would write with rq and onnxruntime alone.

A plain ``rq.Worker`` (forking a work horse per job, as ours does) whose parent has imported
numpy and onnxruntime once, running one job per model: load the model file and the dataset file,
create a CPU session with onnxruntime's defaults, run the dataset at the task's fixed batch shape
(the last batch padded), and return the accuracy on each split. No database, no quota, no
leaderboard, no timing phase, no limits: the result stays in Redis, where rq keeps it.

``python -m benchmarks.floor_job QUEUE NAME`` starts one such worker on ``REDIS_URL``;
``benchmarks/floor_bench.py`` runs it beside ours.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnxruntime as ort


def score(model_path: str, dataset_path: str, batch_size: int) -> dict[str, float]:
    """Accuracy of the model at ``model_path`` on the ``.npz`` dataset, per split."""
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    name, out = session.get_inputs()[0].name, [session.get_outputs()[0].name]
    with np.load(dataset_path) as data:
        inputs = data["inputs"].astype(np.float32)
        targets, split = data["targets"], data["split"].astype(str)
    outputs = []
    for start in range(0, len(inputs), batch_size):
        batch = inputs[start : start + batch_size]
        if len(batch) < batch_size:
            batch = np.concatenate([batch, np.repeat(batch[-1:], batch_size - len(batch), 0)])
        outputs.append(session.run(out, {name: batch})[0])
    predicted = np.concatenate(outputs)[: len(inputs)].argmax(axis=1)
    correct = predicted == targets
    return {part: float(correct[split == part].mean()) for part in ("public", "private")}


def main(argv: list[str]) -> None:
    import importlib

    from redis import Redis
    from rq import Queue, Worker

    importlib.import_module("benchmarks.floor_job")  # the job's module, once, in the parent
    queue_name, worker_name = argv
    connection = Redis.from_url(os.environ["REDIS_URL"])
    queue = Queue(queue_name, connection=connection)
    Worker([queue], connection=connection, name=worker_name).work()


if __name__ == "__main__":
    main(sys.argv[1:])
