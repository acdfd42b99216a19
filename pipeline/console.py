"""The console boundary: what convnorm prints reaches the terminal through ``console_text``.

No Beam import (the command line uses it before Beam's). Three places, one rule
(``transforms.console_text``: control characters shown as their Python escapes):

- ``escaped_console()``: while a command runs, ``sys.stdout`` and ``sys.stderr`` escape every
  control character written to them but the newline, which separates the lines of a table or a
  traceback. Whatever prints (our lines, argparse's errors, a traceback, Beam) is covered.
- ``ConsoleFormatter``, the console log handler's: a record of convnorm's prints on one line.
- ``print_line`` and ``print_error``: a line that names a path or an id, and an error or
  warning line (``ArgumentParser``'s errors too: they quote the arguments as given), each
  printed on one line.

A newline from the data cannot be told from a layout's own once the text is joined, so a value
that goes into a multi-line layout (the summary table, explain's columns, the plan of
``--dry-run``) is escaped where the layout is built: it stays on its line, the columns line up.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Iterator, NoReturn, TextIO

from transforms.console_text import console_text

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


__all__ = [
    "ArgumentParser",
    "ConsoleFormatter",
    "EscapedStream",
    "escaped_console",
    "print_error",
    "print_line",
    "unescaped",
]
