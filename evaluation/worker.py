"""The GPU worker: an rq Worker that forks one work horse per evaluation.

Start it with ``manage.py rqworker evaluation --worker-class evaluation.worker.EvaluationWorker``
(environment: ``EVAL_WORKER_NAME``, ``EVAL_GPU_UUID`` or ``EVAL_GPU_INDEX``,
``EVAL_GPU_MEMORY_FRACTION``; see the README for several workers on one GPU).

The parent process never creates an onnxruntime session (CUDA must not be initialised before a
fork). It watches horses, turns a horse that died (OOM killer, segfault in an operator) into a
retry or a plain failure, publishes a heartbeat with NVML stats every few seconds, and now and
then runs the fleet's recovery under a Redis lock.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import time
from typing import Any

import onnxruntime as ort
from django import db
from django.conf import settings
from rq import Queue
from rq.exceptions import StopRequested
from rq.job import Job
from rq.utils import now
from rq.worker import Worker

from evaluation import heartbeat, recovery
from evaluation.device import worker_name
from evaluation.gpu import gpu_reading, host_info
from submissions import services
from submissions.models import Submission

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def worker_command(name: str, *, burst: bool = False) -> list[str]:
    """The command that runs one evaluation worker (from the project directory), as the README,
    the demo, the benchmarks and the tests start it."""
    command = [sys.executable, "manage.py", "rqworker", settings.EVALUATION_QUEUE]
    command += ["--worker-class", f"{__name__}.EvaluationWorker", "--name", name]
    return [*command, "--burst"] if burst else command


def submission_id_of(job: Job) -> int | None:
    if job.func_name != "evaluation.jobs.evaluate_submission" or not job.args:
        return None
    return int(job.args[0])


def _overran(job: Job) -> bool:
    """Whether the job ran past its rq timeout, after which rq kills the horse itself."""
    if job.started_at is None or job.timeout in (None, -1):
        return False
    return (now() - job.started_at).total_seconds() >= float(job.timeout)


def _die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this work horse when the worker process dies.

    rq puts the horse in its own process group, so ``kill -9`` of the worker would leave it
    running unseen; recovery would then re-run the submission while the orphan could still write
    its result. Elsewhere (macOS) this is a no-op and recovery still covers a lost worker.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the worker died before prctl took effect
        os._exit(1)


class EvaluationWorker(Worker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not kwargs.get("name"):
            kwargs["name"] = worker_name()
        super().__init__(*args, **kwargs)
        # rq's monitoring loop calls heartbeat() every job_monitoring_interval while a horse runs.
        self.job_monitoring_interval = max(1, round(settings.EVAL_HEARTBEAT_INTERVAL_S))
        # onnxruntime logs every CUDA fallback at error level; warnings are enough.
        ort.set_default_logger_severity(3)
        self.fleet_state = heartbeat.WorkerState(
            name=self.name,
            host=socket.gethostname(),
            pid=os.getpid(),
            state="idle",
            device="cpu",
            started_at=time.time(),
        )
        self._last_publish = 0.0

    @property
    def dequeue_timeout(self) -> int:
        # The idle loop blocks on Redis at most this long, then calls heartbeat() again.
        return max(1, round(settings.EVAL_HEARTBEAT_INTERVAL_S))

    def fork_work_horse(self, job: Job, queue: Queue) -> None:
        # The horse must open its own database connections, not share the parent's sockets.
        db.connections.close_all()
        super().fork_work_horse(job, queue)
        self.fleet_state.horse_pid = self.horse_pid or None
        self.publish_heartbeat(force=True)

    def main_work_horse(self, job: Job, queue: Queue) -> None:
        _die_with_parent(self.fleet_state.pid)
        super().main_work_horse(job, queue)

    def execute_job(self, job: Job, queue: Queue) -> None:
        submission_id = submission_id_of(job)
        self.fleet_state.state = "busy"
        self.fleet_state.submission_id = submission_id
        self.fleet_state.busy_since = time.time()
        self.publish_heartbeat(force=True)  # before the horse starts: recovery sees the claim
        try:
            super().execute_job(job, queue)
        finally:
            self._count_outcome(job, submission_id)
            self.fleet_state.state = "idle"
            self.fleet_state.submission_id = None
            self.fleet_state.busy_since = None
            self.fleet_state.horse_pid = None
            self.publish_heartbeat(force=True)

    def _count_outcome(self, job: Job, submission_id: int | None) -> None:
        """Count evaluations this worker finished; a duplicate job that found its submission
        already taken ("skipped") is not an evaluation."""
        if submission_id is None:
            return
        try:
            result = job.latest_result()
            if result is not None and str(result.return_value or "").startswith("skipped"):
                return
            status = (
                Submission.objects.filter(pk=submission_id, worker_name=self.name)
                .values_list("status", flat=True)
                .first()
            )
        except StopRequested:
            raise  # rq's SIGTERM handler raises it wherever the worker is: a warm shutdown
        except Exception as exc:  # Redis or database trouble must not stop the worker
            log.warning("could not read the outcome of submission %s: %s", submission_id, exc)
            return
        if status == Submission.Status.SUCCEEDED:
            self.fleet_state.jobs_done += 1
        elif status == Submission.Status.FAILED:
            self.fleet_state.jobs_failed += 1

    def handle_work_horse_killed(self, job: Job, retpid: int, ret_val: int, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        submission_id = submission_id_of(job)
        if submission_id is None:
            return
        if _overran(job):
            # rq kills a horse only after its timeout (+60 s): the run hung where the watchdog
            # cannot reach (onnxruntime loading or optimising the model). A retry would hang too.
            services.submission_fail(
                submission_id=submission_id,
                message=(
                    f"Time limit exceeded: the evaluation was still running after {job.timeout} s "
                    "(the task's limit plus the time allowed for loading), most likely while "
                    "onnxruntime was loading or optimising the model. Check that the model "
                    "loads quickly with onnxruntime on your machine."
                ),
                log_text=f"work horse killed after its job timeout; waitpid status {ret_val}",
            )
            outcome = "failed: overran its job timeout"
        else:
            outcome = services.submission_requeue_after_crash(submission_id=submission_id)
        log.warning(
            "work horse for submission %s died (status %s): %s", submission_id, ret_val, outcome
        )

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        super().heartbeat(timeout, pipeline)
        if not self.is_horse:  # prepare_job_execution calls this in the horse too
            self.publish_heartbeat()

    def register_death(self) -> None:
        super().register_death()
        self.fleet_state.state = "stopped"
        self.fleet_state.submission_id = None
        self.publish_heartbeat(force=True, with_sample=False)

    def publish_heartbeat(self, *, force: bool = False, with_sample: bool = True) -> None:
        """Publish state and stats; never lets a stats or Redis hiccup stop the worker."""
        interval = settings.EVAL_HEARTBEAT_INTERVAL_S
        now = time.monotonic()
        if not force and now - self._last_publish < interval * 0.8:
            return
        sample = with_sample and (now - self._last_publish >= interval * 0.8)
        self._last_publish = now
        try:
            self._refresh_stats()
            heartbeat.publish(self.connection, self.fleet_state, with_sample=sample)
        except StopRequested:
            raise
        except Exception:
            log.exception("worker %s could not publish its heartbeat", self.name)
        if self.fleet_state.state != "stopped":
            self._maybe_recover()

    def _refresh_stats(self) -> None:
        reading = gpu_reading(settings.EVAL_GPU_INDEX, settings.EVAL_GPU_UUID or None)
        state = self.fleet_state
        state.gpu = reading.gpu.as_dict() if reading.gpu is not None else None
        state.gpu_problem = reading.problem
        state.no_gpu_reason = reading.no_gpu_reason
        state.host_stats = host_info().as_dict()
        # The same rule as evaluation.device.device_config, without creating a session.
        cuda_built = "CUDAExecutionProvider" in ort.get_available_providers()
        mode = settings.EVAL_DEVICE
        cuda = cuda_built and (mode == "cuda" or (mode == "auto" and reading.gpu is not None))
        state.device = "cuda" if cuda else "cpu"
        share: int | None = settings.EVAL_GPU_MEMORY_BYTES or None
        if share is None and reading.gpu is not None:
            share = int(reading.gpu.memory_total * settings.EVAL_GPU_MEMORY_FRACTION)
        state.memory_share = share if cuda else None

    def _maybe_recover(self) -> None:
        try:
            report = recovery.reconcile_if_due(self.connection)
        except StopRequested:
            raise
        except Exception:
            log.exception("worker %s: recovery failed; the next heartbeat tries again", self.name)
            return
        if report is not None and report.changed:
            log.warning("recovery: %s", report)
