"""A ready work horse: forked while its worker is idle, warmed up, then handed one job.

rq forks the horse only once it holds a job, so every evaluation used to pay for the fork, a new
PostgreSQL connection, reading the dataset and (on a GPU) initialising CUDA before its first batch.
A ready horse pays for them while the worker waits: it opens its database connection, loads the
dataset of the task its worker ran last, creates a tiny session (onnxruntime's set-up; on a GPU
the CUDA context, only in the horse, never in the worker), then blocks on a pipe. The worker
writes one line there: the job, its queue and its rq execution. The horse then runs rq's own
``main_work_horse`` for that job and exits, exactly as a freshly forked one: one model per
process, the memory limit, the time limits, death with the worker, the crash retry and the
cancel all stay per model. A job for another task finds no preloaded dataset and reads its own,
as a fresh horse would. An end of file on the pipe (the worker stopped or replaced it) ends the
horse without a job.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django import db
from redis import Redis

from evaluation.jobs import dataset_preload
from evaluation.queues import evaluation_redis
from evaluation.runner import DeviceConfig, create_session
from evaluation.selftest import tiny_model
from submissions import services
from submissions.models import Task

log = logging.getLogger(__name__)


@dataclass
class ReadyHorse:
    pid: int
    write_fd: int  # the worker's end of the pipe; closed once the job is handed over


@dataclass(frozen=True)
class Handover:
    job_id: str
    queue_name: str
    execution_id: str

    def encode(self) -> bytes:
        return f"{self.job_id} {self.queue_name} {self.execution_id}\n".encode()

    @classmethod
    def decode(cls, line: bytes) -> Handover:
        job_id, queue_name, execution_id = line.decode().split()
        return cls(job_id, queue_name, execution_id)


def warm_up(
    *, task_id: int | None, device: DeviceConfig, redis_clients: Sequence[Redis] = ()
) -> None:
    """What a horse would do first for its job, done ahead. Nothing here may stop the horse: a
    step that fails is done again, for real, when the job runs."""
    # A forked process's Redis clients open new connections on first use (redis-py checks the
    # pid): the worker's, which fetches the job, and the device lock's.
    with contextlib.suppress(Exception):
        for client in (*redis_clients, evaluation_redis()):
            client.ping()
    try:
        db.connection.ensure_connection()
        # A new PostgreSQL session reads a table's catalog entries on its first query of it
        # (about 1 ms each): read nothing, as the job's first read does, to pay for them now.
        services.JOB_START_READ({"id": 0})
        task = Task.objects.filter(pk=task_id).first() if task_id is not None else None
        if task is not None and task.dataset.name:
            dataset_preload(task)
    except Exception as exc:
        log.warning("ready work horse: warm-up skipped (%s)", exc)
    # The first session of a process sets up onnxruntime's environment (and on a GPU the CUDA
    # context): on CPU that is about 6 ms of a submission's session creation, 1 ms once a
    # session has been made in the process. With the worker's own options: onnxruntime's
    # defaults spin the tiny session's idle threads, which doubled the warm-up's CPU (15 ms
    # against 7 ms in a fresh fork on the 2-core box), CPU a burst's other horses need.
    # Run once too: onnxruntime's first run in a process checks numpy's version (a regular
    # expression compiled in every horse, about 1 ms).
    with contextlib.suppress(Exception):  # the self-test at start already judged CUDA
        session = create_session(tiny_model(), device)
        session.run(None, {"x": np.zeros(4, dtype=np.float32)})


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
        os.close(horse.write_fd)  # end of file: the horse exits by itself
    with contextlib.suppress(OSError):
        os.killpg(horse.pid, signal.SIGKILL)  # ... or is busy warming up: no need to wait
    with contextlib.suppress(ChildProcessError):
        os.waitpid(horse.pid, 0)
