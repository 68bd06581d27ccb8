"""Confine the process that parses and runs an untrusted ONNX model (issue 38).

The rule: that process can read its model (it arrives as bytes over a pipe), its inputs and the
libraries it needs, write one scratch directory, and nothing else; it can reach nobody. confine()
applies every layer the host offers, in an order where each makes the next possible: an empty
network namespace (unshare needs a single-threaded process), no_new_privs (Landlock and seccomp
need it without CAP_SYS_ADMIN), resource limits, Landlock (files, TCP, signals), seccomp last
(it would refuse the unshare and the setrlimit calls above). A layer the host lacks is recorded
in Protections.missing, never fatal: the worker shows what it got.

Only the standard library: this module runs first in a fresh interpreter, before numpy or
onnxruntime start their threads.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import glob
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from evaluation import landlock, seccomp_filter

ALWAYS_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom")
SYSTEM_READ_PATHS = (
    *("/usr/lib", "/lib", "/lib64", "/usr/lib64", "/usr/local/lib"),
    *("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"),
    # onnxruntime, OpenBLAS and CUDA read CPU topology, memory and driver settings. Not all of
    # /proc: Landlock's ptrace scoping closes another process's mem and stack but, on Linux 6.18,
    # not its environ or maps (the worker's environment holds its secrets). confine() adds the
    # process's own /proc directory.
    *("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys", "/proc/driver/nvidia"),
    "/sys",
)
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
_PR_SET_NO_NEW_PRIVS, _PR_GET_NO_NEW_PRIVS = 38, 39


@dataclass(frozen=True)
class Confinement:
    """What the confined process may use. `scratch` exists already (the caller makes it)."""

    scratch: str
    read_paths: tuple[str, ...]
    device_paths: tuple[str, ...] = ()
    cpu_seconds: int | None = None
    # CPU workers only: CUDA reserves far more address space than it ever uses.
    address_space_bytes: int | None = None
    open_files: int = 1024
    file_size_bytes: int = 64 << 20
    network_namespace: bool = True
    # A CUDA model process: the driver's initialisation (cuInit) fails with "OS call failed"
    # unless it may create a unix socket (it looks for an MPS server) and write its own /proc
    # directory (it names its threads there); benchmarks/cuda_confine_probe.py --bisect shows
    # each on a GPU host.
    cuda_driver: bool = False


@dataclass(frozen=True)
class Protections:
    """What confine() managed to apply; `missing` says, one sentence each, what not and why."""

    no_new_privs: bool
    seccomp: bool
    landlock_abi: int | None
    network_namespace: bool
    limits: dict[str, int]
    missing: tuple[str, ...]

    def active(self) -> list[str]:
        flags = {
            "no_new_privs": self.no_new_privs,
            "seccomp": self.seccomp,
            "landlock": self.landlock_abi is not None,
            "netns": self.network_namespace,
            "rlimits": bool(self.limits),
        }
        return [name for name, on in flags.items() if on]

    def as_dict(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "missing": list(self.missing), "active": self.active()}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Protections:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["missing"] = tuple(values["missing"])  # type: ignore[arg-type]
        return cls(**values)  # type: ignore[arg-type]


def confine(c: Confinement) -> Protections:
    """Confine the calling process for good, as far as the host allows.

    Must run before any thread starts: unshare refuses a threaded process, and Landlock and
    seccomp would bind only the calling thread. Raises RuntimeError when threads are running."""
    threads = _thread_count()
    if threads > 1:
        raise RuntimeError(f"confine() needs a single-threaded process; this one has {threads}")
    missing: list[str] = []
    netns = _network_namespace(missing) if c.network_namespace else False
    if not c.network_namespace:
        missing.append("network namespace: not asked for")
    no_new_privs = _no_new_privs(missing)
    limits = _set_limits(c, missing)
    seccomp_lib = _seccomp_library(missing)  # loaded while its directory is still unrestricted
    landlock_abi = _landlock(c, _own_proc_directory(), missing)
    seccomp = seccomp_lib is not None and _seccomp(seccomp_lib, c.cuda_driver, missing)
    return Protections(no_new_privs, seccomp, landlock_abi, netns, limits, tuple(missing))


def engine_sites() -> list[str]:
    """The folders numpy and onnxruntime are imported from here, found without importing them
    (numpy's BLAS would start threads): a model process imports the same ones (it is given them
    on its PYTHONPATH, ``evaluation.sandbox``), wherever they are installed."""
    sites = []
    for name in ("onnxruntime", "numpy"):  # onnxruntime's first: numpy's may hold another
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            sites.append(str(Path(spec.origin).parent.parent))
    return list(dict.fromkeys(sites))


def default_read_paths() -> tuple[str, ...]:
    """Python, numpy's and onnxruntime's site-packages, this package, the system libraries.

    Only the evaluation package from the project: the project root holds settings and .env.
    numpy and onnxruntime are found without being imported (numpy's BLAS would start threads)."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    paths += engine_sites()
    paths.append(str(Path(__file__).resolve().parent))
    paths += SYSTEM_READ_PATHS
    paths += sorted(glob.glob("/usr/local/cuda*"))
    return tuple(dict.fromkeys(os.path.realpath(p) for p in paths if os.path.exists(p)))


_PROBE = """
import json, sys
from evaluation.confine import Confinement, confine
print(json.dumps(confine(Confinement(**json.loads(sys.argv[1]))).as_dict()))
"""


def probe(device_paths: tuple[str, ...] = (), cuda_driver: bool = False) -> Protections:
    """What confine() achieves on this host, learnt in a short-lived child: the caller stays free.

    Raises RuntimeError when the child fails."""
    with tempfile.TemporaryDirectory(prefix="confine-probe-") as scratch:
        settings = Confinement(scratch, default_read_paths(), device_paths, cuda_driver=cuda_driver)
        root = str(Path(__file__).resolve().parent.parent)
        result = subprocess.run(
            [sys.executable, "-c", _PROBE, json.dumps(dataclasses.asdict(settings))],
            env={**os.environ, "PYTHONPATH": root},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    if result.returncode != 0:
        raise RuntimeError(f"confinement probe failed ({result.returncode}): {result.stderr}")
    return Protections.from_dict(json.loads(result.stdout))


_libc = ctypes.CDLL(None, use_errno=True)


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1  # no /proc to tell: unshare below still refuses a threaded process


def _os_error(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)} ({errno.errorcode.get(code, code)})")


def _network_namespace(missing: list[str]) -> bool:
    """An empty network namespace: only a loopback, and it is down."""
    if _libc.unshare(_CLONE_NEWNET) == 0:  # root, or CAP_SYS_ADMIN
        return True
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        missing.append(f"network namespace: {_os_error('unshare refused')}")
        return False
    # Map our ids onto themselves so files keep their owners. Should that fail, the namespace
    # still isolates the network; our ids would only show as the overflow id.
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    ):
        try:
            Path(f"/proc/self/{name}").write_text(text)
        except OSError:
            break
    return True


