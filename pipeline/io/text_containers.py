"""Reading conversation logs: plan the input into shards, then read shards into batches.

Input files are matched and planned before the pipeline is built (so a pattern that matches
nothing is an error up front, and shard numbers are fixed). Each file kind has a reader:

=============  =====================================================  =====================
suffix         records                                                position
=============  =====================================================  =====================
``.jsonl``     one JSON value per line; split into byte ranges        byte offset of line
``.jsonl.gz``  the same, gzip-compressed (read whole)                 offset, decompressed
``.jsonl.zst`` the same, zstd-compressed (read whole)                 offset, decompressed
``.json``      an array of records (an object: one record)            element index
``.parquet``   one record per row                                     row index
=============  =====================================================  =====================

Any Beam filesystem works (local paths, ``gs://``, ...). A JSONL line ends at LF, CR LF or a
CR alone; a file starting with a UTF-16 byte-order mark is decoded (and never cut into byte
ranges). Blank JSONL lines are not records: they are counted (``blank_lines``; a run of them in
bulk) and skipped. A file that fails mid-way yields one ``unreadable_file`` record for the
rest, so the failure is a dead letter, not a crash. A planned local file is compared with the
plan (size, time, inode) when it is opened and once it is read, and with what its path names
then; a plain file's bytes read with its planned size: a file truncated, replaced or rewritten
under the run yields one ``input_changed`` record for the rest (docs/outputs.md).

Memory per record is bounded by ``--max-record-bytes``: a longer JSONL line, ``.json``
array element or other ``.json`` document is a ``record_too_large`` record, read past in
pieces, never held whole; a Parquet row over it is one too, found from the file's metadata or
measured in Arrow before it becomes a record (docs/input-limits.md). A ``.json`` file up to the limit is parsed
whole; a bigger array is split into its elements by following strings and nesting.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import decimal
import gzip
import io
import logging
import math
import os
import pickle
import re
import stat
import zlib
from functools import lru_cache
from typing import Iterable, Iterator, NamedTuple

import apache_beam as beam
import orjson
import zstandard
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from pipeline.graph.tally import Tally
from pipeline.io.files import open_input
from pipeline.io.output_names import OWN_OUTPUT_FILES
from pipeline.testhooks import pause_point
from transforms.counters import NAMESPACE
from transforms.inputs import (  # the defaults live where the command line reads them without Beam
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_SHARD_BYTES,
    Batch,
    Parsed,
    RawRecord,
    Unreadable,
    batch_is_full,
    raw_size,
)
from transforms.jsontext import NumberTooLarge, parse_json

LOG = logging.getLogger(__name__)

#: Suffix -> (kind, compression, splittable); longest suffix wins.
FILE_KINDS = {
    ".jsonl": ("jsonl", None, True),
    ".jsonl.gz": ("jsonl", "gzip", False),
    ".jsonl.zst": ("jsonl", "zstd", False),
    ".json": ("json", None, False),
    ".parquet": ("parquet", None, False),
}


class InputError(ValueError):
    """An input that cannot be planned: nothing matched, or an unknown file kind."""


class Shard(NamedTuple):
    """A planned unit of reading: a whole file, or a byte range of an uncompressed JSONL file."""

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


def _is_local(pattern: str) -> bool:
    return "://" not in pattern


def _match(pattern: str) -> dict[str, int]:
    """Path -> size for a pattern; relative globs with no directory (``*.jsonl``), which
    Beam's local filesystem does not match, are matched under ``./`` and shown without it."""
    bare = _is_local(pattern) and not os.path.dirname(pattern) and any(c in pattern for c in "*?[")
    matched = FileSystems.match(["./" + pattern if bare else pattern])[0].metadata_list
    found = {}
    for meta in matched:
        path = meta.path[2:] if bare and meta.path.startswith("./") else meta.path
        found[path] = meta.size_in_bytes
    return found


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


def _refuse_special_file(path: str) -> os.stat_result | None:
    """A FIFO, device or socket never ends (or blocks on open): refuse it before the run. The
    file's ``stat`` (local files; None elsewhere), which the plan keeps."""
    if not _is_local(path):
        return None
    try:
        info = os.stat(path)
    except OSError as error:
        raise InputError(f"cannot read --input file {display_path(path)!r}: {error.strerror}") from None
    kind = special_file_kind(info.st_mode)
    if kind is not None:
        raise InputError(f"--input {display_path(path)!r} is {kind}; convnorm reads regular files only")
    return info


def is_directory(pattern: str) -> bool:
    """Does ``--input`` name a directory (a local one, or a remote path ending in ``/``)?"""
    if _is_local(pattern):
        return os.path.isdir(pattern)
    return pattern.endswith("/")


def link_leading_out(path: str, roots: Iterable[str]) -> str | None:
    """Where ``path`` leads when it is a local symbolic link whose target (links resolved) lies
    outside every directory of ``roots``; None for anything else, a link that stays inside
    included. The one rule of a directory input (batch) and a landing directory (streaming):
    such a link is read only with ``--follow-symlinks``, so a link planted among the logs
    (``dl/passwd.jsonl -> /etc/passwd``) never gets a file from elsewhere read and copied into
    ``dead_letter/``."""
    if not _is_local(path) or not os.path.islink(path):
        return None
    target = os.path.realpath(path)
    for root in roots:
        real = os.path.realpath(root)
        if target == real or target.startswith(real.rstrip("/") + "/"):
            return None
    return target


def link_refusal(target: str, where: str) -> str:
    """Why a link that leads out of ``where`` (``the directory``, ``the landing directory``) is not read."""
    return (
        f"a symbolic link that leads out of {where} (to {display_path(target)}); "
        "pass --follow-symlinks to read such links"
    )


class LeftOut(NamedTuple):
    """What a directory input does not read, beside its dot-files and ``_``-files."""

    #: Files without a known suffix, by name.
    unknown: list[str]
    #: Subdirectories (local directories only), by name.
    subdirectories: list[str]
    #: A quoted glob that reads the subdirectories' files (``'logs/*/*.jsonl'``), if they hold any.
    glob: str | None
    #: Files refused, each with why (links that lead out, dangling links): warnings, not notes.
    refused: tuple[str, ...] = ()


