"""What the two per-record steps share (no Beam import): parse, read, ids, and the guard.

The run step (``transforms.record.records``: parse, read, normalize, write) and the validate step
(``transforms.record.validate_step``: parse, read, check) both start from a ``RawRecord`` and end in
exactly one ``Outcome``: a result, or a dead letter (source, position, reason, detail and the
raw text cut to a sane length). Nothing is skipped silently, and an unexpected exception
becomes an ``internal_error`` dead letter rather than a crash (a Beam job that raises retries
the bundle forever on some runners).
"""

from __future__ import annotations

import functools
import hashlib
from enum import Enum
from typing import Any, Callable, NamedTuple

from transforms.calllogs.calls import CallLogReader, Piece, Rejected, Skipped
from transforms.calllogs.readers import CALL_LOG_READERS, detect_call_log
from transforms.core.jsontext import NumberTooLarge, canonical_json, dumps_line, int_text, parse_json
from transforms.dataset.redact import Redaction, redact_assembly, redact_piece
from transforms.formats import (
    READERS,
    Conversation,
    FormatError,
    Reader,
    detect_reader,
    plain_chat_after,
    read_forced,
    unrecognized,
)
from transforms.formats.base import not_a_record
from transforms.formats.openai import is_batch_line
from transforms.record.inputs import Parsed, RawRecord, Unreadable
from transforms.record.output_records import DeadLetter, DropMetrics
from transforms.record.record_settings import Settings


class DeadLetterReason(str, Enum):
    """Closed list of dead-letter reasons, in the order processing can produce them.

    A ``str`` mix-in rather than ``enum.StrEnum``: that is Python 3.11, and convnorm runs on 3.10.
    """

    UNREADABLE_FILE = "unreadable_file"
    #: The rest of a file that is not the one planned (truncated, replaced, rewritten under the run).
    INPUT_CHANGED = "input_changed"
    RECORD_TOO_LARGE = "record_too_large"
    UNCONVERTIBLE_VALUE = "unconvertible_value"
    INVALID_JSON = "invalid_json"
    NUMBER_TOO_LARGE = "number_too_large"
    NOT_A_RECORD = "not_a_record"
    MISSING_MESSAGES = "missing_messages"
    MESSAGES_NOT_A_LIST = "messages_not_a_list"
    UNKNOWN_FORMAT = "unknown_format"
    FORMAT_ERROR = "format_error"
    UNWRITABLE = "unwritable"
    #: Over ``--max-example-tokens`` with ``--over-limit drop`` (the dead letter has its ``tokens``).
    OVER_TOKEN_LIMIT = "over_token_limit"
    #: Kept out by ``--min-score`` / ``--max-score`` (``transforms.record.score_filter``): no
    #: score of that name (or none that is a number), below the minimum, above the maximum.
    SCORE_MISSING = "score_missing"
    SCORE_BELOW_MIN = "score_below_min"
    SCORE_ABOVE_MAX = "score_above_max"
    #: A call-log record holding no LLM call and no tool result; or a group of call-log
    #: records with tool results and no call to assemble them into.
    NO_LLM_CALLS = "no_llm_calls"
    #: A call-log record given to a step that does not assemble conversations (the
    #: ``NormalizeConversation`` DoFn alone, without ``NormalizeConversationBatches``).
    CALL_LOG = "call_log"
    INTERNAL_ERROR = "internal_error"


#: The same list as plain strings, for counters and summaries.
DEAD_LETTER_REASONS = tuple(reason.value for reason in DeadLetterReason)


class Produced(NamedTuple):
    """A step's result: the normalized record (or the validate step's report) and its metrics."""

    record: dict[str, Any]
    metrics: DropMetrics | None
    #: ``record`` serialized (``dumps_line``), when processing did it.
    line: bytes | None = None
    #: ``--examples each``: the conversation's other examples, each ``(record, metrics, line)``,
    #: written after this one (``transforms.dataset.training``).
    more: tuple[tuple[dict[str, Any], Any, bytes | None], ...] = ()

    @property
    def dead_letter(self) -> None:
        """Never a dead letter (read-only, not a field): ``outcome.dead_letter is None`` holds."""
        return None


