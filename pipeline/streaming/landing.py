"""The landing directory of a streaming run: which matched files are read, and when.

Plain functions and one state machine, no Beam: the watcher DoFn (``pipeline.streaming.driver``)
matches the ``--input`` patterns every poll (``match_landing``) and hands what it found to
``LandingWatch.poll``, which says which files to read now.

Every matched path is, at each poll, exactly one of:

- **ignored**: dot-files and ``*.tmp`` (still being written, by the landing convention), files
  of an unknown kind (warned once), files under ``--output`` (convnorm never reads its own
  outputs), and with ``--new-only`` the files present at start as they were then;
- **refused** (warned once): not a regular file (a FIFO, device, socket or directory, refused
  as the batch job refuses them), or a symbolic link that leads out of its landing directory
  (unless ``--follow-symlinks``);
- **settling**: seen with this size and modification time for the first time; it is ready
  when the next poll sees the same (a file still growing is not read);
- **waiting**: ready, not yet admitted (at most ``--max-files-per-poll`` files are admitted per
  poll and at most that many are in flight at once, so a stop drains a bounded backlog);
- **in flight**: handed to the pipeline, until the record of processed files
  (``pipeline.io.processed_files``) says this size and time were handled;
- **done**: that record says so. A later change (new size or time) makes it settling again.

State is kept only for paths the last poll matched, so memory follows the landing directory,
not the hours a run lasts.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from apache_beam.io.filesystems import FileSystems

from pipeline.io import files
from pipeline.io.ownership import is_under
from pipeline.io.planning import canonical_path, landing_root, link_leading_out, link_refusal
from pipeline.io.shard import FILE_KINDS, Stamp, display_path, file_suffix, special_file_kind

LOG = logging.getLogger("convnorm")


#: What ``examine`` found for a matched path: its stamp, or why it is refused / not read.
class Refused(NamedTuple):
    reason: str


class Ignored(NamedTuple):
    reason: str


def is_ignored(path: str) -> bool:
    """Files still being written by the landing convention: dot-files and ``*.tmp``."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name.startswith(".") or name.endswith(".tmp")


@dataclass(frozen=True)
class LandingRules:
    """What the watcher accepts, fixed before the pipeline is built."""

    patterns: tuple[str, ...]
    output: str
    follow_symlinks: bool = False

    @property
    def roots(self) -> tuple[str, ...]:
        return tuple(sorted({landing_root(p) for p in self.patterns}))


def _match(pattern: str) -> list:
    # A bare relative glob (``*.jsonl``) is matched under ``./``, as the batch job does.
    bare = files.is_local(pattern) and "/" not in pattern
    return FileSystems.match(["./" + pattern if bare else pattern])[0].metadata_list


