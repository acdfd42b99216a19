"""One run per output directory: an exclusive lock file, ``OUTPUT/_convnorm.lock``.

The lock is created atomically with its whole content (written to a private file first, then
hard-linked to the lock name, which fails if the name exists; never through a symbolic link:
``pipeline.io.files``), so no reader ever sees a half written lock. It holds the holder's pid,
host, process start time and run start time, plus what the run may leave behind if it dies:
its temporary directory (its name in the output directory, and the size and sha256 of the
file in it that proves it the run's: ``temp_proof``) and, while it finalizes, the files it is
creating or deleting, each with its size and sha256 (``pipeline.io.ownership.clean_dead_run``
deletes only what matches).

Liveness. On a local filesystem the holder also keeps an OS file lock (``flock``) on the lock
file for its whole run: the kernel drops it when the process ends, however it ends. Another
run judges the holder alive while that lock is held, whatever the pid says, so a run in
another PID namespace (a container on the same host, whose pid this one cannot see) is never
taken for dead; and dead when it is free, even if a new process took the old pid. Locks
without the OS lock (written by an older convnorm, or on an object store) fall back on the
pid rule: dead when the pid is gone from this host or now belongs to a process started later.
A lock written on another host is never judged dead.

A second run exits naming the holder. A *stale* lock (its holder dead) is reported, and taken
over only with ``--break-stale-lock``, which first deletes what the dead run provably wrote.

On object stores (``gs://``, ``s3://``) there is no atomic create through Beam's FileSystems
and no OS lock: the lock is checked and written best effort there (docs/outputs.md).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from dataclasses import dataclass, field

from apache_beam.io.filesystems import FileSystems

from pipeline.io import files
from pipeline.io.output_names import LOCK_FILE
from pipeline.io.ownership import crash_note
from transforms.core.jsontext import document_bytes

try:
    import fcntl
except ImportError:  # not POSIX: the pid rule alone
    fcntl = None  # type: ignore[assignment]

#: The lock's ``os_lock`` value when its holder keeps an OS file lock on it (see above).
OS_LOCK = "flock"
#: ``take_over_hint`` of a run's own lock: what ``--break-stale-lock`` does.
BREAK_STALE_HINT = "pass --break-stale-lock to delete what that run recorded as its own and take the lock over"
#: Probes of the OS lock when the lock file is being replaced under the prober (record()).
_PROBES = 5


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
    except (OverflowError, ValueError):
        return False  # no such pid can exist
    if start is not None:
        now = _process_start(pid)
        if now is not None and now != start:
            return False  # the pid was reused by another process
    return True


def os_lock_held(path: str) -> bool | None:
    """Whether some process holds the OS lock of the lock file at ``path``: True, False, or
    None when this cannot be told (an object store, no file, no ``flock`` on this mount)."""
    if fcntl is None or not files.is_local(path):
        return None
    for _probe in range(_PROBES):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            except OSError:
                return None
            # Free: but is it still the file at that name? The holder replaces the file (a new
            # one, locked before it takes the name) when it records what it is doing.
            try:
                now = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                return None
            mine = os.fstat(fd)
            if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                return False
        finally:
            os.close(fd)
    return True  # replaced under us every time: someone is alive and busy


def describe(holder: dict) -> str:
    return (
        f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, "
        f"started {holder.get('started', '?')}, command {holder.get('command', '?')}"
    )


def is_stale(holder: dict, path: str | None = None) -> bool:
    """A lock whose holder is provably dead: written on this host, and its OS lock free (a
    lock that has one; ``path`` is the lock file) or else its pid gone (or reused)."""
    if holder.get("host") != socket.gethostname():
        return False
    if path is not None and holder.get("os_lock") == OS_LOCK:
        held = os_lock_held(path)
        if held is not None:
            return not held
    if not isinstance(holder.get("pid"), int) or isinstance(holder.get("pid"), bool):
        return False
    return not _alive(holder["pid"], holder.get("pid_start"))


def running_holder(output: str) -> dict | None:
    """What the lock of ``output`` says while a live convnorm holds it (``is_stale`` is false:
    its OS lock is held, or the pid rule for a lock without one, or it was written on another
    host), else None: no lock, a stale one, or one that cannot be read (the run's own check
    says more). For the commands that read a run's outputs without taking the lock."""
    holder = read_lock(output)
    if holder is None or holder.get("unreadable"):
        return None
    return None if is_stale(holder, FileSystems.join(output, LOCK_FILE)) else holder


