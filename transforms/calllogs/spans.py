"""Trace spans: OTLP JSON documents and span rows, OpenTelemetry GenAI and OpenInference LLM spans.

Two readers, by container:

- ``otlp``: one OTLP JSON traces document per record, as the collector's file exporter writes
  a line (``{"resourceSpans": [{"resource", "scopeSpans": [{"scope", "spans": [...]}]}]}``;
  also the older ``instrumentationLibrarySpans`` and snake_case keys). Attributes are
  key / typed-value lists (``stringValue``, ``intValue`` as a string or a number,
  ``doubleValue``, ``boolValue``, ``arrayValue``, ``kvlistValue``, ``bytesValue``; or their
  snake_case spellings). One document may hold many spans of many traces. An OTLP *logs*
  document (``resourceLogs``: GenAI events written as log records) is read too
  (``_log_pieces``).
- ``span-rows``: one span per record with a flat ``attributes`` object (Phoenix span JSON, the
  Python SDK's console exporter, ``context.trace_id`` / ``span_id``, ISO ``start_time``).

Each span is read by the convention it follows, decided span by span (one export may mix
them): an OpenInference span (``openinference.span.kind`` or ``llm.*_messages`` keys) by
``transforms.calllogs.openinference``; a span of the Langfuse SDK (``langfuse.observation.*``)
as the observation it stands for (``transforms.calllogs.langfuse``); an OpenTelemetry GenAI
span by the rules below; any other span (HTTP, database, agent and chain spans, an LLM span
whose content capture was off so that it recorded no message) is a ``Skipped``, by kind. Trace
and span ids lose a ``0x`` prefix and are lower-cased (one id whatever the exporter). A span of
a document of many that cannot be read is a ``Rejected`` (a dead letter of its own); the
document's other spans are read. Tool executions (GenAI ``execute_tool`` spans with
a ``gen_ai.tool.call.result``, OpenInference ``TOOL`` spans with an ``output.value``) give
``ToolResult`` pieces.

GenAI, where each part of a call is found, first match wins: system instructions in
``gen_ai.system_instructions`` (or the ``gen_ai.system.instructions`` some emitters write);
the history in ``gen_ai.input.messages`` (GenAI parts or an OpenAI-style list), else the 1.26
``gen_ai.prompt`` attribute or ``gen_ai.content.prompt`` event, else the indexed
``gen_ai.prompt.<N>.*`` attributes, else the per-message events (span events named
``gen_ai.user.message`` ..., or the JSON ``events`` attribute); the output likewise from
``gen_ai.output.messages`` (its first choice), ``gen_ai.completion`` / ``gen_ai.content.completion``,
``gen_ai.completion.0.*``, the ``gen_ai.choice`` event. Tools from ``gen_ai.tool.definitions``
or ``llm.request.functions.<N>.*``. The conversation: ``gen_ai.conversation.id``, else
``session.id``, else ``traceloop.association.properties.session_id`` (on the span, then on its
resource), else the trace id.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from transforms.calllogs import genai, langfuse, openinference
from transforms.calllogs.calls import (
    Call,
    CallLogReader,
    Fragment,
    Label,
    Piece,
    ReadItem,
    Rejected,
    Skipped,
    ToolResult,
    register_call_log_reader,
    register_joiner,
)
from transforms.calllogs.context import call_context, first_set
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

OTLP = "otlp"
_ROW_PREFIXES = ("gen_ai.", "llm.", "openinference.")
_OTLP_KEYS = frozenset(("resourceSpans", "resource_spans", "resourceLogs", "resource_logs"))
SPAN_ROWS = "span-rows"

_GROUP_KEYS = (
    "gen_ai.conversation.id",
    "session.id",
    "langfuse.session.id",
    "traceloop.association.properties.session_id",
)
#: The Langfuse SDK's own span attributes (its OTLP export): the observation's type, payloads
#: (JSON text) and model.
LANGFUSE_TYPE = "langfuse.observation.type"
_LANGFUSE_INPUT = "langfuse.observation.input"
_LANGFUSE_OUTPUT = "langfuse.observation.output"
_LANGFUSE_MODEL = "langfuse.observation.model.name"
#: OpenInference's span kinds: a span row's ``span_kind`` is one of these in Phoenix's export;
#: any other value (``CLIENT``, ``SPAN_KIND_INTERNAL``: OpenTelemetry's own kinds) is not.
_OI_KINDS = frozenset(
    ("LLM", "TOOL", "CHAIN", "AGENT", "RETRIEVER", "EMBEDDING", "RERANKER", "GUARDRAIL", "EVALUATOR", "PROMPT")
)
_HEX_ID = re.compile(r"\A(?:0[xX])?([0-9a-fA-F]+)\Z")
_SYSTEM_KEYS = ("gen_ai.system_instructions", "gen_ai.system.instructions")
_LLM_OPERATIONS = frozenset(("chat", "text_completion", "generate_content"))
_PROMPT_EVENT = "gen_ai.content.prompt"
_COMPLETION_EVENT = "gen_ai.content.completion"
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
#: Where an ``execute_tool`` span keeps its result: the convention's attribute, then the
#: ``output.value`` / ``output`` that OpenInference's GenAI converter and its fixtures use.
_RESULT_KEYS = ("gen_ai.tool.call.result", "output.value", "output")
#: Attributes only an LLM span's content has.
_CONTENT_KEYS = frozenset(
    ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt", "gen_ai.completion", *_SYSTEM_KEYS)
)
#: Span events that hold a call's messages.
_LLM_EVENTS = frozenset((*genai.EVENT_ROLES, genai.CHOICE_EVENT, _PROMPT_EVENT, _COMPLETION_EVENT, _DETAILS_EVENT))
_SCALARS = (
    ("stringValue", "string_value"),
    ("boolValue", "bool_value"),
    ("doubleValue", "double_value"),
    ("bytesValue", "bytes_value"),
)


# --------------------------------------------------------------------------------------------
# OTLP JSON values


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` (``{"stringValue": ...}``, ``{"intValue": "57"}``, arrays, key-value
    lists; camelCase or snake_case) as a plain value; an empty one is ``None``."""
    if not isinstance(value, dict):
        return value
    for camel, snake in _SCALARS:
        if camel in value:
            return value[camel]
        if snake in value:
            return value[snake]
    for key in ("intValue", "int_value"):
        if key in value:
            raw = value[key]
            try:
                return int(raw)
            except (TypeError, ValueError):
                raise FormatError("bad_attribute", f"intValue {raw!r:.40} is not an integer") from None
    for key in ("arrayValue", "array_value"):
        if key in value:
            return [any_value(v) for v in _list(as_dict(value[key]).get("values"))]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value:
            return attributes_of(_list(as_dict(value[key]).get("values")))
    return None


