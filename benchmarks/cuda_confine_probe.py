"""Which confinement layer stops CUDA in a model process: a diagnostic for a GPU host.

Each variant is a fresh child that applies some of ``evaluation.confine``'s layers as a model
process does, then initialises CUDA through the driver API alone (no onnxruntime): load
libcuda, cuInit, count the devices, make the primary context current and allocate 1 MiB. It
prints one line per variant with each call's result code (0 is success; 304 is
CUDA_ERROR_OPERATING_SYSTEM, an operating-system call the driver made failed).

Run on a GPU host: ``python3 -m benchmarks.cuda_confine_probe`` (standard library only): no
confinement, a CPU model process's and a CUDA model process's (``Confinement.cuda_driver``);
``--bisect`` adds each layer alone, the filter refusing each call alone, Landlock at each older
ABI and with each of a few folders writable (docs/security.md says what it found).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import subprocess
import sys
import tempfile

from evaluation import confine as c


def _cuda() -> dict[str, object]:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return {"dlopen": str(exc)}
    steps: dict[str, object] = {"cuInit": lib.cuInit(0)}
    count = ctypes.c_int(0)
    steps["cuDeviceGetCount"] = (lib.cuDeviceGetCount(ctypes.byref(count)), count.value)
    ctx = ctypes.c_void_p()
    steps["cuDevicePrimaryCtxRetain"] = lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)
    steps["cuCtxSetCurrent"] = lib.cuCtxSetCurrent(ctx)
    pointer = ctypes.c_uint64()
    steps["cuMemAlloc"] = lib.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(1 << 20))
    return steps


def child(variant: str) -> dict[str, object]:
    scratch = tempfile.mkdtemp(prefix="cuda-probe-")
    devices = tuple(sorted(glob.glob("/dev/nvidia*")))
    missing: list[str] = []
    layers = variant.split("+")
    read_paths = c.default_read_paths()
    for layer in layers:
        if layer.startswith("read:"):
            read_paths = (*read_paths, layer[5:])
    if "netns" in layers:
        c._network_namespace(missing)
    if {"nnp", "landlock", "seccomp", "all"} & set(layers):
        c._no_new_privs(missing)
    if "rlimits" in layers:
        c._set_limits(c.Confinement(scratch, read_paths, devices, cpu_seconds=600), missing)
    abi = c.landlock.abi_version() if "landlock" in layers else 0
    for layer in layers:
        if layer.startswith("abi:"):  # the ruleset of an older kernel's ABI
            abi = min(abi, int(layer[4:]))
    write_dirs: tuple[str, ...] = (scratch,)
    for layer in layers:
        if layer.startswith("write:"):
            write_dirs = (*write_dirs, layer[6:])
    if "landlock" in layers:
        c.landlock.restrict_self(abi, read_paths, write_dirs, devices)
    only = [layer[5:] for layer in layers if layer.startswith("only:")]
    if "seccomp" in layers or only:
        if only:  # a filter that refuses this one call alone
            c.seccomp_filter.DENIED = tuple(n for n in only if n)  # type: ignore[misc]
            c.seccomp_filter.OWN_PID_ONLY = ()  # type: ignore[misc]
            c.seccomp_filter._CLONE_NAMESPACES = ()  # type: ignore[misc]
            c.seccomp_filter._TTY_INJECTION = ()  # type: ignore[misc]
        c._no_new_privs(missing)
        c.seccomp_filter.load(c.seccomp_filter.library(), os.getpid())
    if "all" in layers or "cuda" in layers:  # every layer, as a CPU or a CUDA model process
        cuda = "cuda" in layers
        c.confine(c.Confinement(scratch, read_paths, devices, cpu_seconds=600, cuda_driver=cuda))
    return {"variant": variant, "missing": missing, **_cuda()}


def _run(variant: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cuda_confine_probe", "--child", variant],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if not lines:
        return f"{variant}: exit {done.returncode}: {done.stderr[-300:]}"
    found = json.loads(lines[-1])
    calls = ("cuInit", "cuMemAlloc", "dlopen")
    return f"{variant}: " + ", ".join(f"{k} {found[k]}" for k in calls if k in found)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2])))
        return
    print("devices:", sorted(glob.glob("/dev/nvidia*")))
    variants = ["none", "all", "cuda"]
    if "--bisect" in sys.argv:
        variants += ["seccomp", "landlock", "only:"]
        variants += [f"only:{name}" for name in c.seccomp_filter.DENIED]
        variants += [f"landlock+abi:{n}" for n in (1, 2, 3, 4, 5)]
        variants += [
            f"landlock+write:{p}" for p in ("/", "/tmp", "/dev/shm", "/run", "/dev", "/proc")
        ]
    for variant in variants:
        print(_run(variant))


if __name__ == "__main__":
    main()
