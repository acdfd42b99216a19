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

The Beam DoFn in ``transforms.conversations`` only calls ``process_batch`` and routes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from transforms.formats import READERS, WRITERS, FormatError, WriteContext, detect_reader
from transforms.profiles import PROFILES, normalize_with_profile
from transforms.validate import check_sendable, count_by_kind

#: Closed list of dead-letter reasons, in the order processing can produce them.
DEAD_LETTER_REASONS = (
    "unreadable_file",
    "invalid_json",
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
    """A payload the reader already decoded (a ``.json`` array element, a Parquet row)."""

    value: Any


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


class BatchResult(NamedTuple):
    records: list
    metrics: list
    dead_letters: list


class _DeadLetter(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# --------------------------------------------------------------------------------------------
# Parsing and ids


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: A run of digits long enough to be an integer past 64 bits (or a long fraction).
_LONG_NUMBER = re.compile(rb"\d{19,}")


def parse_json(payload: bytes | str) -> Any:
    """Parse one JSON text exactly.

    orjson reads integers past 64 bits as floats, silently losing digits; text with a run of
    19 or more digits therefore goes to the standard parser, which reads them exactly (a
    long number inside a string only costs the slower parser). NaN and Infinity are not
    JSON and stay refused.
    """
    data = payload.encode() if isinstance(payload, str) else payload
    if _LONG_NUMBER.search(data) is None:
        return orjson.loads(data)
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except UnicodeDecodeError as error:
        raise ValueError(str(error)) from None


def canonical_json(value: Any) -> bytes:
    """Key-sorted compact JSON, the basis of derived ids (stable across runs and runners)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def derived_id(record: Any) -> str:
    """A stable id from the record's content: the same record gives the same id everywhere."""
    return "sha256:" + hashlib.sha256(canonical_json(record)).hexdigest()[:24]


def record_id(record: Any, id_field: str) -> str:
    """The record's own id (cast to text) when it has one, else a content-derived id."""
    if isinstance(record, dict):
        value = record.get(id_field)
        if isinstance(value, str) and value:
            return value
        if value is not None and not isinstance(value, (bool, str)):
            if isinstance(value, int):
                return str(value)
            return canonical_json(value).decode()
    return derived_id(record)


def dumps_line(value: Any) -> bytes:
    """One output line: compact JSON, non-ASCII as is; big integers exact."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


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


def _read(record: Any, settings: Settings):
    if settings.input_format == "auto":
        reader = detect_reader(record, settings.messages_field)
        if reader is None:
            if not isinstance(record, (dict, list)):
                raise _DeadLetter("not_a_record", f"a record is an object or a list, not {type(record).__name__}")
            field = settings.messages_field
            if field in record:
                kind = type(record[field]).__name__
                raise _DeadLetter("messages_not_a_list", f"{field!r} is {kind}, not a list")
            raise _DeadLetter(
                "unknown_format",
                f"no reader accepts this record (keys: {', '.join(map(str, list(record)[:10]))}); "
                f"name one with --format, or the message field with --messages-field")
    else:
        reader = READERS[settings.input_format]
    try:
        return reader.read(record, settings.messages_field)
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
    except (TypeError, ValueError, RecursionError) as error:
        raise _DeadLetter("invalid_json", str(error)) from None


def _process(raw: RawRecord, settings: Settings) -> tuple[dict, dict]:
    record = _parse(raw)
    conversation = _read(record, settings)
    rid = record_id(record, settings.id_field)
    result = normalize_with_profile(conversation.messages, settings.profile)

    normalized = dict(conversation.fields)
    # Assigning to an existing key keeps its place: the record keeps its key order.
    normalized[settings.messages_field] = result.messages
    if settings.id_field not in normalized:
        normalized = {settings.id_field: rid, **normalized}

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
    if result.repairs:
        metrics["repairs"] = result.repairs
    if settings.check:
        metrics["violations"] = count_by_kind(check_sendable(result.messages))

    context = WriteContext(rid, settings.messages_field, settings.id_field, settings.model, settings.max_tokens)
    try:
        output = WRITERS[settings.sink].write(normalized, context)
    except FormatError as error:
        raise _DeadLetter("unwritable", f"{settings.sink}: {error.reason}: {error}") from None
    return output, metrics


def dead_letter(raw: RawRecord, reason: str, detail: str, limit: int) -> dict:
    return {
        "source": raw.source,
        "position": raw.position,
        "reason": reason,
        "detail": detail[:1000],
        "raw": raw_text(raw.payload, limit),
    }


def _guarded(step, raw: RawRecord, settings: Settings) -> Outcome:
    try:
        output, metrics = step(raw, settings)
        return Outcome(output, metrics, None)
    except _DeadLetter as letter:
        return Outcome(None, None, dead_letter(raw, letter.reason, letter.detail, settings.raw_limit))
    except Exception as error:  # noqa: BLE001 — a bug must surface as data, not kill the job
        detail = f"{type(error).__name__}: {error}"
        return Outcome(None, None, dead_letter(raw, "internal_error", detail, settings.raw_limit))


def process_record(raw: RawRecord, settings: Settings) -> Outcome:
    """Parse, read, normalize and write one raw record; never raises."""
    return _guarded(_process, raw, settings)


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


def process_batch(records: list, settings: Settings, step=process_record) -> BatchResult:
    """``step`` (``process_record`` or ``check_record``) over a batch, split by destination,
    input order kept."""
    outputs, metrics, letters = [], [], []
    for raw in records:
        outcome = step(raw, settings)
        if outcome.dead_letter is None:
            outputs.append(outcome.record)
            if outcome.metrics is not None:
                metrics.append(outcome.metrics)
        else:
            letters.append(outcome.dead_letter)
    return BatchResult(outputs, metrics, letters)
