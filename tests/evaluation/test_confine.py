"""evaluation.confine: each attack runs in a fresh interpreter that confines itself first, the way
the model process does, and reports a JSON verdict; the test asserts the attack failed.

Confinement is irreversible, so nothing here confines the test process itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from evaluation import landlock
from evaluation.confine import default_read_paths, probe

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534

CHILD = """
import json, os, sys
from evaluation.confine import Confinement, confine
settings = json.loads(sys.argv[1])
{before}
protections = confine(Confinement(**settings))

def attack():
{attack}

verdict = {{"protections": protections.as_dict()}}
try:
    verdict["result"] = repr(attack())
    verdict["refused"] = False
except BaseException as error:
    verdict["error"] = f"{{type(error).__name__}}: {{error}}"
    verdict["refused"] = True
print(json.dumps(verdict))
"""


def run_confined(
    scratch: Path, attack: str, before: str = "", stdin: bytes = b"", **settings: Any
) -> subprocess.CompletedProcess[bytes]:
    """Run `attack` (the body of a function) confined to `scratch`; the interpreter gets a clean
    environment, as the worker gives the model process."""
    confinement = {"scratch": str(scratch), "read_paths": default_read_paths(), **settings}
    code = CHILD.format(before=before, attack=textwrap.indent(textwrap.dedent(attack), "    "))
    return subprocess.run(
        [sys.executable, "-c", code, json.dumps(confinement)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )


def verdict(scratch: Path, attack: str, **kwargs: Any) -> dict[str, Any]:
    result = run_confined(scratch, attack, **kwargs)
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout.decode().splitlines()[-1])


def refused_by_confinement(scratch: Path, attack: str, **kwargs: Any) -> str:
    found = verdict(scratch, attack, **kwargs)
    assert found["refused"], f"the attack succeeded: {found.get('result')}"
    return str(found["error"])


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    path = tmp_path / "scratch"
    path.mkdir()
    return path


def test_probe_reports_every_protection_active_on_this_host() -> None:
    try:
        abi = landlock.abi_version()
    except OSError as error:
        pytest.skip(f"this kernel has no Landlock: {error}")
    found = probe()
    assert found.active() == ["no_new_privs", "seccomp", "landlock", "netns", "rlimits"]
    assert found.landlock_abi == abi
    if abi >= 6:
        assert found.missing == ()
    assert found.limits == {"open_files": 1024, "file_size_bytes": 64 << 20, "core_bytes": 0}


def test_a_threaded_process_is_refused_before_anything_is_applied(scratch: Path) -> None:
    before = (
        "import threading; threading.Thread(target=__import__('time').sleep, args=(2,)).start()"
    )
    result = run_confined(scratch, "return 1", before=before)
    assert result.returncode != 0
    assert b"single-threaded" in result.stderr


@pytest.mark.parametrize("port", [5432, 6379], ids=["postgresql", "redis"])
def test_tcp_to_the_database_and_redis_is_refused(scratch: Path, port: int) -> None:
    attack = f"import socket; return socket.create_connection(('127.0.0.1', {port}), timeout=2)"
    assert refused_by_confinement(scratch, attack).startswith("PermissionError")


@pytest.mark.parametrize(
    ("cuda_driver", "refusal"),
    [(False, "PermissionError"), (True, "FileNotFoundError")],  # a CUDA process: no connect
    ids=["cpu", "cuda"],
)
def test_the_postgresql_unix_socket_is_refused(
    scratch: Path, cuda_driver: bool, refusal: str
) -> None:
    path = "/var/run/postgresql/.s.PGSQL.5432"
    if not os.path.exists(path):
        pytest.skip(f"no {path} on this host")
    attack = f"""
        import socket
        s = socket.socket(socket.AF_UNIX)
        return s.connect({path!r})
    """
    error = refused_by_confinement(scratch, attack, cuda_driver=cuda_driver)
    assert error.startswith(refusal), error


@pytest.mark.parametrize("family", ["AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"])
def test_no_socket_of_any_family_can_be_made(scratch: Path, family: str) -> None:
    attack = f"import socket; return socket.socket(socket.{family}, socket.SOCK_DGRAM)"
    assert refused_by_confinement(scratch, attack).startswith("PermissionError")


@pytest.mark.parametrize("family", ["AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"])
def test_a_cuda_process_may_make_a_unix_socket_and_no_other(scratch: Path, family: str) -> None:
    """The CUDA driver's initialisation needs a unix socket (it looks for an MPS server)."""
    unix = verdict(scratch, "import socket; return socket.socket(socket.AF_UNIX)", cuda_driver=True)
    assert not unix["refused"], unix.get("error")
    attack = f"import socket; return socket.socket(socket.{family}, socket.SOCK_DGRAM)"
    error = refused_by_confinement(scratch, attack, cuda_driver=True)
    assert error.startswith("PermissionError")


