"""Which device classes a worker serves: its device (CPU, or a GPU and its name), the operator's
classes (``submissions.DeviceClass``) and ``EVAL_DEVICE_CLASSES``, which wins when set. A CPU worker
serves ``cpu``; a CUDA worker serves ``gpu`` and every class whose ``gpu_name_contains`` is in its
GPU's name. Workers read the classes when they start: restart them after adding one."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings

from queueing.queues import CPU_CLASS, GPU_CLASS
from submissions.models import DeviceClass
from workers.device import device_config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClassRule:
    """What a worker needs to know about one device class to decide whether it serves it."""

    slug: str
    gpu_name_contains: str = ""


def served_classes(
    *, device: str, gpu_name: str | None, override: Sequence[str], rules: Iterable[ClassRule]
) -> list[str]:
    """The device classes a worker serves, given what it runs on ("cuda" or "cpu"), its GPU's
    name, and the operator's override (EVAL_DEVICE_CLASSES), which wins when given."""
    if override:
        return list(dict.fromkeys(override))
    if device != "cuda":
        return [CPU_CLASS]
    name = (gpu_name or "").casefold()
    matched = [
        rule.slug
        for rule in rules
        if rule.gpu_name_contains and rule.gpu_name_contains.casefold() in name
    ]
    return list(dict.fromkeys([GPU_CLASS, *matched]))


def known_classes() -> list[ClassRule]:
    rows = DeviceClass.objects.values_list("slug", "gpu_name_contains")
    return [ClassRule(slug, contains) for slug, contains in rows]


def detected_device() -> tuple[str, str | None]:
    """("cuda" or "cpu", the GPU's name) by the device rule of workers/device.py, read
    without creating a session (a worker parent must never initialise CUDA)."""
    config = device_config()
    return ("cuda", config.device_name) if config.use_cuda else ("cpu", None)


def worker_classes(*, device: str, gpu_name: str | None) -> list[str]:
    """This worker's classes, from its device, the operator's classes and EVAL_DEVICE_CLASSES."""
    rules = known_classes()
    classes = served_classes(
        device=device, gpu_name=gpu_name, override=settings.EVAL_DEVICE_CLASSES, rules=rules
    )
    unknown = sorted(set(classes) - {rule.slug for rule in rules})
    if unknown:
        log.warning("device class(es) %s are not defined in the admin yet", ", ".join(unknown))
    return classes
