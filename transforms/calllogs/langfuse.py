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
from transforms.calllogs.embedded import (
    as_dict,
    decoded,
    merged_ledgers,
    part_text,
    parts_read,
    read_history,
    read_output,
    response_ids,
    result_text,
    strict_flat,
    tools_of,
)
from transforms.calllogs.times import time_nanos
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
    tools = tools_of(attributes.get("gen_ai.tool.definitions")) or openinference.tools(attributes)
    if tools:
        return tools
    definitions = decoded(observation.get("tool_definitions", observation.get("toolDefinitions")))
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


def _call(observation: dict[str, Any], session: Any) -> Call:
    where = f"observation {_text(observation.get('id'))}"
    history_payload, listed_tools = _langchain(observation.get("input"))
    output_payload, _ = _langchain(observation.get("output"))
    history_payload = genai.koog_messages(history_payload)
    output_payload = genai.koog_messages(output_payload, output=True)
    history = read_history(history_payload, f"{where} input")
    output = read_output(output_payload, f"{where} output")
    messages = history.messages
    instructions = decoded(observation.get("output"))
    instructions = instructions.get("instructions") if isinstance(instructions, dict) else None
    if (
        isinstance(instructions, str)
        and instructions
        and not (messages and as_dict(messages[0]).get("role") == "system")
    ):
        # A Responses object echoes the request's instructions, which the recorded input lacks.
        messages = [{"role": "system", "content": instructions}, *messages]
    model = _field(observation, "model") or history.model or output.model
    ledger = merged_ledgers(history.discarded, output.discarded) or {}
    messages = strict_flat(messages, ledger)
    outputs = strict_flat(output.messages, ledger)
    return Call(
        NAME,
        _group(observation, session),
        time_nanos(_field(observation, "start"), f"{where} start time"),
        _text(observation.get("id")),
        messages,
        outputs,
        _tools(observation, history.tools, listed_tools, output.tools),
        model if isinstance(model, str) else None,
        ledger or None,
        output.truncated,
        *response_ids(history_payload, output_payload),
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


def observation_pieces(observation: Any, session: Any = None) -> list[ReadItem]:
    """The piece one observation gives (``session``: the trace's session id, for a download),
    or a ``Skipped`` by its type (``span``, ``agent``, ``event`` ...)."""
    if not isinstance(observation, dict):
        raise FormatError("bad_observation", f"an observation is {type(observation).__name__}, not an object")
    kind = observation.get("type")
    kind = kind.upper() if isinstance(kind, str) else ""
    if kind in _CALL_TYPES:
        call = _call(observation, session)
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
            lambda observation: observation_pieces(observation, session),
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
