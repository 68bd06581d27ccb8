"""The evaluation worker: an rq worker that runs each job in its own process and each model in a
confined model process of its own (``workers.sandboxing``, ``evaluation.sandbox``).

Start it with ``manage.py rqworker evaluation --worker-class workers.worker.EvaluationWorker``
(environment: ``EVAL_WORKER_NAME``, ``EVAL_GPU_UUID`` or ``EVAL_GPU_INDEX``,
``EVAL_GPU_MEMORY_FRACTION``; see the README for several workers on one GPU).

The model process, not a forked work horse, is the boundary a model cannot cross: its crash,
its memory and its time end it and not the worker, and the worker never initialises CUDA (only
model processes and the CUDA self-test's child do). So the worker runs its jobs itself, as rq's
``SimpleWorker`` does: the job claims its submission, hands the model to the model process,
scores its predictions and saves, all on the worker's warm connections. While idle the worker
starts and warms up its next model process. At start it pins its GPU for CUDA
(workers/device.py), runs the CUDA self-test (evaluation/selftest.py), checks the GPU's memory
plan (workers/memory_plan.py) and clears its own name's registration when the process that held
it is provably dead. A thread of its own publishes a heartbeat with NVML stats every few
seconds, a job running or not, and now and then runs the fleet's recovery under a Redis lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
from typing import Any, NoReturn

import onnxruntime as ort
from django import db
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from rq import Queue, worker_registration
from rq.exceptions import StopRequested
from rq.job import Job
from rq.worker import SimpleWorker

from evaluation.gpu import GpuInfo, gpu_reading, host_info
from evaluation.selftest import run_selftest
from queueing import heartbeat
from queueing.queues import queue_name
from submissions.models import Submission
from workers import memory_plan, outages, recovery, sandboxing
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
from workers.measurement import cpu_facts
from workers.pulse import Pulse
from workers.registration import dead_registration

log = logging.getLogger(__name__)


def worker_command(name: str, *, burst: bool = False) -> list[str]:
    """The command that runs one evaluation worker (from the project directory), as the README,
    the demo, the benchmarks and the tests start it. On ``settings.EVALUATION_QUEUE`` the worker
    listens to the queues of the device classes it serves (see ``resolve_queues``)."""
    command = [sys.executable, "manage.py", "rqworker", settings.EVALUATION_QUEUE]
    command += ["--worker-class", f"{__name__}.EvaluationWorker", "--name", name]
    return [*command, "--burst"] if burst else command


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


class EvaluationWorker(SimpleWorker):
    """rq's ``SimpleWorker`` (jobs run in this process) with the overrides the product needs,
    each saying why: ``work`` and ``handle_warm_shutdown_request`` (riding out Redis outages),
    ``bootstrap`` (the device, the sandbox and the heartbeat before rq registers the worker),
    ``dequeue_job_and_maintain_ttl`` (the next model process ahead, the fair turn),
    ``execute_job`` (the fleet's view of the job), ``kill_horse`` (a cancel kills the model
    process, the one process a job has besides the worker) and ``register_death`` (the
    heartbeat's thread stops first)."""

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
        # onnxruntime errors only: a CUDA fallback is caught once, by the self-test at
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
        self._publishing = threading.Lock()  # the pulse's thread and this one both publish
        self._pulse = Pulse(self._beat, settings.EVAL_HEARTBEAT_INTERVAL_S, self.name)
        self._redis_lost = False  # this run of rq's work loop ended because Redis went away
        self._asked_to_stop = False  # SIGINT or SIGTERM came (handle_warm_shutdown_request)
        sandboxing.set_stopping(False)
        self._name_claimed = False  # no live worker holds this name (bootstrap)

    # rq's work with its keyword arguments passed through as they come (django-rq names them).
    def work(self, burst: bool = False, **kwargs: Any) -> bool:  # type: ignore[override]
        """rq's work loop, started again (registration included) when it ended because Redis
        went away, once Redis answers: rq's loop quits on any error outside its dequeue. A
        worker that is not bounded (burst, ``max_jobs``, ``max_idle_time``) keeps working until
        it is asked to stop. What the worker started (its heartbeat's thread, its next model
        process) stops with it, on every way out."""
        try:
            return self._work_through_outages(burst, **kwargs)
        finally:
            self._pulse.stop()
            sandboxing.stop_spare()
            sandboxing.stop_server()
            if self._name_claimed:  # a worker refused its name leaves the live one's alone
                sandboxing.clear_scratch(device_config(self.name))
                self.fleet_state.state = "stopped"
                self.fleet_state.submission_id = None
                self.publish_heartbeat(force=True, with_sample=False)

    def _work_through_outages(self, burst: bool, **kwargs: Any) -> bool:
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
        sandboxing.set_stopping(True)  # the running job starts no further timing session
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
        self._name_claimed = True
        if self.device_choice is None:  # not again when the loop starts again after an outage
            self.start_device()
            # Left by an earlier process of this name (killed outright): no model process of
            # this one runs yet.
            sandboxing.clear_scratch(device_config(self.name))
        super().bootstrap(*args, **kwargs)
        self.publish_heartbeat(force=True)
        self._pulse.start()
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
            record_selftest(selftest.problem)
            choice = current_choice(reading.gpu)
        self.device_choice = choice
        self._check_sandbox()
        if not choice.use_cuda:
            cpu_facts()  # read once, at start (workers/measurement.py)
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

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        """rq's dequeue, after starting the next job's model process (it warms up while the
        worker waits), then the fair turn among the queued submissions of this worker's
        classes (workers/dispatch.py)."""
        if settings.EVAL_START_AHEAD:
            sandboxing.prepare_ahead(device_config(self.name))
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

    def execute_job(self, job: Job, queue: Queue) -> None:
        """rq's execution of the job in this process, announced to the fleet first: recovery
        must see this worker busy with the submission before the job claims it."""
        submission_id = submission_id_of(job)
        state = self.fleet_state
        state.state, state.submission_id, state.busy_since = "busy", submission_id, time.time()
        self.publish_heartbeat(force=True)
        try:
            super().execute_job(job, queue)
        except outages.REDIS_ERRORS:
            # The job itself saved through the database; rq's bookkeeping after it needs Redis.
            self._redis_lost = True
            log.error("worker %s: Redis went away during job %s", self.name, job.id)
            raise  # the work loop starts again once Redis answers (``work``)
        finally:
            self._count_outcome(job, submission_id)
            state.state, state.submission_id, state.busy_since = "idle", None, None
            state.horse_pid = None
            self.publish_heartbeat(force=True)

    def kill_horse(self, sig: Any = None) -> None:
        """rq's stop of a running job (a cancel, sent by ``services.submission_cancel``): kill
        the job's model process, the one process a job has besides the worker; the job sees it
        die and ends."""
        sandboxing.kill_running()

    def register_death(self) -> None:
        """rq's deregistration, once the heartbeat's thread has stopped: a beat after it would
        put the worker back in rq's registry."""
        self._pulse.stop()
        super().register_death()

    def _beat(self) -> None:
        """The pulse's beat: the fleet's heartbeat, and the worker's place in rq's registry
        (``rq info``, the admin's worker list), which a Redis that lost its data no longer holds
        while the worker's loop goes on."""
        self.publish_heartbeat()
        with contextlib.suppress(*outages.REDIS_ERRORS):  # the heartbeat said so already
            worker_registration.register(self)

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

    def publish_heartbeat(self, *, force: bool = False, with_sample: bool = True) -> None:
        """Publish state and stats (from this thread, or every interval from the pulse's);
        never lets a stats or Redis hiccup stop the worker."""
        interval = settings.EVAL_HEARTBEAT_INTERVAL_S
        with self._publishing:
            if not force and time.monotonic() - self._last_publish < interval * 0.8:
                return
            if self.fleet_state.state == "busy":
                self.fleet_state.horse_pid = sandboxing.running_pid()
            try:
                sample = self._sample_now(wanted=with_sample)
                heartbeat.publish(self.connection, self.fleet_state, with_sample=sample)
            except StopRequested:
                raise
            except outages.REDIS_ERRORS as exc:  # an outage: one line, not a traceback a beat
                log.warning("worker %s: heartbeat waits for Redis: %s", self.name, exc)
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