def test_a_cuda_process_still_cannot_reach_a_named_unix_socket(scratch: Path) -> None:
    """Landlock does not govern connecting to a named unix socket: the filter refuses to."""
    listening = socket.socket(socket.AF_UNIX)
    path = str(scratch.parent / "listening.sock")
    listening.bind(path)
    listening.listen()
    try:
        for attack in (
            f"import socket; return socket.socket(socket.AF_UNIX).connect({path!r})",
            f"import socket; return socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)"
            f".sendto(b'x', {path!r})",
            "import socket; return socket.socket(socket.AF_UNIX).bind('\\0abstract')",
        ):
            error = refused_by_confinement(scratch, attack, cuda_driver=True)
            assert error.startswith(("FileNotFoundError", "PermissionError")), error
    finally:
        listening.close()


def test_a_cuda_process_may_name_its_threads_and_write_nothing_else_in_proc(
    scratch: Path,
) -> None:
    """The CUDA driver names its threads through /proc/self/task/<tid>/comm."""
    attack = """
        import threading
        done = []
        def name_me():
            tid = threading.get_native_id()
            try:
                with open(f"/proc/self/task/{tid}/comm", "w") as comm:
                    comm.write("cuda-EvtHandlr")
                done.append(open(f"/proc/self/task/{tid}/comm").read().strip())
            except OSError as error:
                done.append(error)
        t = threading.Thread(target=name_me); t.start(); t.join()
        if isinstance(done[0], OSError):
            raise done[0]
        return done
    """
    found = verdict(scratch, attack, cuda_driver=True)
    assert found["result"] == "['cuda-EvtHandlr']", found.get("error")
    assert refused_by_confinement(scratch, attack).startswith("PermissionError")  # not on CPU
    parent = f"return open('/proc/{os.getpid()}/comm', 'w').write('x')"
    assert refused_by_confinement(scratch, parent, cuda_driver=True).startswith("PermissionError")


def test_the_network_namespace_is_a_new_one(scratch: Path) -> None:
    found = verdict(scratch, "return os.readlink('/proc/self/ns/net')")
    assert found["protections"]["network_namespace"]
    assert found["result"] != repr(os.readlink("/proc/self/ns/net"))


