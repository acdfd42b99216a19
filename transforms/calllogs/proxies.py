"""Provider request + response logs from proxies and gateways: Helicone, OpenPipe, LiteLLM.

Each record is one call: the provider request body as the application sent it, read by the
conversation reader its shape calls for (OpenAI chat, Anthropic, Gemini, Responses, Bedrock:
``transforms.calllogs.embedded.read_history``), and the provider's response, whose assistant
message is the call's output (``read_output``). Bodies may be objects or JSON strings.

- ``helicone``: an export row (``npx @helicone/export --include-body``): ``request_id``,
  ``request_created_at``, ``request_body``, ``response_body``, ``request_properties``. The
  conversation is the ``Helicone-Session-Id`` property, else the request id. A streamed
  response kept as raw server-sent events is assembled (``transforms.calllogs.streams``).
- ``openpipe``: an export line ``{input, output, cacheHit, durationMs, tags}``. The export
  keeps no id and no time: the conversation is a ``session_id`` / ``conversation_id`` /
  ``thread_id`` tag, else a digest of the request (so each request is its own conversation,
  and the same request twice is one); the start is 0.
- ``litellm``: a proxy logging payload (``StandardLoggingPayload``: ``call_type``, top-level
  ``messages``, ``response``, ``startTime``; or a ``LiteLLM_SpendLogs`` row, whose
  ``messages`` / ``response`` are JSON strings, ``"{}"`` unless the proxy stores prompts: such
  a row holds no call). The conversation is ``session_id`` (top level or in ``metadata``),
  else ``trace_id``, else the request id. ``startTime`` has no zone and is read as UTC.
  Payloads of calls that are no chat (embeddings, images, moderation ...) hold no call.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from transforms.calllogs.calls import Call, CallLogReader, ReadItem, Skipped, register_call_log_reader
from transforms.calllogs.embedded import (
    Embedded,
    as_dict,
    decoded,
    merged_ledgers,
    read_history,
    read_output,
    response_ids,
    strict_flat,
    tools_of,
)
from transforms.calllogs.times import time_nanos
from transforms.core.normalize import content_text
from transforms.formats.base import FormatError

HELICONE = "helicone"
OPENPIPE = "openpipe"
LITELLM = "litellm"
_SESSION_TAGS = ("session_id", "conversation_id", "thread_id")
_OPENPIPE_KEYS = frozenset(("input", "output", "cacheHit", "durationMs", "tags"))
#: LiteLLM ``call_type`` values of chat and text calls (``a`` prefix: the async spelling).
_CHAT_CALLS = frozenset(
    (
        "completion",
        "text_completion",
        "anthropic_messages",
        "responses",
        "generate_content",
        "pass_through_endpoint",
    )
)


def _text(value: Any) -> str:
    return "" if value is None else content_text(value)


def _model(*values: Any) -> str | None:
    for value in values:
        if isinstance(value, str) and value:
            return value
    return None


def _call(
    fmt: str,
    group: str,
    start: int,
    call_id: str,
    request: Embedded,
    response: Embedded,
    *models: Any,
    ids: tuple[str, str] = ("", ""),
) -> Call:
    ledger = merged_ledgers(request.discarded, response.discarded) or {}
    history = strict_flat(request.messages, ledger)
    output = strict_flat(response.messages, ledger)
    tools = request.tools or response.tools
    return Call(
        fmt,
        group,
        start,
        call_id,
        history,
        output,
        tools,
        _model(*models, request.model, response.model),
        ledger or None,
        response.truncated,
        *ids,
    )


# --------------------------------------------------------------------------------------------
# Helicone


def read_helicone(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict) or "request_body" not in record:
        raise FormatError(
            "missing_request_body", "a Helicone export row holds request_body (export with --include-body)"
        )
    request_id = _text(record.get("request_id"))
    where = f"request {request_id}"
    request = read_history(record["request_body"], f"{where} request_body")
    response = read_output(record.get("response_body"), f"{where} response_body")
    properties = decoded(record.get("request_properties"))
    session = properties.get("Helicone-Session-Id") if isinstance(properties, dict) else None
    group = _text(session) if session not in (None, "") else request_id
    start = time_nanos(record.get("request_created_at"), f"{where} request_created_at")
    ids = response_ids(record["request_body"], record.get("response_body"))
    return [_call(HELICONE, group, start, request_id, request, response, record.get("request_model"), ids=ids)]


def detect_helicone(record: Any) -> bool:
    return "request_body" in record and "request_id" in record


# --------------------------------------------------------------------------------------------
# OpenPipe


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "openpipe-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def read_openpipe(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict) or not isinstance(decoded(record.get("input")), dict):
        raise FormatError("bad_input", "an OpenPipe line's input is the request object")
    request_body = decoded(record["input"])
    request = read_history(request_body, "input")
    output = decoded(record.get("output"))
    response = read_output(output, "output") if isinstance(output, dict) and "error" not in output else Embedded([])
    tags = decoded(record.get("tags"))
    tags = tags if isinstance(tags, dict) else {}
    session = next((tags[k] for k in _SESSION_TAGS if tags.get(k) not in (None, "")), None)
    digest = _digest(request_body)
    group = _text(session) if session is not None else digest
    return [_call(OPENPIPE, group, 0, digest, request, response, request_body.get("model"))]


def detect_openpipe(record: Any) -> bool:
    if "input" not in record or not record.keys() <= _OPENPIPE_KEYS or "output" not in record:
        return False
    request = record["input"]
    return isinstance(request, dict) and isinstance(request.get("messages"), list)


# --------------------------------------------------------------------------------------------
# LiteLLM


def _litellm_request(record: dict[str, Any], where: str) -> Any:
    messages = decoded(record.get("messages"))
    server_request = decoded(record.get("proxy_server_request"))
    if isinstance(server_request, dict) and ("messages" in server_request or "input" in server_request):
        return server_request  # the whole request body: system, tools and all
    if isinstance(messages, list) and messages:
        return {"messages": messages, **_tools_part(record)}
    if isinstance(messages, dict) and messages:
        return messages
    return None


def _tools_part(record: dict[str, Any]) -> dict[str, Any]:
    parameters = decoded(record.get("model_parameters"))
    tools = parameters.get("tools") if isinstance(parameters, dict) else None
    return {"tools": tools} if tools else {}


def _litellm_group(record: dict[str, Any]) -> str:
    metadata = decoded(record.get("metadata"))
    metadata = metadata if isinstance(metadata, dict) else {}
    for value in (
        record.get("session_id"),
        metadata.get("session_id"),
        metadata.get("litellm_session_id"),
        record.get("trace_id"),
        record.get("request_id"),
        record.get("id"),
    ):
        if value not in (None, ""):
            return _text(value)
    return ""


def read_litellm(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict):
        raise FormatError("not_litellm", "a LiteLLM logging payload is an object")
    call_type = _text(record.get("call_type"))
    if call_type.removeprefix("a") not in _CHAT_CALLS and call_type not in _CHAT_CALLS:
        # An embedding, an image, a moderation ...: no chat call, counted by its type.
        return [Skipped(call_type.removeprefix("a") if call_type.startswith("aembedding") else call_type or "other")]
    call_id = _text(record.get("request_id") or record.get("id"))
    where = f"call {call_id}"
    body = _litellm_request(record, where)
    if body is None:
        return [Skipped("llm_without_messages")]  # SpendLogs without prompt storage
    request = read_history(body, f"{where} messages")
    response_body = decoded(record.get("response"))
    response = read_output(response_body, f"{where} response") if response_body not in (None, {}, "") else Embedded([])
    if not request.tools:
        request = request._replace(tools=tools_of(_tools_part(record).get("tools")))
    start = time_nanos(record.get("startTime"), f"{where} startTime")
    ids = response_ids(body, response_body)
    if not ids[1]:  # LiteLLM keeps the request's other parameters apart from its messages
        previous = as_dict(decoded(record.get("model_parameters"))).get("previous_response_id")
        ids = (ids[0], previous.strip() if isinstance(previous, str) else "")
    call = _call(LITELLM, _litellm_group(record), start, call_id, request, response, record.get("model"), ids=ids)
    return [call]


def detect_litellm(record: Any) -> bool:
    return "call_type" in record and ("messages" in record or "response" in record)


HELICONE_READER = register_call_log_reader(
    CallLogReader(HELICONE, read_helicone, detect_helicone, 40, "Helicone export rows (request and response bodies)")
)
OPENPIPE_READER = register_call_log_reader(
    CallLogReader(
        OPENPIPE, read_openpipe, detect_openpipe, 45, "OpenPipe request-log export lines (input, output, tags)"
    )
)
LITELLM_READER = register_call_log_reader(
    CallLogReader(LITELLM, read_litellm, detect_litellm, 50, "LiteLLM proxy logging payloads and spend-log rows")
)