def examine(path: str, rules: LandingRules, size: int = 0, mtime: float = 0.0) -> Stamp | Refused | Ignored:
    """A matched path's stamp, or why it is not read (``size``/``mtime``: what a remote
    filesystem's listing said; local files are looked at directly)."""
    if is_ignored(path):
        return Ignored("landing convention")
    if file_suffix(path) is None:
        return Ignored("unknown kind")
    if not files.is_local(path):
        return Stamp(size, int(mtime * 1e9))
    if is_under(path, rules.output):
        return Ignored("inside --output")
    try:
        target = None if rules.follow_symlinks else link_leading_out(path, rules.roots)
        if target is not None:  # the batch job's rule for a directory input
            return Refused(link_refusal(target, "the landing directory"))
        info = os.stat(path)
    except OSError as error:
        return Ignored(f"cannot be looked at: {error.strerror}")  # gone since the listing
    kind = special_file_kind(info.st_mode)
    if kind is not None:
        return Refused(f"{kind}; convnorm reads regular files only")
    return Stamp(info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def match_landing(rules: LandingRules) -> dict[str, Stamp | Refused | Ignored]:
    """Every path the patterns match now, with what ``examine`` found."""
    found: dict[str, Stamp | Refused | Ignored] = {}
    for pattern in rules.patterns:
        for meta in _match(pattern):
            path = canonical_path(meta.path)
            if path not in found:
                found[path] = examine(path, rules, meta.size_in_bytes, meta.last_updated_in_seconds)
    return found


def stamp_of(path: str) -> Stamp | None:
    """The stamp of a landed file now (None if it is gone)."""
    try:
        if files.is_local(path):
            info = os.stat(path)
            return Stamp(info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        meta = FileSystems.match([path])[0].metadata_list[0]
        return Stamp(meta.size_in_bytes, int(meta.last_updated_in_seconds * 1e9))
    except Exception:  # noqa: BLE001 — gone, or unreadable: the caller treats it as changed
        return None


# --------------------------------------------------------------------------------------------
# The watcher's state


SETTLING, WAITING, IN_FLIGHT, DONE, IGNORED, REFUSED = "settling", "waiting", "in flight", "done", "ignored", "refused"
PENDING = (SETTLING, WAITING, IN_FLIGHT)


#: The stamp of an entry that has none (refused or ignored without a look at its content).
NO_STAMP = Stamp(-1, -1)


@dataclass
class _Entry:
    state: str
    stamp: Stamp = NO_STAMP
    why: str = ""


class WatchStatus(NamedTuple):
    """The watcher's view after a poll (recorded in each window's progress)."""

    files_pending: int
    oldest_pending_age_s: float
    in_flight: int
    waiting: int
    settling: int
    refused: int


@dataclass
class LandingWatch:
    """Which landed files to read, poll after poll (see the module docstring).

    ``handled(path, stamp)`` asks the record of processed files whether that content of the
    path was handled (processed, or found unchanged); ``ignored_at_start`` holds the stamps of
    the files ``--new-only`` leaves alone.
    """

    handled: Callable[[str, Stamp], bool]
    max_files: int
    ignored_at_start: dict[str, Stamp] = field(default_factory=dict)
    known: dict[str, _Entry] = field(default_factory=dict)

    def poll(self, current: dict[str, Stamp | Refused | Ignored], stopping: bool = False) -> list[tuple[str, Stamp]]:
        """Update the state from one poll's matches; the files admitted now, oldest first."""
        for path, found in current.items():
            self._see(path, found)
        for path in [p for p in self.known if p not in current]:
            entry = self.known[path]
            if entry.state != IN_FLIGHT or self.handled(path, entry.stamp):
                del self.known[path]  # gone from the landing directory: forget it
        if stopping:
            return []
        in_flight = sum(1 for e in self.known.values() if e.state == IN_FLIGHT)
        room = max(0, self.max_files - in_flight)
        waiting = sorted((e.stamp.mtime_ns, p) for p, e in self.known.items() if e.state == WAITING)
        admitted = []
        for _, path in waiting[:room]:
            entry = self.known[path]
            entry.state = IN_FLIGHT
            admitted.append((path, entry.stamp))
        return admitted

    def _see(self, path: str, found: Stamp | Refused | Ignored) -> None:
        entry = self.known.get(path)
        if isinstance(found, (Refused, Ignored)):
            state = REFUSED if isinstance(found, Refused) else IGNORED
            if entry is not None and entry.state == IN_FLIGHT:
                return  # what is in flight finishes; the change is seen when it is handled
            if entry is None or entry.state != state or entry.why != found.reason:
                if isinstance(found, Refused):
                    LOG.warning("watcher: %s is %s: not read", display_path(path), found.reason)
                elif found.reason == "unknown kind":
                    LOG.warning(
                        "watcher: %s matches --input but its kind is unknown (want one of %s); not read",
                        display_path(path),
                        ", ".join(FILE_KINDS),
                    )
            self.known[path] = _Entry(state, NO_STAMP, found.reason)
            return
        stamp = found
        if entry is None:
            if self.ignored_at_start.get(path) == stamp:
                self.known[path] = _Entry(IGNORED, stamp, "present at start (--new-only)")
            else:
                self.known[path] = _Entry(SETTLING, stamp)
            return
        if entry.state == IN_FLIGHT:
            if not self.handled(path, entry.stamp):
                return  # a change waits until the content in flight is handled
            entry.state = DONE
        if entry.stamp != stamp:
            self.known[path] = _Entry(SETTLING, stamp)
        elif entry.state == SETTLING:
            entry.state = DONE if self.handled(path, stamp) else WAITING

    def status(self, now: float | None = None) -> WatchStatus:
        now = time.time() if now is None else now
        counts = {state: 0 for state in (SETTLING, WAITING, IN_FLIGHT, REFUSED)}
        oldest = None
        for entry in self.known.values():
            if entry.state in counts:
                counts[entry.state] += 1
            if entry.state in PENDING:
                oldest = entry.stamp.mtime_ns if oldest is None else min(oldest, entry.stamp.mtime_ns)
        age = max(0.0, now - oldest / 1e9) if oldest is not None else 0.0
        return WatchStatus(
            files_pending=counts[SETTLING] + counts[WAITING] + counts[IN_FLIGHT],
            oldest_pending_age_s=round(age, 3),
            in_flight=counts[IN_FLIGHT],
            waiting=counts[WAITING],
            settling=counts[SETTLING],
            refused=counts[REFUSED],
        )
