"""The model process's system-call filter, built with libseccomp through ctypes.

Default allow, then refuse what an ONNX model never needs and an attacker would: new sockets (the
model talks over inherited pipes), new processes and programs, other processes' memory and
signals, namespaces, mounts, kernel keys, eBPF, modules and the like. Threads stay allowed:
onnxruntime runs a thread pool.

A few ctypes declarations of our own rather than the `pyseccomp` package: that package finds the
library by running `ldconfig -p` in a subprocess at import, and has had no release since 2021.
libseccomp supplies what is hard to get right by hand: each architecture's system-call numbers,
and killing calls made through another ABI (x32, i386) that would slip past those numbers.
"""

from __future__ import annotations

import ctypes
import errno
import os

_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ATTR_ACT_BADARCH = 2
_NE, _MASKED_EQ = 1, 7
_CLONE_THREAD = 0x00010000
# Namespace flags clone() accepts (CLONE_NEWTIME's bit is the exit signal's there).
_CLONE_NAMESPACES = (0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 1 << 30)
_AF_UNIX = 1
_TTY_INJECTION = (0x5412, 0x541C)  # TIOCSTI, TIOCLINUX: type into the worker's terminal

DENIED = (
    *("socket", "execve", "execveat", "fork", "vfork", "unshare", "setns"),
    *("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp"),
    *("tkill", "pidfd_send_signal", "setrlimit"),
    *("mount", "umount2", "pivot_root", "chroot", "mount_setattr", "open_tree", "move_mount"),
    *("fsopen", "fsconfig", "fsmount", "fspick", "open_by_handle_at"),
    *("keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd"),
    *("io_uring_setup", "io_uring_enter", "io_uring_register"),
    *("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"),
    *("reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "iopl", "ioperm", "vhangup"),
    *("sethostname", "setdomainname", "settimeofday", "clock_settime", "clock_adjtime"),
    *("adjtimex", "fanotify_init"),
)
# Signals may go only to this process: kill(0) or a negative pid would reach the worker's group.
OWN_PID_ONLY = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")


class SeccompUnavailable(Exception):
    """libseccomp is not installed on this host."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def library() -> ctypes.CDLL:
    """libseccomp, loaded; SeccompUnavailable where it is not installed."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError as error:
        raise SeccompUnavailable(f"libseccomp.so.2 is not installed ({error})") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    lib.seccomp_attr_set.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    )
    lib.seccomp_load.argtypes = (ctypes.c_void_p,)
    return lib


def errno_action(code: int) -> int:
    return 0x00050000 | code


def load(lib: ctypes.CDLL, own_pid: int, *, unix_sockets: bool = False) -> None:
    """Install the filter on the calling thread (and the threads it starts), for good.

    Signals may go to `own_pid` only. ``unix_sockets``: socket() is allowed for AF_UNIX (the
    CUDA driver's initialisation makes one), which can then connect, bind or send to nobody.
    Raises OSError when the kernel refuses the filter."""
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")
    try:
        _check(lib.seccomp_attr_set(ctx, _ATTR_ACT_BADARCH, _KILL_PROCESS), "badarch")
        _add_rules(lib, ctx, own_pid, unix_sockets)
        _check(lib.seccomp_load(ctx), "seccomp_load")
    finally:
        lib.seccomp_release(ctx)


def _add_rules(lib: ctypes.CDLL, ctx: int, own_pid: int, unix_sockets: bool = False) -> None:
    def deny(name: str, *cmp: tuple[int, int, int, int], code: int = errno.EPERM) -> None:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number == -1:  # a name this libseccomp does not know: an older kernel's, nothing to do
            return
        args = (_ArgCmp * len(cmp))(*(_ArgCmp(*c) for c in cmp))
        _check(lib.seccomp_rule_add_array(ctx, errno_action(code), number, len(cmp), args), name)

    for name in DENIED:
        if name == "socket" and unix_sockets:
            deny(name, (0, _NE, _AF_UNIX, 0))
        else:
            deny(name)
    if unix_sockets:
        # A unix socket reaches only what it is connected to, and Landlock does not govern
        # connecting to a named one (a database's socket on this host): no connect, answered as
        # if the socket file did not exist (what the CUDA driver meets without an MPS server),
        # no bind, and no datagram to an address.
        deny("connect", code=errno.ENOENT)
        deny("bind")
        deny("sendto", (4, _NE, 0, 0))
        deny("sendmsg")
        deny("sendmmsg")
    # glibc falls back to clone() when clone3 says it does not exist; clone3's flags sit in
    # memory, out of a filter's reach, while clone's are an argument.
    deny("clone3", code=errno.ENOSYS)
    deny("clone", (0, _MASKED_EQ, _CLONE_THREAD, 0))  # a new process rather than a thread
    for flag in _CLONE_NAMESPACES:
        deny("clone", (0, _MASKED_EQ, flag, flag))
    for name in OWN_PID_ONLY:
        deny(name, (0, _NE, own_pid, 0))
    deny("prlimit64", (2, _NE, 0, 0))  # reading limits is fine; root could raise them
    for request in _TTY_INJECTION:
        deny("ioctl", (1, _MASKED_EQ, 0xFFFFFFFF, request))


def _check(result: int, what: str) -> None:
    if result < 0:
        raise OSError(-result, f"{os.strerror(-result)} ({what})")