class DeadLettered(NamedTuple):
    """A record that ends in the dead-letter output: source, position, reason, detail, raw."""

    dead_letter: DeadLetter

    # No record, metrics or line (read-only, not fields).
    @property
    def record(self) -> None:
        return None

    @property
    def metrics(self) -> None:
        return None

    @property
    def line(self) -> None:
        return None


class CallLogRead(NamedTuple):
    """What a call-log record was read into: its pieces (calls, tool results, parts refused),
    and how many of its parts were no call and no tool result, by kind."""

    pieces: list[Piece]
    skipped: dict[str, int]


class CallLogged(NamedTuple):
    """A call-log record: its calls and tool results, handed on to be assembled into the
    conversations they belong to (``transforms.calllogs.assemble``), never a record alone;
    its parts of no call and no tool result, counted by kind (``call_logs.skipped_by_kind``)."""

    source: str
    position: int
    pieces: list[Piece]
    skipped: dict[str, int] | None = None

    # No record, metrics, line or dead letter (read-only, not fields).
    @property
    def record(self) -> None:
        return None

    @property
    def metrics(self) -> None:
        return None

    @property
    def line(self) -> None:
        return None

    @property
    def dead_letter(self) -> None:
        return None


#: What a step returns for one raw record: exactly one of these, by type.
Outcome = Produced | DeadLettered | CallLogged


class RecordRefused(Exception):
    """Raised inside a step: the record becomes a dead letter with this reason and detail."""

    def __init__(self, reason: DeadLetterReason | str, detail: str, tokens: int | None = None) -> None:
        super().__init__(detail)
        # A reason outside the closed list raises here: a bug, an ``internal_error`` dead letter.
        self.reason = DeadLetterReason(reason)
        self.detail = detail
        #: The example's token count, for a record refused for its length (``--tokens``).
        self.tokens = tokens


# --------------------------------------------------------------------------------------------
# Ids and raw text


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


#: Where an OpenAI Batch API input line keeps its id: the key the Batch API matches each
#: result to its request by, so it must come through unchanged.
BATCH_ID_FIELD = "custom_id"


def record_id(record: Any, settings: Settings) -> str:
    """The record's own id when it has a usable one, else a content-derived id.

    The own id is the ``--id-field`` (``settings.id_field``); a Batch API line that lacks that
    field names itself by its ``custom_id``.
    """
    own = own_id(record, settings.id_field)
    if (
        own is None
        and isinstance(record, dict)
        and settings.id_field not in record
        and is_batch_line(record, settings.messages_field)
    ):
        own = own_id(record, BATCH_ID_FIELD)
    return own or derived_id(record)


def raw_text(payload: Any, limit: int, redact: Callable[[str], str] | None = None) -> str:
    """The raw input as text for a dead letter, cut to ``limit`` characters; ``redact``
    (``--redact``) applied to the whole text before the cut, so that no find is cut in two."""
    if isinstance(payload, Unreadable):
        text = payload.raw
    elif isinstance(payload, (bytes, bytearray)):
        # Cut before decoding: a line can be huge. 4 bytes per character at most.
        whole = payload if redact is not None else payload[: limit * 4]
        text = bytes(whole).rstrip(b"\r\n").decode("utf-8", errors="replace")
    elif isinstance(payload, str):
        text = payload
    else:
        value = payload.value if isinstance(payload, Parsed) else payload
        try:
            text = dumps_line(value).decode()
        except (TypeError, ValueError, RecursionError):
            text = repr(value)
    return (text if redact is None else redact(text))[:limit]


# --------------------------------------------------------------------------------------------
# Parse and read


class ReaderHint:
    """The reader detected for the previous record of a batch: tried first for the next one
    (``formats.detect_reader_after``; the result is the one full detection gives)."""

    __slots__ = ("reader",)

    def __init__(self) -> None:
        self.reader: Reader | None = None


