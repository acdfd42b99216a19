"""The pieces a call-log reader gives, and the registry of call-log readers.

A call-log record (a Langfuse observation row, an OTLP ``resourceSpans`` document, a LangSmith
run, a proxy's request+response row, ...) holds one or more LLM *calls*, and perhaps tool
executions. A ``CallLogReader`` turns one parsed record into its pieces:

- ``Call``: one LLM call: the history it sent and the output it got, in the flat shape (the
  one the core reads: ``{"role", "content"}``, assistant ``tool_calls`` of
  ``{"tool_call_id", "name", "args"}``, tool ``tool_call_id``; every ``content`` a string);
- ``ToolResult``: one tool execution recorded apart from the calls (an ``execute_tool`` span,
  a Langfuse TOOL observation, a LangSmith ``tool`` run), used where the next call's history
  lacks the result.

Every piece names its conversation: ``group`` (the format's conversation or session id, else
its trace id) within its ``format``; the assembly (``transforms.calllogs.assemble``) groups
pieces by ``(format, group)``, orders them by ``start`` and rebuilds the conversation. A record
the reader cannot read raises ``FormatError``; a call-log record that holds no call and no tool
result gives only ``Skipped`` markers (its parts, counted by kind) or ``[]`` (nothing at all:
the job dead-letters it, ``no_llm_calls``). A record of many parts (a trace download, an OTLP
document) whose one part cannot be read gives a ``Rejected`` for it, and the rest as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple


class Call(NamedTuple):
    """One LLM call, in the flat shape."""

    #: The reader's name (``CallLogReader.name``).
    format: str
    #: The conversation it belongs to: the session / conversation id, else the trace id.
    group: str
    #: Start time, integer nanoseconds since the Unix epoch (UTC); 0 when the record has none.
    start: int
    #: The call's own id in its format (span id, observation id, run id, request id).
    call_id: str
    #: The messages sent, system instructions first (as ``system`` messages), in order.
    history: list[dict[str, Any]]
    #: The call's output: the first choice's assistant message (a list: it may be empty when
    #: the call failed or recorded none; more than one when a format splits one turn).
    output: list[dict[str, Any]]
    #: The tools offered, as OpenAI function tools (``{"type": "function", "function": {...}}``);
    #: ``None`` when the record names none.
    tools: list[dict[str, Any]] | None = None
    #: The model asked for or answered by, when recorded.
    model: str | None = None
    #: What reading left out because the flat shape cannot hold it (reasoning parts,
    #: annotations): the ledger of discarded fields (``transforms.core.ledger``: name -> [count,
    #: characters]), as ``Conversation.discarded`` holds it; ``None`` when nothing was left out.
    discarded: dict[str, Any] | None = None
    #: The output was a stream of events cut off before its end (``streams.complete``): a
    #: partial answer, marked ``truncated_stream`` in the conversation it ends up in.
    truncated: bool = False
    #: The id of the response it got (an OpenAI Responses object's ``id``), "" when none.
    response_id: str = ""
    #: The response its request continues (Responses ``previous_response_id``): its history
    #: holds only what is new since, and the assembly puts that response's sequence before it.
    previous_response_id: str = ""
    #: Who had the call, and where (``transforms.calllogs.context``: ``user_id``, ``session_id``,
    #: ``trace_id``, ``tags``, ``environment``, ``release``); ``None`` when the record names none.
    context: dict[str, Any] | None = None
    #: The places in ``history`` of assistant messages read from a record whose writer drops
    #: the text of an answer that made tool calls (python-contrib openai-v2's legacy
    #: ``gen_ai.assistant.message`` log record: the calls, no content). The assembly may put
    #: that text back from the answer's own record (``transforms.calllogs.restored_text``).
    text_dropped: tuple[int, ...] = ()


class ToolResult(NamedTuple):
    """One tool execution recorded apart from the LLM calls."""

    format: str
    group: str
    start: int
    #: The tool span's / observation's / run's own id.
    call_id: str
    #: The id of the assistant's call it answers (the join key); "" when the record has none.
    tool_call_id: str
    name: str
    #: The result as text (an object or list as compact JSON, as the core casts content).
    content: str


class Rejected(NamedTuple):
    """One part of a record (an observation of a trace download, a span of an OTLP document)
    that its reader could not read, while the record's other parts were read: a dead letter of
    its own (``format_error``, its place in ``detail``), the rest of the record kept."""

    format: str
    group: str
    start: int
    #: The part's own id (observation or span id), or its place when it has none.
    call_id: str
    #: The ``FormatError`` reason and its text, with the part's place.
    reason: str
    detail: str
    #: The part itself as JSON text (cut: ``PART_TEXT_LIMIT``), for its dead letter's ``raw``.
    raw: str = ""


#: How much of a refused part's JSON text a ``Rejected`` keeps (its dead letter's ``raw`` is cut
#: again to ``--raw-limit``).
PART_TEXT_LIMIT = 10_000


class Skipped(NamedTuple):
    """A part of a record that is no LLM call and no tool result (an HTTP, database, chain or
    agent span; a Langfuse SPAN observation; a LangSmith chain run ...): counted by ``kind``
    in the summary (``call_logs.skipped_by_kind``), never a dead letter. Never assembled."""

    kind: str


class Fragment(NamedTuple):
    """A part of one call that its record holds only in part, to be joined with the other parts
    of its ``key`` wherever they were read (another record, another file) before the assembly:
    a LangSmith run's ``post`` whose ``patch`` came in another payload (or that patch), the
    GenAI events of one span that a batch log exporter split over documents, or that span.
    The format's joiner (``register_joiner``) makes the pieces of one key's fragments."""

    format: str
    #: The conversation, when the part names it ("" when only the joined call will: a patch).
    group: str
    start: int
    call_id: str
    #: The join key within the format (``run:<id>``, ``span:<trace>/<span>``).
    key: str
    #: What part it is (``post``, ``patch``, ``events``, ``span``), for the joiner.
    part: str
    #: The part as JSON-able data, as the joiner reads it.
    data: Any


class Label(NamedTuple):
    """One judgement of a call or of a whole trace (a Langfuse score, a LangSmith feedback, a
    Phoenix annotation, a Helicone rating), joined to the conversation holding what it judges
    (``transforms.calllogs.labels``), never assembled itself."""

    #: The reader's name (``CallLogReader.name``).
    format: str
    #: The id it is joined by (``labels.join_id``): its trace id, else the call's id.
    group: str
    #: When it was last updated (``updated_at``, else its own time), nanoseconds; 0 unknown.
    start: int
    #: The id of the call it judges (observation, run, span, request id); "" for a whole trace.
    call_id: str
    #: The tool that kept it: ``langfuse``, ``langsmith``, ``phoenix``, ``helicone`` ...
    source: str
    #: Its own id (duplicates and stale versions of one label share it); "" when it has none.
    label_id: str
    name: str
    #: A number, a bool or a string.
    value: Any
    #: The trace it belongs to; "" when the record names none.
    trace_id: str = ""
    comment: str | None = None
    #: A human-corrected output for the judged call (assistant messages, flat shape).
    correction: list[dict[str, Any]] | None = None


Piece = Call | ToolResult | Rejected | Fragment | Label
#: What a reader's ``read`` gives: the pieces, and a ``Skipped`` for each part left out.
ReadItem = Call | ToolResult | Rejected | Fragment | Label | Skipped

#: Marks a key of fragments to join (``(format + JOIN_SUFFIX, fragment key)``) among the keys of
#: conversation groups: no reader's name ends so.
JOIN_SUFFIX = "+join"

#: ``joiner(fragments)``: the pieces one key's fragments make, each with the place of the record
#: it stands at, ``(source, position, piece)``; ``fragments`` are ``(source, position,
#: fragment)``, in a fixed order (by time, then place). A fragment that meets none it needs (a
#: patch with no post) gives a ``Rejected``: a dead letter with its reason, never dropped.
Joiner = Callable[[list[tuple[str, int, Fragment]]], list[tuple[str, int, Piece]]]
JOINERS: dict[str, Joiner] = {}


def register_joiner(fmt: str, joiner: Joiner) -> Joiner:
    if fmt in JOINERS:
        raise ValueError(f"joiner of {fmt!r} is registered twice")
    JOINERS[fmt] = joiner
    return joiner


@dataclass(frozen=True)
class CallLogReader:
    """A call-log format: ``detect(record)`` says whether a parsed record is one of its records
    (cheap: top-level keys first); ``read(record)`` gives its pieces, or raises ``FormatError``."""

    name: str
    read: Callable[[Any], list[ReadItem]]
    detect: Callable[[Any], bool]
    #: Detection order among call-log readers (lowest first); all of them run before the
    #: conversation readers (``transforms.formats``).
    priority: int
    description: str


CALL_LOG_READERS: dict[str, CallLogReader] = {}
_BY_PRIORITY: list[CallLogReader] = []

#: Top-level keys of which every record some call-log reader detects holds at least one (each
#: detector requires one of them): a record with none of them is no call log, so the plain-chat
#: shortcut (``transforms.formats.plain_chat``) may take it without asking the call-log
#: detectors; one holding any of them goes to full detection (a LiteLLM logging payload has a
#: top-level ``messages`` list beside ``call_type``). tests/test_calllogs_detect.py holds every
#: reader's detection to it.
CALL_LOG_KEYS = frozenset(
    (
        "resourceSpans",  # otlp
        "resource_spans",
        "resourceLogs",
        "resource_logs",
        "attributes",  # span-rows
        "observations",  # langfuse: a trace's JSON download
        "parent_observation_id",  # langfuse: blob-storage export rows
        "parentObservationId",  # langfuse: API / UI rows
        "run_type",  # langsmith: runs
        "post",  # langsmith: ingestion payloads
        "patch",
        "request_body",  # helicone
        "input",  # openpipe (also a Responses key: already refused by the shortcut)
        "call_type",  # litellm
        "data_type",  # labels: a Langfuse score (blob-storage export, API)
        "dataType",
        "feedback_source",  # labels: LangSmith feedback
        "run_id",
        "annotator_kind",  # labels: Phoenix annotations
        "annotatorKind",
    )
)


def register_call_log_reader(reader: CallLogReader) -> CallLogReader:
    if reader.name in CALL_LOG_READERS:
        raise ValueError(f"call-log reader {reader.name!r} is registered twice")
    CALL_LOG_READERS[reader.name] = reader
    # Detection runs once a record: the priority order is kept, not sorted each time.
    _BY_PRIORITY[:] = sorted(CALL_LOG_READERS.values(), key=lambda r: r.priority)
    return reader


def detect_call_log(record: Any) -> CallLogReader | None:
    """The call-log reader whose detection accepts ``record`` (by priority), else ``None``.

    A record holding none of ``CALL_LOG_KEYS`` is refused at once (one set test: an ordinary
    chat record costs no detector); every reader's detection requires one of those keys.
    """
    if not isinstance(record, dict) or CALL_LOG_KEYS.isdisjoint(record):
        return None
    for reader in _BY_PRIORITY:
        if reader.detect(record):
            return reader
    return None