def _in_directory(directory: str, follow_symlinks: bool = False) -> tuple[dict[str, int], LeftOut]:
    """The input files directly in ``directory`` (path -> size) and what is left out.

    Every file with a supported suffix, but dot-files and ``_``-files (hidden, or written by a
    tool: ``_SUCCESS``, ``_convnorm_manifest.json``), in a convnorm output directory its
    summaries, and (without ``follow_symlinks``) symbolic links that lead out of it.
    Subdirectories are not read.
    """
    matched = _match(FileSystems.join(directory.rstrip("/") or "/", "*"))
    names = {path: path.rstrip("/").rsplit("/", 1)[-1] for path in matched}
    own_output = OWN_OUTPUT_FILES[0] in names.values()
    found, unknown, refused = {}, [], []
    for path, name in sorted(names.items()):
        if name.startswith((".", "_")) or (own_output and name in OWN_OUTPUT_FILES):
            continue
        if file_suffix(name) is None:
            unknown.append(name)
            continue
        why = None if follow_symlinks else _refused_link(path, directory)
        if why is not None:
            refused.append(f"--input {display_path(directory)}: {display_path(path)} is {why}: not read")
            continue
        if _is_local(path) and not os.path.isfile(path):
            if os.path.islink(path):  # a dangling link: nothing to read, but never a silent skip
                refused.append(f"--input {display_path(directory)}: {display_path(path)} is a link to nothing")
            continue  # a subdirectory (Beam's match lists it as a path)
        found[path] = matched[path]
    subdirectories, glob = _subdirectories(directory)
    return found, LeftOut(unknown, subdirectories, glob, tuple(refused))


def _refused_link(path: str, directory: str) -> str | None:
    target = link_leading_out(path, [directory])
    return None if target is None else link_refusal(target, "the directory")


def _subdirectories(directory: str) -> tuple[list[str], str | None]:
    """A local directory's subdirectories (not dot- or ``_``-ones), and a glob that reads the
    first input suffix found one level down in them (``None``: they hold no input file)."""
    if not _is_local(directory):
        return [], None
    try:
        names = sorted(e.name for e in os.scandir(directory) if e.is_dir() and not e.name.startswith((".", "_")))
    except OSError:
        return [], None
    for name in names:
        try:
            found = {file_suffix(e.name) for e in os.scandir(os.path.join(directory, name)) if e.is_file()}
        except OSError:
            continue
        suffixes = sorted(suffix for suffix in found if suffix is not None)
        if suffixes:
            return names, f"--input '{os.path.join(display_path(directory), '*', '*' + suffixes[0])}'"
    return names, None


def _left_out_note(directory: str, left_out: LeftOut) -> str | None:
    """The plan's line on what a directory input does not read (``None``: nothing)."""
    parts = []
    if left_out.unknown:
        names = ", ".join(left_out.unknown[:5]) + (" ..." if len(left_out.unknown) > 5 else "")
        parts.append(f"{len(left_out.unknown)} file(s) without a known suffix not read: {names}")
    if left_out.subdirectories:
        count = len(left_out.subdirectories)
        names = ", ".join(f"{name}/" for name in left_out.subdirectories[:5]) + (" ..." if count > 5 else "")
        hint = f" (to read the files in them, quote a glob: {left_out.glob})" if left_out.glob else ""
        parts.append(f"{count} {'subdirectory' if count == 1 else 'subdirectories'} not read: {names}{hint}")
    return f"--input {display_path(directory)}: " + "; ".join(parts) if parts else None


def match_inputs(
    patterns: list[str],
    notes: list[str] | None = None,
    follow_symlinks: bool = False,
    refused: list[str] | None = None,
) -> dict[str, int]:
    """Every input file the patterns name (path -> size): files, globs and directories.

    What a directory input leaves out is said in a line appended to ``notes`` (the plan's:
    shown once the console is set up for the job), or logged when ``notes`` is ``None``; the
    files it refuses (``link_leading_out``, unless ``follow_symlinks``), one line each, in
    ``refused`` (warnings), or logged as warnings when ``refused`` is ``None``.
    """
    files: dict[str, int] = {}
    for pattern in patterns:
        left_out = LeftOut([], [], None)
        try:
            if is_directory(pattern):
                matched, left_out = _in_directory(pattern, follow_symlinks)
                note = _left_out_note(pattern, left_out)
                if note and notes is not None:
                    notes.append(note)
                elif note:
                    LOG.info("%s", note)
                if refused is not None:
                    refused.extend(left_out.refused)
                else:
                    for line in left_out.refused:
                        LOG.warning("%s", line)
            else:
                matched = _match(pattern)
        except Exception as error:  # noqa: BLE001 — filesystems raise their own types
            raise InputError(f"cannot match --input {display_path(pattern)!r}: {error}") from None
        if not matched and is_directory(pattern):
            hint = f"; its subdirectories hold input files: {left_out.glob}" if left_out.glob else ""
            raise InputError(
                f"--input {display_path(pattern)!r} is a directory with no input file directly in it "
                f"(files ending in {', '.join(FILE_KINDS)}; dot-files and subdirectories are not read){hint}"
            )
        if not matched:
            raise InputError(f"no file matches --input {display_path(pattern)!r}")
        files.update(matched)
    return files


