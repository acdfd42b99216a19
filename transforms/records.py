"""Record-level processing: one raw input record in, exactly one outcome out (no Beam import).

A raw record is what a reader found at one position of one file: a JSONL line, an element of
a ``.json`` array, a Parquet row, or a marker for a file that could not be read. Processing
parses it, reads it with a format reader, normalizes its messages by the chosen profile,
writes it with the chosen sink writer, and returns either

- a normalized output record plus its per-conversation drop metrics, or
- a dead letter: source, position, reason, detail and the raw text cut to a sane length.

Every raw record ends in exactly one of the two: nothing is skipped silently, and an
unexpected exception becomes an ``internal_error`` dead letter rather than a crash (a Beam
job that raises retries the bundle forever on some runners).

The Beam DoFn in ``transforms.conversations`` only calls ``normalize_batch`` and routes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from transforms.formats import (
    READERS,
    WRITERS,
    FormatError,
    WriteContext,
    detect_reader_after,
    read_forced,
    unrecognized,
)
from transforms.formats.base import not_a_record
from transforms.ledger import coercion_discards
from transforms.ledger import report as ledger_report
from transforms.normalize import _int_text as int_text
from transforms.normalize import compact_json
from transforms.profiles import PROFILES, normalize_with_profile
from transforms.tool_blocks import first_free
from transforms.validate import check_sendable, count_by_kind

#: Closed list of dead-letter reasons, in the order processing can produce them.
DEAD_LETTER_REASONS = (
    "unreadable_file",
    "record_too_large",
    "unconvertible_value",
    "invalid_json",
    "number_too_large",
    "not_a_record",
    "missing_messages",
    "messages_not_a_list",
    "unknown_format",
    "format_error",
    "unwritable",
    "internal_error",
)

#: Raw text kept in a dead letter, in characters.
DEFAULT_RAW_LIMIT = 2000

#: Longest number read from JSON input, in characters (sign not counted): integers of up to
#: this many digits are exact ids, content and fields; a longer number makes its record a
#: ``number_too_large`` dead letter. Converting digits to an integer and back costs time
#: that grows with the square of their count (0.4 s at this limit), so the limit bounds it.
MAX_NUMBER_DIGITS = 100_000


class RawRecord(NamedTuple):
    """One record as found in the input, before parsing.

    ``position`` is the byte offset of the line for JSONL (in the decompressed stream), the
    element index for a ``.json`` array and the row index for Parquet. ``payload`` is the
    line's bytes (or text), a ``Parsed`` value, or ``Unreadable``.
    """

    source: str
    position: int
    payload: Any


class Parsed(NamedTuple):
    """A payload the reader already decoded (a ``.json`` array element, a Parquet row).

    ``nulled`` counts, by field, the values the reader had to write as null because JSON
    cannot hold them (Parquet's NaN and infinities); ``None`` when there were none.
    """

    value: Any
    nulled: dict | None = None


class NumberTooLarge(ValueError):
    """A JSON number longer than ``MAX_NUMBER_DIGITS``."""


class Unreadable(NamedTuple):
    """Stands for the part of a file that could not be read (corrupt archive, bad array)."""

    reason: str
    detail: str
    raw: str = ""


class Batch(NamedTuple):
    """A run of consecutive items from one input shard, in input order.

    Beam's per-element cost in Python dominates small records, so the job moves records in
    batches; ``shard`` (the index of the planned input range) names the output files, which
    keeps them byte-identical across reruns and runners without a global sort.
    """

    shard: int
    #: Position of the batch's first input record within the shard's file.
    start: int
    items: list
    #: Each item as its JSON line (no newline), when processing already serialized it: a JSON
    #: Lines file writes these bytes instead of serializing the items again. ``None``: not known.
    lines: list | None = None


@dataclass(frozen=True)
class Settings:
    """How to read, normalize and write records; validated by the options before use."""

    messages_field: str = "messages"
    id_field: str = "id"
    input_format: str = "auto"
    profile: str = "spec"
    sink: str = "flat"
    model: str | None = None
    max_tokens: int | None = None
    #: Dotted path of a record's tool definitions for the writers (``--tools-field``).
    tools_field: str = "tools"
    #: Also run the strict sendability check on every normalized conversation.
    check: bool = False
    raw_limit: int = DEFAULT_RAW_LIMIT

    def problems(self) -> list[str]:
        """Every setting that cannot work, as sentences for a person."""
        found = []
        if self.input_format != "auto" and self.input_format not in READERS:
            found.append(f"unknown --format {self.input_format!r}; known: auto, {', '.join(sorted(READERS))}")
        if self.sink not in WRITERS:
            found.append(f"unknown --sink {self.sink!r}; known: {', '.join(sorted(WRITERS))}")
        if self.profile not in PROFILES:
            found.append(f"unknown --profile {self.profile!r}; known: {', '.join(PROFILES)}")
        if not self.messages_field:
            found.append("--messages-field must not be empty")
        if not self.id_field:
            found.append("--id-field must not be empty")
        if self.id_field == self.messages_field:
            found.append("--id-field and --messages-field must differ")
        if not self.tools_field or any(not part for part in self.tools_field.split(".")):
            found.append(f"--tools-field {self.tools_field!r} is not a dotted path of field names")
        if self.max_tokens is not None and self.max_tokens < 1:
            found.append("--max-tokens must be at least 1")
        if self.raw_limit < 0:
            found.append("--dead-letter-raw-limit must be 0 or more")
        return found


class Outcome(NamedTuple):
    """Exactly one of ``record`` (with ``metrics``) or ``dead_letter`` is set."""

    record: dict | None
    metrics: dict | None
    dead_letter: dict | None
    #: ``record`` serialized (``dumps_line``), when processing did it.
    line: bytes | None = None


class BatchResult(NamedTuple):
    records: list
    metrics: list
    dead_letters: list
    #: ``dumps_line`` of each record (normalizing only; ``None`` for ``check_record``).
    lines: list | None = None


class _DeadLetter(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# --------------------------------------------------------------------------------------------
# Parsing and ids


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: A number orjson may not read exactly: integers past its 64-bit range (orjson reads them
#: as floats, silently losing digits), i.e. 20+ digits or a negative 19-digit one. Found by
#: mapping every digit to "0" and searching the runs: 20x faster than a regular expression
#: over a line (which cost more than parsing it). Both shapes hold a run of 19 digits: one
#: search for it decides for almost every line, the precise searches run only after a hit.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN_DIGITS = b"0" * 19
_TWENTY_DIGITS = b"0" * 20
_NEGATIVE_NINETEEN_DIGITS = b"-" + b"0" * 19


def _beyond_64_bits(data: bytes) -> bool:
    digits = data.translate(_DIGITS_AS_ZERO)
    if _NINETEEN_DIGITS not in digits:
        return False
    return _TWENTY_DIGITS in digits or _NEGATIVE_NINETEEN_DIGITS in digits
#: An escaped UTF-16 surrogate: fine in a pair, but the standard parser also accepts one
#: alone, which is not text (orjson refuses it; an output line could not encode it).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _check_length(text: str) -> None:
    if len(text) - text.startswith("-") > MAX_NUMBER_DIGITS:
        raise NumberTooLarge(f"a number of {len(text):,} characters is longer than the "
                             f"{MAX_NUMBER_DIGITS:,} convnorm reads")


def _exact_int(text: str) -> int:
    _check_length(text)  # before converting: the conversion costs the square of the length
    try:
        return int(text)
    except ValueError:
        # Past CPython's 4,300-digit conversion limit: build it from chunks of digits.
        digits = text.lstrip("-")
        value = 0
        for i in range(0, len(digits), 4000):
            chunk = digits[i:i + 4000]
            value = value * 10 ** len(chunk) + int(chunk)
        return -value if text.startswith("-") else value


def _finite_float(text: str) -> float:
    _check_length(text)
    value = float(text)
    if not math.isfinite(value):
        # As orjson does: a float past the double range is not a number JSON can carry on.
        raise ValueError(f"number {text[:40]} is infinity when parsed as double")
    return value


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_json(payload: bytes | str) -> Any:
    """Parse one JSON text exactly; raises ``ValueError`` (or ``RecursionError``).

    orjson is the fast path. Text holding an integer past 64 bits goes to the standard
    parser, which reads integers of any size exactly (a long digit run inside a string only
    costs the slower parser). NaN, Infinity, numbers past the double range (``1e400``) and
    lone surrogates are not JSON text and stay refused, whichever parser reads them; a number
    longer than ``MAX_NUMBER_DIGITS`` raises ``NumberTooLarge`` before it is converted.
    """
    data = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else payload
    if not _beyond_64_bits(data):
        return orjson.loads(data)
    try:
        # Strict UTF-8, as orjson reads: json.loads(bytes) would take a byte-order mark and
        # UTF-8-encoded surrogates, so the same line would pass here and fail there.
        value = json.loads(data.decode("utf-8"), parse_constant=_reject_constant, parse_int=_exact_int,
                           parse_float=_finite_float)
    except UnicodeDecodeError as error:
        raise ValueError(str(error)) from None
    if _SURROGATE_ESCAPE.search(data) and _has_lone_surrogate(value):
        raise ValueError("a string holds a lone UTF-16 surrogate escape, which is not text")
    return value


def canonical_json(value: Any) -> bytes:
    """Key-sorted compact JSON, the basis of derived ids (stable across runs and runners)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        pass
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=str).encode("utf-8", "surrogatepass")
    except ValueError:
        # An integer past CPython's 4,300-digit conversion limit: the exact encoder.
        return compact_json(_keys_sorted(value)).encode("utf-8", "surrogatepass")


