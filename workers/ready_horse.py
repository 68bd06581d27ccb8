"""A ready work horse: forked while its worker is idle, warmed up, then handed one job.

rq forks the horse only once it holds a job, so every evaluation used to pay for the fork, its
connections, reading the dataset and (on a GPU) initialising CUDA before its first batch. A ready
horse pays for them while the worker waits: it opens its Redis connections, loads the dataset of
the task its worker ran last, creates a tiny session (onnxruntime's set-up; on a GPU the CUDA
context, cuBLAS and cuDNN, only in the horse, never in the worker), then blocks on a pipe. It
opens no database connection: the worker claims the job's submission and saves its result
(``workers.jobs.Claim``). The worker writes one line on the pipe: the job, its queue, its rq
execution and that claim. The horse then
runs rq's own ``main_work_horse`` for that job and exits, exactly as a freshly forked one: one
model per process, the memory limit, the time limits, death with the worker, the crash retry and
the cancel all stay per model. A job for another task finds no preloaded dataset and reads its own,
as a fresh horse would. An end of file on the pipe (the worker stopped or replaced it) ends the
horse without a job.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import os
import pickle
import signal
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from onnx import TensorProto, helper, numpy_helper
from redis import Redis

from evaluation.runner import DeviceConfig, create_session
from evaluation.selftest import tiny_model
from evaluation.timing import ScoringGate, scoring_alone
from queueing.queues import evaluation_redis
from submissions.models import Task
from workers.jobs import Claim, dataset_preload
from workers.measurement import Measurement

log = logging.getLogger(__name__)


@dataclass
class ReadyHorse:
    pid: int
    write_fd: int  # the worker's end of the pipe; closed once the job is handed over
    result_fd: int  # the worker's end of the pipe the horse's result comes back on


@dataclass(frozen=True)
class Handover:
    """One line on the pipe: the job, its queue, its rq execution and the worker's claim of its
    submission (``jobs.Claim``, pickled: the worker's own objects, never a user's)."""

    job_id: str
    queue_name: str
    execution_id: str
    claim: Claim | None = None

    def encode(self) -> bytes:
        claim = base64.b64encode(pickle.dumps(self.claim)).decode()
        return f"{self.job_id} {self.queue_name} {self.execution_id} {claim}\n".encode()

    @classmethod
    def decode(cls, line: bytes) -> Handover:
        job_id, queue_name, execution_id, claim = line.decode().split()
        return cls(job_id, queue_name, execution_id, pickle.loads(base64.b64decode(claim)))


def warm_up(
    *, task: Task | None, device: DeviceConfig, redis_clients: Sequence[Redis] = ()
) -> None:
    """What a horse would do first for its job, done ahead. Nothing here may stop the horse: a
    step that fails is done again, for real, when the job runs. No database: the worker claims
    the job's submission and saves its result (``jobs.Claim``), and ``task`` is the worker's
    row of the task it ran last, with its dataset version."""
    # A forked process's Redis clients open new connections on first use (redis-py checks the
    # pid): the worker's, which fetches the job, and the device lock's.
    with contextlib.suppress(Exception):
        for client in (*redis_clients, evaluation_redis()):
            client.ping()
    try:
        if task is not None and task.dataset.name:
            dataset_preload(task)
    except Exception as exc:
        log.warning("ready work horse: dataset not preloaded (%s)", exc)
    # The first session of a process sets up onnxruntime's environment (and on a GPU the CUDA
    # context): on CPU that is about 6 ms of a submission's session creation, 1 ms once a
    # session has been made in the process. With the worker's own options: onnxruntime's
    # defaults spin the tiny session's idle threads, which doubled the warm-up's CPU (15 ms
    # against 7 ms in a fresh fork on the 2-core box), CPU a burst's other horses need.
    # Run once too: onnxruntime's first run in a process checks numpy's version (a regular
    # expression compiled in every horse, about 1 ms).
    model, inputs = warm_up_model(device)
    with contextlib.suppress(Exception):  # the self-test at start already judged CUDA
        session = create_session(model, device)
        with _turn_on_device(device) as turn:
            if turn.due():
                turn.give_way(settings.EVAL_TIMING_LOCK_WAIT_S)
            session.run(None, {"x": inputs})


def _turn_on_device(device: DeviceConfig) -> AbstractContextManager[ScoringGate]:
    """On a GPU the warm-up model's run (cuDNN's algorithm search, cuBLAS's first products: tens
    of milliseconds of kernels) is a reader of the device's timing lock, as a scoring phase is:
    it waits while another worker's timing holds or waits for the GPU, and a timing that starts
    meanwhile waits for it. The CPU's tiny Add disturbs nobody and takes no turn."""
    if not device.use_cuda:
        return scoring_alone()
    try:  # NVML names the device's lock; Redis failing is handled by the turn itself
        return Measurement(device, lock_wait_s=settings.EVAL_TIMING_LOCK_WAIT_S).scoring()
    except Exception as exc:
        log.warning("ready work horse: warm-up without a turn on the device (%s)", exc)
        return scoring_alone()


