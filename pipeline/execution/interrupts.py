"""Ctrl-C: one line that says what was stopped and where the output stands, exit status 130.

No Beam import. Python turns SIGINT into ``KeyboardInterrupt`` in the main thread; the command
line catches it at the top of each command (``pipeline.cli.main``, ``pipeline.cli.commands``) and prints
``interrupted_line``. The output directory is unchanged by an interrupted run because the
pipeline writes only into the run's temporary directory, which ``pipeline.execution.execute`` removes on
the way out, with the lock. The one step that changes the directory, moving the files into
place and writing the manifest, is ``shielded``: a Ctrl-C there waits until it is done, so the
directory holds either the previous outputs or the whole new run, never half of each.

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


class InterruptedAfterWrite(KeyboardInterrupt):
    """Ctrl-C came while the outputs were being moved into place: they were finished first."""


@dataclass
class Stopping:
    """What a command is doing, for the line Ctrl-C prints."""

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


def interrupted_line(
    what: str, output: str | None, *, written: bool = False, streaming: bool = False, drained: bool = False
) -> str:
    """The one line Ctrl-C prints."""
    if drained:
        where = f"every file seen was written to {output}, the last windows closed and summary.json written"
        return f"convnorm: interrupted (Ctrl-C): stopped {what} after draining; {where}"
    if written and output is not None:  # the finished run was writing its last files: they are whole
        return (
            f"convnorm: interrupted (Ctrl-C) after {what} finished: its outputs in {output} are complete "
            "(the summary is in their summary file, the table was not printed)"
        )
    if output is None:
        where = "nothing was written"
    elif streaming:
        where = f"{output} keeps the windows already closed; files in flight were not written"
    else:
        where = f"the output directory {output} is unchanged"
    return f"convnorm: interrupted (Ctrl-C): stopped {what}; {where}"


def stopping_line(state: Stopping) -> str:
    return interrupted_line(state.what, state.output, written=state.written, streaming=state.streaming)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Run the block to its end even if Ctrl-C comes; then raise ``InterruptedAfterWrite``.

    Only in the main thread (where Python handles signals); elsewhere the block just runs.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise InterruptedAfterWrite()


class _Received:
    """Whether Ctrl-C came, for code that sees it only wrapped: Beam runs a bundle in the main
    thread, so the ``KeyboardInterrupt`` surfaces inside a DoFn and Beam re-raises it as a
    ``RuntimeError`` (``pipeline.execution.execute.run_pipeline`` asks ``received()`` and re-raises it
    as what it is)."""

    def __init__(self) -> None:
        self.event = threading.Event()


_RECEIVED = _Received()


def received() -> bool:
    return _RECEIVED.event.is_set()


@contextlib.contextmanager
def handling_ctrl_c(stopping: Stopping) -> Iterator[None]:
    """The command's SIGINT handler: the first Ctrl-C silences logging (Beam logs the
    interrupted bundle with a traceback) and raises ``KeyboardInterrupt`` to unwind, with the
    temporary directory and the lock removed on the way; a second one, while that runs, stops
    at once (the lock stays: ``--break-stale-lock`` cleans up after it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: object) -> None:
        if _RECEIVED.event.is_set():
            print(
                interrupted_line(stopping.what, None).split(";")[0]
                + " at once; rerun with --break-stale-lock to clean up",
                file=sys.stderr,
                flush=True,
            )
            os._exit(INTERRUPTED)
        _RECEIVED.event.set()
        silence_after_interrupt()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
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
