"""Containment of one evaluation inside its work horse: an address-space limit (RLIMIT_AS).

Without it a model such as ConstantOfShape([100000, 100000]) asks for memory the kernel happily
overcommits, fills it page by page and brings the OOM killer down on whatever process is
largest, possibly not ours. Under the limit the allocation itself fails, onnxruntime reports it,
and the submission fails with a plain message while the machine carries on.

The limit is on *added* address space: the horse starts as a fork of the worker and already maps
Python, Django, numpy and onnxruntime, which is none of the model's doing.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator


def address_space_bytes() -> int:
    """Virtual memory this process maps now (VmSize), from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def added_memory_limit(limit_bytes: int | None) -> Iterator[int | None]:
    """Let the block add at most ``limit_bytes`` of address space; the old limit comes back after.

    Only the soft limit is lowered, so it can be raised again: a job run inside a long-lived
    process (a test, a SimpleWorker) is not left crippled. Yields the absolute limit set, or None
    when ``limit_bytes`` is None/0 or the platform has no RLIMIT_AS.
    """
    if not limit_bytes or not hasattr(resource, "RLIMIT_AS"):
        yield None
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    target = address_space_bytes() + limit_bytes
    if hard != resource.RLIM_INFINITY:
        target = min(target, hard)
    if soft != resource.RLIM_INFINITY:
        target = min(target, soft)  # never loosen a limit someone else set
    resource.setrlimit(resource.RLIMIT_AS, (target, hard))
    try:
        yield target
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
