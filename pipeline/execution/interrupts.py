"""Ctrl-C and SIGTERM: one line that says what was stopped and where the output stands, exit
status 130 (Ctrl-C) or 143 (SIGTERM: what ``timeout``, systemd and Kubernetes send).

No Beam import. ``handling_signals`` turns SIGINT and SIGTERM into ``Stopped`` (a
``KeyboardInterrupt``, which is what Python makes of SIGINT without it) in the main thread, so
both unwind the same way: the command line catches them at the top of each command
(``pipeline.cli.main``, ``pipeline.cli.commands``) and prints ``interrupted_line``. The output directory is
unchanged by an interrupted run because the pipeline writes only into the run's temporary
directory, which ``pipeline.execution.execute`` removes on the way out, with the lock. The one step that
changes the directory, moving the files into place and writing the manifest, is ``shielded``:
a Ctrl-C or SIGTERM there waits until it is done, so the directory holds either the previous
outputs or the whole new run, never half of each.

``Stopping`` records what the command is doing for that line; ``silence_after_interrupt``
keeps Beam's threads and worker processes from printing their tracebacks after it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

#: The exit status of a command stopped by Ctrl-C (128 + SIGINT, as shells report it).
INTERRUPTED = 130
#: The exit status of a command stopped by SIGTERM (128 + SIGTERM).
TERMINATED = 143
#: The signals that stop a command cleanly.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_status(signum: int) -> int:
    """The status a shell reports for a process ended by ``signum``: 128 + its number."""
    return 128 + signum


class Stopped(KeyboardInterrupt):
    """A stop signal, unwinding the command like Ctrl-C; ``signum`` says which one came."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__()
        self.signum = signum


class InterruptedAfterWrite(Stopped):
    """The signal came while the outputs were being moved into place: they were finished first."""


def stop_signal(stop: BaseException) -> int:
    """The signal behind a ``KeyboardInterrupt``: Python's own (no handler of ours yet) is SIGINT."""
    return getattr(stop, "signum", signal.SIGINT)


@dataclass
class Stopping:
    """What a command is doing, for the line a stop signal prints."""

    #: ``the run pipeline``, ``the validate pipeline``, ``the dry run`` ...
    what: str = "convnorm"
    #: The output directory, once known.
    output: str | None = None
    #: The outputs were moved into place (the run finished writing).
    written: bool = False
    #: The output is a streaming run's: windows already closed stay, complete.
    streaming: bool = False
    #: When the command started (``time.monotonic()``): its ``done in`` counts from here.
    started: float = field(default_factory=time.monotonic)


def _cause(signum: int) -> str:
    return "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted (Ctrl-C)"


def interrupted_line(
    what: str,
    output: str | None,
    *,
    written: bool = False,
    streaming: bool = False,
    drained: bool = False,
    signum: int = signal.SIGINT,
) -> str:
    """The one line a Ctrl-C (``signum`` SIGINT) or a SIGTERM prints."""
    cause = _cause(signum)
    if drained:
        where = f"every file seen was written to {output}, the last windows closed and summary.json written"
        return f"convnorm: {cause}: stopped {what} after draining; {where}"
    if written and output is not None:  # the finished run was writing its last files: they are whole
        return (
            f"convnorm: {cause} after {what} finished: its outputs in {output} are complete "
            "(the summary is in their summary file, the table was not printed)"
        )
    if output is None:
        where = "nothing was written"
    elif streaming:
        where = f"{output} keeps the windows already closed; files in flight were not written"
    else:
        where = f"the output directory {output} is unchanged"
    return f"convnorm: {cause}: stopped {what}; {where}"


def stopping_line(state: Stopping, signum: int = signal.SIGINT) -> str:
    return interrupted_line(state.what, state.output, written=state.written, streaming=state.streaming, signum=signum)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Run the block to its end even if Ctrl-C or SIGTERM comes; then raise
    ``InterruptedAfterWrite`` (with the first signal that came).

    Only in the main thread (where Python handles signals); elsewhere the block just runs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if caught:
        raise InterruptedAfterWrite(caught[0])


class _Received:
    """Whether a stop signal came, and which, for code that sees it only wrapped: Beam runs a
    bundle in the main thread, so the ``Stopped`` surfaces inside a DoFn and Beam re-raises it
    as a ``RuntimeError`` (``pipeline.execution.execute.run_pipeline`` asks ``received()`` and re-raises
    ``as_stopped()``: what it is)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int = signal.SIGINT


_RECEIVED = _Received()


def received() -> bool:
    return _RECEIVED.event.is_set()


def as_stopped() -> Stopped:
    """The stop that came (``received()``), to raise again once Beam has wrapped it."""
    return Stopped(_RECEIVED.signum)


@contextlib.contextmanager
def handling_signals(stopping: Stopping) -> Iterator[None]:
    """The command's SIGINT and SIGTERM handler: the first signal silences logging (Beam logs
    the interrupted bundle with a traceback) and raises ``Stopped`` to unwind, with the
    temporary directory and the lock removed on the way; a second one, while that runs, stops
    at once (the lock stays: ``--break-stale-lock`` cleans up after it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: object) -> None:
        if _RECEIVED.event.is_set():
            print(
                interrupted_line(stopping.what, None, signum=signum).split(";")[0]
                + " at once; rerun with --break-stale-lock to clean up",
                file=sys.stderr,
                flush=True,
            )
            os._exit(exit_status(signum))
        _RECEIVED.signum = signum
        _RECEIVED.event.set()
        silence_after_interrupt()
        raise Stopped(signum)

    previous = {s: signal.signal(s, handle) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _RECEIVED.event.clear()


class _Silence(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


def silence_after_interrupt() -> None:
    """After Ctrl-C, nothing more from logging: Beam's threads log the broken connections to
    worker processes that the same Ctrl-C stopped, with tracebacks a person need not read."""
    root = logging.getLogger()
    for handler in root.handlers:
        handler.addFilter(_Silence())
    logging.disable(logging.CRITICAL)
    # Beam's gRPC threads end with the connections Ctrl-C closed: their exceptions say nothing more.
    threading.excepthook = lambda args: None
