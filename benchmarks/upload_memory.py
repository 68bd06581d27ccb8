"""Memory of the web process while it takes uploads.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/uploads \
        .venv/bin/python -m benchmarks.upload_memory [--sizes 100,330] [--at-once 1,4] [--refused]

Accepted models (the default): digits classifiers carrying an initializer that makes them
``--sizes`` MB (10^6 bytes; generated with onnx.helper in a temporary folder, deleted after) are
uploaded through the API, ``--at-once`` of them together, to gunicorn run as production runs it
(DEBUG off, docker/gunicorn.conf.py) with one worker process of 4 threads, so that every upload
lands in the one process measured. The stack is the benchmark's own: a database
``<DATABASE_URL's name>_upload_memory`` on the same server and a redis-server on a free port,
both gone afterwards. For each case: the worker's RSS before, its peak while the uploads were
handled, after (3 s after the last answer), the peak of the worker together with the
inspection processes it started (the host's share), and the time until the last answer.

``--refused``: bodies the portal refuses, sent through the WSGI application in this process: how
many bytes the server read, the peak Python memory traced (tracemalloc), the growth of the
process's peak RSS, the wall time. Bodies over UPLOAD_MAX_BYTES are refused from Content-Length
(413) before any byte is read; bodies under it stream to a temporary file and are refused by the
task's size limit (400).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psutil
from onnx import TensorProto, helper, numpy_helper

from benchmarks import site_load
from benchmarks.chaos_stack import RedisServer, own_database
from tests.builders import digits_like, finish, npz_bytes

ROOT = Path(__file__).resolve().parents[1]
MB, MiB, GB = 1_000_000, 1024**2, 1024**3
REFUSED_SIZES = [5 * GB, 3 * GB, 1 * GB, 256 * MiB]
BOUNDARY = "----upload-memory-boundary"
SLUG = "bench-upload-memory"


def model_file(directory: Path, megabytes: int, seed: int) -> Path:
    """A digits classifier of about ``megabytes`` MB. The bulk is weights the size of a
    transformer's (768 x 768 float32, as ViT-B/16 has), summed and multiplied by zero into the
    logits, so the whole graph is needed to run it: many medium tensors, as a real network has,
    are what a long-lived process's allocator keeps after parsing, where one huge tensor would be
    mapped and unmapped whole. ``seed`` fills them, so each file differs (the portal refuses a
    duplicate)."""
    block = np.full((768, 768), seed, np.float32)
    blocks = [f"w{i}" for i in range(max(1, megabytes * MB // block.nbytes))]
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "W"], ["logits"]),
        helper.make_node("Sum", blocks, ["blocks"]),
        helper.make_node("ReduceSum", ["blocks"], ["total"], keepdims=0),
        helper.make_node("Mul", ["total", "zero"], ["nothing"]),
        helper.make_node("Add", ["logits", "nothing"], ["output"]),
    ]
    init = [
        numpy_helper.from_array(np.eye(64, 10, dtype=np.float32), "W"),
        numpy_helper.from_array(np.array(0, np.float32), "zero"),
        *(numpy_helper.from_array(block, name) for name in blocks),
    ]
    path = directory / f"model-{megabytes}-{seed}.onnx"
    path.write_bytes(finish(helper.make_graph(nodes, "blocks", [x], [y], init)))
    return path


def post_model(base: str, token: str, path: Path) -> int:
    """POST /api/submissions/ with ``path`` streamed from disk; the answer's status."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="task"\r\n\r\n{SLUG}\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="{path.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    address = urlsplit(base)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=600)
    try:
        connection.putrequest("POST", "/api/submissions/")
        connection.putheader("Authorization", f"Token {token}")
        connection.putheader("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")
        connection.putheader("Content-Length", str(len(head) + path.stat().st_size + len(tail)))
        connection.endheaders()
        connection.send(head)
        with path.open("rb") as f:
            while chunk := f.read(MiB):
                connection.send(chunk)
        connection.send(tail)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


