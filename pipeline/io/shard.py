"""An input file's kind and a shard of it: ``FILE_KINDS`` (suffix -> reader, compression,
whether it splits into byte ranges), ``Shard``, how a path and a position in it are shown
(``display_path``, ``where_text``), what tells one content of a file from another (``Stamp``),
and ``BLANK`` (a blank JSONL line, counted but no record). No Beam import."""

from __future__ import annotations

import stat
from functools import lru_cache
from typing import NamedTuple

#: Suffix -> (kind, compression, splittable into byte ranges); longest suffix wins. (A big
#: Parquet file is cut too, by row groups: ``pipeline.io.parquet_plan``.)
FILE_KINDS = {
    ".jsonl": ("jsonl", None, True),
    ".jsonl.gz": ("jsonl", "gzip", False),
    ".jsonl.zst": ("jsonl", "zstd", False),
    ".json": ("json", None, False),
    ".parquet": ("parquet", None, False),
}


class Shard(NamedTuple):
    """A planned unit of reading: a whole file, a byte range of an uncompressed JSONL file, or
    a range of rows of a Parquet file (whole row groups). ``start`` and ``end`` are the file
    kind's positions: bytes for JSONL, rows for Parquet."""

    #: 0, 1, ... in plan order (``index`` would shadow the tuple's method).
    number: int
    path: str
    suffix: str
    start: int
    end: int | None  # exclusive; None: to the end of the file
    #: Records to read at most (``--limit``); None: every record of the range.
    limit: int | None = None
    #: The file's size in bytes when it was planned (for progress); None: not known.
    file_size: int | None = None
    #: The path as the plan matched it, when ``path`` was made absolute from it (a relative
    #: ``--input``): what outputs and logs name, so they do not depend on where the checkout is.
    source: str = ""
    #: A local file's modification time, inode and device when it was planned (with
    #: ``file_size``): the reader compares them with the file it opens (``InputChanged``).
    mtime_ns: int | None = None
    inode: int | None = None
    device: int | None = None
    #: The file bytes a range of rows covers (a Parquet shard's row groups, compressed, as the
    #: metadata gives them): its size where ``start`` and ``end`` are not bytes; None otherwise.
    range_bytes: int | None = None

    @property
    def name(self) -> str:
        """The path as shown in outputs and logs (non-UTF-8 bytes escaped)."""
        return display_path(self.source or self.path)


@lru_cache(maxsize=1024)
def display_path(path: str) -> str:
    """A path as UTF-8 text: bytes that are not UTF-8 (which Python's file functions carry as
    lone surrogates) are shown as ``\\xNN``, the same way in every output."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        pass
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


#: The suffixes, longest first (``.jsonl.gz`` before ``.jsonl``).
_SUFFIXES = sorted(FILE_KINDS, key=len, reverse=True)


def file_suffix(path: str) -> str | None:
    lowered = path.lower()
    for suffix in _SUFFIXES:
        if lowered.endswith(suffix):
            return suffix
    return None


def special_file_kind(mode: int) -> str | None:
    """What a file that is not a regular file is (``a FIFO``, ``a device`` ...), from its
    ``st_mode``; None for a regular file. convnorm reads regular files only: a FIFO, device or
    socket never ends (or blocks on open)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


class Blank(NamedTuple):
    """Blank JSONL lines in a row (white space only): counted and skipped, not records. A run
    of them is one item, so a file of newlines costs about what decompressing it does."""

    lines: int


BLANK = Blank(1)


def where_text(source: str, position: int, line: int | None) -> str:
    """``logs/a.jsonl line 45 (byte 12,345)``, or ``... element 3`` / ``row 3``."""
    suffix = file_suffix(source)
    kind = FILE_KINDS[suffix][0] if suffix else "jsonl"
    if kind == "json":
        return f"{source} element {position:,}"
    if kind == "parquet":
        return f"{source} row {position:,}"
    return f"{source} line {line:,} (byte {position:,})" if line else f"{source} byte {position:,}"


class Stamp(NamedTuple):
    """What tells one content of a path from another without reading it: its size and
    modification time, and for a local file its status-change time (``ctime``), which no tool
    can set back: a file rewritten, or replaced by another, with its size and modification
    time kept (``cp -p``, ``touch -r``) is told apart by it. 0 where there is none (object stores)."""

    size: int
    mtime_ns: int
    ctime_ns: int = 0