def read_conversation(
    record: Any, settings: Settings, hint: ReaderHint | None = None, for_core: bool = False
) -> Conversation:
    """The record read by its format reader (detected, or the one ``--format`` names);
    ``RecordRefused`` with the reason when no reader takes it. ``for_core``: the messages go
    only to the core and the ledger (the run step), so the reader's faster ``read_for_core``
    may serve; validate checks the list itself and never takes it."""
    if settings.input_format == "auto":
        field = settings.messages_field
        plain = plain_chat_after(hint.reader if hint is not None else None, record, field)
        reader = READERS[plain.reader] if plain is not None else detect_reader(record, field)
        if hint is not None:
            hint.reader = reader
        if (
            plain is not None
            and plain.as_is
            and (plain.reader == "flat" or (for_core and READERS[plain.reader].read_for_core))
        ):
            # What the reader hands on (the flat reader, the OpenAI reader's read for the core):
            # the record's own messages and fields, one pass over them, no second.
            return Conversation(record[field], record, keys_kept=plain.keys_kept)
        if reader is None:
            if not isinstance(record, (dict, list)):
                raise RecordRefused(DeadLetterReason.NOT_A_RECORD, str(not_a_record(record)))
            if isinstance(record, dict) and field in record and not isinstance(record[field], list):
                kind = type(record[field]).__name__
                raise RecordRefused(DeadLetterReason.MESSAGES_NOT_A_LIST, f"{field!r} is {kind}, not a list")
            raise RecordRefused(DeadLetterReason.UNKNOWN_FORMAT, unrecognized(record, field))
        read = (reader.read_for_core or reader.read) if for_core else reader.read
    else:
        reader = READERS[settings.input_format]
        read = functools.partial(read_forced, reader)
    try:
        return read(record, settings.messages_field)
    except FormatError as error:
        reason = DeadLetterReason(error.dead_letter_reason)
        # A record-shape error is its own reason; any other names the reader and its reason.
        detail = f"{reader.name}: {error.reason}: {error}" if reason is DeadLetterReason.FORMAT_ERROR else str(error)
        raise RecordRefused(reason, detail) from None


def call_log_reader(record: Any, settings: Settings) -> CallLogReader | None:
    """The call-log reader of ``record``: the one ``--format`` names, or, auto-detecting, the
    one whose detection accepts it; ``None`` for a record that is not a call log."""
    if settings.input_format == "auto":
        return detect_call_log(record)
    return CALL_LOG_READERS.get(settings.input_format)


def read_call_log(record: Any, settings: Settings) -> CallLogRead | None:
    """The pieces of a call-log record and its parts skipped by kind; ``None`` when it is not
    one. ``RecordRefused`` when its reader cannot read it (or any of its parts), when it holds
    nothing at all, or when the step does not assemble (``Settings.calls``)."""
    reader = call_log_reader(record, settings)
    if reader is None:
        return None
    if not settings.calls and settings.calls_sampled_out:
        raise RecordRefused(
            DeadLetterReason.CALL_LOG,
            f"{reader.name}: a call-log record past the first records of each input file, where the run "
            "(--call-logs auto) found none and so left out the assembly of conversations from calls; "
            "run again with --call-logs on to assemble it",
        )
    if not settings.calls:
        raise RecordRefused(
            DeadLetterReason.CALL_LOG,
            f"{reader.name}: a call-log record, given to a step that does not assemble conversations from "
            "calls (convnorm run, batch or streaming, and NormalizeConversationBatches do; the "
            "NormalizeConversation DoFn alone does not)",
        )
    try:
        items = reader.read(record)
    except FormatError as error:
        raise RecordRefused(DeadLetterReason.FORMAT_ERROR, f"{reader.name}: {error.reason}: {error}") from None
    if not items:
        raise RecordRefused(
            DeadLetterReason.NO_LLM_CALLS, f"{reader.name}: the record holds no LLM call and no tool result"
        )
    pieces: list[Piece] = []
    skipped: dict[str, int] = {}
    for item in items:
        if isinstance(item, Skipped):
            skipped[item.kind] = skipped.get(item.kind, 0) + 1
        else:
            pieces.append(item)
    refused = [piece for piece in pieces if isinstance(piece, Rejected)]
    if len(refused) == len(pieces) and not skipped:
        # No part could be read: the record is one dead letter, as a record of one part is.
        more = f" (and {len(refused) - 1} more part(s) alike)" if len(refused) > 1 else ""
        raise RecordRefused(DeadLetterReason.FORMAT_ERROR, refused[0].detail + more)
    redaction = _redaction(settings)
    if redaction is not None:
        # --redact before the assembly: a streaming run keeps the pieces in its output directory.
        pieces = [redact_piece(piece, redaction) for piece in pieces]
    return CallLogRead(pieces, skipped)