def warm_up_model(device: DeviceConfig) -> tuple[bytes, np.ndarray]:
    """The model a ready horse runs once while it waits, and its input.

    On CUDA a submission's first run used to pay for loading cuBLAS and cuDNN and their kernels
    in its horse, even in a ready one that had run ``tiny_model``'s Add: on an H100 (26 Nov 2026,
    medians of 4 forks, `docs/benchmarks.md`) the digits model's first run took 60.7 ms after
    that warm-up and the depth conv model's 160 ms; after that warm-up and one run of
    ``library_warm_model``, 1.7 and 26.7 ms (the depth model's 14.7 ms once the same model had run
    in the process: cuDNN's algorithm search, which is per session). The horse now runs
    ``library_warm_model`` alone, without the Add before it: on an H200 (27 Nov 2026,
    ``benchmarks.session_creation --cuda``) the first runs then took 1.7 and 32.7 ms in a ready
    horse against 85.8 and 251 ms in a fresh one. On CPU
    nothing of the kind is loaded, so a CPU horse keeps the Add, which costs a burst less CPU.
    """
    if device.use_cuda:
        return library_warm_model(), np.zeros(LIBRARY_WARM_INPUT, dtype=np.float32)
    return tiny_model(), np.zeros(4, dtype=np.float32)


LIBRARY_WARM_INPUT = (4, 3, 64, 64)


@functools.cache
def library_warm_model() -> bytes:
    """x [4, 3, 64, 64] -> Conv 3x3 (8) -> Conv 3x3 (8) -> Conv 1x1 (1) -> Clip -> Flatten ->
    MatMul -> Gemm -> y [4, 4]: the operators whose first run in a process loads a GPU library
    (cuDNN's convolutions with a bias, cuBLAS's matrix products), at shapes that make the
    libraries load the kernels the demo models use. The first choice, one 3x3 convolution without
    a bias on one 8x8 image and the products on one row, left the depth model's first run at
    120 ms and the digits model's at 14.4 ms on the H100 (which kernels load depends on the
    shapes; why exactly these was not established)."""
    batch, channels, height, width = LIBRARY_WARM_INPUT
    nodes = []
    initializers = []
    previous, depth = "x", channels
    for index, (out, kernel) in enumerate(((8, 3), (8, 3), (1, 1))):
        weight = np.full((out, depth, kernel, kernel), 0.01, dtype=np.float32)
        initializers += [
            numpy_helper.from_array(weight, f"weight{index}"),
            numpy_helper.from_array(np.zeros(out, dtype=np.float32), f"bias{index}"),
        ]
        nodes.append(
            helper.make_node(
                "Conv",
                [previous, f"weight{index}", f"bias{index}"],
                [f"conv{index}"],
                pads=[kernel // 2] * 4,
            )
        )
        previous, depth = f"conv{index}", out
    initializers += [
        numpy_helper.from_array(np.array(0.0, dtype=np.float32), "floor"),
        numpy_helper.from_array(np.full((height * width, 16), 0.01, dtype=np.float32), "project"),
        numpy_helper.from_array(np.full((16, 4), 0.01, dtype=np.float32), "classify"),
        numpy_helper.from_array(np.zeros(4, dtype=np.float32), "offset"),
    ]
    nodes += [
        helper.make_node("Clip", [previous, "floor"], ["clipped"]),
        helper.make_node("Flatten", ["clipped"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "project"], ["projected"]),
        helper.make_node("Gemm", ["projected", "classify", "offset"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "library-warm-up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(LIBRARY_WARM_INPUT))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def wait_for_job(read_fd: int) -> Handover | None:
    """Block until the worker hands over a job; None at end of file (no job will come)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker's Ctrl-C is the worker's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with os.fdopen(read_fd, "rb") as pipe:
        line = pipe.readline()
    return Handover.decode(line) if line.endswith(b"\n") else None


def is_alive(pid: int) -> bool:
    """Whether the child ``pid`` still runs; reaps it when it has ended."""
    try:
        ended, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return ended == 0


def stop(horse: ReadyHorse) -> None:
    """End a ready horse that will get no job (the worker stops), and reap it."""
    with contextlib.suppress(OSError):
        os.close(horse.result_fd)
    with contextlib.suppress(OSError):
        os.close(horse.write_fd)  # end of file: the horse exits by itself
    if not is_alive(horse.pid):
        return  # reaped already (here or by the caller): its pid may be another process's now
    with contextlib.suppress(OSError):
        os.killpg(horse.pid, signal.SIGKILL)  # ... or is busy warming up: no need to wait
    with contextlib.suppress(OSError):
        # Also by its pid: a horse forked a moment ago may not have made its process group yet
        # (killpg then finds none), and may never see the end of file either while a process
        # forked after it holds the pipe's write end.
        os.kill(horse.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(horse.pid, 0)
