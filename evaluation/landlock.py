"""Landlock through ctypes: the model process may read its libraries, write its scratch directory,
use the device files it is given, and nothing else; it may not reach TCP ports, abstract unix
sockets or signal processes outside its own domain (the worker shares its uid).

Our own few lines rather than the PyPI `landlock` package, which is a development release.
See Documentation/userspace-api/landlock.rst in the kernel for the structures used here.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # same number on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

# Rights the kernel knows, by the ABI that introduced them.
_FS_BY_ABI = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}
# The only rights a rule on a file (not a directory) may carry.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

READ_ONLY = EXECUTE | READ_FILE | READ_DIR
# Scratch: files and directories come and go, but nothing there is executed and no device,
# socket, fifo or link is made.
SCRATCH = WRITE_FILE | READ_FILE | READ_DIR | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG
SCRATCH |= REFER | TRUNCATE
DEVICE = READ_FILE | WRITE_FILE | IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel declares it __attribute__((packed))
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number: int, *args: object) -> int:
    result = int(_libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def abi_version() -> int:
    """The Landlock ABI this kernel offers; OSError (ENOSYS, EOPNOTSUPP) where it has none."""
    return _syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))


def handled_fs(abi: int) -> int:
    return sum(bits for since, bits in _FS_BY_ABI.items() if abi >= since)


def restrict_self(
    abi: int,
    read_paths: Iterable[str],
    write_dirs: Iterable[str],
    devices: Iterable[str],
    writable: Iterable[str] = (),
) -> None:
    """Confine the calling thread (and the threads it starts) for good; needs no_new_privs.

    Every filesystem right the ABI knows is handled, so whatever no rule grants is refused. On
    ABI 4 and later TCP bind and connect are handled with no rule (all refused); on ABI 6 and later
    abstract unix sockets and signals are scoped to this domain. Paths that do not exist, or that
    this uid cannot reach, are skipped: a host without CUDA has no /usr/local/cuda.
    ``writable``: paths whose existing files may be written, nothing created or removed there
    (a CUDA process's own /proc directory)."""
    fs = handled_fs(abi)
    attr = _RulesetAttr(fs, 0, 0)
    if abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    ruleset = _syscall(
        _CREATE_RULESET,
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
        ctypes.c_uint32(0),
    )
    try:
        rules = (
            (read_paths, READ_ONLY),
            (write_dirs, SCRATCH),
            (devices, DEVICE),
            (writable, READ_ONLY | WRITE_FILE | TRUNCATE),
        )
        for paths, rights in rules:
            for path in paths:
                _allow(ruleset, path, rights & fs)
        _syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, PermissionError):
        return  # out of our reach already: a rule would grant nothing
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0))
    except OSError as error:
        raise OSError(error.errno, f"{error.strerror}: {path}") from None
    finally:
        os.close(fd)
