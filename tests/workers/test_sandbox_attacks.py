"""Proof by attack: hostile code run exactly where a model is parsed and run, in a real worker.

An ONNX file cannot carry Python, so the worker runs a test-only hook (EVAL_SANDBOX_TEST_HOOK)
inside its model process just before the session is created, for models that carry a marker.
What the hook tries stands for what a model that took over onnxruntime could try. Each attack
must fail or be stopped, the submission failed with a specific message, the worker still
serving, and an honest model on the same worker scored exactly as in this process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from django.conf import settings

from evaluation.runner import Dataset, DeviceConfig, evaluate
from submissions.lifecycle import services
from submissions.models import Submission
from tests.workers.fleet_support import fast_model, row, start_worker, submit, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
_ = start_worker

SECRET = "s3cret-only-the-worker-knows"

_HOOK = r"""
import json, os, signal, socket, time
if b"hang-me" in model_bytes:
    time.sleep(600)
if b"spin-me" in model_bytes:
    while True:
        pass
if b"eat-me" in model_bytes:
    import numpy
    hoard = []
    while True:  # reserved, not written: the address space runs out, not the CPU time
        hoard.append(numpy.empty(256 << 20, dtype=numpy.uint8))
if b"attack-me" in model_bytes:
    report = {}
    def attempt(name, action):
        try:
            action()
            report[name] = "succeeded"
        except BaseException as exc:
            report[name] = f"refused: {type(exc).__name__}: {exc}"
    attempt("postgres", lambda: socket.create_connection(("127.0.0.1", 5432), timeout=2))
    attempt("redis", lambda: socket.create_connection(("127.0.0.1", 6379), timeout=2))
    attempt("outside", lambda: socket.create_connection(("192.0.2.1", 80), timeout=2))
    attempt("unix_socket", lambda: socket.socket(socket.AF_UNIX).connect(PG_SOCKET))
    attempt("parent_environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read())
    attempt("worker_settings", lambda: open(SETTINGS_FILE).read())
    attempt("write_outside", lambda: open(OUTSIDE_FILE, "w").write("pwned"))
    attempt("write_scratch", lambda: open("scratch-file", "w").write("fine"))
    attempt("fork", lambda: os.fork() or os._exit(0))
    attempt("exec", lambda: os.execv("/bin/true", ["true"]))
    attempt("signal_worker", lambda: os.kill(os.getppid(), signal.SIGTERM))
    report["environment"] = sorted(os.environ)
    report["own_environ"] = open("/proc/self/environ", "rb").read().decode(errors="replace")
    raise RuntimeError("ATTACK REPORT " + json.dumps(report) + " END")
"""


def _hook(outside: Path) -> str:
    return (
        _HOOK.replace("PG_SOCKET", repr("/var/run/postgresql/.s.PGSQL.5432"))
        .replace("SETTINGS_FILE", repr(str(Path(settings.BASE_DIR) / "portal" / "settings.py")))
        .replace("OUTSIDE_FILE", repr(str(outside)))
    )


def _marked(marker: str) -> bytes:
    model = onnx.load_from_string(fast_model())
    model.doc_string = marker
    return model.SerializeToString()


def _final(submission: Submission, workers: list[Any], timeout: float = 90) -> Submission:
    return wait_for(
        "a final state", lambda: row(submission).is_final and row(submission), timeout, workers
    )


@pytest.fixture
def hostile_worker(start_worker: Any, tmp_path: Path) -> Any:
    return start_worker(
        "hostile", EVAL_SANDBOX_TEST_HOOK=_hook(tmp_path / "pwned"), SECRET_KEY=SECRET
    )


def test_a_model_process_reaches_no_network_no_secret_no_file_and_no_process(
    hostile_worker: Any, tmp_path: Path, alice: Any, make_task: Any
) -> None:
    task = make_task(submissions_per_day=100)
    attacked = _final(submit(alice, task, _marked("attack-me")), [hostile_worker])

    assert attacked.status == "failed" and attacked.failed_by_system
    found = re.search(r"ATTACK REPORT (\{.*?\}) END", attacked.log)
    assert found, attacked.log
    report = json.loads(found.group(1))
    for attack in (
        "postgres",
        "redis",
        "outside",
        "unix_socket",
        "parent_environ",
        "worker_settings",
        "write_outside",
        "fork",
        "exec",
        "signal_worker",
    ):
        assert report[attack].startswith("refused"), (attack, report[attack])
    assert report["write_scratch"] == "succeeded"
    leaked = {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    assert not leaked & set(report["environment"]), report["environment"]
    assert SECRET not in attacked.log and SECRET not in report["own_environ"]
    assert not (tmp_path / "pwned").exists()
    assert hostile_worker.process.poll() is None, hostile_worker.log()

    honest_model = fast_model()
    honest = _final(submit(alice, task, honest_model), [hostile_worker])
    assert honest.status == "succeeded", honest.log
    with task.dataset.open("rb") as f, np.load(f, allow_pickle=False) as arrays:
        data = Dataset.from_arrays({k: arrays[k] for k in arrays.files})
    reference = evaluate(honest_model, data, task.spec(), DeviceConfig(intra_op_threads=1))
    assert honest.score == pytest.approx(reference.score, abs=0)


def test_a_model_that_hangs_eats_memory_or_spins_is_stopped_with_its_reason(
    start_worker: Any, tmp_path: Path, alice: Any, make_task: Any
) -> None:
    worker = start_worker(
        "limits", EVAL_SANDBOX_TEST_HOOK=_hook(tmp_path / "pwned"), EVAL_SANDBOX_CPU_SECONDS="2"
    )
    quick = make_task(slug="quick", submissions_per_day=100, time_limit_s=3)
    task = make_task(submissions_per_day=100, time_limit_s=60)

    hung = _final(submit(alice, quick, _marked("hang-me")), [worker])
    assert hung.status == "failed" and "3 s" in hung.error_message, hung.error_message
    assert "loading" in hung.error_message

    eaten = _final(submit(alice, task, _marked("eat-me")), [worker])
    assert eaten.status == "failed"
    assert "ran out of memory" in eaten.error_message, eaten.error_message

    spun = _final(submit(alice, task, _marked("spin-me")), [worker], timeout=120)
    assert spun.status == "failed" and spun.attempts == 2
    assert spun.error_message == services.HORSE_DIED.message
    assert "CPU time limit" in spun.log, spun.log

    assert worker.process.poll() is None, worker.log()
    honest = _final(submit(alice, task, fast_model()), [worker])
    assert honest.status == "succeeded", honest.log
