"""Progress of a local run, and a console that shows what matters to a person.

How it works: for a local runner, ``ProgressMonitor`` makes a private directory and names it in
the environment (``CONVNORM_PROGRESS_DIR``), which in-process DoFns and the worker processes
of ``--direct_running_mode=multi_processing`` both see. The DoFns that read shards and write
outputs keep a ``Tally`` each and now and then replace a small JSON file there with their
running counts; the monitor thread sums the files and shows:

- on a terminal, one live line on stderr, redrawn in place (log lines print above it);
- otherwise, a plain log line every ``LOG_EVERY`` seconds.

``--progress`` chooses (``auto``: line on a terminal, log otherwise; ``line``; ``log``;
``off``); ``--quiet`` shows warnings and errors only. Remote runners get no progress here:
their workers cannot see this machine's directory (their own consoles show progress).

Counts are for watching a run, not for accounting: a retried bundle counts twice here (never
in ``summary.json``). Bytes count exactly for uncompressed JSONL, which is read in byte
ranges; a compressed, ``.json`` or Parquet file counts whole once it is read.

The tallies are ``pipeline.graph.tally``'s; the live line and the console's logging are
``pipeline.console``'s. In multi-process mode the monitor also sends the worker processes' own
stderr (their start-up chatter) to a file that is kept, and named, only if the run fails.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

from pipeline.console import LIVE, ConsoleHandler
from pipeline.graph.tally import ENV

#: Seconds between two redraws of the live line.
REDRAW_EVERY = 0.5
#: Seconds between two progress log lines when stderr is not a terminal.
LOG_EVERY = 10.0

LOG = logging.getLogger("convnorm")

# --------------------------------------------------------------------------------------------
# Monitor side: summing and showing


@dataclass
class Snapshot:
    records: int = 0
    bytes_done: int = 0
    dead_letters: int = 0
    written: int = 0
    shards_done: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    #: The shards read to the end, by index.
    done: set[int] = field(default_factory=set)


def read_tallies(directory: str, shard_sizes: list[int]) -> Snapshot:
    """Sum the tally files in ``directory``; bytes from shards read whole plus offsets of the rest."""
    counts: dict[str, int] = {}
    offsets: dict[int, int] = {}
    done: set[int] = set()
    try:
        names = os.listdir(directory)
    except OSError:
        names = []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name)) as handle:
                tally = json.load(handle)
        except (OSError, ValueError):
            continue
        for key, n in tally.get("counts", {}).items():
            counts[key] = counts.get(key, 0) + n
        for shard, offset in tally.get("offsets", {}).items():
            offsets[int(shard)] = max(offsets.get(int(shard), 0), offset)
        done.update(tally.get("done", ()))
    size = lambda shard: shard_sizes[shard] if 0 <= shard < len(shard_sizes) else 0  # noqa: E731
    bytes_done = sum(size(s) for s in done) + sum(min(o, size(s)) for s, o in offsets.items() if s not in done)
    return Snapshot(
        records=counts.get("records", 0),
        bytes_done=bytes_done,
        dead_letters=counts.get("dead_letter", 0),
        written=counts.get("normalized", 0),
        shards_done=len(done),
        counts=counts,
        done=done,
    )


def size_text(n: float) -> str:
    """Bytes as a person reads them: ``812 B``, ``1.5 MiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def duration_text(seconds: float) -> str:
    """A run's duration as a person reads it: ``2.4 s``, ``3 min 05 s``, ``1 h 02 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    seconds = int(round(seconds))
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def files_done(done: set[int], shard_files: list[str]) -> int:
    """Input files whose every shard is read (``shard_files``: each shard's file, by index)."""
    pending = {path for index, path in enumerate(shard_files) if index not in done}
    return len(set(shard_files) - pending)


def format_progress(
    snap: Snapshot, total_bytes: int, total_shards: int, elapsed: float, shard_files: list[str] | None = None
) -> str:
    """One line: records, bytes of the planned total, files read, rate, ETA, dead letters so far."""
    parts = [f"{snap.records:,} records"]
    if total_bytes:
        fraction = min(snap.bytes_done / total_bytes, 1.0)
        parts.append(f"{size_text(snap.bytes_done)} of {size_text(total_bytes)} ({fraction:.0%})")
    else:
        fraction = snap.shards_done / total_shards if total_shards else 0.0
        parts.append(f"{snap.shards_done} of {total_shards} shards")
    files = len(set(shard_files or ()))
    if files > 1:
        parts.append(f"{files_done(snap.done, shard_files or [])} of {files} files")
    if elapsed > 0:
        parts.append(f"{snap.records / elapsed:,.0f} records/s")
    if 0.01 <= fraction < 1.0 and elapsed > 1:
        parts.append(f"ETA {_clock(elapsed * (1 - fraction) / fraction)}")
    elif fraction >= 1.0:
        parts.append("writing")
    parts.append(f"{snap.dead_letters:,} dead letter{'' if snap.dead_letters == 1 else 's'}")
    parts.append(_clock(elapsed))
    return " · ".join(parts)


def choose_mode(progress: str, quiet: bool, local: bool, stream=None) -> str:
    """``line``, ``log`` or ``off`` for ``--progress`` / ``--quiet`` and where we run."""
    if quiet or progress == "off" or not local:
        return "off"
    if progress == "auto":
        stream = stream or sys.stderr
        return "line" if getattr(stream, "isatty", lambda: False)() else "log"
    return progress


class ProgressMonitor:
    """``with ProgressMonitor(mode, shard_sizes, multi_process): pipeline.run() ...``.

    ``mode`` is ``line``, ``log`` or ``off``. With ``multi_process``, the worker processes'
    stderr goes to a file while the run lasts (see the module docstring); ``failed()`` keeps
    that file and returns its path.
    """

    def __init__(
        self, mode: str, shard_sizes: list[int], multi_process: bool = False, shard_files: list[str] | None = None
    ) -> None:
        self.mode = mode
        self.sizes = list(shard_sizes)
        #: Each shard's input file, by shard index: the line counts files read.
        self.shard_files = list(shard_files or [])
        self.total = sum(self.sizes)
        self.multi_process = multi_process
        self.worker_log: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._dir: str | None = None
        self._saved_env: str | None = None
        self._saved_fd: int | None = None
        self._console: TextIO | None = None
        self._failed = False

    # -- lifecycle
    def __enter__(self) -> ProgressMonitor:
        self._started = time.monotonic()
        if self.mode != "off":
            self._dir = tempfile.mkdtemp(prefix="convnorm-progress-")
            self._saved_env = os.environ.get(ENV)
            os.environ[ENV] = self._dir
        if self.multi_process:
            self._quiet_workers()
        if self.mode != "off":
            self._thread = threading.Thread(target=self._loop, name="convnorm-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        LIVE.clear()
        if self.mode == "log" and self._dir:
            self._log_line()
        if self._dir:
            if self._saved_env is None:
                os.environ.pop(ENV, None)
            else:
                os.environ[ENV] = self._saved_env
            shutil.rmtree(self._dir, ignore_errors=True)
        # Ctrl-C stopped the workers too: their tracebacks say nothing the one line does not.
        interrupted = exc[0] is not None and issubclass(exc[0], KeyboardInterrupt)
        self._restore_stderr(keep_log=(self._failed or exc[0] is not None) and not interrupted)

    def failed(self) -> str | None:
        """Mark the run failed: the workers' stderr file (if any) is kept; returns its path."""
        self._failed = True
        return self.worker_log

    # -- showing
    def snapshot(self) -> Snapshot:
        return read_tallies(self._dir, self.sizes) if self._dir else Snapshot()

    def line(self) -> str:
        elapsed = time.monotonic() - self._started
        return format_progress(self.snapshot(), self.total, len(self.sizes), elapsed, self.shard_files)

    def _log_line(self) -> None:
        LOG.info("progress: %s", self.line())

    def _loop(self) -> None:
        last_log = time.monotonic()
        stream = self._console or sys.stderr
        while not self._stop.wait(REDRAW_EVERY):
            if self.mode == "line":
                LIVE.show(stream, self.line())
            elif time.monotonic() - last_log >= LOG_EVERY:
                last_log = time.monotonic()
                self._log_line()

    # -- the workers' stderr (multi-process)
    def _quiet_workers(self) -> None:
        try:
            sys.stderr.flush()
            fd, self.worker_log = tempfile.mkstemp(prefix="convnorm-workers-", suffix=".log")
            self._saved_fd = os.dup(2)
            # Our own console keeps the real stderr: the log handler and the live line.
            self._console = os.fdopen(os.dup(self._saved_fd), "w", buffering=1)
            os.dup2(fd, 2)  # worker processes inherit fd 2: their chatter goes to the file
            os.close(fd)
            for handler in logging.getLogger().handlers:
                if isinstance(handler, ConsoleHandler) and _is_fd2(handler.stream):
                    handler.setStream(self._console)
        except OSError:
            self._saved_fd = None

    def _restore_stderr(self, keep_log: bool) -> None:
        if self._saved_fd is None:
            return
        sys.stderr.flush()
        os.dup2(self._saved_fd, 2)
        os.close(self._saved_fd)
        self._saved_fd = None
        for handler in logging.getLogger().handlers:
            if isinstance(handler, ConsoleHandler) and handler.stream is self._console:
                handler.setStream(sys.stderr)
        if self._console is not None:
            self._console.close()
        self._console = None
        if self.worker_log and not keep_log:
            os.unlink(self.worker_log)
            self.worker_log = None


def _is_fd2(stream) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False