def test_a_secret_outside_the_read_paths_is_unreadable(scratch: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    before = f"assert open({str(secret)!r}).read() == 'hunter2'"  # readable until confined
    attack = f"return open({str(secret)!r}).read()"
    assert refused_by_confinement(scratch, attack, before=before).startswith("PermissionError")


def test_the_project_root_with_its_settings_is_unreadable(scratch: Path) -> None:
    attack = f"return os.listdir({str(ROOT)!r})"
    assert refused_by_confinement(scratch, attack).startswith("PermissionError")


def test_the_parent_environment_is_unreadable(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONFINE_TEST_SECRET", "hunter2")  # in the worker's place: this process
    for name in ("environ", "maps", "cmdline", "mem"):
        attack = f"return open('/proc/{os.getpid()}/{name}', 'rb').read()"
        assert refused_by_confinement(scratch, attack).startswith("PermissionError"), name


def test_its_own_proc_files_stay_readable(scratch: Path) -> None:
    found = verdict(scratch, "return open('/proc/self/status').read().startswith('Name:')")
    assert found["result"] == "True"


def test_writes_succeed_in_scratch_only(scratch: Path, tmp_path: Path) -> None:
    inside = "return open('inside.txt', 'w').write('x')"
    assert verdict(scratch, f"os.chdir({str(scratch)!r}); {inside}")["result"] == "1"
    for target in (tmp_path / "outside.txt", Path("/tmp") / "confine-test.txt"):
        attack = f"return open({str(target)!r}, 'w').write('x')"
        assert refused_by_confinement(scratch, attack).startswith("PermissionError")
        assert not target.exists()


@pytest.mark.parametrize(
    "attack",
    [
        "return os.fork()",
        "import subprocess; return subprocess.run(['/bin/true'])",
        "return os.execv('/bin/true', ['true'])",
        "import socket; return socket.socket(socket.AF_INET).close()",
    ],
    ids=["fork", "subprocess", "execve", "socket"],
)
def test_no_new_process_or_program(scratch: Path, attack: str) -> None:
    assert refused_by_confinement(scratch, attack).startswith("PermissionError")


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x32 is an x86_64 ABI")
def test_the_x32_abi_does_not_slip_past_the_filter(scratch: Path) -> None:
    attack = """
        import ctypes
        return ctypes.CDLL(None).syscall(0x40000000 + 41, 2, 1, 0)  # socket(AF_INET) via x32
    """
    assert run_confined(scratch, attack).returncode == -signal.SIGSYS


def test_root_cannot_raise_its_limits_back(scratch: Path) -> None:
    attack = "import resource; return resource.setrlimit(resource.RLIMIT_CPU, (-1, -1))"
    assert refused_by_confinement(scratch, attack, cpu_seconds=30)


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A process of ours, in the worker's place, for the confined process to try to signal."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def test_signals_to_other_processes_are_refused(
    scratch: Path, bystander: subprocess.Popen[bytes]
) -> None:
    attack = f"import signal; return os.kill({bystander.pid}, signal.SIGTERM)"
    assert refused_by_confinement(scratch, attack).startswith("PermissionError")
    time.sleep(0.2)
    assert bystander.poll() is None
    assert verdict(scratch, "return os.kill(os.getpid(), 0)")["result"] == "None"


def test_cpu_spin_past_the_limit_is_killed(scratch: Path) -> None:
    result = run_confined(scratch, "while True: pass", cpu_seconds=1)
    assert result.returncode in (-signal.SIGXCPU, -signal.SIGKILL)


def test_allocation_past_the_address_space_limit_raises_memory_error(scratch: Path) -> None:
    attack = "return len(bytearray(2 << 30))"
    error = refused_by_confinement(scratch, attack, address_space_bytes=1 << 30)
    assert error.startswith("MemoryError")


def tiny_matmul_model() -> bytes:
    weight = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def test_threads_numpy_and_onnxruntime_work_confined(scratch: Path) -> None:
    attack = """
        import threading
        threads = [threading.Thread(target=sum, args=([1, 2],)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        import numpy as np  # after confine: its BLAS threads start confined
        import onnxruntime as ort
        a = np.arange(256 * 256, dtype=np.float64).reshape(256, 256)
        assert np.allclose(a @ np.eye(256), a)
        session = ort.InferenceSession(sys.stdin.buffer.read(), providers=["CPUExecutionProvider"])
        (y,) = session.run(None, {"x": np.ones((1, 2), dtype=np.float32)})
        return y.tolist()
    """
    found = verdict(scratch, attack, stdin=tiny_matmul_model(), address_space_bytes=16 << 30)
    assert not found["refused"], found.get("error")
    assert found["result"] == "[[4.0, 6.0]]"


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory another uid can reach (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="confine-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


# The interpreter lives under /root here, which other uids cannot enter: the child starts as root,
# imports what it needs, then drops to nobody for good (and becomes dumpable again, as a process
# exec'd by that user is) before confining itself.
DROP_TO_NOBODY = f"""
import ctypes, socket
os.setgroups([])
os.setresgid({NOBODY}, {NOBODY}, {NOBODY})
os.setresuid({NOBODY}, {NOBODY}, {NOBODY})
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
assert open(settings.pop("secret")).read() == "hunter2"  # readable until confined
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the other tests already run unprivileged")
def test_an_unprivileged_process_is_confined_too(shared_tmp: Path) -> None:
    scratch = shared_tmp / "scratch"
    scratch.mkdir()
    os.chown(scratch, NOBODY, NOBODY)
    secret = shared_tmp / "secret.txt"
    secret.write_text("hunter2")
    secret.chmod(0o644)
    attack = f"""
        assert os.getuid() == {NOBODY}
        open(os.path.join({str(scratch)!r}, 'inside.txt'), 'w').write('x')
        for family in (socket.AF_INET, socket.AF_UNIX):
            try:
                socket.socket(family)
                return 'socket made'
            except PermissionError:
                pass
        return open({str(secret)!r}).read()
    """
    found = verdict(scratch, attack, before=DROP_TO_NOBODY, secret=str(secret))
    assert found["refused"] and found["error"].startswith("PermissionError"), found
    assert found["protections"]["active"] == [
        "no_new_privs",
        "seccomp",
        "landlock",
        "netns",
        "rlimits",
    ]
    assert (scratch / "inside.txt").exists()


def test_the_read_paths_leave_the_project_root_out() -> None:
    paths = default_read_paths()
    assert str(ROOT / "evaluation") in paths
    assert str(ROOT) not in paths
    assert "/proc" not in paths


def test_the_test_process_itself_is_not_confined() -> None:
    socket.socket().close()  # probe() and every attack above ran in children
