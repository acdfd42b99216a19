"""A private network for a run that starts Prism: no other user on the host can reach it.

Loopback is not a boundary on a shared machine (a CI runner, a bastion, a notebook server):
every local user reaches 127.0.0.1. Prism's job service takes any job it is sent, and a job
with a ``PROCESS`` environment has Prism run a command as convnorm's user; its worker
endpoints hand out the pipeline and its data. Prism has no authentication to turn on, so a run
that starts Prism first moves itself into a **network namespace of its own** (Linux,
``unshare(2)``), whose only interface is its own loopback: Prism, the worker pool and the SDK
workers all live there, and nothing outside can connect to any of them, whatever address
Prism binds. As root that is ``CLONE_NEWNET``; as another user, a user namespace mapping only
that user to itself comes with it (where the kernel allows unprivileged user namespaces).

It must happen while the process has one thread (a namespace is per thread, and a user
namespace cannot be entered by a threaded process), so ``pipeline.cli.main`` calls
``isolate_prism_run`` before Beam is imported. Where no namespace can be made, the run is
refused with the reason, unless ``--host-loopback`` says every local user is trusted.

The namespace has no network beyond itself: a Prism run reads and writes local paths only.
The other services convnorm starts need no namespace: Beam's gRPC servers in this process
refuse callers of another user (``pipeline.runners.loopback.SameUserOnly``), and a local Dask cluster
speaks TLS with credentials made for the run (``pipeline.runners.dask_cluster``).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
import struct
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.config.precheck import CheckedArgs

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
#: ioctl requests and the flag that bring an interface up (linux/sockios.h, linux/if.h).
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
#: ``struct ifreq``: the interface's name, its flags, padding to 40 bytes.
IFREQ = "16sH22x"

#: Set once this process is in the private namespace it made.
_entered = False
#: Why the namespace could not be made, for the run's log (``--host-loopback`` runs).
_why_not: str | None = None


class PrivateNetworkError(RuntimeError):
    """No private network namespace can be made here; the message says why."""


def entered() -> bool:
    """This run is in a network namespace of its own (``enter``)."""
    return _entered


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _unshare(flags: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return 0 if libc.unshare(flags) == 0 else ctypes.get_errno()


def _map_to_itself(uid: int, gid: int) -> None:
    # In a new user namespace: this user (and group) only, as themselves; setgroups must be
    # denied before an unprivileged process may write its gid map.
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
            handle.write(text)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        current = fcntl.ioctl(probe, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0))
        flags = struct.unpack(IFREQ, current)[1]
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))


def enter() -> None:
    """Move this process into a new network namespace with only loopback, up. Raises
    ``PrivateNetworkError`` (why) when it cannot; idempotent."""
    global _entered
    if _entered:
        return
    if not sys.platform.startswith("linux"):
        raise PrivateNetworkError(f"network namespaces are Linux's; this is {sys.platform}")
    if _threads() != 1:
        raise PrivateNetworkError(f"the process already runs {_threads()} threads (a namespace is per thread)")
    uid, gid = os.geteuid(), os.getegid()
    failed = _unshare(CLONE_NEWNET)
    if failed in (errno.EPERM, errno.EACCES):
        # Without CAP_SYS_ADMIN (not root, or a container's root): with a user namespace.
        failed = _unshare(CLONE_NEWUSER | CLONE_NEWNET)
        if not failed:
            _map_to_itself(uid, gid)
    if failed:
        refused = failed in (errno.EPERM, errno.EACCES, errno.ENOSPC)
        hint = " (are unprivileged user namespaces off? see user.max_user_namespaces)" if refused else ""
        raise PrivateNetworkError(f"unshare(2) refused: {os.strerror(failed)}{hint}")
    try:
        _loopback_up()
    except OSError as error:
        raise PrivateNetworkError(f"could not bring loopback up in the new namespace: {error}") from None
    _entered = True


def starts_prism(beam: dict) -> bool:
    """A run whose Beam flags (the check's ``.beam``: ``pipeline.config.precheck``) make convnorm
    start Prism itself."""
    return str(beam.get("runner") or "").lower() in ("prismrunner", "prism") and not beam.get("job_endpoint")


def isolate_prism_run(args: list[str] | CheckedArgs) -> str | None:
    """Before Beam's import: a run that starts Prism enters its private network. Returns the
    error to print (exit status 2) when it cannot and ``--host-loopback`` was not given.

    ``args``: the command line's check (``pipeline.config.precheck.check_args``), which the
    command line hands on; a bare command line is checked here."""
    from pipeline.config.flags import ConfigError
    from pipeline.config.precheck import CheckedArgs, check_args

    if isinstance(args, CheckedArgs):
        checked = args.values
    else:
        try:
            checked = check_args(args, output_required=False).values
        except ConfigError:
            return None  # load_job reports it, as for any other run
    if not starts_prism(checked.beam):
        return None
    remote = [path for path in _run_paths(checked) if "://" in path]
    if remote and not checked.host_loopback:
        # The namespace has no network beyond its own loopback: say so now, not as a failed read.
        return (
            f"this run starts Prism, which convnorm runs in a private network namespace with no network, "
            f"so it reads and writes local paths only: {remote[0]!r} is not one. Copy the files here, run "
            f"on another runner, or pass --host-loopback where every local user is trusted"
        )
    try:
        enter()
    except PrivateNetworkError as error:
        global _why_not
        _why_not = str(error)
        if not checked.host_loopback:
            return (
                f"this run starts Prism, which takes work from anyone who can reach its port; convnorm "
                f"runs it in a private network namespace, which cannot be made here: {error}. Run on "
                f"the default runner, or pass --host-loopback where every local user is trusted"
            )
    return None


def _run_paths(checked) -> list[str]:
    """The paths a run reads and writes, as its options give them."""
    inputs = checked.input if isinstance(checked.input, list) else [checked.input] if checked.input else []
    return [str(path) for path in [*inputs, checked.output, checked.stop_file] if path]


def why_not() -> str | None:
    """Why ``isolate_prism_run`` could not make the namespace (the run went on with
    ``--host-loopback``), or None."""
    return _why_not
