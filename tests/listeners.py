"""Listening TCP sockets of a process tree, read from /proc (Linux; no dependency).

``listeners(root_pids)`` returns ``(pid, address, port)`` for every socket in LISTEN state
owned by one of the processes or any of their descendants: the socket inodes come from
``/proc/<pid>/fd`` links (``socket:[inode]``), their addresses from ``/proc/net/tcp`` and
``/proc/net/tcp6`` (of another network namespace: ``/proc/<a pid in it>/net/...``).
``private_netns_problem`` says why a loopback-only network namespace cannot be made here.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import struct
import subprocess

LISTEN = "0A"


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


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", struct.unpack(">I", raw)[0]))
    # IPv6: four 32-bit words, each in host (little-endian) order.
    words = struct.unpack(">4I", raw)
    return socket.inet_ntop(socket.AF_INET6, struct.pack("<4I", *words))


def _listening_sockets(netns_pid: int | None = None) -> dict[str, tuple[str, int]]:
    """inode -> (address, port) of every LISTEN socket in this network namespace (or in the
    one process ``netns_pid`` is in)."""
    found = {}
    proc = "/proc" if netns_pid is None else f"/proc/{netns_pid}"
    for table in (f"{proc}/net/tcp", f"{proc}/net/tcp6"):
        try:
            with open(table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != LISTEN:
                continue
            host, port = local.split(":")
            found[inode] = (_address(host), int(port, 16))
    return found


def listeners(roots: list[int], netns_pid: int | None = None) -> list[tuple[int, str, int]]:
    table = _listening_sockets(netns_pid)
    out = []
    for pid in process_tree(roots):
        for inode in _socket_inodes(pid):
            if inode in table:
                out.append((pid, *table[inode]))
    return sorted(set(out))


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback


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