def in_use_text(output: str, holder: dict) -> str:
    """The line for a command refused because a running convnorm holds ``output``'s lock."""
    return (
        f"{output!r} is in use by a running convnorm ({describe(holder)}; it holds the lock "
        f"{FileSystems.join(output, LOCK_FILE)}): its outputs may be half replaced until it ends; wait for it "
        "to finish, then run this again"
    )


def _take_os_lock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


@dataclass
class OutputLock:
    """A held lock; ``record`` rewrites its content, ``release`` deletes it."""

    output: str
    path: str
    content: dict = field(default_factory=dict)
    #: The open lock file whose OS lock this run holds (local outputs), or None.
    fd: int | None = None

    def record(self, **fields) -> None:
        """Add what this run may leave behind (before it creates or deletes it)."""
        self.content.update(fields)
        if self.fd is None:
            files.write_file(self.output, LOCK_FILE, _payload(self.content), replace=True, mime_type="application/json")
            return
        # The new file is OS-locked before it takes the name, the old one released after:
        # the file at the name is locked at every moment.
        fd = files.write_file(
            self.output, LOCK_FILE, _payload(self.content), replace=True, before_placing=_take_os_lock, keep_open=True
        )
        os.close(self.fd)
        self.fd = fd

    def release(self) -> None:
        """Delete the lock file, then let go of its OS lock (also when the delete fails: the
        file stays, stale, for the next run to take over)."""
        try:
            files.delete(self.path)
        finally:
            self.close()

    def close(self) -> None:
        """Let go of the OS lock but leave the lock file and its record (a run that stopped in
        an unexpected state: the next run sees a stale lock and cleans up what it records)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def read_lock(output: str) -> dict | None:
    path = FileSystems.join(output, LOCK_FILE)
    if files.is_link(path):
        return {"unreadable": True}  # never read (or trust) what a link at the lock's name shows
    try:
        text = files.read_own(path)  # a FIFO there would make the run wait for ever
    except Exception:  # noqa: BLE001 — absent (or unreadable) lock
        return None if not FileSystems.exists(path) else {"unreadable": True}
    try:
        holder = json.loads(text)
        return holder if isinstance(holder, dict) else {"unreadable": True}
    except ValueError:
        return {"unreadable": True}


def _payload(content: dict) -> bytes:
    # One line per file it lists: a finalize records 200,000 files (100,000 inputs), and
    # Python's indented encoder took ~1.5 s per rewrite of the lock.
    return document_bytes(content, indent=1, ascii_only=True, sort_keys=True, rows=True)


def _create_exclusive(output: str, content: dict) -> tuple[bool, int | None]:
    """Create the lock with ``content`` unless it exists: (created, its OS-locked descriptor)."""
    local_os_lock = content.get("os_lock") == OS_LOCK
    try:
        fd = files.write_file(
            output,
            LOCK_FILE,
            _payload(content),
            mime_type="application/json",
            before_placing=_take_os_lock if local_os_lock else None,
            keep_open=local_os_lock,
        )
    except FileExistsError:
        return False, None
    return True, fd


def acquire(
    output: str,
    *,
    run_id: str,
    command: str,
    temp_dir: str,
    break_stale: bool,
    clean_up,
    temp_proof: dict | None = None,
    take_over_hint: str = BREAK_STALE_HINT,
) -> OutputLock:
    """Take the lock of ``output`` (creating the directory), or raise ``LockError``.

    ``temp_dir``: the run's temporary directory, by its name in ``output`` ("" for none);
    ``temp_proof``: the size and sha256 of the file that proves it the run's. ``clean_up(holder)``
    is called with a stale holder's content, under our lock, before the run goes on: it deletes
    what the dead run recorded as its own.
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
    if temp_proof is not None:
        content["temp_proof"] = temp_proof
    if fcntl is not None and files.is_local(output):
        content["os_lock"] = OS_LOCK
    for _attempt in range(3):  # the holder may finish between our create and our read
        created, fd = _create_exclusive(output, content)
        if created:
            return OutputLock(output, path, content, fd)
        holder = read_lock(output)
        if holder is not None:
            break
    else:
        raise LockError(f"--output {output!r}: its lock {path} keeps appearing and disappearing; try again")
    refused = refusal(output, holder, break_stale=break_stale, take_over_hint=take_over_hint)
    if refused:
        raise LockError(refused)
    return _take_over(output, path, holder, content, clean_up)


