"""Memory and time of refusing huge uploads, measured through the real WSGI application.

    SECRET_KEY=bench ALLOWED_HOSTS=testserver SECURE_SSL_REDIRECT=0 \
        DATABASE_URL=... REDIS_URL=... .venv/bin/python benchmarks/upload_memory.py

Production settings (DEBUG off: DEBUG's error pages read request bodies to show them).

For each body size: how many bytes the server read, the peak Python memory traced while it
handled the request (tracemalloc), the growth of the process's peak RSS, and the wall time.
Bodies over UPLOAD_MAX_BYTES are refused from Content-Length (413) before any byte is read;
bodies under it stream to a temporary file and are refused by the task's size limit (400).
Creates a throwaway user and task and deletes them afterwards.
"""

from __future__ import annotations

import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.files.base import ContentFile  # noqa: E402

from accounts.services import api_token_create  # noqa: E402
from submissions.models import Task  # noqa: E402
from tests.builders import digits_like, npz_bytes  # noqa: E402
from tests.portal.lazy_body import LazyMultipartBody, post_through_wsgi  # noqa: E402

MB, GB = 1024**2, 1024**3
SIZES = [5 * GB, 3 * GB, 1 * GB, 256 * MB]


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure(slug: str, token: str, size: int) -> dict[str, Any]:
    body = LazyMultipartBody(slug, size)
    rss_before = max_rss_mb()
    tracemalloc.start()
    started = time.perf_counter()
    status, _ = post_through_wsgi(body, token, body.length)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "body": f"{size / GB:.2f} GB",
        "status": status.split()[0],
        "read": f"{body.bytes_read / MB:.0f} MB",
        "peak traced": f"{peak / MB:.2f} MB",
        "peak RSS growth": f"{max_rss_mb() - rss_before:.1f} MB",
        "time": f"{elapsed:.2f} s",
    }


def main() -> None:
    user = get_user_model().objects.create_user("bench-upload-memory", password=None)
    task = Task(
        slug="bench-upload-memory",
        title="bench",
        batch_size=16,
        input_shape=[1, 8, 8],
        output_shape=[10],
        metric="accuracy",
        max_model_bytes=100 * MB,
    )
    task.dataset.save("bench.npz", ContentFile(npz_bytes(digits_like(n=16))), save=False)
    task.save()
    try:
        token = api_token_create(user=user, name="bench").secret
        print(f"baseline peak RSS {max_rss_mb():.0f} MB")
        for size in SIZES:
            print("  ".join(f"{k}: {v}" for k, v in measure(task.slug, token, size).items()))
    finally:
        task.dataset.delete(save=False)
        task.delete()
        user.delete()


if __name__ == "__main__":
    main()
