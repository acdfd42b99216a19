"""The format registry's contract: readers map a record to the flat shape, writers map back.

A *reader* takes one parsed record (whatever a line of the input holds) and returns a
``Conversation``: the message list in the flat shape the core reads, and every other field
of the record, carried through unchanged. A reader that cannot read a record raises
``FormatError`` with a short reason; the job dead-letters the record with it.

A *writer* takes one normalized flat record (a dict whose ``ctx.messages_field`` holds the
normalized messages, the record's other fields beside it) and returns the output record. A
writer that cannot represent a record raises ``FormatError``. A writer that reads a
command-line option names the ``WriteContext`` field in ``Writer.uses``, so that the job can
warn when the option is missing. The two differ in precedence: ``--model``, when given,
replaces every record's own model (``record_model``); ``--max-tokens`` only fills in for a
record that has no ``max_tokens`` of its own.

Adding a format is one module that defines a reader and/or a writer and registers them with
``register_reader`` / ``register_writer``, plus its import in ``transforms/formats/__init__``.
Register at import time, in a module workers import: a format registered at run time on the
launching machine only would be unknown to remote workers.
No Beam import here: formats are plain functions, testable alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, NamedTuple


class FormatError(ValueError):
    """A record that a reader cannot read or a writer cannot write.

    ``reason`` is a short snake_case token (it becomes a dead-letter reason's detail and a
    counter name); the message says what was wrong, for a person.
    """

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason

    @property
    def dead_letter_reason(self) -> str:
        """The dead-letter reason when a reader raises this: ``format_error``, with ``reason``
        in the detail (a writer's error is always ``unwritable``)."""
        return "format_error"


class RecordShapeError(FormatError):
    """A record whose shape no reader takes (not a record, no message list): its ``reason`` is
    one of the job's dead-letter reasons and becomes the dead letter's reason as it is."""

    @property
    def dead_letter_reason(self) -> str:
        return self.reason


def not_a_record(record: Any) -> FormatError:
    """The error for an input value that is neither an object nor a list (the one wording)."""
    return RecordShapeError("not_a_record", f"a record is an object or a list, not {type(record).__name__}")


class Conversation(NamedTuple):
    """One record read into the flat shape.

    ``messages`` is the (possibly defective) flat message list the core normalizes;
    ``fields`` is every other field of the record, in order, carried through unchanged. A
    reader may leave the message key inside ``fields``: the job replaces its value in place,
    so the record keeps its key order. ``discarded`` is the reader's part of the ledger of
    what the flat shape cannot hold (``transforms.core.ledger``: reasoning blocks and items it
    leaves out), ``None`` when it left nothing out.
    """

    messages: list[Any]
    fields: dict[str, Any]
    #: Counts of the reader's documented choices that change what the record said (e.g.
    #: ``tool_call_ids_split``); the job reports them per conversation and per run.
    report: dict[str, Any] | None = None
    #: What the reader left out because the flat shape cannot hold it (reasoning blocks, a
    #: refusal beside content): the ledger of discarded fields, by key (transforms.core.ledger).
    discarded: dict[str, Any] | None = None
    #: The record continues a conversation it does not hold (a Responses request with a
    #: ``previous_response_id``): the job flags it in the drop metrics (``partial_conversation``).
    partial: bool = False
    #: Known to hold only keys rule 1 keeps (``formats.plain_chat`` looked): coercion discards
    #: nothing, the job skips the ledger's own pass. ``False``: not known.
    keys_kept: bool = False


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and the job makes
# one context per record (frozen, 2 us; slotted, 0.3 us: a tenth of a round trip). Writers
# read it and add to ``report`` only.
@dataclass(slots=True)
class WriteContext:
    """What a writer knows besides the record itself."""

    record_id: str
    messages_field: str = "messages"
    id_field: str = "id"
    model: str | None = None
    #: For request bodies that must bound the reply (Anthropic), when the record has none.
    max_tokens: int | None = None
    #: Dotted path of the record's tool definitions (``--tools-field``), e.g. ``kwargs.tools``.
    tools_field: str = "tools"
    #: Counts of what the writer mapped, dropped or derived for this record (one fresh dict per
    #: record): ``count_written`` adds to it; the job reports it as the record's
    #: ``writer_report`` (in ``drops/``) and sums it per run (``summary.json``).
    report: dict[str, Any] = field(default_factory=dict, compare=False)
    #: What the writer leaves out of the conversation's content, a ledger
    #: (``transforms.core.ledger.note``): the job adds it to the record's own.
    discarded: dict[str, Any] = field(default_factory=dict, compare=False)
    #: The record as parsed, before its reader mapped it: a writer that writes a record back
    #: in its own input format (a Batch line to ``openai-batch``) keeps from here everything it
    #: does not change. ``None`` when the job has no such record (a writer called alone).
    source: Any = None
    #: ``--kto-threshold NAME=VALUE``: the numeric label that makes a KTO row's thumb, and the
    #: value at or above which it is a good one (``transforms.formats.trl``). ``None``: thumbs only.
    kto_threshold: tuple[str, float] | None = None
    #: ``--reward NAME``: the label whose value is a prompt's ``reward`` (``trl-prompts``).
    reward: str | None = None
    #: ``trl-dpo`` in a batch run: a conversation without a pair of its own is written as a
    #: candidate for pairs across conversations of one prompt (``transforms.record.pairs``),
    #: decided by the label ``pair_by`` (``--pair-by``; ``None``: thumbs). The writer leaves the
    #: candidate's claim in ``pair_claim`` (``None``: no candidate).
    pairs_across: bool = False
    pair_by: str | None = None
    pair_claim: Any = field(default=None, compare=False)


def count_written(ctx: WriteContext, name: str, n: int = 1, key: str | None = None) -> None:
    """Add ``n`` to the writer report's ``name`` (or to ``name[key]`` for counts by key)."""
    if key is None:
        ctx.report[name] = ctx.report.get(name, 0) + n
    else:
        bucket = ctx.report.setdefault(name, {})
        bucket[key] = bucket.get(key, 0) + n


@dataclass(frozen=True)
class Reader:
    name: str
    #: ``read(record, messages_field) -> Conversation``; raises FormatError.
    read: Callable[[Any, str], Conversation]
    #: ``detect(record, messages_field) -> bool``: does this record look like this format?
    #: Used by ``--format auto``; readers are tried in their registration priority.
    detect: Callable[[Any, str], bool]
    #: Lower is tried first by auto-detection (the catch-all flat reader goes last).
    priority: int = 50
    description: str = ""
    #: A faster ``read`` whose messages only the core and the ledger see (the job's
    #: normalization): it may leave shapes the core reads leniently unconverted, giving the
    #: same output. ``None``: ``read``. ``convnorm validate`` always uses ``read``.
    read_for_core: Callable[[Any, str], Conversation] | None = None
    #: ``accepts(record, messages_field) -> bool``: is the record valid in this format as it is?
    #: A reader named with ``--format`` reads such a record even when auto-detection would give
    #: it to another reader (text-part content is OpenAI's signal, and valid Anthropic too).
    #: ``None``: only what ``detect`` accepts.
    accepts: Callable[[Any, str], bool] | None = None


@dataclass(frozen=True)
class Writer:
    name: str
    #: ``write(record, ctx) -> dict``; raises FormatError.
    write: Callable[[dict[str, Any], WriteContext], dict[str, Any]]
    description: str = ""
    #: The ``WriteContext`` fields this writer reads from the command line, e.g. ``("model",)``
    #: (``--model`` fills ``model`` and, when given, wins over a record's own model;
    #: ``--max-tokens`` fills ``max_tokens`` for records without their own). The job warns when a
    #: named option is not given, since records without their own value then cannot be written,
    #: or are written without it;
    #: a writer that never reads an option leaves it out, and gets no warning for it. Names are
    #: checked against ``WriteContext`` at registration.
    uses: tuple[str, ...] = ()
    #: A top-level output field whose values must be unique within an output file (the
    #: Batch API refuses a file with a repeated ``custom_id``): the job renames the second
    #: and later occurrences ``<value>~2``, ``<value>~3`` ... and counts them.
    unique_field: str | None = None
    #: The schema of the records it writes (``transforms.formats.schema``): what loads a whole
    #: multi-part output as one dataset. ``None``: records without a fixed schema (flat).
    schema: dict[str, Any] | None = None
    #: The providers whose carried reasoning (``transforms.formats.reasoning``) this writer writes
    #: back (``"*"``: any, as it is); others' is left out, counted in the ledger.
    reasoning: tuple[str, ...] = ()
    #: ``--reasoning`` when not given: ``keep`` (write back what the sink takes) or ``drop``.
    reasoning_default: str = "keep"
    #: ``media(item, role) -> bool``: does this writer write a carried media item
    #: (``transforms.formats.media``) of a message of ``role`` where its placeholder stands?
    #: ``None``: it writes placeholders only; the others are counted in the ledger.
    media: Callable[[dict[str, Any], str], bool] | None = None
    #: ``--media`` when not given: ``keep`` or ``drop``.
    media_default: str = "keep"

    def __post_init__(self) -> None:
        known = {f.name for f in fields(WriteContext)}
        unknown = [name for name in self.uses if name not in known]
        if unknown:
            raise ValueError(f"writer {self.name!r} uses unknown WriteContext field(s): {', '.join(unknown)}")


READERS: dict[str, Reader] = {}
WRITERS: dict[str, Writer] = {}


def register_reader(reader: Reader) -> Reader:
    if reader.name in READERS or reader.name == "auto":
        raise ValueError(f"reader {reader.name!r} is already registered")
    READERS[reader.name] = reader
    return reader


def register_writer(writer: Writer) -> Writer:
    if writer.name in WRITERS:
        raise ValueError(f"writer {writer.name!r} is already registered")
    WRITERS[writer.name] = writer
    return writer


def detect_reader(record: Any, messages_field: str = "messages") -> Reader | None:
    """The first reader, by priority then name, whose ``detect`` accepts the record."""
    for reader in sorted(READERS.values(), key=lambda r: (r.priority, r.name)):
        if reader.detect(record, messages_field):
            return reader
    return None