class PeakRss:
    """Samples a process's RSS, alone and with its descendants, until stopped; the peaks."""

    def __init__(self, process: psutil.Process) -> None:
        self.process = process
        self.alone = self.with_children = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):
                alone = self.process.memory_info().rss
                children = 0
                for child in self.process.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        children += child.memory_info().rss
                self.alone = max(self.alone, alone)
                self.with_children = max(self.with_children, alone + children)
            time.sleep(0.02)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(base: str, token: str, worker: psutil.Process, paths: list[Path]) -> dict[str, str]:
    before = worker.memory_info().rss
    statuses: list[int] = []
    started = time.perf_counter()
    with PeakRss(worker) as peak:
        threads = [
            threading.Thread(target=lambda p=p: statuses.append(post_model(base, token, p)))
            for p in paths
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    elapsed = time.perf_counter() - started
    time.sleep(3)
    after = worker.memory_info().rss
    return {
        "answers": ",".join(str(s) for s in sorted(statuses)),
        "before": f"{before / MiB:.0f} MiB",
        "peak": f"{peak.alone / MiB:.0f} MiB",
        "after": f"{after / MiB:.0f} MiB",
        "after - before": f"{(after - before) / MiB:+.0f} MiB",
        "peak with inspections": f"{peak.with_children / MiB:.0f} MiB",
        "time to the last answer": f"{elapsed:.1f} s",
    }


def seed_task(max_model_bytes: int) -> str:
    """A digits task that takes the benchmark's models, and a user's API token."""
    from django.contrib.auth import get_user_model
    from django.core.files.base import ContentFile

    from accounts.services import api_token_create
    from submissions.models import Task

    user = get_user_model().objects.create_user("bench-upload-memory", password=None)
    task = Task(
        slug=SLUG, title="bench", batch_size=16, input_shape=[1, 8, 8], output_shape=[10],
        metric="accuracy", max_model_bytes=max_model_bytes, submissions_per_day=1000,
        queued_per_user=1000,
    )  # fmt: skip
    task.dataset.save("bench.npz", ContentFile(npz_bytes(digits_like(n=16))), save=False)
    task.save()
    return api_token_create(user=user, name="bench").secret


@contextlib.contextmanager
def gunicorn(env: dict[str, str]) -> Iterator[tuple[str, psutil.Process]]:
    """gunicorn, one worker process of 4 threads; its base URL and that worker. Stopped on exit."""
    port = site_load._free_port()
    command = [
        sys.executable, "-m", "gunicorn", "--config", "docker/gunicorn.conf.py",
        "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "4",
        "portal.wsgi:application",
    ]  # fmt: skip
    log = env["PORTAL_VAR_DIR"] + "/gunicorn.log"
    with open(log, "ab") as out:
        master = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    try:
        base = f"http://127.0.0.1:{port}"
        site_load._wait_healthy(base, master)
        yield base, psutil.Process(master.pid).children()[0]
    finally:
        site_load._stop(master)


def accepted(args: argparse.Namespace, env: dict[str, str], scratch: Path) -> None:
    token = seed_task(max_model_bytes=(max(args.sizes) + 10) * MB)
    from django.db import connections

    connections.close_all()
    seed = 0
    with gunicorn(env) as (base, worker):
        warm_up = model_file(scratch, 1, seed)
        print(f"after starting: {worker.memory_info().rss / MiB:.0f} MiB; ", end="")
        assert post_model(base, token, warm_up) == 201, "the warm-up upload was refused"
        rss = worker.memory_info().rss / MiB
        print(f"after a first upload ({warm_up.stat().st_size / MB:.1f} MB): {rss:.0f} MiB")
        for size in args.sizes:
            for at_once in args.at_once:
                paths = []
                for _ in range(at_once):
                    seed += 1
                    paths.append(model_file(scratch, size, seed))
                figures = measure(base, token, worker, paths)
                print(
                    f"{size} MB x {at_once}: " + "  ".join(f"{k} {v}" for k, v in figures.items())
                )
                for path in paths:
                    path.unlink()


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def refused() -> None:
    from tests.portal.lazy_body import LazyMultipartBody, post_through_wsgi

    token = seed_task(max_model_bytes=100 * MiB)
    print(f"baseline peak RSS {max_rss_mb():.0f} MB")
    for size in REFUSED_SIZES:
        body = LazyMultipartBody(SLUG, size)
        rss_before = max_rss_mb()
        tracemalloc.start()
        started = time.perf_counter()
        status, _ = post_through_wsgi(body, token, body.length)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"body: {size / GB:.2f} GB  status: {status.split()[0]}  "
            f"read: {body.bytes_read / MiB:.0f} MB  peak traced: {peak / MiB:.2f} MB  "
            f"peak RSS growth: {max_rss_mb() - rss_before:.1f} MB  time: {elapsed:.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,330", help="model sizes in MB")
    parser.add_argument("--at-once", default="1,4", help="uploads sent together")
    parser.add_argument("--refused", action="store_true", help="the refused-bodies measure")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.at_once = [int(n) for n in args.at_once.split(",")]
    admin = urlsplit(os.environ["DATABASE_URL"])
    name = f"{admin.path.lstrip('/') or 'portal'}_upload_memory"
    with (
        tempfile.TemporaryDirectory(prefix="upload-memory-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        scratch = Path(tmp)
        redis = RedisServer(
            site_load._free_port(), stack.enter_context(open(f"{tmp}/redis.log", "ab"))
        )
        stack.callback(redis.stop)  # first: a start that fails may have left it running
        redis.start()
        env = {
            **os.environ, **site_load.SITE_ENV, "LOG_LEVEL": "WARNING",
            "ALLOWED_HOSTS": "127.0.0.1,testserver", "REDIS_URL": redis.url,
            "DATABASE_URL": urlunsplit(admin._replace(path=f"/{name}")),
            "PORTAL_VAR_DIR": tmp, "MEDIA_ROOT": f"{tmp}/media",
            "SECRET_KEY": os.environ.get("SECRET_KEY") or "upload-memory-only-" + "x" * 40,
            "DJANGO_SETTINGS_MODULE": "portal.settings",
        }  # fmt: skip
        os.environ.update(env)
        import django

        django.setup()
        from django.core.management import call_command

        stack.enter_context(own_database(urlunsplit(admin._replace(path="/postgres")), name))
        call_command("migrate", verbosity=0)
        if args.refused:
            refused()
        else:
            accepted(args, env, scratch)


if __name__ == "__main__":
    main()