def _keys_sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _keys_sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_keys_sorted(v) for v in value]
    return value


def derived_id(record: Any) -> str:
    """A stable id from the record's content: the same record gives the same id everywhere."""
    return "sha256:" + hashlib.sha256(canonical_json(record)).hexdigest()[:24]


def own_id(record: Any, id_field: str) -> str | None:
    """The record's own id as text, or ``None`` when it has no usable one.

    A non-empty string is used as is, an integer as its digits, another JSON value (an
    object, say) as its canonical JSON; a missing, null, empty or boolean id is no id.
    """
    if not isinstance(record, dict):
        return None
    value = record.get(id_field)
    if value is None or isinstance(value, bool) or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return int_text(value)
    return canonical_json(value).decode("utf-8", "replace")


def record_id(record: Any, id_field: str) -> str:
    """The record's own id when it has a usable one, else a content-derived id."""
    return own_id(record, id_field) or derived_id(record)


def dumps_line(value: Any) -> bytes:
    """One output line: compact JSON, non-ASCII as is, integers of any size exact.

    Raises ``TypeError`` / ``ValueError`` for what JSON cannot hold; the job calls it inside
    the per-record guard first, so such a record is a dead letter, never a failed write.
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        return compact_json(value).encode("utf-8")


def raw_text(payload: Any, limit: int) -> str:
    """The raw input as text for a dead letter, cut to ``limit`` characters."""
    if isinstance(payload, Unreadable):
        text = payload.raw
    elif isinstance(payload, (bytes, bytearray)):
        # Cut before decoding: a line can be huge. 4 bytes per character at most.
        text = bytes(payload[: limit * 4]).rstrip(b"\r\n").decode("utf-8", errors="replace")
    elif isinstance(payload, str):
        text = payload
    else:
        value = payload.value if isinstance(payload, Parsed) else payload
        try:
            text = dumps_line(value).decode()
        except (TypeError, ValueError, RecursionError):
            text = repr(value)
    return text[:limit]


# --------------------------------------------------------------------------------------------
# One record


class ReaderHint:
    """The reader detected for the previous record of a batch: tried first for the next one
    (``formats.detect_reader_after``; the result is the one full detection gives)."""

    __slots__ = ("reader",)

    def __init__(self) -> None:
        self.reader = None


def _read(record: Any, settings: Settings, hint: ReaderHint | None = None, for_core: bool = False):
    if settings.input_format == "auto":
        reader = detect_reader_after(hint.reader if hint is not None else None, record, settings.messages_field)
        if hint is not None:
            hint.reader = reader
        if reader is None:
            if not isinstance(record, (dict, list)):
                raise _DeadLetter("not_a_record", str(not_a_record(record)))
            field = settings.messages_field
            if isinstance(record, dict) and field in record and not isinstance(record[field], list):
                kind = type(record[field]).__name__
                raise _DeadLetter("messages_not_a_list", f"{field!r} is {kind}, not a list")
            raise _DeadLetter("unknown_format", unrecognized(record, field))
        # Normalization may take the reader's faster read for the core (validate never does).
        read = (reader.read_for_core or reader.read) if for_core else reader.read
    else:
        reader = READERS[settings.input_format]
        read = functools.partial(read_forced, reader)
    try:
        return read(record, settings.messages_field)
    except FormatError as error:
        reason = error.reason if error.reason in DEAD_LETTER_REASONS else "format_error"
        detail = str(error) if reason == error.reason else f"{reader.name}: {error.reason}: {error}"
        raise _DeadLetter(reason, detail) from None


def _parse(raw: RawRecord) -> Any:
    payload = raw.payload
    if isinstance(payload, Unreadable):
        raise _DeadLetter(payload.reason, payload.detail)
    if isinstance(payload, Parsed):
        return payload.value
    try:
        return parse_json(payload)
    except NumberTooLarge as error:
        raise _DeadLetter("number_too_large", str(error)) from None
    except (TypeError, ValueError, RecursionError) as error:
        raise _DeadLetter("invalid_json", str(error)) from None


def _process(raw: RawRecord, settings: Settings, hint: ReaderHint | None = None) -> tuple[dict, dict, bytes]:
    record = _parse(raw)
    conversation = _read(record, settings, hint, for_core=True)
    rid = record_id(record, settings.id_field)
    result = normalize_with_profile(conversation.messages, settings.profile)

    normalized = dict(conversation.fields)
    # Assigning to an existing key keeps its place: the record keeps its key order.
    normalized[settings.messages_field] = result.messages
    if settings.id_field not in normalized:
        normalized = {settings.id_field: rid, **normalized}
    elif own_id(normalized, settings.id_field) is None:
        # A null, empty or boolean id cannot join the outputs: use the derived one.
        normalized[settings.id_field] = rid

    metrics = {
        "id": rid,
        "source": raw.source,
        "position": raw.position,
        "dropped": result.dropped,
        "drops": result.drops,
        "healed": result.healed,
        "messages_in": len(conversation.messages),
        "messages_out": len(result.messages),
    }
    # What coercion discards beside the drops (a ledger, not MEM-5's count): the reader's part
    # (reasoning blocks) plus the message keys rule 1 does not keep.
    discarded = coercion_discards(conversation.messages, conversation.discarded)
    if discarded:
        metrics["discarded"] = ledger_report(discarded)
    if result.repairs:
        metrics["repairs"] = result.repairs
    if conversation.report:
        metrics["reader_report"] = conversation.report
    if isinstance(raw.payload, Parsed) and raw.payload.nulled:
        # Values the reader wrote as null because JSON cannot hold them, by field.
        metrics["non_finite_nulled"] = raw.payload.nulled
    if settings.check:
        metrics["violations"] = count_by_kind(check_sendable(result.messages))

    context = WriteContext(rid, settings.messages_field, settings.id_field, settings.model, settings.max_tokens,
                           settings.tools_field, source=record)
    try:
        output = WRITERS[settings.sink].write(normalized, context)
    except FormatError as error:
        raise _DeadLetter("unwritable", f"{settings.sink}: {error.reason}: {error}") from None
    if context.report:
        metrics["writer_report"] = context.report
    try:
        # Serialize here, inside the guard: a value JSON cannot hold (a Parquet decimal, a
        # lone surrogate) must make this record a dead letter, not fail the file writer. The
        # file writer writes these bytes: each record is serialized once.
        line = dumps_line(output)
    except (TypeError, ValueError, RecursionError) as error:
        raise _DeadLetter("unwritable", f"not JSON: {type(error).__name__}: {error}") from None
    return output, metrics, line


def dead_letter(raw: RawRecord, reason: str, detail: str, limit: int) -> dict:
    return {
        "source": raw.source,
        "position": raw.position,
        "reason": reason,
        "detail": detail[:1000],
        "raw": raw_text(raw.payload, limit),
    }


def _guarded(step, raw: RawRecord, settings: Settings, *hint) -> Outcome:
    try:
        output, metrics, *line = step(raw, settings, *hint)
        return Outcome(output, metrics, None, *line)
    except _DeadLetter as letter:
        return Outcome(None, None, dead_letter(raw, letter.reason, letter.detail, settings.raw_limit))
    except Exception as error:  # noqa: BLE001 — a bug must surface as data, not kill the job
        detail = f"{type(error).__name__}: {error}"
        return Outcome(None, None, dead_letter(raw, "internal_error", detail, settings.raw_limit))


def process_record(raw: RawRecord, settings: Settings, hint: ReaderHint | None = None) -> Outcome:
    """Parse, read, normalize and write one raw record; never raises.

    ``hint`` (one per batch) carries the detected reader from record to record.
    """
    return _guarded(_process, raw, settings, hint)


def _check(raw: RawRecord, settings: Settings) -> tuple[dict, None]:
    record = _parse(raw)
    conversation = _read(record, settings)
    violations = check_sendable(conversation.messages)
    report = {
        "id": record_id(record, settings.id_field),
        "source": raw.source,
        "position": raw.position,
        "messages": len(conversation.messages),
        "violations": count_by_kind(violations),
        "details": [
            {"kind": v.kind, "index": v.index, "tool_call_id": v.tool_call_id, "detail": v.detail}
            for v in violations[:MAX_REPORTED_VIOLATIONS]
        ],
    }
    return report, None


#: Violations listed one by one in a conversation's report (all are counted).
MAX_REPORTED_VIOLATIONS = 50


def check_record(raw: RawRecord, settings: Settings) -> Outcome:
    """Parse and read one raw record and check it as it is (no normalization); never raises.

    The outcome's ``record`` is the conversation's violation report.
    """
    return _guarded(_check, raw, settings)


def normalize_batch(records: list, settings: Settings, step=process_record, taken: dict | None = None) -> BatchResult:
    """``step`` (``process_record`` or ``check_record``) over a batch, split by destination,
    input order kept.

    ``taken`` is the state of the output file the batch goes to (the caller starts a new one
    per file): when the sink's writer has a ``unique_field``, repeated values are renamed
    (``make_unique``).
    """
    outputs, metrics, letters = [], [], []
    normalizing = step is process_record
    hint = (ReaderHint(),) if normalizing else ()
    lines = [] if normalizing else None
    for raw in records:
        outcome = step(raw, settings, *hint)
        if outcome.dead_letter is None:
            outputs.append(outcome.record)
            if outcome.metrics is not None:
                metrics.append(outcome.metrics)
            if lines is not None:
                lines.append(outcome.line)
        else:
            letters.append(outcome.dead_letter)
    unique_field = WRITERS[settings.sink].unique_field if normalizing else None
    if unique_field is not None and taken is not None:
        for index in make_unique(outputs, metrics, unique_field, taken):
            lines[index] = dumps_line(outputs[index])  # renamed after it was serialized
    return BatchResult(outputs, metrics, letters, lines)


#: Separator of a renamed duplicate value and its occurrence number: ``<value>~2``.
UNIQUE_SEPARATOR = "~"


def make_unique(outputs: list, metrics: list, field: str, taken: dict) -> list[int]:
    """Rename repeated ``field`` values in place, deterministically, in output order.

    The n-th occurrence of a value becomes ``<value>~n`` (``~n+1`` ... if that is taken too);
    ``taken`` maps every value used so far in the file to its occurrences. Each rename is
    counted in its record's writer report as ``duplicate_<field>_renamed``. Returns the
    indexes of the renamed outputs.
    """
    renamed_at = []
    for index, (output, record_metrics) in enumerate(zip(outputs, metrics)):
        value = output.get(field) if isinstance(output, dict) else None
        if not isinstance(value, str):
            continue
        if value not in taken:
            taken[value] = 1
            continue
        renamed, taken[value] = first_free(value, UNIQUE_SEPARATOR, taken[value] + 1, taken)
        taken[renamed] = 1
        output[field] = renamed
        renamed_at.append(index)
        report = record_metrics.setdefault("writer_report", {})
        name = f"duplicate_{field}_renamed"
        report[name] = report.get(name, 0) + 1
    return renamed_at