#: How orjson says it could not get the memory to parse a text (a ``JSONDecodeError``).
OUT_OF_MEMORY = "Not enough memory"


def parse_payload(raw: RawRecord) -> Any:
    """The record's JSON value; ``RecordRefused`` when it cannot be parsed."""
    payload = raw.payload
    if isinstance(payload, Unreadable):
        raise RecordRefused(payload.reason, payload.detail)
    if isinstance(payload, Parsed):
        return payload.value
    try:
        return parse_json(payload)
    except NumberTooLarge as error:
        raise RecordRefused(DeadLetterReason.NUMBER_TOO_LARGE, str(error)) from None
    except (TypeError, ValueError, RecursionError) as error:
        if str(error).startswith(OUT_OF_MEMORY):
            raise MemoryError(str(error)) from None  # orjson's: the machine's limit, not invalid JSON
        raise RecordRefused(DeadLetterReason.INVALID_JSON, str(error)) from None


def dead_letter(
    raw: RawRecord,
    reason: DeadLetterReason,
    detail: str,
    limit: int,
    tokens: int | None = None,
    redaction: Redaction | None = None,
) -> DeadLetter:
    """The dead letter of ``raw``; with ``redaction`` (``--redact``) its raw text, its detail
    (a key name, a value quoted) and its calls' ids redacted, as a written record is."""
    redact = None if redaction is None else redaction.text
    letter: DeadLetter = {
        "source": raw.source,
        "position": raw.position,
        "reason": reason.value,  # a plain str in the output dict
        "detail": (detail if redact is None else redact(detail))[:1000],
        "raw": raw_text(raw.payload, limit, redact),
    }
    if tokens is not None:
        letter["tokens"] = tokens
    if isinstance(raw.payload, Parsed) and raw.payload.assembly is not None:
        # A conversation assembled from call logs: the calls that made it (explain reads them).
        assembly = raw.payload.assembly
        letter["assembly"] = assembly if redaction is None else redact_assembly(assembly, redaction)
    return letter


def _redaction(settings: Settings) -> Redaction | None:
    """``--redact``'s for a dead letter (its finds are not counted: a dead letter has no metrics)."""
    return Redaction(settings.redact, settings.redact_region, {}) if settings.redact else None


def guarded(
    step: Callable[..., tuple[Any, ...] | CallLogRead], raw: RawRecord, settings: Settings, *hint: ReaderHint | None
) -> Outcome:
    """``step(raw, settings, *hint)`` as an ``Outcome``; never raises."""
    try:
        result = step(raw, settings, *hint)  # (record, metrics) or (record, metrics, line), or pieces
        if isinstance(result, CallLogRead):
            return CallLogged(raw.source, raw.position, result.pieces, result.skipped or None)
        return Produced(*result)
    except RecordRefused as letter:
        return DeadLettered(
            dead_letter(raw, letter.reason, letter.detail, settings.raw_limit, letter.tokens, _redaction(settings))
        )
    except MemoryError:
        raise  # the machine's limit, not the record's fault: the run fails saying so, never a dead letter
    except Exception as error:  # noqa: BLE001 — a bug must surface as data, not kill the job
        detail = f"{type(error).__name__}: {error}"
        return DeadLettered(
            dead_letter(raw, DeadLetterReason.INTERNAL_ERROR, detail, settings.raw_limit, None, _redaction(settings))
        )
