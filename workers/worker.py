"""The GPU worker: an rq Worker that forks one work horse per evaluation.

Start it with ``manage.py rqworker evaluation --worker-class workers.worker.EvaluationWorker``
(environment: ``EVAL_WORKER_NAME``, ``EVAL_GPU_UUID`` or ``EVAL_GPU_INDEX``,
``EVAL_GPU_MEMORY_FRACTION``; see the README for several workers on one GPU).

The parent process never creates an onnxruntime session (CUDA must not be initialised before a
fork). At start it pins its GPU for CUDA (workers/device.py), runs the CUDA self-test in a
child (evaluation/selftest.py), checks the GPU's memory plan (workers/memory_plan.py) and
clears its own name's registration when the process that held it is provably dead. It watches
horses, turns a horse that died (OOM killer, segfault in an operator) into a
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
from typing import Any, NoReturn

import onnxruntime as ort
from django import db
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from rq import Queue, worker_registration
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.job import Job
from rq.utils import now
from rq.worker import Worker, WorkerStatus

from evaluation.gpu import GpuInfo, gpu_reading, host_info
from evaluation.runner import EvalResult
from evaluation.selftest import run_selftest
from queueing import heartbeat
from queueing.queues import queue_name
from submissions.lifecycle import services
from submissions.models import Submission, Task
from workers import memory_plan, outages, ready_horse, recovery, sandboxing
from workers.classes import detected_device, worker_classes
from workers.device import (
    CUDA_DEVICE_ID,
    DeviceChoice,
    current_choice,
    device_config,
    nvml_target,
    pin_cuda,
    record_selftest,
    this_gpu_pin,
    worker_name,
)
from workers.dispatch import fair_pick, submission_id_of
from workers.jobs import (
    Claim,
    ResultReader,
    hand_claim,
    keep_dataset_for_horses,
    leave_boards_to_worker,
    refresh_boards,
    save_handed_result,
    sends_result,
    write_all,
)
from workers.measurement import cpu_facts
from workers.registration import dead_registration

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# rq's heartbeats (the worker's key, kept for minutes) closer together than this are one.
HEARTBEAT_COALESCE_S = 1.0


def worker_command(name: str, *, burst: bool = False) -> list[str]:
    """The command that runs one evaluation worker (from the project directory), as the README,
    the demo, the benchmarks and the tests start it. On ``settings.EVALUATION_QUEUE`` the worker
    listens to the queues of the device classes it serves (see ``resolve_queues``)."""
    command = [sys.executable, "manage.py", "rqworker", settings.EVALUATION_QUEUE]
    command += ["--worker-class", f"{__name__}.EvaluationWorker", "--name", name]
    return [*command, "--burst"] if burst else command


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


# In a work horse: the worker's database connections it inherited through fork, kept referenced
# so that they are never closed or collected here (either would end the worker's session, whose
# socket the two processes share). The horse opens its own; these go with it (os._exit).
_INHERITED_CONNECTIONS: list[Any] = []


def _leave_parent_connections() -> None:
    """In a freshly forked horse: leave the worker its database connections, unused and open.
    The worker keeps its own from job to job instead of connecting again after every fork (a new
    PostgreSQL connection and its cold catalog are a visible part of a small job's dispatch)."""
    for conn in db.connections.all(initialized_only=True):
        if conn.connection is not None:
            _INHERITED_CONNECTIONS.append(conn.connection)
            conn.connection = None


def _names(queues: Any) -> list[str]:
    given = [queues] if isinstance(queues, str | Queue) else list(queues)
    return [q.name if isinstance(q, Queue) else str(q) for q in given]


def resolve_queues(queues: Any) -> tuple[list[Any], list[str]]:
    """The queues and device classes of a worker started on ``queues``.

    The plain evaluation queue means "what my device serves" (classes.served_classes); explicit
    class queues (``evaluation-a40``) are taken as given.
    """
    given = [queues] if isinstance(queues, str | Queue) else list(queues)
    names = _names(queues)
    if names == [settings.EVALUATION_QUEUE]:
        device, gpu_name = detected_device()
        classes = worker_classes(device=device, gpu_name=gpu_name)
        return [queue_name(c) for c in classes], classes  # rq makes them its queue class
    prefix = f"{settings.EVALUATION_QUEUE}-"
    classes = [
        "cpu" if n == settings.EVALUATION_QUEUE else n.removeprefix(prefix)
        for n in names
        if n == settings.EVALUATION_QUEUE or n.startswith(prefix)
    ]
    return given, classes


class EvaluationWorker(Worker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not kwargs.get("name"):
            kwargs["name"] = worker_name()
        queues = args[0] if args else kwargs.pop("queues")
        if kwargs.get("connection") is not None:  # rq's constructor talks to Redis already
            outages.wait_for_redis(kwargs["connection"], name=kwargs["name"], stop=lambda: False)
        resolved, self.device_classes = resolve_queues(queues)
        # Started on the plain queue: the classes follow the device, so they are derived again
        # once the CUDA self-test has said whether this worker really runs on CUDA.
        self._classes_follow_device = _names(queues) == [settings.EVALUATION_QUEUE]
        super().__init__(resolved, *args[1:], **kwargs)
        self.class_queues = {q.name: q for q in self.queues}
        log.info("worker %s serves device classes %s", self.name, ", ".join(self.device_classes))
        # rq's monitoring loop calls heartbeat() every job_monitoring_interval while a horse runs.
        self.job_monitoring_interval = max(1, round(settings.EVAL_HEARTBEAT_INTERVAL_S))
        # Horses log onnxruntime errors only: a CUDA fallback is caught once, by the self-test at
        # start, which keeps onnxruntime's warnings and logs the reason at error level.
        ort.set_default_logger_severity(3)
        self.device_choice: DeviceChoice | None = None
        self.fleet_state = heartbeat.WorkerState(
            name=self.name,
            host=socket.gethostname(),
            pid=os.getpid(),
            state="idle",
            device="cpu",
            started_at=time.time(),
            device_classes=self.device_classes,
        )
        self._last_publish = float("-inf")  # the first heartbeat is a sample
        self._ready: ready_horse.ReadyHorse | None = None
        self._last_task: Task | None = None  # the likely task of the next job
        self._claim: Claim | None = None  # the running job's submission, claimed here
        self._results: ResultReader | None = None  # where its horse sends the result
        self._saved = False  # whether this worker saved the running job's result
        self._last_rq_heartbeat = (float("-inf"), 0)  # when, and the TTL it gave (heartbeat())
        self._job_waits = False  # another job waited when the last one ended (execute_job)
        self._redis_lost = False  # this run of rq's work loop ended because Redis went away
        self._asked_to_stop = False  # SIGINT or SIGTERM came (handle_warm_shutdown_request)

    # rq.Worker.work with its keyword arguments passed through as they come (django-rq names them).
    def work(self, burst: bool = False, **kwargs: Any) -> bool:  # type: ignore[override]
        """rq's work loop, started again (registration included) when it ended because Redis
        went away, once Redis answers: rq's loop quits on any error outside its dequeue, and
        Redis refusing a heartbeat while a horse runs is one. A worker that is not bounded
        (burst, ``max_jobs``, ``max_idle_time``) keeps working until it is asked to stop."""
        bounded = burst or any(kwargs.get(k) is not None for k in ("max_jobs", "max_idle_time"))
        worked, next_wait = False, outages.backoff()
        while True:
            self._redis_lost = False
            try:
                worked = super().work(burst, **kwargs) or worked
            except outages.REDIS_ERRORS as exc:
                self._redis_lost = True
                log.error("worker %s: lost Redis: %s", self.name, exc)
            except StopRequested:  # rq's signal handler, while this loop waited for Redis
                return worked
            if self._asked_to_stop or (bounded and not self._redis_lost):
                return worked
            if not self._redis_lost:
                log.error("worker %s: its work loop ended unasked; starting it again", self.name)
                time.sleep(next_wait())  # a fault that repeats at once must not spin
            self._leave_pubsub()
            try:
                if not outages.wait_for_redis(
                    self.connection, name=self.name, stop=lambda: self._asked_to_stop
                ):
                    return worked
            except StopRequested:
                return worked

    def handle_warm_shutdown_request(self) -> None:
        """rq's hook for SIGINT and SIGTERM: remembered, since rq's own flag is set only while a
        job runs, and ``work`` must not start its loop again after a stop that was asked for."""
        self._asked_to_stop = True
        super().handle_warm_shutdown_request()

    def _leave_pubsub(self) -> None:
        """Stop the command channel's thread rq started (``subscribe``), which an interrupted
        teardown left running: the next bootstrap starts a new one."""
        if self.pubsub_thread is None or self.pubsub is None:
            return
        with contextlib.suppress(*outages.REDIS_ERRORS):
            self.pubsub.unsubscribe()
        self.pubsub_thread.stop()
        self.pubsub_thread.join(timeout=1)
        with contextlib.suppress(*outages.REDIS_ERRORS):
            self.pubsub.close()
        self.pubsub_thread = None

    def bootstrap(self, *args: Any, **kwargs: Any) -> None:
        # The name first: a mistaken second worker under a live one's name must not publish
        # anything under it (the self-test and the memory plan do) before rq refuses it.
        self._claim_name()
        if self.device_choice is None:  # not again when the loop starts again after an outage
            self.start_device()
        self.fleet_state.state = "idle"  # a loop started again follows a teardown's "stopped"
        sandboxing.clear_scratch(device_config(self.name))  # left by a previous process's horses
        super().bootstrap(*args, **kwargs)
        self.publish_heartbeat(force=True)
        # A restarted worker may have left a submission running: recover it now, not later.
        self._maybe_recover(now=True)

    def start_device(self) -> None:
        """Pin the GPU for CUDA, self-test it, and take a place in its memory plan.

        Exits (SystemExit, non-zero) with the reason when EVAL_DEVICE=cuda and CUDA does not
        work, or when this worker's share would overcommit its GPU.
        """
        reading = gpu_reading(*nvml_target())
        choice = current_choice(reading.gpu)
        if choice.use_cuda:
            self._pin_cuda()
            selftest = run_selftest(
                device_id=CUDA_DEVICE_ID, timeout_s=settings.EVAL_CUDA_SELFTEST_TIMEOUT_S
            )
            record_selftest(selftest.problem)  # the horses forked later inherit it
            choice = current_choice(reading.gpu)
        self.device_choice = choice
        self._check_sandbox()
        if not choice.use_cuda:
            cpu_facts()  # read once here, inherited by every horse (workers/measurement.py)
        if self._classes_follow_device:
            gpu_name = reading.gpu.name if reading.gpu is not None else None
            device = "cuda" if choice.use_cuda else "cpu"
            self._serve_classes(worker_classes(device=device, gpu_name=gpu_name))
        if choice.problem:
            log.error("worker %s: %s", self.name, choice.problem)
        if settings.EVAL_DEVICE == "cuda" and not choice.use_cuda:
            self._refuse(f"EVAL_DEVICE=cuda, but CUDA does not work here: {choice.problem}")
        if choice.use_cuda:
            log.info("worker %s: CUDA self-test passed on %s", self.name, self._gpu_label(reading))
            if reading.gpu is not None and choice.memory_share:
                self._join_memory_plan(reading.gpu, choice.memory_share)

    def _check_sandbox(self) -> None:
        """Learn the protections this worker's model processes get (shown on its card), and
        refuse to start without one that ``EVAL_SANDBOX_REQUIRE`` asks for."""
        protections, refusal = sandboxing.protections_check(device_config(self.name))
        self.fleet_state.sandbox = protections.as_dict() if protections is not None else None
        if protections is not None:
            log.info(
                "worker %s: model processes get %s", self.name, ", ".join(protections.active())
            )
            for missing in protections.missing:
                log.warning("worker %s: model processes without %s", self.name, missing)
        if refusal:
            self._refuse(refusal)

    def _serve_classes(self, classes: list[str]) -> None:
        """Listen to these device classes' queues (before rq registers the worker's queues)."""
        if classes == self.device_classes:
            return
        log.warning(
            "worker %s serves device classes %s (not %s): its device is not what it first seemed",
            self.name,
            ", ".join(classes),
            ", ".join(self.device_classes),
        )
        self.queues = [
            self.queue_class(
                queue_name(c),
                connection=self.connection,
                job_class=self.job_class,
                serializer=self.serializer,
            )
            for c in classes
        ]
        self._ordered_queues = self.queues[:]
        self.class_queues = {q.name: q for q in self.queues}
        self.device_classes = classes
        self.fleet_state.device_classes = classes

    def _pin_cuda(self) -> None:
        """Make CUDA see this worker's GPU only, before any of its processes initialises CUDA."""
        try:
            pin_cuda(this_gpu_pin())
        except ImproperlyConfigured as exc:
            self._refuse(str(exc))

    @staticmethod
    def _gpu_label(reading: Any) -> str:
        gpu = reading.gpu
        return f"{gpu.name} {gpu.uuid}" if gpu is not None else "an unnamed GPU (no NVML)"

    def _join_memory_plan(self, gpu: GpuInfo, share: int) -> None:
        with memory_plan.plan_lock(self.connection, gpu.uuid):
            others = [s for s in heartbeat.read_states(self.connection) if s.name != self.name]
            plan = memory_plan.plan_of(
                others, uuid=gpu.uuid, gpu_name=gpu.name, total=gpu.memory_total
            )
            why = memory_plan.refusal(plan, memory_plan.PlannedWorker(self.name, share))
            if why:
                self._refuse(why)
            self.publish_heartbeat(force=True)  # takes this worker's place in the plan

    def _refuse(self, message: str) -> NoReturn:
        """Show the reason on the worker's card and exit non-zero with it."""
        log.error("worker %s refuses to start: %s", self.name, message)
        self.fleet_state.state = "stopped"
        self.fleet_state.cuda_problem = message
        with contextlib.suppress(Exception):
            heartbeat.publish(self.connection, self.fleet_state, with_sample=False)
        raise SystemExit(f"worker {self.name} refuses to start: {message}")

    def _claim_name(self) -> None:
        """rq refuses a name that is still registered; a registration whose process provably
        died (kill -9, a lost machine) is cleared so a restart under that name starts at once."""
        raw: dict[Any, Any] = self.connection.hgetall(self.key)  # type: ignore[assignment]
        fields = {heartbeat.text(k): heartbeat.text(v) for k, v in raw.items()}
        if not fields or "death" in fields:
            return
        states = {s.name: s for s in heartbeat.read_states(self.connection)}
        why = dead_registration(fields, states.get(self.name), host=socket.gethostname())
        if why is None:  # alive, or not provably dead: refused, as rq's register_birth would
            raise ValueError(f"There exists an active worker named {self.name!r} already")
        log.warning("worker %s: clearing its previous registration: %s", self.name, why)
        with self.connection.pipeline() as pipe:
            worker_registration.unregister(self, pipe)
            pipe.delete(self.key)
            pipe.execute()

    @property
    def dequeue_timeout(self) -> int:
        # The idle loop blocks on Redis at most this long, then calls heartbeat() again.
        return max(1, round(settings.EVAL_HEARTBEAT_INTERVAL_S))

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        """rq's dequeue, then the fair turn among the queued submissions of this worker's
        classes (workers/dispatch.py)."""
        self._ensure_ready_horse()  # it warms up while we wait for a job
        db.close_old_connections()  # a broken one, or one past DATABASE_CONN_MAX_AGE
        while True:
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            if result is None:
                return None
            try:
                picked = fair_pick(*result, classes=self.device_classes, queues=self.class_queues)
            except StopRequested:
                raise
            except Exception:  # the database or Redis hiccuped: run what rq gave us
                log.exception("worker %s: fair turn failed; running the job popped", self.name)
                return result
            if picked is not None:
                return picked

    def _claim_for_horse(self, job: Job) -> Claim | None:
        """Claim the job's submission (queued -> running) here, on the worker's own database
        connection, for the horse about to run it (``jobs.Claim``): after rq's preparation has
        published this worker busy with it, before the horse exists. None (the horse claims it
        itself, as under a plain rq worker) when the job is not an evaluation or the database
        refused: the claim is then the horse's, exactly as before."""
        if self._claim is not None:  # a ready horse died at the hand-over: the same claim
            return self._claim
        submission_id = submission_id_of(job)
        if submission_id is None:
            return None
        try:
            submission = services.submission_start(
                submission_id=submission_id, worker_name=self.name
            )
        except StopRequested:
            raise
        except Exception as exc:
            log.warning(
                "worker %s: claim of %s left to the horse: %s", self.name, submission_id, exc
            )
            return None
        self._claim = Claim(submission_id, self.name, submission)
        if submission is not None:
            self._last_task = submission.task
        return self._claim

    def fork_work_horse(self, job: Job, queue: Queue) -> None:
        claim = self._claim_for_horse(job)
        if claim is not None and claim.submission is not None:
            # Held here, as for a ready horse: this horse and the next ones inherit it (a CPU
            # worker in a burst forks every horse this way).
            keep_dataset_for_horses(claim.submission.task)
        pipe = os.pipe() if sends_result(claim) else None
        hand_claim(claim, pipe[1] if pipe else None)  # the horse forked next inherits them
        try:
            super().fork_work_horse(job, queue)  # the horse leaves our connections
        except BaseException:
            if pipe:
                os.close(pipe[0])
            raise
        finally:
            hand_claim(None, None)
            if pipe:
                os.close(pipe[1])
        if pipe:
            self._results = ResultReader(pipe[0])
        self.fleet_state.horse_pid = self.horse_pid or None
        self.publish_heartbeat(force=True)

    def _ensure_ready_horse(self) -> None:
        job_waits, self._job_waits = self._job_waits, False  # once: a dequeue may find none
        if not settings.EVAL_READY_HORSE or self.is_horse:
            return
        if self._ready is not None and ready_horse.is_alive(self._ready.pid):
            return
        if self._ready is not None:
            log.warning("worker %s: its ready work horse died while waiting", self.name)
            ready_horse.stop(self._ready)
            self._ready = None
        if job_waits and not (self.device_choice and self.device_choice.use_cuda):
            # A CPU worker in a burst: the next job is there already, so its horse is forked
            # after the claim as rq does. A ready horse would wait for nothing, and everything
            # the worker writes between the fork and the horse's end (the dequeue, fair turn,
            # claim and rq's preparation as well) would copy its page instead of only making it
            # writable again (docs/benchmarks.md). A GPU worker's horse warms CUDA up: it keeps
            # its ready horse.
            return
        if self._last_task is not None:
            keep_dataset_for_horses(self._last_task)  # inherited, not read again, by the horse
        read_fd, write_fd = os.pipe()
        result_read_fd, result_write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            _leave_parent_connections()  # it opens its own while it warms up
            os.close(write_fd)
            os.close(result_read_fd)
            self._ready_horse_main(read_fd, result_write_fd)
        os.close(read_fd)
        os.close(result_write_fd)
        self._ready = ready_horse.ReadyHorse(pid, write_fd, result_read_fd)

    def _ready_horse_main(self, read_fd: int, result_fd: int) -> NoReturn:
        """The ready horse: warm up, wait for a job, run it as rq runs a horse, exit."""
        try:
            os.setpgrp()
            self._is_horse = True  # heartbeat() in a horse must not publish the worker's state
            _die_with_parent(self.fleet_state.pid)
            ready_horse.warm_up(
                task=self._last_task,
                device=device_config(self.name),
                redis_clients=[self.connection],
            )
            handover = ready_horse.wait_for_job(read_fd)
            if handover is None:
                os._exit(0)
            job = self.job_class.fetch(
                handover.job_id, connection=self.connection, serializer=self.serializer
            )
            queue = next(q for q in self.queues if q.name == handover.queue_name)
            if sends_result(handover.claim):
                hand_claim(handover.claim, result_fd)
            else:
                hand_claim(handover.claim, None)
                os.close(result_fd)
            execution = Execution(
                handover.execution_id, job.id, self.connection, worker_name=self.name
            )
            self.executions = {execution.id: execution}
        except BaseException:
            log.exception("ready work horse of %s failed before its job", self.name)
            os._exit(1)  # the worker sees a horse that died: the job is retried or failed
        os.environ["RQ_WORKER_ID"] = self.name
        os.environ["RQ_JOB_ID"] = job.id
        self.main_work_horse(job, queue)
        os._exit(0)

    def _hand_to_ready_horse(self, job: Job, queue: Queue) -> bool:
        """Run the job in the ready horse, as rq's execute_job would in a fresh fork; False when
        there is no live ready horse (the caller forks one the usual way)."""
        ready, self._ready = self._ready, None
        if ready is None:
            return False
        if not ready_horse.is_alive(ready.pid):
            ready_horse.stop(ready)
            return False
        self._horse_pid = ready.pid  # before anything can ask to kill "the horse"
        self.fleet_state.horse_pid = ready.pid  # announced with the claim, before the job starts
        execution = self.prepare_execution(job)
        claim = self._claim_for_horse(job)
        handover = ready_horse.Handover(job.id, queue.name, execution.id, claim)
        try:
            write_all(ready.write_fd, handover.encode())
        except OSError:  # it died just now: fork as rq does, for the same execution
            ready_horse.stop(ready)
            self.fork_work_horse(job, queue)  # announces the new horse
        else:
            os.close(ready.write_fd)
            if sends_result(claim):
                self._results = ResultReader(ready.result_fd)
            else:
                os.close(ready.result_fd)
        self.monitor_work_horse(job, queue, execution)
        self.set_state(WorkerStatus.IDLE)
        return True

    def main_work_horse(self, job: Job, queue: Queue) -> None:
        if not self._is_horse:  # just forked by rq (a ready horse left them before warming up)
            _leave_parent_connections()
        _die_with_parent(self.fleet_state.pid)
        leave_boards_to_worker()  # execute_job refreshes them once this horse has ended
        super().main_work_horse(job, queue)

    def execute_job(self, job: Job, queue: Queue) -> None:
        submission_id = submission_id_of(job)
        self.fleet_state.state = "busy"
        self.fleet_state.submission_id = submission_id
        self.fleet_state.busy_since = time.time()
        # Published with rq's preparation, before the horse starts (``prepare_execution``).
        self._claim, self._saved = None, False
        try:
            if not self._hand_to_ready_horse(job, queue):
                super().execute_job(job, queue)
        except outages.REDIS_ERRORS:
            self._redis_lost = True
            self._finish_without_redis(job, submission_id)
            raise  # the work loop starts again once Redis answers (``work``)
        finally:
            results, self._results, self._claim = self._results, None, None
            if results is not None:
                results.close()
            saved, self._saved = self._saved, False
            self._count_outcome(job, submission_id, saved)
            self.fleet_state.state = "idle"
            self.fleet_state.submission_id = None
            self.fleet_state.busy_since = None
            self.fleet_state.horse_pid = None
            self.publish_heartbeat(force=True)
            if submission_id is not None:
                # The board refreshes the job owed, its horse's result or a dead horse's: here,
                # where the queries are compiled and the tables' catalogs read already.
                self._job_waits = refresh_boards(job.connection, job.origin)

    def prepare_execution(self, job: Job) -> Execution:
        """rq's preparation of the job (rq.executions.prepare_execution: the execution, the busy
        state) and this worker's claim on it (its fleet state, busy with the submission) in one
        MULTI/EXEC, before the horse starts, so recovery sees the claim: one round trip on
        every job's way to its horse instead of two."""
        with self.connection.pipeline() as pipeline:
            execution = Execution.create(
                job, self.get_heartbeat_ttl(job), pipeline=pipeline, worker_name=self.name
            )
            self.executions[execution.id] = execution
            self.set_state(WorkerStatus.BUSY, pipeline=pipeline)
            heartbeat.publish_into(pipeline, self.fleet_state, with_sample=self._sample_now())
            pipeline.execute()
        return execution

    def wait_for_horse(self) -> tuple[int | None, int | None, Any]:
        """rq's wait for the horse's end, after taking the result it sends (``jobs.Claim``) and
        saving it at once: the submitter sees the score while the horse still finishes rq's
        bookkeeping and exits, as when the horse saved it itself."""
        self._take_result()
        return super().wait_for_horse()

    def _take_result(self) -> None:
        """The result the running horse sends, if it sends one, saved (``_saved``). rq's
        monitoring alarm may interrupt the wait for it (the reader keeps what came so far), to
        send the heartbeats, but not the save."""
        results = self._results
        if results is not None and not results.done:
            result = results.read(self.horse_pid)
            if result is not None:
                left = signal.alarm(0)
                try:
                    self._saved = self._save_result(result)
                finally:
                    if left:
                        signal.alarm(left)

    def _save_result(self, result: EvalResult) -> bool:
        """The result the horse sent (``jobs.save_handed_result``), saved; False when saving
        failed. While the database does not answer, the worker keeps the result and tries again
        (its heartbeat keeps its claim); only a stop request gives up, and the submission, still
        running without a horse, is then run again by recovery."""
        claim = self._claim
        if claim is None:
            return False
        try:
            return outages.save_patiently(
                lambda: save_handed_result(claim, result),
                what=f"the result of submission {claim.submission_id}",
                stop=lambda: self._asked_to_stop,
                while_waiting=lambda: self.publish_heartbeat(with_sample=False),
            )
        except Exception:
            log.exception(
                "worker %s: the result of %s was not saved", self.name, claim.submission_id
            )
            return False

    def _finish_without_redis(self, job: Job, submission_id: int | None) -> None:
        """Redis went away while a horse ran: let the horse finish, save the result it sends,
        and reap it, through the database alone (rq's monitoring needs Redis). A horse that
        ended without a result has its submission run again, for the true reason."""
        log.error("worker %s: Redis went away during job %s; finishing it", self.name, job.id)
        pid = self.horse_pid
        if pid:
            self._take_result()
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            self._horse_pid = 0
        if submission_id is not None and not self._saved:
            with contextlib.suppress(Exception):  # the database may be down too: recovery's
                outcome = services.submission_retry_or_fail(
                    submission_id=submission_id, cause=services.QUEUE_LOST, worker_name=self.name
                )
                log.warning("submission %s without a result: %s", submission_id, outcome)

    def _count_outcome(self, job: Job, submission_id: int | None, saved: bool = False) -> None:
        """Count evaluations this worker finished; a duplicate job that found its submission
        already taken ("skipped") is not an evaluation. ``saved``: this worker saved its result,
        so it succeeded without asking the database."""
        if submission_id is None:
            return
        if saved:
            self.fleet_state.jobs_done += 1
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
            outcome = services.submission_retry_or_fail(
                submission_id=submission_id, cause=services.HORSE_DIED, worker_name=self.name
            )
        log.warning(
            "work horse for submission %s died (status %s): %s", submission_id, ret_val, outcome
        )

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        """rq's heartbeat (the worker's key and its executions' kept alive ``timeout`` s more),
        in one round trip instead of rq's three, and not again within ``HEARTBEAT_COALESCE_S``
        of one that keeps them alive as long: rq's loop sends one before and after each dequeue
        and after each job, twelve round trips a job in a burst for keys that live a minute."""
        if pipeline is not None:  # part of someone's transaction: as rq does it
            super().heartbeat(timeout, pipeline)
        else:
            ttl = timeout or self.worker_ttl + 60
            clock = time.monotonic()
            last_at, last_ttl = self._last_rq_heartbeat
            if clock - last_at >= HEARTBEAT_COALESCE_S or ttl > last_ttl:
                with self.connection.pipeline(transaction=False) as batch:
                    super().heartbeat(ttl, batch)
                    # rq's heartbeat brings back the worker's hash after Redis lost its data, not
                    # its place in the registry (rq info, Worker.all): idempotent, in the batch.
                    worker_registration.register(self, batch)
                    batch.execute()
                self._last_rq_heartbeat = (clock, ttl)
        if not self.is_horse:  # prepare_job_execution calls this in the horse too
            self.publish_heartbeat()

    def register_death(self) -> None:
        if self._ready is not None:  # what we start we stop: the horse that got no job
            ready_horse.stop(self._ready)
            self._ready = None
        sandboxing.clear_scratch(device_config(self.name))  # its model processes died with it
        super().register_death()
        self.fleet_state.state = "stopped"
        self.fleet_state.submission_id = None
        self.publish_heartbeat(force=True, with_sample=False)

    def publish_heartbeat(self, *, force: bool = False, with_sample: bool = True) -> None:
        """Publish state and stats; never lets a stats or Redis hiccup stop the worker."""
        interval = settings.EVAL_HEARTBEAT_INTERVAL_S
        if not force and time.monotonic() - self._last_publish < interval * 0.8:
            return
        try:
            sample = self._sample_now(wanted=with_sample)
            heartbeat.publish(self.connection, self.fleet_state, with_sample=sample)
        except StopRequested:
            raise
        except Exception:
            log.exception("worker %s could not publish its heartbeat", self.name)
        if self.fleet_state.state != "stopped":
            self._maybe_recover()

    def _sample_now(self, *, wanted: bool = True) -> bool:
        """Whether a publish now is also a sample (one per interval; a state change between
        samples, a job's start and end, keeps the stats), the stats refreshed if so. Counts as
        the publish (the next one waits an interval)."""
        now = time.monotonic()
        sample = wanted and now - self._last_publish >= settings.EVAL_HEARTBEAT_INTERVAL_S * 0.8
        self._last_publish = now
        if sample:
            try:
                self._refresh_stats()
            except StopRequested:
                raise
            except Exception:  # NVML or /proc trouble: publish the state without new stats
                log.exception("worker %s could not read its stats", self.name)
        return sample

    def _refresh_stats(self) -> None:
        reading = gpu_reading(*nvml_target())
        state = self.fleet_state
        state.gpu = reading.gpu.as_dict() if reading.gpu is not None else None
        state.gpu_problem = reading.problem
        state.no_gpu_reason = reading.no_gpu_reason
        state.host_stats = host_info().as_dict()
        # Decided once at start (self-test included); a worker object never started (tests)
        # applies the same rule to what NVML says now.
        choice = self.device_choice or current_choice(reading.gpu)
        state.device = "cuda" if choice.use_cuda else "cpu"
        state.memory_share = choice.memory_share
        state.cuda_problem = choice.problem

    def _maybe_recover(self, *, now: bool = False) -> None:
        try:
            if now:
                report: recovery.ReconcileReport | None = recovery.reconcile(
                    connection=self.connection, blocking=False
                )
            else:
                report = recovery.reconcile_if_due(self.connection)
        except StopRequested:
            raise
        except outages.REDIS_ERRORS as exc:  # an outage, not a fault of recovery's: one line
            log.warning("worker %s: recovery waits for Redis: %s", self.name, exc)
            return
        except DatabaseError as exc:
            # A connection the server dropped stays broken until closed: close it now, so the
            # next heartbeat connects again instead of failing for the rest of a long job.
            log.warning("worker %s: recovery waits for the database: %s", self.name, exc)
            db.close_old_connections()
            return
        except Exception:
            log.exception("worker %s: recovery failed; the next heartbeat tries again", self.name)
            return
        if report is not None and report.changed:
            log.warning("recovery: %s", report)