def _no_new_privs(missing: list[str]) -> bool:
    _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if _libc.prctl(_PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1:
        return True
    missing.append(f"no_new_privs: {_os_error('prctl refused')}")
    return False


def _set_limits(c: Confinement, missing: list[str]) -> dict[str, int]:
    wanted = {
        "cpu_seconds": (resource.RLIMIT_CPU, c.cpu_seconds),
        "address_space_bytes": (resource.RLIMIT_AS, c.address_space_bytes),
        "open_files": (resource.RLIMIT_NOFILE, c.open_files),
        "file_size_bytes": (resource.RLIMIT_FSIZE, c.file_size_bytes),
        "core_bytes": (resource.RLIMIT_CORE, 0),
    }
    applied: dict[str, int] = {}
    for name, (which, value) in wanted.items():
        if value is None:
            continue
        # CPU: SIGXCPU at the soft limit, SIGKILL a second later should the process catch it.
        hard = value + 1 if which == resource.RLIMIT_CPU else value
        ceiling = resource.getrlimit(which)[1]
        if ceiling != resource.RLIM_INFINITY:
            hard = min(hard, ceiling)
        try:
            resource.setrlimit(which, (min(value, hard), hard))
        except (OSError, ValueError) as error:
            missing.append(f"limit {name}: {error}")
            continue
        applied[name] = min(value, hard)
    return applied


def _own_proc_directory() -> str:
    """/proc/<our pid>, held open for good: a Landlock rule follows the inode, and procfs makes a
    new inode should the directory's dentry be dropped while nothing holds it."""
    path = f"/proc/{os.getpid()}"
    _held_open.append(os.open(path, os.O_PATH | os.O_CLOEXEC))
    return path


_held_open: list[int] = []


def _landlock(c: Confinement, own_proc: str, missing: list[str]) -> int | None:
    try:
        abi = landlock.abi_version()
    except OSError as error:
        reason = "is disabled at boot" if error.errno == errno.EOPNOTSUPP else "is absent"
        name = errno.errorcode.get(error.errno or 0, str(error.errno))
        missing.append(f"Landlock: the kernel's Landlock {reason} ({name})")
        return None
    devices = (*ALWAYS_DEVICES, *c.device_paths)
    try:
        own = (own_proc,) if c.cuda_driver else ()
        landlock.restrict_self(abi, (*c.read_paths, own_proc), (c.scratch,), devices, own)
    except OSError as error:
        missing.append(f"Landlock: the ruleset was refused ({error})")
        return None
    if abi < 4:
        missing.append(f"Landlock TCP rules: need ABI 4 (Linux 6.7), the kernel has ABI {abi}")
    if abi < 6:
        missing.append(f"Landlock signal scoping: needs ABI 6 (Linux 6.12), the kernel has {abi}")
    return abi


def _seccomp_library(missing: list[str]) -> ctypes.CDLL | None:
    try:
        return seccomp_filter.library()
    except seccomp_filter.SeccompUnavailable as error:
        missing.append(f"seccomp: {error}")
        return None


def _seccomp(lib: ctypes.CDLL, unix_sockets: bool, missing: list[str]) -> bool:
    try:
        seccomp_filter.load(lib, os.getpid(), unix_sockets=unix_sockets)
    except OSError as error:
        missing.append(f"seccomp: the filter was refused ({error})")
        return False
    return True
