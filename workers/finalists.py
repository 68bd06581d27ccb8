"""The rq job that re-measures a task's finalists (``submissions.boards.finalists``): one job per
campaign, so one worker of the chosen device class times every finalist, one after the other.

Each finalist is timed in the campaign's number of fresh sessions, each a model process of its
own that runs one batch and the timing phase under the device's timing lock, exactly as an
evaluation's further sessions are (``workers.jobs``); nothing is scored. A finalist that cannot
be timed (its model file gone, the model failing, its process dying) is recorded as failed with
the reason and the campaign goes on with the next.
"""

from __future__ import annotations

import dataclasses
import logging

from rq.timeouts import JobTimeoutException

from evaluation.runner import DeviceConfig, EvaluationError
from evaluation.sandbox import ModelProcessDied
from evaluation.spec import TaskSpec
from evaluation.timing import Timing, combine_sessions
from submissions.boards import finalists
from submissions.models import FinalistCampaign, FinalistMeasurement
from workers import sandboxing
from workers.device import device_config
from workers.jobs import current_worker_name, run_in_process, task_dataset

log = logging.getLogger(__name__)


def remeasure_finalists(campaign_id: int) -> str:
    name = current_worker_name()
    campaign = finalists.finalist_campaign(campaign_id)
    device = device_config(name)
    # Timed as the chosen class requires: a GPU class refuses to time on the CPU.
    spec = dataclasses.replace(
        campaign.task.spec(), requires_gpu=campaign.device_class.requires_gpu
    )
    timed = failed = 0
    for measurement_id in finalists.finalist_waiting_ids(campaign_id=campaign_id):
        if sandboxing.stopping():  # the rest wait; recovery gives them a new job
            return f"stopped: {timed} timed, {failed} failed"
        m = finalists.finalist_measurement_start(measurement_id=measurement_id, worker_name=name)
        if m is None:
            continue
        message = _remeasure_one(m, campaign, spec, device)
        if message:
            failed += 1
            finalists.finalist_measurement_fail(measurement_id=m.pk, message=message)
        else:
            timed += 1
    sandboxing.reap_stopped()
    finalists.finalist_campaign_finish(campaign_id=campaign_id)
    return f"{timed} timed, {failed} failed"


def _remeasure_one(
    m: FinalistMeasurement, campaign: FinalistCampaign, spec: TaskSpec, device: DeviceConfig
) -> str:
    """Time one finalist and save its figures; "" when done, else why it could not be."""
    submission = m.submission
    try:
        timing = _timed(m, campaign, spec, device)
    except FileNotFoundError:
        return f"Its model file {submission.model_file.name!r} is gone from storage."
    except EvaluationError as exc:
        return str(exc)
    except ModelProcessDied as exc:
        return f"Its model process died: {exc.why}"
    except JobTimeoutException:
        finalists.finalist_measurement_fail(
            measurement_id=m.pk, message="The campaign's job ran past its time limit."
        )
        raise
    except Exception as exc:
        log.exception("finalist %s of campaign %s: not timed", submission.pk, campaign.pk)
        return f"An error on our side: {type(exc).__name__}: {exc}"
    finalists.finalist_measurement_save(
        measurement_id=m.pk,
        timing=timing,
        batch_size=spec.batch_size,
        device_name=device.device_name,
    )
    return ""


def _timed(
    m: FinalistMeasurement, campaign: FinalistCampaign, spec: TaskSpec, device: DeviceConfig
) -> Timing:
    """The campaign's sessions of one finalist, combined (the medians and their spread)."""
    submission = m.submission
    with submission.model_file.open("rb") as f:
        model_bytes = f.read()
    batch = task_dataset(submission.task).inputs[: spec.batch_size]
    timings: list[Timing] = []
    for _ in range(campaign.sessions):
        if sandboxing.stopping() and timings:  # the figures stand on the sessions timed so far
            break
        outcome, _ = run_in_process(
            submission, model_bytes, batch, spec, device, device_class=campaign.device_class_id
        )
        timings.append(outcome.run.timing)
    return combine_sessions(timings)
