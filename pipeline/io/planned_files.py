"""Is the file read the one planned? A planned local shard's file is compared with the plan
(size, time, inode) when it is opened and once it is read, and with what its path names then;
a plain file's bytes read with its planned size. A change is ``InputChanged``, which
``read_shard`` makes one ``input_changed`` record (docs/outputs.md)."""

from __future__ import annotations

import contextlib
import os

from pipeline.io.files import is_local, open_input
from pipeline.io.shard import Shard


class InputChanged(Exception):
    """The file a planned shard reads is not the one planned: changed before it was opened or
    while it was read, or its path names another file by the end. ``read_shard`` makes it one
    ``input_changed`` record, where reading stopped (``position``, when the reader knows it)."""

    def __init__(self, detail: str, position: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.position = position


def _is_planned(shard: Shard) -> bool:
    # Streaming and `convnorm explain` make shards of no plan: they look at changes themselves.
    return shard.file_size is not None


def stat_changes(shard: Shard, now: os.stat_result) -> list[str]:
    """How the file ``now`` describes differs from the one planned, one phrase each (empty: it
    does not). A change of the status-change time alone (``chmod``, a new hard link) is none."""
    changes = []
    if shard.inode is not None and (now.st_ino, now.st_dev) != (shard.inode, shard.device):
        changes.append("it is another file (one put at its name, by a rename or a copy)")
    if shard.file_size is not None and now.st_size != shard.file_size:
        changes.append(f"planned {shard.file_size:,} bytes, now {now.st_size:,}")
    if shard.mtime_ns is not None and now.st_mtime_ns != shard.mtime_ns:
        changes.append("modified since it was planned")
    return changes


def _check_opened(shard: Shard, handle) -> None:
    """The file just opened, against the plan: a change means none of it is read."""
    changes = stat_changes(shard, os.fstat(handle.fileno()))
    if changes:
        detail = f"the file changed between the plan and when it was opened: {'; '.join(changes)}; not read"
        raise InputChanged(detail, shard.start)


def _check_done(shard: Shard, handle) -> None:
    """The file read to its end (or the shard's), against the plan: the open file itself (its
    size and time) and what its path names now (a file renamed over it leaves the open one whole)."""
    changes = stat_changes(shard, os.fstat(handle.fileno()))
    if changes:
        raise InputChanged(f"the file changed while it was read: {'; '.join(changes)}")
    try:
        now = os.stat(shard.path)
    except FileNotFoundError:
        raise InputChanged("the file is no longer there: removed or moved away while it was read") from None
    if shard.inode is not None and (now.st_ino, now.st_dev) != (shard.inode, shard.device):
        raise InputChanged(
            "its path names another file now (one renamed over it while it was read): what was read "
            "is no longer the file at that name"
        )


def check_ended(shard: Shard, handle, position: int) -> None:
    """A plain file's end met at byte ``position``: before the planned end, it was cut short
    (the bytes read against the plan, which also holds where the file has no ``fstat``)."""
    end = shard.end if shard.end is not None else shard.file_size
    if not _is_planned(shard) or end is None or position >= end:
        return
    changes = stat_changes(shard, os.fstat(handle.fileno())) if is_local(shard.path) else []
    changes.append(f"it ended at byte {position:,}, before the planned end at byte {end:,}")
    raise InputChanged(f"the file changed while it was read: {'; '.join(changes)}", position)


@contextlib.contextmanager
def open_shard(shard: Shard):
    """``open_input`` of a shard's file, checked against the plan when it is opened and once
    the reader is done with it (a reader that stops early, ``--limit``, is not checked at the end)."""
    checked = _is_planned(shard) and is_local(shard.path)
    with open_input(shard.path) as raw:
        if checked:
            _check_opened(shard, raw)
        yield raw
        if checked:
            _check_done(shard, raw)
