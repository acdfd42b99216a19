"""Listening TCP sockets of a process tree, read from /proc (Linux).

``listeners(root_pids)`` returns ``(pid, address, port)`` for every socket in LISTEN state
owned by one of the processes or any of their descendants, with the reading of the kernel's
tables that convnorm itself uses (``pipeline.runners.loopback``: the socket inodes from
``/proc/<pid>/fd``, their addresses from ``/proc/net/tcp{,6}`` of the namespace asked).
``private_netns_problem`` says why a loopback-only network namespace cannot be made here.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from pipeline.runners.loopback import is_loopback, listening_sockets, socket_inodes

__all__ = ["interfaces", "is_loopback", "listeners", "private_netns_problem", "process_tree"]


def _children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found += [int(c) for c in handle.read().split()]
        except OSError:
            pass
    return found


def process_tree(roots: list[int]) -> list[int]:
    seen: list[int] = []
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.append(pid)
        stack += _children(pid)
    return seen


def listeners(roots: list[int], netns_pid: int | None = None) -> list[tuple[int, str, int]]:
    table = listening_sockets(netns_pid)
    out = []
    for pid in process_tree(roots):
        for inode in socket_inodes(pid):
            if inode in table:
                out.append((pid, *table[inode]))
    return sorted(set(out))


def private_netns_problem() -> str | None:
    """Why a loopback-only network namespace cannot be made here, or None."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        return "needs unshare and ip (util-linux, iproute2) for a loopback-only network namespace"
    probe = subprocess.run(
        ["unshare", "--net", "ip", "link", "set", "lo", "up"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode:
        return f"cannot make a network namespace (unshare --net): {probe.stderr.strip()}"
    return None


def interfaces(pid: int | str = "self") -> list[str]:
    """The network interfaces of ``pid``'s network namespace."""
    with open(f"/proc/{pid}/net/dev") as handle:
        lines = handle.read().splitlines()[2:]
    return sorted(line.split(":")[0].strip() for line in lines)