def attributes_of(value: Any) -> dict[str, Any]:
    """Span, event or resource attributes as a flat dict: an OTLP list of ``{key, value}``
    decoded, a dict (span rows) as it is; anything else is no attributes."""
    if isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for entry in value if isinstance(value, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("key"), str):
            out[entry["key"]] = any_value(entry.get("value"))
    return out


def _get(obj: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in obj:
            return obj[key]
    return None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def otlp_spans(record: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Every span of an OTLP traces document, with its resource's attributes."""
    for resource_spans in _list(_get(record, "resourceSpans", "resource_spans")):
        if not isinstance(resource_spans, dict):
            raise FormatError("bad_otlp", "a resourceSpans entry is not an object")
        resource = resource_spans.get("resource")
        resource_attributes = attributes_of(resource.get("attributes")) if isinstance(resource, dict) else {}
        scopes = _get(resource_spans, "scopeSpans", "scope_spans", "instrumentationLibrarySpans")
        for scope_spans in _list(scopes):
            for span in _list(scope_spans.get("spans") if isinstance(scope_spans, dict) else None):
                if not isinstance(span, dict):
                    raise FormatError("bad_otlp", "a span is not an object")
                yield span, resource_attributes


# --------------------------------------------------------------------------------------------
# One span


class Span:
    """What every span container gives: ids, start, attributes, events (name, attributes)."""

    __slots__ = ("trace_id", "span_id", "start", "attributes", "events", "resource")

    def __init__(
        self,
        trace_id: str,
        span_id: str,
        start: int,
        attributes: dict[str, Any],
        events: list[tuple[str, dict[str, Any]]],
        resource: dict[str, Any],
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.start = start
        self.attributes = attributes
        self.events = events
        self.resource = resource


def span_id_text(value: Any) -> str:
    """A trace or span id as text, hex ids without a ``0x`` prefix and in lower case: the same
    span gets the same id whichever exporter wrote it (Phoenix and the console exporter write
    ``0x5b8e...``, OTLP JSON ``5b8e...``)."""
    text = content_text(value).strip()
    match = _HEX_ID.match(text)
    return match.group(1).lower() if match else text


def _otlp_span(span: dict[str, Any], resource: dict[str, Any]) -> Span:
    events = []
    for event in _list(span.get("events")):
        if isinstance(event, dict):
            events.append((content_text(event.get("name")), attributes_of(event.get("attributes"))))
    start = time_nanos(_get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano")
    return Span(
        span_id_text(_get(span, "traceId", "trace_id")),
        span_id_text(_get(span, "spanId", "span_id")),
        start,
        attributes_of(span.get("attributes")),
        events,
        resource,
    )


#: Attributes only OpenInference writes (beside ``llm.*`` and ``openinference.*``).
_OI_KEYS = frozenset(("input.value", "output.value", "tool.name", "tool.id", "tool_call.id"))


def _speaks_genai_only(attributes: dict[str, Any]) -> bool:
    """The attributes follow the GenAI conventions and none of OpenInference's: a row's kind
    beside them (an exporter's ``LLM`` or ``TOOL`` label) does not make them OpenInference's."""
    genai_keys = False
    for key in attributes:
        if key.startswith(("llm.", "openinference.")) or key in _OI_KEYS:
            return False
        genai_keys = genai_keys or key.startswith("gen_ai.")
    return genai_keys


def _row_span(row: dict[str, Any]) -> Span:
    context = as_dict(row.get("context"))
    events = []
    for event in _list(row.get("events")):
        if isinstance(event, dict):
            events.append((content_text(event.get("name")), attributes_of(event.get("attributes"))))
    resource = row.get("resource")
    resource_attributes = attributes_of(resource.get("attributes")) if isinstance(resource, dict) else {}
    attributes = attributes_of(row.get("attributes"))
    kind = row.get("span_kind")
    if (
        isinstance(kind, str)
        and kind.upper() in _OI_KINDS
        and openinference.SPAN_KIND not in attributes
        and not _speaks_genai_only(attributes)
    ):
        # Phoenix's span JSON keeps the OpenInference kind beside the attributes, not among
        # them; the console exporter's ``span_kind`` is OpenTelemetry's (``CLIENT`` ...), which
        # says nothing of the convention the attributes follow.
        attributes = {**attributes, openinference.SPAN_KIND: kind}
    return Span(
        span_id_text(_get(context, "trace_id", "traceId") or _get(row, "trace_id", "traceId")),
        span_id_text(_get(context, "span_id", "spanId") or _get(row, "span_id", "spanId", "id")),
        time_nanos(_get(row, "start_time", "startTime", "startTimeUnixNano"), "start_time"),
        attributes,
        events,
        resource_attributes,
    )


def _group(span: Span) -> str:
    for attributes in (span.attributes, span.resource):
        for key in _GROUP_KEYS:
            value = attributes.get(key)
            if value not in (None, ""):
                return content_text(value)
    return span.trace_id


_USER_KEYS = ("user.id", "langfuse.user.id", "enduser.id", "traceloop.association.properties.user_id")
_TAG_KEYS = ("tag.tags", "langfuse.trace.tags")
_ENVIRONMENT_KEYS = ("deployment.environment.name", "deployment.environment", "langfuse.environment")
_RELEASE_KEYS = ("langfuse.release", "service.version")


def _attribute(span: Span, keys: tuple[str, ...]) -> Any:
    """The first of ``keys`` set on the span, else on its resource."""
    return first_set(*(attributes.get(key) for attributes in (span.attributes, span.resource) for key in keys))


def span_context(span: Span) -> dict[str, Any] | None:
    """A span's context (``transforms.calllogs.context``): OpenInference's and the GenAI
    conventions' ``user.id`` and ``session.id`` (Langfuse's and Traceloop's spellings too),
    ``tag.tags``, the resource's ``deployment.environment`` and ``service.version``, the trace id."""
    tags = _attribute(span, _TAG_KEYS)
    return call_context(
        user_id=_attribute(span, _USER_KEYS),
        session_id=_attribute(span, _GROUP_KEYS[1:]),
        trace_id=span.trace_id,
        tags=decoded(tags) if isinstance(tags, str) and tags.startswith("[") else tags,
        environment=_attribute(span, _ENVIRONMENT_KEYS),
        release=_attribute(span, _RELEASE_KEYS),
    )


def _contextual_pieces(fmt: str, span: Span, row: dict[str, Any] | None = None) -> list[ReadItem]:
    """``span_pieces``, its call with the span's context, and the evaluations it carries as
    labels (``evaluation_labels``: in its attributes, or beside them in a span row)."""
    pieces = span_pieces(fmt, span)
    found = [piece._replace(context=span_context(span)) if isinstance(piece, Call) else piece for piece in pieces]
    return found + evaluation_labels(span, span.attributes) + (evaluation_labels(span, row) if row else [])


#: The label reader's name (``labels.PHOENIX_ANNOTATIONS``: that module imports this one).
_ANNOTATIONS = "phoenix-annotations"
#: A span export's evaluations and annotations: Phoenix's ``eval.<name>.label`` / ``.score`` /
#: ``.explanation`` (a TraceDataset's spans with their evaluations), Arize's
#: ``annotation.<name>.label`` / ``.score`` / ``.text``.
_EVALUATION = re.compile(r"\A(eval|annotation)\.(.+)\.(label|score|explanation|text)\Z")


def evaluation_labels(span: Span, fields: dict[str, Any]) -> list[ReadItem]:
    """The evaluations a span carries, one label a name (the score, else the label; the
    explanation as its comment), on the span's call."""
    found: dict[str, dict[str, Any]] = {}
    for key, value in fields.items():
        match = _EVALUATION.match(key) if isinstance(key, str) and key[:1] in "ea" else None
        if match is not None and value is not None and value != "":
            found.setdefault(match.group(2), {})[match.group(3)] = value
    labels: list[ReadItem] = []
    for name in sorted(found):
        parts = found[name]
        score, label = parts.get("score"), parts.get("label")
        value = score if isinstance(score, (int, float)) and score == score else label
        if not isinstance(value, (int, float, str)) or value == "":
            continue
        comment = parts.get("explanation", parts.get("text"))
        labels.append(
            Label(
                _ANNOTATIONS,
                span.trace_id or span.span_id,
                span.start,
                span.span_id,
                "phoenix",
                f"{span.span_id}:{name}",
                name,
                value,
                span.trace_id,
                comment if isinstance(comment, str) and comment else None,
            )
        )
    return labels


def _operation(attributes: dict[str, Any]) -> str:
    operation = attributes.get("gen_ai.operation.name")
    return operation if isinstance(operation, str) else ""


def _event(span: Span, name: str) -> dict[str, Any] | None:
    for event_name, attributes in span.events:
        if event_name == name:
            return attributes
    return None


def _is_genai_llm(span: Span) -> bool:
    attributes = span.attributes
    if not _CONTENT_KEYS.isdisjoint(attributes) or "gen_ai.prompt.0.role" in attributes:
        return True
    if _operation(attributes) in _LLM_OPERATIONS:
        return True
    return any(name in _LLM_EVENTS for name, _ in span.events)


def _genai_history(span: Span, where: str, ledger: dict[str, Any]) -> list[Any]:
    attributes = span.attributes
    details = _event(span, _DETAILS_EVENT) or {}
    system_value = next((a[k] for a in (attributes, details) for k in _SYSTEM_KEYS if k in a), None)
    system = genai.system_to_flat(decoded(system_value), ledger)
    for source in (attributes, details):
        if "gen_ai.input.messages" in source:
            return system + _messages(source["gen_ai.input.messages"], where, ledger)
    prompt = attributes.get("gen_ai.prompt")
    if prompt is None:
        prompt = (_event(span, _PROMPT_EVENT) or {}).get("gen_ai.prompt")
    if prompt is not None:
        return system + _messages(prompt, where, ledger)
    entries = genai.indexed(attributes, "gen_ai.prompt")
    if entries:
        messages = [genai.indexed_message(entry) for entry in entries]
        return system + genai.answered_in_order(messages, "tool_call_id")
    events = _events(span)
    return system + genai.event_messages(events, ledger)[0]


def _events(span: Span) -> list[dict[str, Any]]:
    listed = decoded(span.attributes.get("events"))
    if genai.is_event_list(listed):
        return [e for e in listed if isinstance(e, dict)]
    return [{**attributes, "event.name": name} for name, attributes in span.events]


def _messages(value: Any, where: str, ledger: dict[str, Any]) -> list[Any]:
    value = decoded(value)
    if genai.is_genai_messages(value):
        return genai.genai_to_flat(value, ledger)
    read = read_history(value, where)
    if read.discarded:
        ledger.update(merged_ledgers(ledger, read.discarded) or {})
    return read.messages


def _genai_output(span: Span, where: str, ledger: dict[str, Any]) -> list[Any]:
    attributes = span.attributes
    details = _event(span, _DETAILS_EVENT) or {}
    for source in (attributes, details):
        if "gen_ai.output.messages" in source:
            choices = decoded(source["gen_ai.output.messages"])
            if isinstance(choices, list):
                return _messages(choices[:1], where, ledger) if choices else []
            return _completion(choices, where, ledger)
    completion = attributes.get("gen_ai.completion")
    if completion is None:
        completion = (_event(span, _COMPLETION_EVENT) or {}).get("gen_ai.completion")
    if completion is not None:
        return _completion(decoded(completion), where, ledger)
    entries = genai.indexed(attributes, "gen_ai.completion")
    if entries:
        return [genai.indexed_message(entries[0])]
    return genai.event_messages(_events(span), ledger)[1]


def _completion(value: Any, where: str, ledger: dict[str, Any]) -> list[Any]:
    """A 1.26 completion: a list of messages (the first choice), or ``{text, finish_reason}``."""
    if isinstance(value, list):
        return _messages(value[:1], where, ledger) if value else []
    if isinstance(value, dict) and "text" in value and "role" not in value:
        return [{"role": "assistant", "content": content_text(value["text"])}]
    read = read_output(value, where)
    if read.discarded:
        ledger.update(merged_ledgers(ledger, read.discarded) or {})
    return read.messages


def _genai_tools(attributes: dict[str, Any]) -> list[dict[str, Any]] | None:
    tools = tools_of(attributes.get("gen_ai.tool.definitions"))
    if tools is not None:
        return tools
    functions = []
    for entry in genai.indexed(attributes, "llm.request.functions"):
        function: dict[str, Any] = {"name": entry.get("name")}
        if entry.get("description") is not None:
            function["description"] = entry["description"]
        if "parameters" in entry:
            function["parameters"] = decoded(entry["parameters"])
        functions.append({"type": "function", "function": function})
    return functions or None


def _model(attributes: dict[str, Any]) -> str | None:
    for key in ("gen_ai.response.model", "gen_ai.request.model"):
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _skipped_kind(attributes: dict[str, Any]) -> str:
    """What a span that is no call and no tool result is, for the skipped counts: its GenAI
    operation (``invoke_agent``, ``embeddings`` ...), else ``http``, ``db`` or ``rpc`` by its
    attributes, else ``other``."""
    operation = _operation(attributes)
    if operation:
        return operation
    for prefix, kind in (("http.", "http"), ("url.", "http"), ("db.", "db"), ("rpc.", "rpc")):
        if any(key.startswith(prefix) for key in attributes):
            return kind
    return "other"


def _langfuse_pieces(fmt: str, span: Span, kind: str) -> list[ReadItem]:
    """A span of the Langfuse SDK (``langfuse.observation.*``), read as the observation it
    stands for: a generation is a call, a tool a tool result, anything else is skipped."""
    attributes = span.attributes
    observation = {
        "id": span.span_id,
        "type": kind,
        "input": attributes.get(_LANGFUSE_INPUT),
        "output": attributes.get(_LANGFUSE_OUTPUT),
        "model": attributes.get(_LANGFUSE_MODEL),
        "metadata": {"attributes": attributes},
    }
    pieces = langfuse.observation_pieces(observation)
    out: list[ReadItem] = []
    for piece in pieces:
        if isinstance(piece, (Call, ToolResult)):
            out.append(piece._replace(format=fmt, group=_group(span), start=span.start, call_id=span.span_id))
        else:
            out.append(piece)
    return out


def span_pieces(fmt: str, span: Span) -> list[ReadItem]:
    """The pieces one span gives: a ``Call``, a ``ToolResult``, or a ``Skipped`` (a span of
    neither, by kind)."""
    attributes = span.attributes
    where = f"span {span.span_id}"
    if openinference.is_openinference(attributes):
        kind = openinference.span_kind(attributes)
        if kind == "TOOL":
            found = openinference.tool_result(attributes)
            if found is None:
                return [Skipped("tool_without_result")]
            call_id, name, content = found
            return [ToolResult(fmt, _group(span), span.start, span.span_id, call_id, name, content)]
        if kind != "LLM":
            return [Skipped(kind.lower() or "other")]
        if not openinference.has_messages(attributes):
            return [Skipped("llm_without_messages")]
        ledger: dict[str, Any] = {}
        history = strict_flat(openinference.history(attributes, ledger), ledger)
        output = strict_flat(openinference.output(attributes, ledger), ledger)
        return [
            Call(
                fmt,
                _group(span),
                span.start,
                span.span_id,
                history,
                output,
                openinference.tools(attributes),
                openinference.model(attributes),
                ledger or None,
                False,
                # The raw response (``output.value``: a Responses object names the response it
                # continues) and the request's parameters.
                *response_ids(attributes.get("llm.invocation_parameters"), attributes.get("output.value")),
            )
        ]
    langfuse_type = attributes.get(LANGFUSE_TYPE)
    if isinstance(langfuse_type, str) and langfuse_type and _CONTENT_KEYS.isdisjoint(attributes):
        return _langfuse_pieces(fmt, span, langfuse_type.upper())
    if _operation(attributes) == "execute_tool":
        result_key = next((k for k in _RESULT_KEYS if k in attributes), None)
        if result_key is None:
            return [Skipped("tool_without_result")]  # the result is opt-in
        return [
            ToolResult(
                fmt,
                _group(span),
                span.start,
                span.span_id,
                content_text(attributes.get("gen_ai.tool.call.id")).strip(),
                content_text(attributes.get("gen_ai.tool.name")),
                result_text(attributes[result_key]),
            )
        ]
    if not _is_genai_llm(span):
        return [Skipped(_skipped_kind(attributes))]
    ledger = {}
    history = strict_flat(_genai_history(span, where, ledger), ledger)
    output = strict_flat(_genai_output(span, where, ledger), ledger)
    tools = _genai_tools(attributes)
    if not history and not output:
        # Content capture off, or its messages logged apart as events (``_log_pieces``): what
        # the span knows (its conversation, model, tools) waits for them, by span id.
        skipped: list[ReadItem] = [Skipped("llm_without_messages")]
        if fmt == OTLP and span.span_id:
            data = {
                "group": _group(span),
                "start": span.start,
                "tools": tools,
                "model": _model(attributes),
                "context": span_context(span),
            }
            skipped.append(Fragment(OTLP, "", span.start, span.span_id, _span_key(span), "span", data))
        return skipped
    return [
        Call(fmt, _group(span), span.start, span.span_id, history, output, tools, _model(attributes), ledger or None)
    ]


# --------------------------------------------------------------------------------------------
# The readers


def otlp_log_records(record: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Every log record of an OTLP logs document, with its resource's attributes."""
    for resource_logs in _list(_get(record, "resourceLogs", "resource_logs")):
        if not isinstance(resource_logs, dict):
            raise FormatError("bad_otlp", "a resourceLogs entry is not an object")
        resource = resource_logs.get("resource")
        resource_attributes = attributes_of(resource.get("attributes")) if isinstance(resource, dict) else {}
        for scope_logs in _list(_get(resource_logs, "scopeLogs", "scope_logs")):
            for log in _list(_get(as_dict(scope_logs), "logRecords", "log_records")):
                if not isinstance(log, dict):
                    raise FormatError("bad_otlp", "a log record is not an object")
                yield log, resource_attributes


def _span_key(span: Span) -> str:
    return f"span:{span.trace_id}/{span.span_id}"


def _log_pieces(record: dict[str, Any]) -> list[ReadItem]:
    """The calls of an OTLP logs document (GenAI events written as log records, semconv 1.28 on).

    A ``gen_ai.client.inference.operation.details`` record holds a whole call in its
    attributes, read as a span's. The per-message records (``gen_ai.user.message`` ...,
    ``gen_ai.choice``; the name in ``eventName`` or the ``event.name`` attribute, the message in
    the body) of one span make one call; the call's id is the span id, its start the first
    record's time. A batch log exporter may split one span's records over documents, and the
    span itself is in a traces document: the records of a span are a ``Fragment`` keyed by
    the span, joined (``join_span``) with its records in other documents and with the span,
    wherever they were read. Records with no span id make a call of this document's alone.
    Other log records are no calls.
    """
    pieces: list[ReadItem] = []
    by_span: dict[tuple[str, str], list[Any]] = {}
    for log, resource in otlp_log_records(record):
        attributes = attributes_of(log.get("attributes"))
        name = _get(log, "eventName", "event_name") or attributes.get("event.name")
        trace_id = span_id_text(_get(log, "traceId", "trace_id"))
        span_id = span_id_text(_get(log, "spanId", "span_id"))
        start = time_nanos(_get(log, "timeUnixNano", "time_unix_nano", "observedTimeUnixNano"), "timeUnixNano")
        if name == _DETAILS_EVENT:
            pieces.extend(span_pieces(OTLP, Span(trace_id, span_id, start, attributes, [], resource)))
        elif isinstance(name, str) and (name in genai.EVENT_ROLES or name == genai.CHOICE_EVENT):
            body = any_value(log.get("body"))
            event = {**(body if isinstance(body, dict) else {"content": body}), "event.name": name}
            entry = by_span.get((trace_id, span_id))
            if entry is None:
                by_span[(trace_id, span_id)] = [
                    Span(trace_id, span_id, start, attributes, [], resource),
                    [start, event],
                ]
            else:
                entry.append([start, event])
        else:
            pieces.append(Skipped("log_record"))  # an application's log line, no part of a call
    for span, *events in by_span.values():
        if span.span_id:
            data = {"group": _group(span), "events": events, "context": span_context(span)}
            pieces.append(Fragment(OTLP, "", span.start, span.span_id, _span_key(span), "events", data))
        else:
            call = _events_call(span.span_id, _group(span), span.start, [e for _, e in events], None, None)
            pieces.append(call._replace(context=span_context(span)))
    return pieces


def _events_call(
    span_id: str, group: str, start: int, events: list[Any], tools: list[dict[str, Any]] | None, model: str | None
) -> Call:
    ledger: dict[str, Any] = {}
    history, output = genai.event_messages(events, ledger)
    history, output = strict_flat(history, ledger), strict_flat(output, ledger)
    dropped = genai.text_dropped_places(events)
    return Call(OTLP, group, start, span_id, history, output, tools, model, ledger or None, text_dropped=dropped)


def join_span(fragments: list[tuple[str, int, Fragment]]) -> list[tuple[str, int, Piece]]:
    """The GenAI event records of one span, from every document that holds some (in time order,
    then document and place), made one call with what the span says (its conversation, start,
    model and tools; without the span, the records' own), at the first records' place. A span
    with no record logged gives nothing (it was counted skipped, ``llm_without_messages``)."""
    logged = [item for item in fragments if item[2].part == "events"]
    if not logged:
        return []
    events = sorted(
        (when, source, position, index, event)
        for source, position, fragment in logged
        for index, (when, event) in enumerate(fragment.data["events"])
    )
    source, position, first = logged[0]
    span = next((fragment.data for _, _, fragment in fragments if fragment.part == "span"), None)
    group, start = (span["group"], span["start"]) if span else (first.data["group"], min(e[0] for e in events))
    tools, model = (span["tools"], span["model"]) if span else (None, None)
    try:
        made = _events_call(first.call_id, group, start, [e[-1] for e in events], tools, model)
        # Who had the call: the span's context, else the event records' (their resource's).
        call: Piece = made._replace(context=(span or {}).get("context") or first.data.get("context"))
    except FormatError as error:
        detail = f"{OTLP}: events of span {first.call_id}: {error.reason}: {error}"
        call = Rejected(OTLP, group, start, first.call_id, error.reason, detail, part_text(first.data))
    return [(source, position, call)]


register_joiner(OTLP, join_span)


def _rejected_span(fmt: str, index: int, span: dict[str, Any], error: FormatError) -> Rejected:
    trace_id = span_id_text(_get(span, "traceId", "trace_id"))
    span_id = span_id_text(_get(span, "spanId", "span_id")) or f"#{index}"
    try:
        start = time_nanos(_get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano")
    except FormatError:
        start = 0
    detail = f"{fmt}: span {index} (id {span_id}): {error.reason}: {error}"
    return Rejected(fmt, trace_id, start, span_id, error.reason, detail, part_text(span))


def read_otlp(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict):
        raise FormatError("not_otlp", "an OTLP document is an object")
    spans = _get(record, "resourceSpans", "resource_spans")
    logs = _get(record, "resourceLogs", "resource_logs")
    if not isinstance(spans, list) and not isinstance(logs, list):
        raise FormatError("not_otlp", "an OTLP document has a resourceSpans or a resourceLogs list")
    spans = list(otlp_spans(record))
    pieces = parts_read(
        spans,
        lambda found: _contextual_pieces(OTLP, _otlp_span(*found)),
        lambda index, found, error: _rejected_span(OTLP, index, found[0], error),
    )
    pieces.extend(_log_pieces(record))
    return pieces


def detect_otlp(record: Any) -> bool:
    return not _OTLP_KEYS.isdisjoint(record)


def read_span_row(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict) or not isinstance(record.get("attributes"), dict):
        raise FormatError("not_a_span", "a span row has an attributes object")
    return _contextual_pieces(SPAN_ROWS, _row_span(record), record)


def detect_span_row(record: Any) -> bool:
    """A span with a flat ``attributes`` object: a ``context`` with the trace and span ids
    (Phoenix, the console exporter), or ids at the top level beside a span kind or GenAI /
    OpenInference attributes. Every span of such an export is one (an AGENT or HTTP span gives
    no piece): a trace's rows are read as one kind, not some as chats."""
    attributes = record.get("attributes")
    if not isinstance(attributes, dict):
        return False
    context = record.get("context")
    if isinstance(context, dict) and ("trace_id" in context or "span_id" in context):
        return True
    if not ("span_id" in record or "trace_id" in record):
        return False
    return "span_kind" in record or any(isinstance(k, str) and k.startswith(_ROW_PREFIXES) for k in attributes)


OTLP_READER = register_call_log_reader(
    CallLogReader(
        OTLP,
        read_otlp,
        detect_otlp,
        10,
        "OTLP JSON (collector file exporter): GenAI and OpenInference LLM and tool spans, GenAI log events",
    )
)
SPAN_ROWS_READER = register_call_log_reader(
    CallLogReader(
        SPAN_ROWS,
        read_span_row,
        detect_span_row,
        15,
        "one span per row with a flat attributes object (Phoenix span JSON, console exporter): "
        "OpenInference and OpenTelemetry GenAI spans",
    )
)
