"""The console boundary: what convnorm prints reaches the terminal through ``console_text``.

No Beam import (the command line uses it before Beam's). Three places, one rule
(``transforms.totals.console_text``: control characters shown as their Python escapes):

- ``escaped_console()``: while a command runs, ``sys.stdout`` and ``sys.stderr`` escape every
  control character written to them but the newline, which separates the lines of a table or a
  traceback. Whatever prints (our lines, argparse's errors, a traceback, Beam) is covered.
- ``ConsoleFormatter``, the console log handler's: a record of convnorm's prints on one line.
- ``print_line`` and ``print_error``: a line that names a path or an id, and an error or
  warning line (``ArgumentParser``'s errors too: they quote the arguments as given), each
  printed on one line.

What else reaches the terminal goes through here too:

- ``BeamNoiseFilter`` drops Beam's log messages that a local run's user cannot act on (the
  apitools/BigQuery notice, the semi-persistent directory warning). ``quiet_beam_noise()``
  installs it on the root logger before ``apache_beam`` is imported (Beam prints its notice
  while it is being imported); ``dask_setup`` is Dask's preload hook (``dask worker --preload
  pipeline.console``), the same filter in a Dask worker process.
- ``LIVE``, the live progress line (``pipeline.cli.progress`` draws it), redrawn in place on a
  terminal; ``ConsoleHandler`` clears it before each log record, and ``configure_console`` sets
  up the command line's logging with both.

A newline from the data cannot be told from a layout's own once the text is joined, so a value
that goes into a multi-line layout (the summary table, explain's columns, the plan of
``--dry-run``) is escaped where the layout is built: it stays on its line, the columns line up.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import sys
import threading
from typing import Iterator, NoReturn, TextIO

from transforms.totals.console_text import console_text

#: The loggers whose records are one line each (other libraries' keep their own line breaks).
OUR_LOGGERS = ("convnorm", "pipeline", "transforms")


class EscapedStream:
    """A console stream that escapes every control character written to it but the newline.

    ``unescaped`` is the stream itself, for the one writer whose control characters are its
    own layout: the live progress line's carriage returns (``pipeline.cli.progress``)."""

    def __init__(self, stream: TextIO) -> None:
        self.unescaped = stream

    def write(self, text: str) -> int:
        self.unescaped.write(console_text(text, keep_newlines=True))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self.unescaped, name)


def unescaped(stream):
    """The stream under an ``EscapedStream`` (any other stream as it is)."""
    return stream.unescaped if isinstance(stream, EscapedStream) else stream


@contextlib.contextmanager
def escaped_console() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` escaped while the block runs (see the module docstring)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (s if isinstance(s, EscapedStream) else EscapedStream(s) for s in saved)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


class ConsoleFormatter(logging.Formatter):
    """A log record as the console shows it: a message of convnorm's on one line (a file name
    with a newline cannot forge a second), another library's with its own line breaks, and a
    traceback with its lines; every other control character escaped."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        ours = record.name.split(".")[0] in OUR_LOGGERS
        return console_text(super().formatMessage(record), keep_newlines=not ours)

    def formatException(self, ei) -> str:
        return console_text(super().formatException(ei), keep_newlines=True)

    def formatStack(self, stack_info: str) -> str:
        return console_text(super().formatStack(stack_info), keep_newlines=True)


def print_line(text: str, file: TextIO | None = None, flush: bool = False) -> None:
    """``text`` on one line of ``file`` (stdout): a newline in it is a value's, shown escaped."""
    print(console_text(text), file=file or sys.stdout, flush=flush)


def print_error(message: str, prog: str = "convnorm", kind: str = "error") -> None:
    """``prog: error: message`` on stderr, on one line: an error may quote a path, an id or a
    JSON key from the data."""
    print_line(f"{prog}: {kind}: {message}", sys.stderr)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's, with its errors printed by ``print_error``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print_error(message, self.prog)
        self.exit(2)


#: Substrings of Beam log messages that a local run's user cannot act on.
BEAM_NOISE = (
    "apitools not found",
    "semi_persistent_directory",
    "semi-persistent directory",
)


class BeamNoiseFilter(logging.Filter):
    """Drops Beam's messages that a local run's user cannot act on (see ``BEAM_NOISE``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(("apache_beam", "root")) and record.name != "__main__":
            return True
        message = record.getMessage()
        return not any(noise in message for noise in BEAM_NOISE)


def quiet_beam_noise() -> None:
    """Add the filter to the root logger once (a second call changes nothing)."""
    root = logging.getLogger()
    if not any(isinstance(f, BeamNoiseFilter) for f in root.filters):
        root.addFilter(BeamNoiseFilter())


def dask_setup(worker: object) -> None:
    """Dask's preload hook (``dask worker --preload pipeline.console``): the same filter in a Dask
    worker process, before a task imports Beam."""
    quiet_beam_noise()


class _LiveLine:
    """The one line redrawn in place on a terminal; log records clear it before printing."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.stream = None  # set while a live line is shown
        self.width = 0

    def show(self, stream, text: str) -> None:
        # The carriage returns are the line's own: written past the console's escaping, the text escaped here.
        stream = unescaped(stream)
        with self.lock:
            columns = shutil.get_terminal_size((100, 20)).columns
            text = console_text(text)[: max(columns - 1, 10)]
            stream.write("\r" + text + " " * max(self.width - len(text), 0) + "\r")
            stream.flush()
            self.stream, self.width = stream, len(text)

    def clear(self) -> None:
        with self.lock:
            if self.stream is not None and self.width:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
            self.width = 0


LIVE = _LiveLine()


class ConsoleHandler(logging.StreamHandler):
    """stderr, with the live progress line cleared before each record (it is redrawn after)."""

    def emit(self, record: logging.LogRecord) -> None:
        with LIVE.lock:
            LIVE.clear()
            super().emit(record)


def configure_console(quiet: bool = False) -> None:
    """Logging for the command line: our INFO lines (none with ``quiet``), others' warnings, each
    escaped for the terminal (``pipeline.console.ConsoleFormatter``)."""
    handler = ConsoleHandler(sys.stderr)
    handler.setFormatter(ConsoleFormatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(BeamNoiseFilter())
    # apache_beam installs a root handler on import; force=True replaces it.
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    for name in ("convnorm", "pipeline", "transforms"):
        logging.getLogger(name).setLevel(logging.WARNING if quiet else logging.INFO)


__all__ = [
    "LIVE",
    "ArgumentParser",
    "BeamNoiseFilter",
    "ConsoleFormatter",
    "ConsoleHandler",
    "EscapedStream",
    "configure_console",
    "dask_setup",
    "escaped_console",
    "print_error",
    "print_line",
    "quiet_beam_noise",
    "unescaped",
]
