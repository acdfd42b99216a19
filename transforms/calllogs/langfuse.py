"""Langfuse exports: observation rows (blob storage, API / UI) and a trace's JSON download.

Three record shapes, one reader (``langfuse``):

- a blob-storage export row (``observations_v2/`` or legacy ``observations/``, JSONL), snake
  case: ``id``, ``trace_id``, ``parent_observation_id`` (``""`` at the root), ``type``,
  ``start_time`` (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC), ``input`` / ``output`` (JSON strings,
  ``""`` when unset), ``provided_model_name``, ``metadata``, ``tool_definitions``, ``session_id``;
- an API / UI row, camel case: ``traceId``, ``parentObservationId``, ``startTime`` (ISO),
  ``model``, ``sessionId`` when present;
- a single trace's JSON download ``{"trace": {..., "sessionId"}, "observations": [...]}``: one
  record, many observations (``trace.observations`` repeats them and is not read).

Observations of type ``GENERATION`` are calls, ``TOOL`` ones tool results (their ``output``;
the call id from the OTel attributes Langfuse keeps in ``metadata``: ``gen_ai.tool.call.id``,
``tool_call.id``, else none); every other type (``SPAN``, ``AGENT``, ``EVENT`` ...) is a
``Skipped``, by type. The conversation is the session id, else the trace id. An observation of
a trace download that cannot be read is a ``Rejected`` (a dead letter of its own), and the
trace's other observations are read.

Langfuse keeps ``input`` and ``output`` as the instrumentation wrote them: OpenAI chat messages,
Responses items, Gemini requests, OTel GenAI parts or events, plain text. They are read by the
reader the payload's own shape calls for (``transforms.calllogs.embedded``). A Responses object
as output (the OpenAI Agents SDK) gives its ``output`` items, and its echoed ``instructions`` a
leading system message when the history has none. Tools: those of the payloads, else the
``gen_ai.tool.definitions`` / ``llm.tools.<i>.tool.json_schema`` attributes in ``metadata``,
else Langfuse's ``tool_definitions`` (name to parameters).
"""

from __future__ import annotations

import threading
from typing import Any

from transforms.calllogs import genai, openinference
from transforms.calllogs.calls import (
    Call,
    CallLogReader,
    ReadItem,
    Rejected,
    Skipped,
    ToolResult,
    register_call_log_reader,
)
from transforms.calllogs.context import call_context, first_set
from transforms.calllogs.embedded import (
    Embedded,
    as_dict,
    decoded,
    merged_ledgers,
    part_text,
    parts_read,
    plain_chat,
    plain_flat,
    read_history,
    read_output,
    response_ids,
    result_text,
    role_and_text_only,
    strict_flat,
    tools_of,
)
from transforms.calllogs.times import time_nanos
from transforms.core.jsontext import loads_as_json
from transforms.core.normalize import content_text
from transforms.formats.base import FormatError

NAME = "langfuse"
_CALL_TYPES = frozenset(("GENERATION",))
_TOOL_TYPES = frozenset(("TOOL",))
_SNAKE = {"trace": "trace_id", "start": "start_time", "session": "session_id", "model": "provided_model_name"}
_CAMEL = {"trace": "traceId", "start": "startTime", "session": "sessionId", "model": "model"}


def _field(observation: dict[str, Any], name: str) -> Any:
    value = observation.get(_SNAKE[name])
    if value is None:
        value = observation.get(_CAMEL[name])
    return value


def _attributes(observation: dict[str, Any]) -> dict[str, Any]:
    metadata = decoded(observation.get("metadata"))
    attributes = metadata.get("attributes") if isinstance(metadata, dict) else None
    return attributes if isinstance(attributes, dict) else {}


def _text(value: Any) -> str:
    return "" if value is None else content_text(value)


def _group(observation: dict[str, Any], session: Any) -> str:
    for value in (session, _field(observation, "session"), _field(observation, "trace")):
        if value not in (None, ""):
            return _text(value)
    return _text(observation.get("id"))


