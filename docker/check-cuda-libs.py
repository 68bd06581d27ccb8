"""Build-time check: can this image load every CUDA and cuDNN library onnxruntime-gpu needs?

A CUDA session needs a GPU, which `docker build` does not have, and asking
`onnxruntime.get_available_providers()` proves nothing: it lists CUDA even when the provider's
libraries cannot be loaded, and sessions then fall back to CPU. So this loads, with ctypes:

1. the CUDA and cuDNN libraries onnxruntime's own `preload_dlls()` loads for this build of
   onnxruntime-gpu (from its build info: CUDA 13 here), cuDNN's sub-libraries included;
2. onnxruntime's CUDA provider library itself, which resolves every library it links against.
   That needs libcuda.so.1, the driver, which the NVIDIA Container Toolkit mounts from the host
   only when a container runs: at build time the toolkit's stub stands in for it where the image
   has one; where it has none, `ldd` checks that every other library the provider links
   against resolves.

It exits 1 naming each library that does not load. The worker's CUDA self-test at start
(evaluation/selftest.py) and `manage.py gpu_check` then prove the rest on a real GPU.
"""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys

import onnxruntime
from onnxruntime.capi import build_and_package_info

STUBS = ["/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/targets/*/lib/stubs/libcuda.so"]
CUDNN_PARTS = ["graph", "ops", "cnn", "adv", "heuristic", "engines_precompiled"]
OPTIONAL = ("libcufft", "libnvrtc")  # onnxruntime's preload_dlls treats these as optional


def load(name: str) -> str:
    """'' when ``name`` loads, else the loader's error."""
    try:
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        return str(exc)
    return ""


def driver() -> str:
    if not load("libcuda.so.1"):
        return "libcuda.so.1 (the driver)"
    for pattern in STUBS:
        for stub in glob.glob(pattern):
            if not load(stub):
                return f"{stub} (build-time stub; the host's driver replaces it at run time)"
    return ""


def unresolved(library: str) -> str:
    """What the dynamic loader cannot find for ``library``, the driver aside ('' if nothing)."""
    listing = subprocess.run(["ldd", library], capture_output=True, text=True, check=False).stdout
    missing = [
        line.split("=>")[0].strip()
        for line in listing.splitlines()
        if "not found" in line and "libcuda.so.1" not in line
    ]
    return f"{library} links against missing {', '.join(missing)}" if missing else ""


def libraries() -> list[str]:
    cuda_major = build_and_package_info.cuda_version.split(".")[0]
    paths = getattr(onnxruntime, "_get_nvidia_dll_paths", None)
    if paths is not None:
        names = [p[-1] for p in paths(False, True, True)]
    else:  # an onnxruntime without it: the libraries of a CUDA 12/13 build
        names = [f"libcudart.so.{cuda_major}", f"libcublasLt.so.{cuda_major}",
                 f"libcublas.so.{cuda_major}", "libcurand.so.10", "libcudnn.so.9"]  # fmt: skip
    return names + [f"libcudnn_{part}.so.9" for part in CUDNN_PARTS]


def main() -> int:
    print(f"onnxruntime-gpu {onnxruntime.__version__}, built for CUDA "
          f"{build_and_package_info.cuda_version}")  # fmt: skip
    found = driver()
    failures: list[str] = []
    print(f"  driver: {found or 'not here (mounted from the host at run time)'}")
    for name in libraries():
        error = load(name)
        optional = name.startswith(OPTIONAL)
        print(
            f"  {name}: {'ok' if not error else ('missing (optional)' if optional else 'MISSING')}"
        )
        if error and not optional:
            failures.append(f"{name}: {error}")
    provider = os.path.join(os.path.dirname(onnxruntime.__file__), "capi",
                            "libonnxruntime_providers_cuda.so")  # fmt: skip
    error = load(provider) if found else unresolved(provider)
    print(f"  {os.path.basename(provider)}: {'ok' if not error else 'MISSING'}")
    if error:
        failures.append(error)
    for failure in failures:
        print(f"cannot load {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
