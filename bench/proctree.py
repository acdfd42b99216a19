"""CPU and memory of a process and its children, read from /proc (Linux), for the benchmarks."""

from __future__ import annotations

import os
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def cpu_and_rss(root: int) -> tuple[float, int, dict[str, float], dict[str, int]]:
    """Summed CPU seconds (user + system) and RSS bytes of the process tree, and both per
    command name (convnorm's python, prism)."""
    cpu, rss = 0.0, 0
    cpu_by_name: dict[str, float] = {}
    rss_by_name: dict[str, int] = {}
    for pid in process_tree(root):
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
            statm = Path(f"/proc/{pid}/statm").read_text().split()
        except OSError:
            continue
        name = stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode(errors="replace")
        fields = stat.rsplit(b")", 1)[1].split()
        seconds = (int(fields[11]) + int(fields[12])) / CLK_TCK
        resident = int(statm[1]) * PAGE
        cpu += seconds
        rss += resident
        cpu_by_name[name] = cpu_by_name.get(name, 0.0) + seconds
        rss_by_name[name] = rss_by_name.get(name, 0) + resident
    return cpu, rss, cpu_by_name, rss_by_name
