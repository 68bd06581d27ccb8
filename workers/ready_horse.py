"""A ready work horse: forked while its worker is idle, warmed up, then handed one job.

rq forks the horse only once it holds a job, so every evaluation used to pay for the fork, its
connections, reading the dataset and (on a GPU) initialising CUDA before its first batch. A ready
horse pays for them while the worker waits: it opens its Redis connections, loads the dataset of
the task its worker ran last, starts the model process its job will run in (which sets
onnxruntime up, and on a GPU the CUDA context, cuBLAS and cuDNN: never in the worker or the
horse; ``workers.sandboxing``), then blocks on a pipe. It
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
import logging
import os
import pickle
import signal
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from django.conf import settings
from redis import Redis

from evaluation.runner import DeviceConfig
from evaluation.timing import ScoringGate, scoring_alone
from queueing.queues import evaluation_redis
from submissions.models import Task
from workers import sandboxing
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
    # The model process the job will run in (evaluation.model_process): started and warmed up
    # now, onnxruntime's set-up and on a GPU the CUDA context and libraries with it.
    try:
        sandboxing.start_ahead(device)
        with _turn_on_device(device) as turn:
            if turn.due():
                turn.give_way(settings.EVAL_TIMING_LOCK_WAIT_S)
            sandboxing.model_process_ready()
    except Exception as exc:
        log.warning("ready work horse: model process not started ahead (%s)", exc)


def _turn_on_device(device: DeviceConfig) -> AbstractContextManager[ScoringGate]:
    """On a GPU the model process's warm-up run (cuDNN's algorithm search, cuBLAS's first
    products: kernels of its own) is a reader of the device's timing lock, as scoring is:
    it waits while another worker's timing holds or waits for the GPU, and a timing that starts
    meanwhile waits for it. The CPU's tiny Add disturbs nobody and takes no turn."""
    if not device.use_cuda:
        return scoring_alone()
    try:  # NVML names the device's lock; Redis failing is handled by the turn itself
        return Measurement(device, lock_wait_s=settings.EVAL_TIMING_LOCK_WAIT_S).scoring()
    except Exception as exc:
        log.warning("ready work horse: warm-up without a turn on the device (%s)", exc)
        return scoring_alone()


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