def refusal(output: str, holder: dict, *, break_stale: bool, take_over_hint: str = BREAK_STALE_HINT) -> str | None:
    """Why a run cannot take the lock ``holder`` (what ``read_lock(output)`` gave), or None when
    it may take it over (stale, and ``break_stale``). The run and ``--dry-run`` both say this."""
    path = FileSystems.join(output, LOCK_FILE)
    if holder.get("unreadable"):
        return (
            f"--output {output!r} has a lock file {path} that cannot be read (or is a symbolic link); if no "
            "convnorm run is using this directory, delete that file and run again"
        )
    if not is_stale(holder, path):
        return (
            f"--output {output!r} is in use by another convnorm run ({describe(holder)}); "
            f"wait for it to finish (lock file {path})"
        )
    if not break_stale:
        return (
            f"--output {output!r} has a stale lock: the run that held it {_how_it_ended(output, holder)} "
            f"({describe(holder)}); its temporary files may still be there; {take_over_hint} (lock file {path})"
        )
    return None


def _how_it_ended(output: str, holder: dict) -> str:
    """Said of a stale lock's run: it failed and kept its lock (its ``failed`` note), it
    crashed (the fatal-error report in its temporary directory), or it died."""
    failed = holder.get("failed")
    if isinstance(failed, str) and failed:
        return f"did not die: it failed ({' '.join(failed.split())[:400]}) and kept its lock for the recovery"
    crashed = crash_note(output, holder)
    if crashed:
        return f"died of a crash ({crashed}; under a memory limit such as ulimit -v a failed allocation often ends so)"
    return "died"


def _take_over(output: str, path: str, holder: dict, content: dict, clean_up) -> OutputLock:
    # Move the stale lock aside under a name of our own, then check it is the one we judged
    # stale: two runs breaking the same lock at once cannot both win.
    aside_name = f"{LOCK_FILE}.stale-{content['run_id']}"
    aside = FileSystems.join(output, aside_name)
    try:
        FileSystems.rename([path], [aside])
    except Exception as error:  # noqa: BLE001
        raise LockError(f"--output {output!r}: another run took the stale lock over first ({error})") from None
    moved = json.loads(files.read_own(aside))
    if moved.get("run_id") != holder.get("run_id"):
        FileSystems.rename([aside], [path])
        raise LockError(f"--output {output!r}: another run took the stale lock over first")
    created, fd = _create_exclusive(output, content)
    if not created:
        raise LockError(f"--output {output!r}: another run took the lock while the stale one was broken")
    lock = OutputLock(output, path, content, fd)
    try:
        clean_up(holder)
    except BaseException:
        lock.release()
        FileSystems.rename([aside], [path])  # the dead run's record stays for the next attempt
        raise
    files.delete(aside)
    return lock