def plan_shards(
    patterns: list[str],
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    notes: list[str] | None = None,
    follow_symlinks: bool = False,
    refused: list[str] | None = None,
) -> list[Shard]:
    """Match every pattern and cut the files into shards, in a deterministic order
    (``notes``, ``follow_symlinks``, ``refused``: see ``match_inputs``)."""
    files = match_inputs(patterns, notes, follow_symlinks, refused)
    shards: list[Shard] = []
    for path in sorted(files):
        suffix = file_suffix(path)
        if suffix is None:
            raise InputError(
                f"cannot tell the format of {display_path(path)!r} from its name; "
                f"input files end in one of: {', '.join(FILE_KINDS)}"
            )
        info = _refuse_special_file(path)
        # What the reader compares the file it opens with: size, and locally time and identity.
        size = files[path] if info is None else info.st_size
        whole = Shard(0, path, suffix, 0, None, file_size=size)
        if info is not None:
            whole = whole._replace(mtime_ns=info.st_mtime_ns, inode=info.st_ino, device=info.st_dev)
        # A UTF-16 file is read whole: a byte range could start in the middle of a code unit.
        if FILE_KINDS[suffix][2] and size > shard_bytes and not _starts_utf16(path):
            # Equal ranges of at most shard_bytes: no small tail shard, so workers that take
            # shards in turn get even work.
            count = -(-size // shard_bytes)
            bounds = [size * k // count for k in range(count + 1)]
            for start, end in zip(bounds, bounds[1:]):
                shards.append(whole._replace(number=len(shards), start=start, end=None if end == size else end))
        else:
            shards.append(whole._replace(number=len(shards)))
    return shards


def limit_plan(shards: list[Shard], limit: int, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> list[Shard]:
    """The plan cut to its first ``limit`` records (``--limit``): the shards that hold them,
    in order, each with the number of records to read from it.

    Counts records by reading the shards in plan order until ``limit`` are found, so at most
    ``limit`` records are read here (JSONL lines are not parsed).
    """
    kept: list[Shard] = []
    remaining = limit
    for shard in shards:
        if remaining <= 0:
            break
        records = sum(
            1 for item in read_shard(shard._replace(limit=remaining), max_record_bytes) if not isinstance(item, Blank)
        )
        if records:
            kept.append(shard._replace(number=len(kept), limit=records))
            remaining -= records
    return kept or shards[:1]


def shard_sizes(shards: list[Shard]) -> list[int]:
    """Bytes of each planned shard (its range, or its whole file), by shard number: from the
    sizes planning saw, a file's size looked up only where it is not known."""
    sizes: dict[str, int] = {s.path: s.file_size for s in shards if s.file_size is not None}
    for path in {s.path for s in shards if s.end is None and s.path not in sizes}:
        try:
            sizes[path] = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
        except Exception:  # noqa: BLE001 — only for progress: an unknown size counts 0
            sizes[path] = 0
    return [(s.end if s.end is not None else max(sizes[s.path], s.start)) - s.start for s in shards]


# --------------------------------------------------------------------------------------------
# Reading one shard (plain generators: the baseline benchmark and the validator reuse them)


class Blank(NamedTuple):
    """Blank JSONL lines in a row (white space only): counted and skipped, not records. A run
    of them is one item, so a file of newlines costs about what decompressing it does."""

    lines: int


BLANK = Blank(1)

#: The bytes of blank lines: white space and line ends.
_SPACE = b" \t\x0b\x0c\r\n"
#: Bytes looked at per step of a run of blank lines (what the stream's buffer holds, at most).
_BLANK_PEEK = 1 << 16


def _line_ends(data: bytes, end: int) -> int:
    """The lines ending in ``data[:end]``: at each LF, and at each CR that no LF follows."""
    lines = data.count(b"\n", 0, end)
    cr = data.find(b"\r", 0, end)
    return lines if cr == -1 else lines + data.count(b"\r", cr, end) - data.count(b"\r\n", cr, end)


def _blank_run(handle, room: int | None) -> tuple[int, int]:
    """Read past the blank lines at the stream's position, a buffer at a time, with bytes
    methods only (a regular expression cost 25 ns a byte): (bytes, lines).

    With ``room`` (a byte range's bytes left), the lines kept are those of the range: a line
    belongs to the range its first byte falls in, with the rest of its LF-ended line (the
    pieces a CR alone cuts off it), as the line-by-line path reads them."""
    peek = getattr(handle, "peek", None)
    taken = lines = 0
    while peek is not None and (room is None or taken < room):
        buffered = peek(_BLANK_PEEK)
        head = buffered[:64]  # most runs are short: strip a copy of their start only
        space = len(head) - len(head.lstrip(_SPACE))
        if space == len(head):
            space = len(buffered) - len(buffered.lstrip(_SPACE))
        if space == len(buffered) and buffered.endswith(b"\r"):
            space -= 1  # an LF may follow in the next buffer: one line end, not two
        run = max(buffered.rfind(b"\n", 0, space), buffered.rfind(b"\r", 0, space)) + 1
        if room is not None and taken + run >= room:
            left = room - taken
            lf = buffered.find(b"\n", left - 1, run)
            # To the LF that ends the line holding the range's last byte; without one in the
            # run, the whole LF-ended lines before it (the line-by-line path reads the rest).
            run = lf + 1 if lf != -1 else buffered.rfind(b"\n", 0, left) + 1
        if not run:
            break
        handle.read(run)
        lines += _line_ends(buffered, run)
        taken += run
        if run < len(buffered):
            break  # the run ended inside the buffer
    return taken, lines


#: Compressed bytes fed to the zstd decoder at a time. zstd expands a byte to at most ~32 KiB
#: (run-length blocks), so one step's output stays under ~32 MiB even for a decompression bomb.
_ZSTD_PIECE = 1 << 10
#: Decompressed bytes gathered before handing them on.
_ZSTD_OUTPUT = 1 << 18


class _ZstdReader(io.RawIOBase):
    """A zstd stream that raises at a truncated end or a corrupt part (the library's stream
    reader stops quietly), after handing on everything decoded before it, as gzip does."""

    def __init__(self, raw) -> None:
        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame = self._decompressor.decompressobj()
        self._input = b""
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._started = False
        self._error: Exception | None = None

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        while self._pending_size < _ZSTD_OUTPUT:
            if not self._input:
                self._input = self._raw.read(1 << 20)
                if not self._input:
                    if self._started and not self._frame.eof:
                        raise EOFError("zstd stream ended before the end of its frame")
                    return
            if self._frame.eof:
                # Concatenated frames: start the next one on the leftover bytes.
                self._frame = self._decompressor.decompressobj()
            piece, self._input = self._input[:_ZSTD_PIECE], self._input[_ZSTD_PIECE:]
            self._started = True
            out = self._frame.decompress(piece)
            if self._frame.eof and self._frame.unused_data:
                self._input = self._frame.unused_data + self._input
            if out:
                self._pending.append(out)
                self._pending_size += len(out)

    def readinto(self, buffer) -> int:
        if not self._pending and self._error is None:
            try:
                self._fill()
            except Exception as error:  # noqa: BLE001 — hand on what was decoded, then fail
                self._error = error
        if not self._pending:
            if self._error is not None:
                raise self._error
            return 0
        data = b"".join(self._pending)
        n = min(len(buffer), len(data))
        buffer[:n] = data[:n]
        self._pending = [data[n:]] if n < len(data) else []
        self._pending_size = len(data) - n
        return n


# --------------------------------------------------------------------------------------------
# Is the file read the one planned?


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


def _check_ended(shard: Shard, handle, position: int) -> None:
    """A plain file's end met at byte ``position``: before the planned end, it was cut short
    (the bytes read against the plan, which also holds where the file has no ``fstat``)."""
    end = shard.end if shard.end is not None else shard.file_size
    if not _is_planned(shard) or end is None or position >= end:
        return
    changes = stat_changes(shard, os.fstat(handle.fileno())) if _is_local(shard.path) else []
    changes.append(f"it ended at byte {position:,}, before the planned end at byte {end:,}")
    raise InputChanged(f"the file changed while it was read: {'; '.join(changes)}", position)


@contextlib.contextmanager
def _open_shard(shard: Shard):
    """``open_input`` of a shard's file, checked against the plan when it is opened and once
    the reader is done with it (a reader that stops early, ``--limit``, is not checked at the end)."""
    checked = _is_planned(shard) and _is_local(shard.path)
    with open_input(shard.path) as raw:
        if checked:
            _check_opened(shard, raw)
        yield raw
        if checked:
            _check_done(shard, raw)


@contextlib.contextmanager
def _open_text_stream(shard: Shard):
    # Beam's own decompressing reader stops quietly at a truncated archive; these raise,
    # so a cut-off file becomes an ``unreadable_file`` dead letter instead of a short read.
    compression = FILE_KINDS[shard.suffix][1]
    with _open_shard(shard) as raw:
        if compression == "gzip":
            yield gzip.GzipFile(fileobj=raw, mode="rb")
        elif compression == "zstd":
            yield io.BufferedReader(_ZstdReader(raw), buffer_size=1 << 20)
        else:
            yield raw


_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, as some Windows tools write
#: UTF-16 byte-order marks (Windows tools write UTF-16 text with one): the file is decoded.
_UTF16_BOMS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}


def line_feed(head: bytes) -> bytes:
    """The bytes of a line feed in a file that starts with ``head`` (its first two bytes): LF,
    or LF in the UTF-16 its byte-order mark names."""
    encoding = _UTF16_BOMS.get(head[:2])
    return "\n".encode(encoding) if encoding else b"\n"


def _utf16_encoding(handle) -> str | None:
    """The UTF-16 encoding a byte-order mark at the start of ``handle`` names, or None; the
    handle is left at its start."""
    peek = getattr(handle, "peek", None)
    if peek is not None:
        head = peek(2)[:2]  # at the start the buffer is fresh: two bytes unless the file is shorter
    else:
        head = handle.read(2)
        handle.seek(0)
    return _UTF16_BOMS.get(head)


def _starts_utf16(path: str) -> bool:
    try:
        with open_input(path) as handle:
            return handle.read(2) in _UTF16_BOMS
    except Exception:  # noqa: BLE001 — unreadable: the reader says so, as a dead letter
        return False


def _at_lone_carriage_returns(line: bytes) -> list[bytes]:
    """``line`` cut after each carriage return that no line feed follows: a CR alone ends a
    line too (a raw CR is never inside a JSON string; as whitespace inside a record it would
    cut the record, which JSON Lines writers do not do)."""
    pieces, start = [], 0
    i = line.find(b"\r")
    while i != -1:
        if i + 1 < len(line) and line[i + 1] != 0x0A:
            pieces.append(line[start : i + 1])
            start = i + 1
        i = line.find(b"\r", i + 1)
    pieces.append(line[start:])
    return pieces


#: Bytes read at a time while skipping past the rest of an over-long line.
_SKIP_PIECE = 1 << 20


def _skip_line(handle) -> int:
    """Read past the rest of the current line, a piece at a time; the bytes skipped."""
    skipped = 0
    while True:
        piece = handle.readline(_SKIP_PIECE)
        skipped += len(piece)
        if not piece or piece.endswith(b"\n"):
            return skipped


def _after_last_cr(handle, line: bytes) -> tuple[bytes, bytes] | None:
    """``line`` (no line feed in it, read up to a size limit) cut after its last carriage
    return, which ends a record there; (the records' bytes, the bytes read after them), or None
    without a carriage return. A CR that is the last byte read takes its LF along, if one follows."""
    if line.endswith(b"\r"):
        following = handle.read(1)
        return (line + following, b"") if following == b"\n" else (line, following)
    cut = line.rfind(b"\r")
    return None if cut == -1 else (line[: cut + 1], line[cut + 1 :])


def _skip_record(handle) -> tuple[int, bytes]:
    """Read past the rest of an over-long record, a piece at a time, to its line end (a line
    feed, or a carriage return alone): (the bytes skipped, the bytes read after them)."""
    skipped = 0
    while True:
        piece = handle.readline(_SKIP_PIECE)
        cr = piece.find(b"\r")
        if cr == -1:
            skipped += len(piece)
            if not piece or piece.endswith(b"\n"):
                return skipped, b""
            continue
        if cr + 1 == len(piece):  # the CR is the last byte read: an LF may follow
            following = handle.read(1)
            if following == b"\n":
                return skipped + cr + 2, b""
            return skipped + cr + 1, following
        end = cr + 2 if piece[cr + 1] == 0x0A else cr + 1  # CR LF, or a CR alone
        return skipped + end, piece[end:]


def _too_large(prefix: bytes, size: int, limit: int, whole: bool) -> Unreadable:
    # Keep only what a dead letter shows of it: the raw text is cut to a few KB anyway.
    text = prefix[:_RAW_PREFIX_BYTES].decode("utf-8", errors="replace")
    size_text = f"{size:,} bytes" if whole else f"more than {limit:,} bytes"
    return Unreadable(
        "record_too_large",
        f"a record of {size_text} is over --max-record-bytes {limit:,}; it was read past, not parsed",
        text,
    )


#: Raw bytes of an over-long record kept for its dead letter.
_RAW_PREFIX_BYTES = 16 << 10


def _read_jsonl(shard: Shard, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator:
    with _open_text_stream(shard) as handle:
        position = 0
        encoding = _utf16_encoding(handle)  # at the file's start, whatever byte the shard starts at
        if encoding is not None:
            # Never cut into byte ranges; a start is where a processed version ended (streaming).
            yield from _read_utf16_lines(handle, shard.name, encoding, max_record_bytes, shard.start)
            return
        if shard.start:
            # A line belongs to the shard its first byte falls in: skip the partial one.
            handle.seek(shard.start - 1)
            position = shard.start - 1 + _skip_line(handle)
        # Read past a line end when a CR alone ended the records before it: they are whole, and
        # the rest of the line (up to its LF) belongs to this shard, however far past its end.
        carry = b""
        blanks = 0  # blank lines just read, one by one
        while carry or shard.end is None or position < shard.end:
            try:
                if blanks >= 2 and not carry:
                    # A run of blank lines: count the rest in bulk, not one by one (a single
                    # blank line between records, which is common, is not worth the look).
                    blanks = 0
                    taken, lines = _blank_run(handle, None if shard.end is None else shard.end - position)
                    if lines:
                        yield Blank(lines)
                        position += taken
                        continue
                # At most one byte over the limit is held: a longer line is read past in pieces.
                line = carry + handle.readline(max_record_bytes + 1 - len(carry))
                carry = b""
                size = len(line)
                if size > max_record_bytes and not line.endswith(b"\n"):
                    # Lines ending in a CR alone (a CR-only file is one "line" to readline).
                    cut = _after_last_cr(handle, line)
                    if cut is not None:
                        line, carry = cut
                    else:
                        skipped, carry = _skip_record(handle)
                        size += skipped
                        item = _too_large(line, size, max_record_bytes, True)
                        line = None
            except Exception as error:  # noqa: BLE001 — corrupt archives raise many types
                yield RawRecord(
                    shard.name,
                    position,
                    Unreadable(
                        "unreadable_file", f"reading stopped at offset {position}: {type(error).__name__}: {error}"
                    ),
                )
                return
            if line is None:
                yield RawRecord(shard.name, position, item)
                position += size
                continue
            if not line:
                if FILE_KINDS[shard.suffix][1] is None:
                    _check_ended(shard, handle, position)
                return
            if position == 0 and line.startswith(_BOM):
                position, line = len(_BOM), line[len(_BOM) :]
            cr = line.find(b"\r")  # mostly none, or the CR of a CR LF ending: one line
            lone = cr != -1 and not (cr == len(line) - 2 and line.endswith(b"\r\n"))
            pieces = _at_lone_carriage_returns(line) if lone else (line,)
            for piece in pieces:
                if piece.strip():
                    yield RawRecord(shard.name, position, piece)
                    blanks = 0
                else:
                    yield BLANK
                    blanks += 1
                position += len(piece)


def _read_utf16_lines(handle, source: str, encoding: str, max_record_bytes: int, start: int = 0) -> Iterator:
    """A UTF-16 JSON Lines file, decoded from its byte-order mark (or from ``start``, a line's
    first byte): each line as UTF-8 bytes, at its byte offset in the file. Lines end at LF, CR LF
    or CR alone; a line over the limit (its UTF-8 bytes) is a ``record_too_large`` record."""
    if start:
        handle.seek(start)
    text = io.TextIOWrapper(handle, encoding=encoding, errors="surrogatepass", newline="")
    position = start
    try:
        if not start:
            position = len(text.read(1).encode(encoding))  # the byte-order mark
        while True:
            line = text.readline(max_record_bytes + 1)
            if not line:
                return
            size = len(line.encode(encoding, "surrogatepass"))
            data = line.encode("utf-8", "surrogatepass")
            if len(data) > max_record_bytes:
                while not line.endswith(("\n", "\r")) and line:
                    line = text.readline(max_record_bytes + 1)
                    size += len(line.encode(encoding, "surrogatepass"))
                yield RawRecord(source, position, _too_large(data, size, max_record_bytes, True))
            elif data.strip():
                yield RawRecord(source, position, data)
            else:
                yield BLANK
            position += size
    except Exception as error:  # noqa: BLE001 — a cut-off code unit, a corrupt archive
        yield RawRecord(
            source,
            position,
            Unreadable("unreadable_file", f"reading stopped at offset {position}: {type(error).__name__}: {error}"),
        )
    finally:
        text.detach()  # the handle is closed by its owner


#: Outside strings: the bytes that open or close a value, separate elements, or open a string.
_JSON_STRUCTURE = re.compile(rb'[][{}",]')
#: Inside a string: its end or an escape.
_JSON_STRING_STOP = re.compile(rb'["\\]')
_JSON_SPACE = b" \t\r\n"


class _ArrayScan:
    """Finds the top-level delimiters of a JSON array fed chunk by chunk: only strings (with
    their escapes) and nesting are followed, and the state carries over from chunk to chunk."""

    def __init__(self) -> None:
        self.depth, self.in_string, self.escaped = 0, False, False

    def stops(self, chunk: bytes) -> Iterator:
        """The matches of the top-level ``,`` and ``]`` in ``chunk`` (and of a stray ``}``)."""
        i = 0
        if self.escaped:
            i, self.escaped = 1, False
        while i < len(chunk):
            if self.in_string:
                stop = self._past_string_stop(chunk, i)
                if stop is None:
                    return
                i = stop
                continue
            match = _JSON_STRUCTURE.search(chunk, i)
            if match is None:
                return
            i = match.end()
            byte = match.group()
            if byte == b'"':
                self.in_string = True
            elif byte in b"[{":
                self.depth += 1
            elif self.depth and byte in b"]}":
                self.depth -= 1
            elif not self.depth:
                yield match

    def _past_string_stop(self, chunk: bytes, i: int) -> int | None:
        """Where to go on after the next end or escape of the string the scan is in (``None``:
        the string goes on past the chunk)."""
        match = _JSON_STRING_STOP.search(chunk, i)
        if match is None:
            return None
        i = match.end()
        if match.group() != b"\\":
            self.in_string = False
        elif i < len(chunk):
            i += 1
        else:
            self.escaped = True  # the escaped byte opens the next chunk
        return i


class _ElementBytes:
    """The bytes of one array element, gathered across chunks; past ``limit`` only its first
    bytes are kept, for the ``record_too_large`` dead letter."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._reset()

    def _reset(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.prefix: bytes | None = None  # the first bytes of an element over the limit

    def add(self, piece: bytes) -> None:
        """A chunk's tail: the element goes on in the next chunk."""
        self.size += len(piece)
        if self.prefix is None:
            self.parts.append(piece)
            if self.size > self.limit:
                self.prefix, self.parts = b"".join(self.parts)[:_RAW_PREFIX_BYTES], []

    def end(self, piece: bytes):
        """The whole element (``piece`` is its last bytes), or its ``Unreadable`` when over the
        limit; the next element starts empty."""
        if self.prefix is None and self.size + len(piece) > self.limit:
            self.prefix = (b"".join(self.parts) + piece[:_RAW_PREFIX_BYTES])[:_RAW_PREFIX_BYTES]
        element: bytes | Unreadable
        if self.prefix is not None:
            element = _too_large(self.prefix, self.size + len(piece), self.limit, True)
        else:
            element = b"".join(self.parts) + piece
        self._reset()
        return element


def _array_elements(handle, head: bytes, limit: int) -> Iterator:
    """The elements of a JSON array, as raw bytes, one at a time (``head`` holds the bytes
    after its ``[``); an element over ``limit`` is a ``record_too_large`` ``Unreadable``,
    read past. Only strings and nesting are followed to find the top-level commas: each
    element's own syntax is checked when it is parsed, like a JSONL line."""
    scan = _ArrayScan()
    element = _ElementBytes(limit)
    emitted = False
    chunk = head
    while True:
        start = 0
        for stop in scan.stops(chunk):
            byte = stop.group()
            if byte == b"}":
                yield Unreadable("invalid_json", f"unbalanced {byte.decode()!r} in the top-level array")
                return
            done = element.end(chunk[start : stop.start()])
            # "[]" holds no element; "[1,]" an empty one, which is invalid JSON.
            if isinstance(done, Unreadable) or byte == b"," or done.strip(_JSON_SPACE) or emitted:
                yield done
            emitted = True
            start = stop.end()
            if byte == b"]":
                yield from _after_array(chunk[start:], handle)
                return
        element.add(chunk[start:])
        chunk = handle.read(1 << 20)
        if not chunk:
            yield Unreadable("invalid_json", "the top-level array is not closed (the file ends inside it)")
            return


def _after_array(rest: bytes, handle) -> Iterator:
    """Nothing but white space may follow the top-level array (its first KB is looked at)."""
    rest += handle.read(1 << 10)
    if rest.strip(_JSON_SPACE):
        yield Unreadable(
            "invalid_json", "content after the end of the top-level array", rest[:200].decode("utf-8", errors="replace")
        )


def _read_json(shard: Shard, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator:
    # A document up to the limit is parsed whole. A bigger one holding an array is read element
    # by element (each bounded like a JSONL line); any other bigger document is one record,
    # too large.
    source = shard.name
    with _open_shard(shard) as handle:
        text = handle.read(max_record_bytes + 1)
        if len(text) > max_record_bytes:
            body = text[len(_BOM) :] if text.startswith(_BOM) else text
            stripped = body.lstrip(_JSON_SPACE)
            if stripped.startswith(b"["):
                for index, element in enumerate(_array_elements(handle, stripped[1:], max_record_bytes)):
                    yield RawRecord(source, index, element)
                return
            letter = _too_large(text, 0, max_record_bytes, False)
            yield RawRecord(
                source,
                0,
                letter._replace(
                    detail=letter.detail.replace("a record of", "a .json document of", 1)
                    + " (only a top-level array is read element by element: write big inputs as .jsonl)"
                ),
            )
            return
    if text.startswith(_BOM):
        text = text[len(_BOM) :]
    elif text[:2] in _UTF16_BOMS:
        try:
            text = text[2:].decode(_UTF16_BOMS[text[:2]], "surrogatepass").encode("utf-8", "surrogatepass")
        except UnicodeDecodeError as error:
            yield RawRecord(
                source, 0, Unreadable("invalid_json", f"not UTF-16 text after its byte-order mark: {error}")
            )
            return
    try:
        document = parse_json(text)
    except (ValueError, RecursionError) as error:
        stripped = text.lstrip(_JSON_SPACE)
        if stripped.startswith(b"["):
            # One bad element must not take the others with it: read the array element by
            # element, as a file over the limit is, so the outcome does not depend on its size.
            for index, element in enumerate(_array_elements(io.BytesIO(), stripped[1:], max_record_bytes)):
                yield RawRecord(source, index, element)
            return
        hint = ""
        if text.lstrip()[:1] == b"{" and b"\n{" in text:
            hint = " (it looks like JSON Lines: name the file .jsonl)"
        reason = "number_too_large" if isinstance(error, NumberTooLarge) else "invalid_json"
        yield RawRecord(
            source,
            0,
            Unreadable(reason, f"not a JSON document: {error}{hint}", text[:4000].decode("utf-8", errors="replace")),
        )
        return
    if isinstance(document, list):
        for index, record in enumerate(document):
            yield RawRecord(source, index, Parsed(record))
    else:
        yield RawRecord(source, 0, Parsed(document))


def _jsonable(value, nulled: list):
    """A Parquet value as JSON can hold it: Arrow types that JSON lacks become text.

    Bytes that are UTF-8 become their text, other bytes base64; decimals their exact decimal
    text; dates, times and timestamps ISO 8601; durations their seconds. A non-finite float
    (NaN, +-inf), which JSON cannot hold, becomes null and is counted in ``nulled[0]``.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        nulled[0] += 1
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v, nulled) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v, nulled) for v in value]
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, tuple):  # map columns: a list of (key, value) pairs
        return [_jsonable(v, nulled) for v in value]
    return value  # anything else: the record's guard dead-letters it if JSON cannot hold it


def _parquet_row(row: dict) -> Parsed:
    """One Parquet row as a record; non-finite floats nulled and counted by column."""
    out = {}
    counts = None
    for column, value in row.items():
        nulled = [0]
        out[column] = _jsonable(value, nulled)
        if nulled[0]:
            counts = counts or {}
            counts[column] = nulled[0]
    return Parsed(out, counts)


def _arrow_text(column, i: int) -> str:
    """Arrow's own text of a value Python cannot hold (a date past 9999 is cast in C++)."""
    import pyarrow as pa

    try:
        return column.slice(i, 1).cast(pa.string())[0].as_py()
    except Exception:  # noqa: BLE001
        return f"<{column.type} value>"


def _parquet_rows(batch) -> Iterator:
    """A record batch's rows as ``Parsed`` records; a row holding a value Python cannot
    represent (a nanosecond timestamp, a year past 9999) is an ``unconvertible_value``
    ``Unreadable`` naming its column, and the other rows are read. A file with two columns of
    one name makes every row one: a record cannot hold two fields of one name, and keeping
    either would lose the other silently."""
    names = batch.schema.names
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        yield from _rows_with_repeated_columns(batch, repeated)
        return
    try:
        rows = batch.to_pylist()
    except Exception:  # noqa: BLE001 — pyarrow raises several types; find the row below
        rows = None
    if rows is not None:
        for row in rows:
            yield _parquet_row(row)
        return
    columns = batch.schema.names
    for i in range(batch.num_rows):
        row, failure = {}, None
        for name, column in zip(columns, batch.columns):
            try:
                row[name] = column[i].as_py()
            except Exception as error:  # noqa: BLE001
                failure = failure or (name, error)
                row[name] = _arrow_text(column, i)  # for the dead letter only
        if failure is None:
            yield _parquet_row(row)
            continue
        name, cause = failure
        raw = {k: _jsonable(v, [0]) for k, v in row.items()}
        try:
            raw_text = orjson.dumps(raw, default=str).decode()
        except (TypeError, ValueError):
            raw_text = repr(raw)
        yield Unreadable("unconvertible_value", f"column {name!r}: {type(cause).__name__}: {cause}", raw_text[:4000])


def _rows_with_repeated_columns(batch, repeated: list[str]) -> Iterator:
    names = batch.schema.names
    detail = "; ".join(f"column {name!r}: the file has {names.count(name)} columns named so" for name in repeated)
    detail += "; a record cannot hold two fields of one name"
    for i in range(batch.num_rows):
        pairs = []
        for name, column in zip(names, batch.columns):
            try:
                value = _jsonable(column[i].as_py(), [0])
            except Exception:  # noqa: BLE001 — shown as Arrow's text, for the dead letter only
                value = _arrow_text(column, i)
            pairs.append([name, value])
        try:
            raw_text = orjson.dumps(pairs, default=str).decode()
        except (TypeError, ValueError):
            raw_text = repr(pairs)
        yield Unreadable("unconvertible_value", detail, raw_text[:4000])


#: Rows per Parquet record batch at most; fewer where the row group's rows are big.
PARQUET_BATCH_ROWS = 1024


def parquet_batch_rows(rows: int, uncompressed: int, limit: int) -> int:
    """Rows per record batch for a row group of ``rows`` rows and ``uncompressed`` bytes (its
    column chunks' uncompressed sizes): rows of the group's average size that add up to about
    ``limit``, so a batch holds about one record's worth however big the rows are."""
    if rows <= 0 or uncompressed <= 0:
        return PARQUET_BATCH_ROWS
    return max(1, min(PARQUET_BATCH_ROWS, limit * rows // uncompressed))


def _parquet_too_large(size: int, limit: int, how: str, raw: str = "") -> Unreadable:
    return Unreadable(
        "record_too_large",
        f"a Parquet row of {size:,} bytes ({how}) is over --max-record-bytes {limit:,}; it was not read",
        raw,
    )


def _value_sizes(array) -> list[int]:
    """The bytes each value of an Arrow array takes (for a dictionary column: its entry, not
    the whole dictionary), measured on the buffers: nothing is converted."""
    import pyarrow as pa

    if pa.types.is_dictionary(array.type):
        entries: dict[int, int] = {}  # measured as used: a dictionary may be far longer than the batch
        sizes = []
        for index in array.indices.to_pylist():
            if index is not None and index not in entries:
                entries[index] = array.dictionary.slice(index, 1).nbytes
            sizes.append(0 if index is None else entries[index])
        return sizes
    return [array.slice(i, 1).nbytes for i in range(len(array))]


def _row_sizes(batch) -> list[int]:
    """Each row's bytes in Arrow (the sum of its values' sizes)."""
    sizes = [0] * batch.num_rows
    for column in batch.columns:
        for i, size in enumerate(_value_sizes(column)):
            sizes[i] += size
    return sizes


def _row_prefix(batch, i: int) -> str:
    """The start of an over-long row, for its dead letter: its short values, and the type and
    size of the others (never the whole row as text)."""
    shown = {}
    for name, column in zip(batch.schema.names, batch.columns):
        value = column.slice(i, 1)
        if value.nbytes <= 1024:
            try:
                shown[name] = _jsonable(value[0].as_py(), [0])
                continue
            except Exception:  # noqa: BLE001 — shown by its type below
                pass
        shown[name] = f"<{column.type}: {value.nbytes:,} bytes>"
    return orjson.dumps(shown, default=str).decode()[:4000]


def _bounded_rows(batch, limit: int) -> Iterator:
    """A record batch's rows as records; a row over ``limit`` bytes in Arrow is a
    ``record_too_large`` ``Unreadable``, measured before any Python object of it is built."""
    if batch.nbytes <= limit:  # the common case: no row can be over (a row is part of the batch)
        yield from _parquet_rows(batch)
        return
    start = 0
    for i, size in enumerate(_row_sizes(batch)):
        if size > limit:
            yield from _parquet_rows(batch.slice(start, i - start))
            yield _parquet_too_large(size, limit, "its values in Arrow", _row_prefix(batch, i))
            start = i + 1
    yield from _parquet_rows(batch.slice(start))


def _row_group_sizes(metadata) -> list[tuple[int, int]]:
    """(rows, uncompressed bytes) of each row group, from the file's metadata alone."""
    groups = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        uncompressed = sum(group.column(c).total_uncompressed_size for c in range(group.num_columns))
        groups.append((group.num_rows, uncompressed))
    return groups


def _read_parquet(shard: Shard, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator:
    # Row group by row group, in record batches cut to the limit (``parquet_batch_rows``). A
    # row group of one row bigger than the limit is that row: a dead letter known from the
    # metadata, never decoded (a 7 KB file can hold a 200 MB string). Any other row over the
    # limit is measured in Arrow, before it becomes a record. Running out of memory while
    # decoding a row group makes the rest of that group one dead letter; the next group is read.
    import pyarrow.parquet as pq  # only Parquet inputs pay for the import

    source = shard.name
    index = 0
    with _open_shard(shard) as handle:
        parquet = pq.ParquetFile(handle)
        for g, (rows, uncompressed) in enumerate(_row_group_sizes(parquet.metadata)):
            first, end = index, index + rows
            if rows == 1 and uncompressed > max_record_bytes:
                how = f"row group {g} of one row, uncompressed, in the file's metadata"
                yield RawRecord(source, index, _parquet_too_large(uncompressed, max_record_bytes, how))
                index = end
                continue
            try:
                batches = parquet.iter_batches(
                    batch_size=parquet_batch_rows(rows, uncompressed, max_record_bytes), row_groups=[g]
                )
                for batch in batches:
                    for payload in _bounded_rows(batch, max_record_bytes):
                        yield RawRecord(source, index, payload)
                        index += 1
            except MemoryError as error:  # pyarrow's ArrowMemoryError is one
                yield RawRecord(source, index, _out_of_memory(g, rows, uncompressed, first, index, end, error))
                index = end


def _out_of_memory(group: int, rows: int, uncompressed: int, first: int, at: int, end: int, error) -> Unreadable:
    unread = f"row {at}" if end - at == 1 else f"rows {at}-{end - 1}"
    return Unreadable(
        "record_too_large",
        f"out of memory decoding row group {group} (rows {first}-{end - 1}, {uncompressed:,} bytes uncompressed): "
        f"{unread} not read ({type(error).__name__}: {error})",
    )


_SHARD_READERS = {"jsonl": _read_jsonl, "json": _read_json, "parquet": _read_parquet}


def read_shard(shard: Shard, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator:
    """Yield the shard's ``RawRecord``s in order, and a ``Blank`` for each run of blank JSONL lines.

    A file that cannot be opened or read any further ends in one ``unreadable_file`` record
    (at the position after the last one read), never in an exception. A record over
    ``max_record_bytes`` is a ``record_too_large`` record, read past without being held.
    """
    next_position = shard.start
    left = shard.limit
    try:
        for item in _SHARD_READERS[FILE_KINDS[shard.suffix][0]](shard, max_record_bytes):
            if not isinstance(item, Blank):
                if left is not None:
                    if left <= 0:
                        return  # --limit: the plan's records are read
                    left -= 1
                next_position = item.position + 1
            yield item
    except InputChanged as changed:
        # Not the file planned: what was read stays read, the rest is this one record.
        position = next_position if changed.position is None else changed.position
        yield RawRecord(shard.name, position, Unreadable("input_changed", changed.detail))
    except Exception as error:  # noqa: BLE001 — filesystems and pyarrow raise many types
        yield RawRecord(
            shard.name,
            next_position,
            Unreadable("unreadable_file", f"reading stopped: {type(error).__name__}: {error}"),
        )


def iter_batches(
    shard: Shard,
    batch_size: int,
    stats: dict,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
) -> Iterator[Batch]:
    """Group a shard's records into batches of ``batch_size`` records or ``batch_bytes`` raw
    bytes, whichever comes first; ``stats`` counts records and blank lines."""
    items: list = []
    size = 0
    for item in read_shard(shard, max_record_bytes):
        if isinstance(item, Blank):
            stats["blank_lines"] += item.lines
            continue
        stats["records"] += 1
        items.append(item)
        size += raw_size(item)
        if batch_is_full(len(items), size, batch_size, batch_bytes):
            yield Batch(shard.number, items[0].position, items)
            items, size = [], 0
            pause_point("reading")  # the file open, a batch handed on: tests change it here
    if items:
        yield Batch(shard.number, items[0].position, items)


# --------------------------------------------------------------------------------------------
# Reading one record again (convnorm explain, the report's examples)


def record_at(path: str, position: int, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> RawRecord | None:
    """The raw record at ``position`` of ``path``, as the run read it (a drop-metrics line or a
    dead letter names both); ``None`` when the file has none there (or is gone)."""
    suffix = file_suffix(path)
    if suffix is None or position < 0:
        return None
    if FILE_KINDS[suffix][2]:  # uncompressed JSONL: the line that starts at that byte
        # (The first line of a file with a byte-order mark starts past it: read it from 0.)
        start = position if position > len(_BOM) else 0
        items = read_shard(Shard(0, path, suffix, start, position + 1), max_record_bytes)
    else:
        items = read_shard(Shard(0, path, suffix, 0, None), max_record_bytes)
    for item in items:
        if isinstance(item, Blank):
            continue
        if item.position == position and not isinstance(item.payload, Unreadable):
            return item
        if item.position >= position:
            return None
    return None


def line_numbers(path: str, positions: Iterable[int]) -> dict[int, int]:
    """The 1-based line numbers of byte ``positions`` in a JSONL file (decompressed: the
    positions convnorm gives a ``.jsonl.gz``); {} for other kinds or a file that cannot be
    read. Reads the file up to the last position, once."""
    wanted = sorted({p for p in positions if p >= 0})
    suffix = file_suffix(path)
    if not wanted or suffix is None or FILE_KINDS[suffix][0] != "jsonl":
        return {}
    found: dict[int, int] = {}
    try:
        with _open_text_stream(Shard(0, path, suffix, 0, None)) as handle:
            offset, lines = 0, 1
            for position in wanted:
                while offset < position:
                    chunk = handle.read(min(1 << 20, position - offset))
                    if not chunk:
                        return found
                    lines += chunk.count(b"\n")
                    offset += len(chunk)
                found[position] = lines
    except Exception:  # noqa: BLE001 — a line number is a nicety: the byte offset still says where
        return found
    return found


# --------------------------------------------------------------------------------------------
# Beam


@beam.typehints.with_input_types(Shard)
@beam.typehints.with_output_types(Batch)  # and the per-shard statistics, dicts, under STATS
class _ReadShard(beam.DoFn):
    STATS = "read_stats"

    def __init__(
        self, batch_size: int, total_shards: int, max_record_bytes: int, batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> None:
        self._batch_size = batch_size
        self._batch_bytes = batch_bytes
        self._total = total_shards
        self._max_record_bytes = max_record_bytes

    def setup(self) -> None:
        self._blank = Metrics.counter(NAMESPACE, "blank_lines")
        self._shards = Metrics.counter(NAMESPACE, "shards_read")
        self._tally = Tally("read")  # the live progress of local runs (pipeline/cli/progress.py)

    def process(self, shard: Shard):
        pause_point("read")  # tests kill a run here (pipeline.testhooks)
        stats = {"records": 0, "blank_lines": 0}
        progress = ReadProgress(shard, self._tally)
        for batch in iter_batches(shard, self._batch_size, stats, self._max_record_bytes, self._batch_bytes):
            yield batch
            progress.batch_read(batch)
        self._blank.inc(stats["blank_lines"])
        self._shards.inc()
        progress.done()
        yield TaggedOutput(self.STATS, {"shard": shard.number, **stats})


class ReadProgress:
    """The progress of reading one shard, for the live tally of local runs: records, bytes read
    (file offsets in uncompressed JSONL; other files count once read whole), shards done. Files
    read show in the progress line, not as a log line each (100 files: 100 lines)."""

    def __init__(self, shard: Shard, tally: Tally) -> None:
        self._shard = shard
        self._tally = tally
        self._byte_offsets = FILE_KINDS[shard.suffix] == ("jsonl", None, True)

    def batch_read(self, batch: Batch) -> None:
        self._tally.add("records", len(batch.items))
        if self._byte_offsets:
            self._tally.at(self._shard.number, batch.items[-1].position - self._shard.start)

    def done(self) -> None:
        self._tally.shard_done(self._shard.number)


#: Elements of the plan the graph carries, at most: a job of up to this many shards gets one
#: element per shard; a bigger one, chunks of shards. Beam's ``Create`` costs per element, and
#: whatever it holds is pickled and bz2-compressed into the graph (with one element per shard,
#: 100,000 files spent ~50 s there before the first record was read).
MAX_PLAN_ELEMENTS = 1000


def pack_shards(shards: list[Shard]) -> bytes:
    """A chunk of the plan as the graph carries it: the shards as plain tuples, pickled and
    compressed (paths share most of their bytes; a pickled ``Shard`` per element cost 10x)."""
    return zlib.compress(pickle.dumps([tuple(s) for s in shards], protocol=pickle.HIGHEST_PROTOCOL), 6)


def unpack_shards(chunk: bytes) -> list[Shard]:
    """``pack_shards`` undone, in a worker."""
    return [Shard(*row) for row in pickle.loads(zlib.decompress(chunk))]


@beam.typehints.with_output_types(Shard)
class CreateShards(beam.PTransform):
    """Planned shards -> a PCollection of them, spread over the workers: ``Create`` of the plan
    in ``chunks`` (default: one per shard, at most ``MAX_PLAN_ELEMENTS``), ``Reshuffle``, then
    each chunk unpacked where it landed, so a big plan is neither carried element by element
    nor shuffled shard by shard. A runner whose ``Reshuffle`` does nothing (DaskRunner) spreads
    by ``Create``'s partitions: give it one chunk per partition."""

    def __init__(self, shards: list[Shard], chunks: int | None = None) -> None:
        super().__init__()
        self._shards = shards
        self._chunks = max(1, min(len(shards), chunks or MAX_PLAN_ELEMENTS))

    def expand(self, pbegin):
        size = -(-len(self._shards) // self._chunks)
        chunks = [pack_shards(self._shards[i : i + size]) for i in range(0, len(self._shards), size)]
        return (
            pbegin
            | "Shards" >> beam.Create(chunks, reshuffle=False)
            # Spread the chunks over workers; each is a few KB.
            | "Spread" >> beam.Reshuffle()
            | "Unpack" >> beam.FlatMap(unpack_shards).with_output_types(Shard)
        )


class ReadOutputs(NamedTuple):
    batches: beam.PCollection
    stats: beam.PCollection


class ReadConversationLogs(beam.PTransform):
    """Planned shards -> batches of ``RawRecord`` (and per-shard read statistics)."""

    def __init__(
        self,
        shards: list[Shard],
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        super().__init__()
        self._shards = shards
        self._batch_size = batch_size
        self._max_record_bytes = max_record_bytes
        self._batch_bytes = batch_bytes

    def expand(self, pbegin):
        read = _ReadShard(self._batch_size, len(self._shards), self._max_record_bytes, self._batch_bytes)
        outputs = (
            pbegin
            | "Plan" >> CreateShards(self._shards)
            | "Read" >> beam.ParDo(read).with_outputs(read.STATS, main="batches")
        )
        return ReadOutputs(outputs.batches, outputs[read.STATS])