def _tools(observation: dict[str, Any], *found: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    for tools in found:
        if tools:
            return tools
    attributes = _attributes(observation)
    if attributes:  # (none: no tools there, without asking)
        tools = tools_of(attributes.get("gen_ai.tool.definitions")) or openinference.tools(attributes)
        if tools:
            return tools
    definitions = observation.get("tool_definitions", observation.get("toolDefinitions"))
    if definitions is None:
        return None
    definitions = decoded(definitions)
    if isinstance(definitions, dict) and definitions:
        return [
            {"type": "function", "function": {"name": name, "parameters": decoded(schema)}}
            for name, schema in definitions.items()
        ]
    return None


def _is_definition(message: Any) -> bool:
    """A ``tool`` message whose content is a tool definition: Langfuse's LangChain callback
    handler lists the tools offered that way, among the messages."""
    if not isinstance(message, dict) or message.get("role") != "tool" or "tool_call_id" in message:
        return False
    content = message.get("content")
    return isinstance(content, dict) and content.get("type") == "function" and isinstance(content.get("function"), dict)


def _langchain_message(message: Any) -> Any:
    """A LangChain message dict whose calls are only in ``additional_kwargs.tool_calls`` (OpenAI's
    form), with them lifted to ``tool_calls`` for the OpenAI reader."""
    if not isinstance(message, dict) or message.get("tool_calls"):
        return message
    extra = as_dict(message.get("additional_kwargs"))
    calls = extra.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return message
    return {**{k: v for k, v in message.items() if k != "additional_kwargs"}, "tool_calls": calls}


def _langchain(payload: Any) -> tuple[Any, list[dict[str, Any]] | None]:
    """The payload with the LangChain callback handler's quirks undone, and the tools it listed
    among the messages (``None`` when none)."""
    payload = decoded(payload)
    if isinstance(payload, dict):
        return _langchain_message(payload), None
    if not isinstance(payload, list):
        return payload, None
    definitions = [m["content"] for m in payload if _is_definition(m)]
    messages = [_langchain_message(m) for m in payload if not _is_definition(m)]
    return messages, tools_of(definitions)


def _history(payload: Any, where: str, group: str) -> tuple[Embedded, list[dict[str, Any]] | None, bool, Any]:
    """The messages a generation sent, the tools its LangChain handler listed among them,
    whether the messages are in the flat shape already (``strict_flat`` would copy them), and
    the request as read (``response_ids`` looks in it; ``None`` for a plain chat: no request
    body, no response id).

    A call's history is the one before it and more, read again at every call. A plain chat
    (``embedded.plain_chat``: string roles and contents, nothing else, no tool message) that
    holds no Koog call entry is its own reading: the LangChain quirks, Koog's entries and
    every provider reader's detection leave it as it is and the flat reader reads it. Such a
    history, kept as JSON text, is read once per group: the text of the group's previous one
    less its closing bracket, then more entries, is read as that one's messages and the new
    entries alone (``_recent``)."""
    text = payload.strip() if isinstance(payload, str) else None
    if text is not None and text[:1] == "[":
        known = _recent_history(text, group)
        if known is not None:
            return Embedded(known), None, True, None
    read = decoded(payload)
    flat = _plain_flat(read)
    if flat is not None:
        if text is not None:
            _remember(group, text, flat)
        return Embedded(flat), None, True, None
    history_payload, listed_tools = _langchain(payload)
    history_payload = genai.koog_messages(history_payload)
    return read_history(history_payload, f"{where} input"), listed_tools, False, history_payload


def _plain_flat(read: Any) -> list[dict[str, Any]] | None:
    """A plain chat without Koog entries or tool messages, in the flat shape; else ``None``."""
    fast = plain_flat(read)  # nearly every history, in one pass
    if fast is not None:
        return fast
    if not plain_chat(read) or genai.koog_messages(read) is not read:
        return None
    return role_and_text_only(read)


class _Recent(threading.local):
    """Each thread's last plain history per group, as text and flat messages (a few groups:
    the calls of a trace come together in an export)."""

    def __init__(self) -> None:
        self.histories: dict[str, tuple[str, list[dict[str, Any]]]] = {}
        #: The last contexts made (``langfuse_context``), by the fields they were made of.
        self.contexts: dict[tuple[Any, ...], dict[str, Any]] = {}


_recent = _Recent()
#: The groups whose last history is kept, at most.
RECENT_GROUPS = 64


def _remember(group: str, text: str, flat: list[dict[str, Any]]) -> None:
    histories = _recent.histories
    histories.pop(group, None)
    if len(histories) >= RECENT_GROUPS:
        del histories[next(iter(histories))]
    histories[group] = (text, flat)


def _recent_history(text: str, group: str) -> list[dict[str, Any]] | None:
    """The flat messages of ``text`` (a JSON list) when it continues the group's last plain
    history: that text less its closing bracket, then a comma and more entries, themselves a
    plain chat. A JSON list is its entries in a row, each read on its own, so the entries
    after the comma, read as a list, are the new ones; the text is then valid JSON exactly
    when they are. ``None`` otherwise (the caller reads the whole text)."""
    last = _recent.histories.get(group)
    if last is None:
        return None
    before, flat = last
    head = before[:-1]
    if not flat or not text.endswith("]") or not text.startswith(head):
        return None
    rest = text[len(head) :].lstrip()
    if rest[:1] != ",":
        return None
    try:
        more = loads_as_json("[" + rest[1:])
    except ValueError:
        return None
    # (None but a list of entries: ``[a,]`` is no JSON though ``[]`` is.)
    added = _plain_flat(more) if isinstance(more, list) and more else None
    if added is None:
        return None
    messages = [*flat, *added]
    _remember(group, text, messages)
    return messages


def _output(payload: Any, read: Any, where: str) -> tuple[Embedded, Any]:
    """The messages a generation got back (``read``: the payload decoded), and the response as
    read (``None`` for a plain message: no response object); a plain message (as ``_history``:
    Koog's entries are read in lists only) is its own reading."""
    if isinstance(read, dict) and plain_chat([read]):
        return Embedded([read]), None
    output_payload, _ = _langchain(payload)
    output_payload = genai.koog_messages(output_payload, output=True)
    return read_output(output_payload, f"{where} output"), output_payload


def _call(observation: dict[str, Any], session: Any, context: dict[str, Any] | None) -> Call:
    call_id = _text(observation.get("id"))
    where = f"observation {call_id}"
    group = _group(observation, session)
    history, listed_tools, flat, history_payload = _history(observation.get("input"), where, group)
    recorded = decoded(observation.get("output"))
    plain_output = plain_flat([recorded]) if flat and recorded.__class__ is dict else None
    if plain_output is not None:
        # A plain chat sent and a plain message got back (nearly every call): what the general
        # path below makes of them, without its passes (no instructions, nothing for the
        # ledger, no tools in the payloads, no response object).
        model = _field(observation, "model")
        return Call(
            NAME,
            group,
            time_nanos(_field(observation, "start"), f"{where} start time"),
            call_id,
            history.messages,
            plain_output,
            _tools(observation),
            model if isinstance(model, str) and model else None,
            context=context,
        )
    output, output_payload = _output(observation.get("output"), recorded, where)
    messages = history.messages
    instructions = recorded.get("instructions") if isinstance(recorded, dict) else None
    if (
        isinstance(instructions, str)
        and instructions
        and not (messages and as_dict(messages[0]).get("role") == "system")
    ):
        # A Responses object echoes the request's instructions, which the recorded input lacks.
        messages = [{"role": "system", "content": instructions}, *messages]
        flat = False
    model = _field(observation, "model") or history.model or output.model
    ledger = merged_ledgers(history.discarded, output.discarded) or {}
    messages = messages if flat else strict_flat(messages, ledger)
    outputs = strict_flat(output.messages, ledger)
    return Call(
        NAME,
        group,
        time_nanos(_field(observation, "start"), f"{where} start time"),
        call_id,
        messages,
        outputs,
        _tools(observation, history.tools, listed_tools, output.tools),
        model if isinstance(model, str) else None,
        ledger or None,
        output.truncated,
        *response_ids(history_payload, output_payload),
        context,
    )


def _tool_result(observation: dict[str, Any], session: Any) -> ToolResult | None:
    output = observation.get("output")
    if output is None or output == "":
        return None  # no result recorded
    attributes = _attributes(observation)
    call_id = attributes.get("gen_ai.tool.call.id", attributes.get("tool_call.id", attributes.get("tool.id", "")))
    where = f"observation {_text(observation.get('id'))}"
    return ToolResult(
        NAME,
        _group(observation, session),
        time_nanos(_field(observation, "start"), f"{where} start time"),
        _text(observation.get("id")),
        _text(call_id).strip(),
        _text(observation.get("name")),
        result_text(output),
    )


#: The context's fields of an observation (snake and camel case), then of its trace (camel first).
_CONTEXT_FIELDS = (
    ("user_id", "userId"),
    ("session_id", "sessionId"),
    ("tags", "tags"),
    ("environment", "environment"),
    ("release", "release"),
)


def langfuse_context(observation: dict[str, Any], trace: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A call's context (``transforms.calllogs.context``): the enriched observation's own
    ``user_id``, ``session_id``, ``tags``, ``environment``, ``release`` (snake or camel case),
    else its trace's (a download)."""
    trace = trace or {}
    found = []
    for snake, camel in _CONTEXT_FIELDS:
        value = observation.get(snake)
        if value is None or value == "":
            value = observation.get(camel)
        if value is None or value == "":
            value = first_set(trace.get(camel), trace.get(snake)) if trace else None
        found.append(value)
    user_id, session_id, tags, environment, release = found
    fields = (user_id, session_id, first_set(_field(observation, "trace"), trace.get("id")), tags, environment, release)
    # The calls of a trace come together and name the same: made once, while the values are
    # texts (a number would be found under an equal one of another type: 1, 1.0, True).
    texts = all(value is None or value.__class__ is str for value in fields)
    known = _recent.contexts.get(fields) if texts else None
    if known is not None:
        return known
    user_id, session_id, trace_id, tags, environment, release = fields
    context = call_context(
        user_id=user_id,
        session_id=session_id,
        trace_id=trace_id,
        tags=decoded(tags),
        environment=environment,
        release=release,
    )
    if texts and context is not None:
        contexts = _recent.contexts
        if len(contexts) >= RECENT_GROUPS:
            contexts.clear()
        contexts[fields] = context
    return context


def observation_pieces(observation: Any, session: Any = None, trace: dict[str, Any] | None = None) -> list[ReadItem]:
    """The piece one observation gives (``session``: the trace's session id, for a download),
    or a ``Skipped`` by its type (``span``, ``agent``, ``event`` ...)."""
    if not isinstance(observation, dict):
        raise FormatError("bad_observation", f"an observation is {type(observation).__name__}, not an object")
    kind = observation.get("type")
    kind = kind.upper() if isinstance(kind, str) else ""
    if kind in _CALL_TYPES:
        call = _call(observation, session, langfuse_context(observation, trace))
        # A generation that recorded neither input nor output (BeeAI's start / finish events
        # are generations of their own) has nothing to rebuild from.
        return [call] if call.history or call.output else [Skipped("llm_without_messages")]
    if kind in _TOOL_TYPES:
        result = _tool_result(observation, session)
        return [Skipped("tool_without_result")] if result is None else [result]
    return [Skipped(kind.lower() or "other")]


def _rejected(trace: dict[str, Any], session: Any, index: int, observation: Any, error: FormatError) -> Rejected:
    """An observation of a trace download that cannot be read: a dead letter of its own."""
    found = as_dict(observation)
    own = _text(found.get("id")) or f"#{index}"
    group = next(
        (_text(v) for v in (session, _field(found, "session"), _field(found, "trace"), trace.get("id")) if v),
        own,
    )
    try:
        start = time_nanos(_field(found, "start"), "start time")
    except FormatError:
        start = 0
    detail = f"{NAME}: observation {index} (id {own}): {error.reason}: {error}"
    return Rejected(NAME, group, start, own, error.reason, detail, part_text(observation))


def read_langfuse(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict):
        raise FormatError("not_langfuse", "a Langfuse record is an object")
    if "observations" in record:
        observations = record["observations"]
        if not isinstance(observations, list):
            raise FormatError("bad_observations", "'observations' is not a list")
        trace = as_dict(record.get("trace"))
        session = trace.get("sessionId", trace.get("session_id"))
        return parts_read(
            observations,
            lambda observation: observation_pieces(observation, session, trace),
            lambda index, observation, error: _rejected(trace, session, index, observation, error),
        )
    if "type" not in record:
        raise FormatError("missing_type", "a Langfuse observation has a type")
    return observation_pieces(record)


def detect_langfuse(record: Any) -> bool:
    if "observations" in record:
        return isinstance(record.get("trace"), dict)
    if "parent_observation_id" in record:
        return "trace_id" in record and "type" in record
    if "parentObservationId" in record:
        return "traceId" in record and "type" in record
    return False


LANGFUSE_READER = register_call_log_reader(
    CallLogReader(
        NAME,
        read_langfuse,
        detect_langfuse,
        20,
        "Langfuse observations (blob-storage export rows, API / UI rows) and a trace's JSON download",
    )
)
