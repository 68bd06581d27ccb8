"""Where and how many at once an upload's model is inspected: the web process's memory stays
bounded whatever the size or number of uploads (evaluation/inspect_process.py says why a
process of its own)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from evaluation.inspect import ModelInfo, inspect_model
from evaluation.inspect_process import inspect_out_of_process
from evaluation.spec import TaskSpec
from plumbing.host_slots import SlotsFull, slot_held
from plumbing.refusals import Unavailable

# What an upload refused for want of an inspection slot is told to wait: about one large
# model's inspection.
UPLOAD_BUSY_RETRY_AFTER_S = 15
UPLOAD_BUSY = (
    "The server is inspecting as many uploads as it can at once; nothing of this upload was "
    "kept. Please upload it again in a moment."
)


def upload_inspected(path: Path, spec: TaskSpec) -> ModelInfo:
    """What inspection finds in the uploaded model at ``path``, or ModelRejected saying why not.

    Parsing a model holds about twice its size, and a long-lived web process keeps much of what
    a large one took. So a model of UPLOAD_INSPECT_OUT_OF_PROCESS_BYTES or more is inspected in
    a process of its own, holding one of this host's inspection slots: no number of uploads at
    once can take more memory than the slots allow, and one that finds none free within
    UPLOAD_INSPECTIONS_WAIT_S is answered 503 (Unavailable). A smaller model is inspected here:
    its memory is small, and starting a process would cost its upload many times its inspection.
    """
    try:
        if path.stat().st_size < settings.UPLOAD_INSPECT_OUT_OF_PROCESS_BYTES:
            return inspect_model(path, spec)
        with slot_held(
            settings.UPLOAD_INSPECTIONS_DIR,
            settings.UPLOAD_INSPECTIONS_MAX,
            wait_s=settings.UPLOAD_INSPECTIONS_WAIT_S,
        ):
            return inspect_out_of_process(path, spec)
    except SlotsFull:
        raise Unavailable(UPLOAD_BUSY, retry_after_s=UPLOAD_BUSY_RETRY_AFTER_S) from None
