"""JSON Lines (plain, gzip, zstd, UTF-16) and ``.json`` files: bytes to raw records.

Input files are matched and planned first (``pipeline.io.planning``); a shard is read by
``pipeline.io.read_shard``, which picks its reader by file kind (Parquet's is
``pipeline.io.parquet_rows``):

=============  =====================================================  =====================
suffix         records                                                position
=============  =====================================================  =====================
``.jsonl``     one JSON value per line; split into byte ranges        byte offset of line
``.jsonl.gz``  the same, gzip-compressed (read whole)                 offset, decompressed
``.jsonl.zst`` the same, zstd-compressed (read whole)                 offset, decompressed
``.json``      an array of records (an object: one record)            element index
``.parquet``   one record per row                                     row index
=============  =====================================================  =====================

Any Beam filesystem works (local paths, ``gs://``, ...). A JSONL line ends at LF, CR LF or a CR
alone; a file starting with a UTF-16 byte-order mark is decoded (and never cut into byte
ranges). Blank JSONL lines are not records: they are counted (``blank_lines``; a run of them in
bulk) and skipped. A file that fails mid-way yields one ``unreadable_file`` record for the rest,
so the failure is a dead letter, not a crash. A file truncated, replaced or rewritten under the
run yields one ``input_changed`` record for the rest (``pipeline.io.planned_files``,
docs/outputs.md).

Memory per record is bounded by ``--max-record-bytes``: a longer JSONL line, ``.json``
array element or other ``.json`` document is a ``record_too_large`` record, read past in
pieces, never held whole; a Parquet row over it is one too, found from the file's metadata or
measured in Arrow before it becomes a record (docs/input-limits.md). A ``.json`` file up to the limit is parsed
whole; a bigger array is split into its elements by following strings and nesting.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import re
from typing import Iterator

import zstandard

from pipeline.io.files import open_input
from pipeline.io.planned_files import check_ended, open_shard
from pipeline.io.shard import BLANK, FILE_KINDS, Blank, Shard
from transforms.core.jsontext import NumberTooLarge, parse_json
from transforms.record.inputs import (  # the defaults live where the command line reads them without Beam
    DEFAULT_MAX_RECORD_BYTES,
    Parsed,
    RawRecord,
    Unreadable,
)

# --------------------------------------------------------------------------------------------
# Reading one shard (plain generators: the baseline benchmark and the validator reuse them)


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


@contextlib.contextmanager
def open_text_stream(shard: Shard):
    # Beam's own decompressing reader stops quietly at a truncated archive; these raise,
    # so a cut-off file becomes an ``unreadable_file`` dead letter instead of a short read.
    compression = FILE_KINDS[shard.suffix][1]
    with open_shard(shard) as raw:
        if compression == "gzip":
            yield gzip.GzipFile(fileobj=raw, mode="rb")
        elif compression == "zstd":
            yield io.BufferedReader(_ZstdReader(raw), buffer_size=1 << 20)
        else:
            yield raw


UTF8_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, as some Windows tools write
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


def starts_utf16(path: str) -> bool:
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


def read_jsonl_shard(shard: Shard, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator:
    with open_text_stream(shard) as handle:
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
            except MemoryError:
                raise  # the machine's limit, not the file's fault: the run fails saying so
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
                    check_ended(shard, handle, position)
                return
            if position == 0 and line.startswith(UTF8_BOM):
                position, line = len(UTF8_BOM), line[len(UTF8_BOM) :]
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
    except MemoryError:
        raise  # the machine's limit, not the file's fault: the run fails saying so
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


def read_json_shard(shard: Shard, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator:
    # A document up to the limit is parsed whole. A bigger one holding an array is read element
    # by element (each bounded like a JSONL line); any other bigger document is one record,
    # too large.
    source = shard.name
    with open_shard(shard) as handle:
        text = handle.read(max_record_bytes + 1)
        if len(text) > max_record_bytes:
            body = text[len(UTF8_BOM) :] if text.startswith(UTF8_BOM) else text
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
    if text.startswith(UTF8_BOM):
        text = text[len(UTF8_BOM) :]
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


# --------------------------------------------------------------------------------------------
# Reading one record again (convnorm explain, the report's examples)


# --------------------------------------------------------------------------------------------
# Beam
