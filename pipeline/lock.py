"""One run per output directory: an exclusive lock file, ``OUTPUT/_convnorm.lock``.

The lock is created atomically with its whole content (written to a private file first, then
hard-linked to the lock name, which fails if the name exists), so no reader ever sees a half
written lock. It holds the holder's pid, host, process start time and run start time, plus
what the run may leave behind if it dies: its temporary directory and, while it finalizes, the
files it is creating or deleting. A second run exits naming the holder. A lock whose pid is
dead on this host is *stale*: it is reported, and taken over only with ``--break-stale-lock``,
which first deletes what the dead run recorded as its own (and nothing else).

On object stores (``gs://``, ``s3://``) there is no atomic create through Beam's FileSystems:
the lock is checked and written best effort there, and says so in docs/outputs.md.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import uuid
from dataclasses import dataclass, field

from apache_beam.io.filesystems import FileSystems

from pipeline import files
from transforms.jsontext import document_bytes

LOCK_FILE = "_convnorm.lock"


class LockError(RuntimeError):
    """The output directory is locked by another run (or a stale lock was not taken over)."""


def _process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux), to tell a reused pid from the holder."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()  # field 22 of stat; fields[0] is field 3
    except (OSError, IndexError):
        return None


def _alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    if start is not None:
        now = _process_start(pid)
        if now is not None and now != start:
            return False  # the pid was reused by another process
    return True


def describe(holder: dict) -> str:
    return (
        f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, "
        f"started {holder.get('started', '?')}, command {holder.get('command', '?')}"
    )


def is_stale(holder: dict) -> bool:
    """A lock whose holder is provably dead: same host, pid gone (or reused)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    return not _alive(holder["pid"], holder.get("pid_start"))


@dataclass
class OutputLock:
    """A held lock; ``record`` rewrites its content, ``release`` deletes it."""

    output: str
    path: str
    content: dict = field(default_factory=dict)

    def record(self, **fields) -> None:
        """Add what this run may leave behind (before it creates or deletes it)."""
        self.content.update(fields)
        _write_over(self.path, self.content)

    def release(self) -> None:
        files.delete(self.path)


def read_lock(output: str) -> dict | None:
    path = FileSystems.join(output, LOCK_FILE)
    try:
        with FileSystems.open(path) as handle:
            text = handle.read()
    except Exception:  # noqa: BLE001 — absent (or unreadable) lock
        return None if not FileSystems.exists(path) else {"unreadable": True}
    try:
        holder = json.loads(text)
        return holder if isinstance(holder, dict) else {"unreadable": True}
    except ValueError:
        return {"unreadable": True}


def _payload(content: dict) -> bytes:
    return document_bytes(content, indent=1, ascii_only=True, sort_keys=True)


def _write_over(path: str, content: dict) -> None:
    if files.is_local(path):
        temp = f"{path}.{uuid.uuid4().hex}"
        with open(temp, "wb") as handle:
            handle.write(_payload(content))
        os.replace(temp, path)
    else:
        with FileSystems.create(path, mime_type="application/json") as handle:
            handle.write(_payload(content))


def _create_exclusive(path: str, content: dict) -> bool:
    """Create ``path`` with ``content`` unless it exists; False if it does."""
    if not files.is_local(path):
        if FileSystems.exists(path):
            return False
        _write_over(path, content)
        return True
    temp = f"{path}.{uuid.uuid4().hex}"
    with open(temp, "wb") as handle:
        handle.write(_payload(content))
    try:
        os.link(temp, path)  # atomic, and fails if the lock exists
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(temp)


def acquire(output: str, *, run_id: str, command: str, temp_dir: str, break_stale: bool, clean_up) -> OutputLock:
    """Take the lock of ``output`` (creating the directory), or raise ``LockError``.

    ``clean_up(holder)`` is called with a stale holder's content, under our lock, before the
    run goes on: it deletes what the dead run recorded as its own.
    """
    if files.is_local(output):
        os.makedirs(output, exist_ok=True)
    path = FileSystems.join(output, LOCK_FILE)
    content = {
        "run_id": run_id,
        "pid": os.getpid(),
        "pid_start": _process_start(os.getpid()),
        "host": socket.gethostname(),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "temp_dir": temp_dir,
    }
    for _attempt in range(3):  # the holder may finish between our create and our read
        if _create_exclusive(path, content):
            return OutputLock(output, path, content)
        holder = read_lock(output)
        if holder is not None:
            break
    else:
        raise LockError(f"--output {output!r}: its lock {path} keeps appearing and disappearing; try again")
    if holder.get("unreadable"):
        raise LockError(
            f"--output {output!r} has a lock file {path} that cannot be read; if no convnorm run "
            "is using this directory, delete that file and run again"
        )
    if not is_stale(holder):
        raise LockError(
            f"--output {output!r} is in use by another convnorm run ({describe(holder)}); "
            f"wait for it to finish (lock file {path})"
        )
    if not break_stale:
        raise LockError(
            f"--output {output!r} has a stale lock: the run that held it died ({describe(holder)}); "
            "its temporary files may still be there; pass --break-stale-lock to delete what "
            f"that run recorded as its own and take the lock over (lock file {path})"
        )
    return _take_over(output, path, holder, content, clean_up)


def _take_over(output: str, path: str, holder: dict, content: dict, clean_up) -> OutputLock:
    # Move the stale lock aside under a name of our own, then check it is the one we judged
    # stale: two runs breaking the same lock at once cannot both win.
    aside = f"{path}.stale-{content['run_id']}"
    try:
        FileSystems.rename([path], [aside])
    except Exception as error:  # noqa: BLE001
        raise LockError(f"--output {output!r}: another run took the stale lock over first ({error})") from None
    with FileSystems.open(aside) as handle:
        moved = json.loads(handle.read())
    if moved.get("run_id") != holder.get("run_id"):
        FileSystems.rename([aside], [path])
        raise LockError(f"--output {output!r}: another run took the stale lock over first")
    if not _create_exclusive(path, content):
        raise LockError(f"--output {output!r}: another run took the lock while the stale one was broken")
    lock = OutputLock(output, path, content)
    try:
        clean_up(holder)
    except BaseException:
        lock.release()
        raise
    files.delete(aside)
    return lock
