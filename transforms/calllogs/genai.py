"""OpenTelemetry GenAI messages as flat messages: parts, events, indexed attributes.

Three generations of the GenAI semantic conventions spell a call's messages differently, and
call-log exports hold all three (OTLP spans, and Langfuse observations of OTel-instrumented
apps):

- **parts** (semconv 1.37 on: ``gen_ai.input.messages``, ``gen_ai.output.messages``,
  ``gen_ai.system_instructions``): ``{role, parts: [{type, ...}]}``. Part types ``text``
  (``content``), ``tool_call`` (``id``, ``name``, ``arguments``), ``tool_call_response``
  (``id`` and the result under ``response``, or ``result`` as some emitters and the semconv
  registry's own example write, or ``content``), ``reasoning`` (left out, in the ledger),
  ``blob`` / ``file`` / ``uri`` (a placeholder by modality: ``[image]``, ``[audio]``,
  ``[video]``, else ``[file]``), ``server_tool_call`` / ``server_tool_call_response``
  (rendered as text, as the conversation readers render server-side tools);
- **events** (semconv 1.28: ``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``), as span events or
  as the JSON ``events`` list pydantic-ai / Logfire wrote;
- **indexed attributes** (OpenLLMetry up to 0.54, Koog: ``gen_ai.prompt.N.role`` ...).

Roles: ``model`` is ``assistant`` (Vertex AI); every other role is kept as written (the core
keeps unknown roles too). A message's ``tool_call_response`` parts become ``tool`` messages
whatever the message's role (Gemini and pydantic-ai send results under ``user``), ahead of
any text the same message holds. Ids are trimmed (the semconv example has ``" call_..."``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from transforms.core.ledger import note
from transforms.core.normalize import content_text
from transforms.formats._rendered import SERVER_CALL, SERVER_RESULT, render, unknown_block

JOIN = "\n"
#: The part types of the GenAI message schemas (``generic`` is python-contrib's catch-all).
PART_TYPES = frozenset(
    (
        "text",
        "tool_call",
        "tool_call_response",
        "server_tool_call",
        "server_tool_call_response",
        "reasoning",
        "blob",
        "file",
        "uri",
    )
)
_MEDIA = frozenset(("blob", "file", "uri"))
#: The reasoning part .NET's Microsoft.Extensions.AI writes among GenAI parts (a Gemini model's
#: thoughts, by the Microsoft agent framework): read as ``reasoning``.
_MEAI_REASONING = "Microsoft.Extensions.AI.TextReasoningContent"
_PLACEHOLDER = {"image": "[image]", "audio": "[audio]", "video": "[video]"}
_ROLES = {"model": "assistant"}
#: Keys a ``tool_call_response`` holds its result under, in the order they are tried.
_RESULT_KEYS = ("response", "result", "content", "output")


def is_genai_messages(value: Any) -> bool:
    """A list of GenAI messages: some entry is ``{role?, parts: [...]}`` with a typed part of a
    GenAI part type (Gemini's ``parts`` hold untyped parts: they are not these)."""
    if not isinstance(value, list):
        return False
    for message in value:
        parts = message.get("parts") if isinstance(message, dict) else None
        if isinstance(parts, list) and any(isinstance(p, dict) and _kind(p) in PART_TYPES for p in parts):
            return True
    return False


def _kind(part: dict[str, Any]) -> str:
    kind = part.get("type")
    return kind if isinstance(kind, str) else ""


def _trimmed(value: Any) -> str:
    return value.strip() if isinstance(value, str) else content_text(value)


def _media_text(part: dict[str, Any]) -> str:
    modality = part.get("modality")
    if isinstance(modality, str) and modality in _PLACEHOLDER:
        return _PLACEHOLDER[modality]
    mime = part.get("mime_type") or part.get("mimeType")
    kind = mime.split("/", 1)[0] if isinstance(mime, str) else None
    return _PLACEHOLDER.get(kind or "", "[file]")


def _result_text(part: dict[str, Any]) -> str:
    for key in _RESULT_KEYS:
        if key in part:
            return content_text(part[key])
    return ""


def genai_to_flat(messages: list[Any], discarded: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """GenAI messages (``{role, parts}``) as flat messages, in order.

    An entry that is not an object, or has no ``parts`` list, is handed on as it is when it
    holds ``content`` (an OpenAI-style message among GenAI ones), for the core to read or drop,
    counted. A part of a type outside the schemas is refused (``unknown_block``).
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
            out.append(message)
            continue
        role = message.get("role")
        role = _ROLES.get(role, role) if isinstance(role, str) else role
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for part in message["parts"]:
            _read_part(part, texts, calls, out, discarded)
        results_only = any(isinstance(p, dict) and _kind(p) == "tool_call_response" for p in message["parts"])
        if texts or calls or not results_only:
            flat: dict[str, Any] = {"role": role, "content": JOIN.join(texts)}
            if calls:
                flat["tool_calls"] = calls
            out.append(flat)
    return out


def _read_part(
    part: Any,
    texts: list[str],
    calls: list[dict[str, Any]],
    out: list[dict[str, Any]],
    discarded: dict[str, Any] | None,
) -> None:
    if isinstance(part, str):
        texts.append(part)
        return
    if not isinstance(part, dict):
        texts.append(content_text(part))
        return
    kind = part.get("type")
    if not isinstance(kind, str):
        raise unknown_block(kind, "OpenTelemetry GenAI")
    if kind == "text":
        text = content_text(part.get("content"))
        if text:
            texts.append(text)
    elif kind == "tool_call":
        call: dict[str, Any] = {"tool_call_id": _trimmed(part.get("id")), "name": part.get("name")}
        if "arguments" in part:
            call["args"] = part["arguments"]
        calls.append(call)
    elif kind == "tool_call_response":
        out.append({"role": "tool", "content": _result_text(part), "tool_call_id": _trimmed(part.get("id"))})
    elif kind == "reasoning" or kind == _MEAI_REASONING:
        if discarded is not None:
            content = part.get("content")
            # Microsoft.Extensions.AI (.NET agents) keeps its reasoning as {text, protectedData}.
            note(discarded, "reasoning", content.get("text") if isinstance(content, dict) else content)
    elif kind in _MEDIA:
        texts.append(_media_text(part))
    elif kind == "server_tool_call":
        texts.append(render(SERVER_CALL, part.get("name"), part.get("server_tool_call")))
    elif kind == "server_tool_call_response":
        texts.append(render(SERVER_RESULT, part.get("name"), part.get("server_tool_call_response")))
    elif kind == "generic" and "value" in part:
        texts.append(content_text(part["value"]))
    else:
        raise unknown_block(kind, "OpenTelemetry GenAI")


def system_to_flat(instructions: Any, discarded: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``gen_ai.system_instructions`` (a list of parts, or text) as leading system messages:
    one, its parts' texts joined; none when it holds no text."""
    if instructions is None or instructions == "":
        return []
    if isinstance(instructions, str):
        return [{"role": "system", "content": instructions}]
    parts = instructions if isinstance(instructions, list) else [instructions]
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in parts:
        _read_part(part, texts, calls, [], discarded)
    text = JOIN.join(texts)
    return [{"role": "system", "content": text}] if text else []


# --------------------------------------------------------------------------------------------
# Events (semconv 1.28): one per message


#: Event names, by the role their message has.
EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"


def is_event_list(value: Any) -> bool:
    """A JSON list of GenAI events as pydantic-ai / Logfire wrote them (each with ``event.name``)."""
    return isinstance(value, list) and any(
        isinstance(e, dict) and (_event_name(e) in EVENT_ROLES or _event_name(e) == CHOICE_EVENT) for e in value
    )


def _event_name(event: dict[str, Any]) -> str:
    name = event.get("event.name")
    return name if isinstance(name, str) else ""


def _event_calls(calls: Any) -> list[dict[str, Any]]:
    calls = _json(calls)
    out = []
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, dict):
            continue
        function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
        flat: dict[str, Any] = {"tool_call_id": _trimmed(call.get("id")), "name": function.get("name")}
        if "arguments" in function:
            flat["args"] = function["arguments"]
        out.append(flat)
    return out


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def event_message(role: str, body: dict[str, Any]) -> dict[str, Any]:
    """One event's body (``content``, ``tool_calls``, ``id`` of the call a tool message answers)
    as a flat message of ``role`` (the body's own ``role`` wins: ``gen_ai.choice`` has none)."""
    own = body.get("role")
    role = _ROLES.get(own, own) if isinstance(own, str) else _ROLES.get(role, role)
    content = _json(body.get("content"))
    if isinstance(content, list) and is_genai_messages([{"parts": content}]):
        content = JOIN.join(str(m["content"]) for m in genai_to_flat([{"role": role, "parts": content}]))
    flat: dict[str, Any] = {"role": role, "content": content_text(content)}
    if role == "tool":
        flat["tool_call_id"] = _trimmed(body.get("id", body.get("tool_call_id")))
    calls = _event_calls(body.get("tool_calls"))
    if calls and role == "assistant":
        flat["tool_calls"] = calls
    return flat


def event_messages(events: list[Any], discarded: dict[str, Any] | None = None) -> tuple[list[Any], list[Any]]:
    """(history, output) of a list of event bodies, each with ``event.name``: message events
    in order make the history, the first ``gen_ai.choice`` (its ``message``) the output.
    Other events are not messages and are left out."""
    history: list[Any] = []
    output: list[Any] = []
    for event in events:
        if not isinstance(event, dict):
            continue
        name = _event_name(event)
        if name in EVENT_ROLES:
            history.append(event_message(EVENT_ROLES[name], event))
        elif name == CHOICE_EVENT and not output:
            message = _json(event.get("message"))
            body = message if isinstance(message, dict) else event
            output.append(event_message("assistant", body))
    return history, output


def text_dropped_places(events: list[Any]) -> tuple[int, ...]:
    """The places in ``event_messages``' history of ``gen_ai.assistant.message`` events whose
    body has tool calls and no content: python-contrib's legacy writer (``message_to_event``)
    writes an assistant message that made calls as its calls only, whatever text it had."""
    places = []
    index = 0
    for event in events:
        if not isinstance(event, dict) or _event_name(event) not in EVENT_ROLES:
            continue
        if (
            _event_name(event) == "gen_ai.assistant.message"
            and event.get("content") is None
            and event.get("role") in (None, "assistant")
            and _event_calls(event.get("tool_calls"))
        ):
            places.append(index)
        index += 1
    return tuple(places)


# --------------------------------------------------------------------------------------------
# Indexed attributes (OpenLLMetry <= 0.54): gen_ai.prompt.N.role, .content, .tool_calls.K.name ...


_INDEX = re.compile(r"^(\d+)(?:\.(.*))?$")


def indexed(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The entries ``<prefix>.<N>.<key>`` of flat attributes, as one dict of ``key`` → value
    per ``N``, in numeric order (``.10`` after ``.9``, not after ``.1``); gaps are skipped."""
    start = prefix + "."
    entries: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(start):
            continue
        match = _INDEX.match(key[len(start) :])
        if match is None:
            continue
        entries.setdefault(int(match.group(1)), {})[match.group(2) or ""] = value
    return [entries[n] for n in sorted(entries)]


def _listed_calls(content: Any) -> list[dict[str, Any]] | None:
    """Koog's tool calls, written as an entry's ``content``: JSON text of a list of OpenAI
    calls (``[{"function": {"name", "arguments"}, "id", "type": "function"}]``) as flat calls;
    ``None`` for any other content."""
    found = _json(content) if isinstance(content, str) else None
    if not isinstance(found, list) or not found:
        return None
    for call in found:
        if not (isinstance(call, dict) and call.get("type") == "function" and isinstance(call.get("function"), dict)):
            return None
    return _event_calls(found)


def indexed_message(entry: dict[str, Any]) -> dict[str, Any]:
    """One ``gen_ai.prompt.N`` / ``gen_ai.completion.N`` entry as a flat message. An entry whose
    content is a list of tool calls (Koog: role ``tool`` in a prompt, ``assistant`` in a
    completion) is an assistant message making those calls."""
    calls_listed = _listed_calls(entry.get("content"))
    if calls_listed is not None:
        return {"role": "assistant", "content": "", "tool_calls": calls_listed}
    own = entry.get("role")
    role = _ROLES.get(own, own) if isinstance(own, str) else "user"
    flat: dict[str, Any] = {"role": role, "content": content_text(entry.get("content"))}
    calls = []
    for call in indexed(entry, "tool_calls"):
        one: dict[str, Any] = {"tool_call_id": _trimmed(call.get("id")), "name": call.get("name")}
        if "arguments" in call:
            one["args"] = call["arguments"]
        calls.append(one)
    if calls and role == "assistant":
        flat["tool_calls"] = calls
    if role == "tool":
        flat["tool_call_id"] = _trimmed(entry.get("tool_call_id"))
    return flat


def koog_message(message: Any) -> Any:
    """A message of a list (a Langfuse payload) whose ``content`` is Koog's listed tool calls,
    and that answers no call, as the OpenAI assistant message making them; any other as it is."""
    if not isinstance(message, dict) or "tool_call_id" in message or message.get("tool_calls"):
        return message
    content = message.get("content")
    calls = _json(content) if isinstance(content, str) else None
    if _listed_calls(content) is None or not isinstance(calls, list):
        return message
    return {"role": "assistant", "content": None, "tool_calls": calls}


def koog_messages(messages: Any, output: bool = False) -> Any:
    """A message list with Koog's call entries read as assistant calls (``koog_message``); as an
    output, only its first entry when it holds any (Koog writes each call of a turn as a
    completion entry of its own, and the next request repeats them one by one, each followed by
    its result: the first is the one the next request's history continues)."""
    if not isinstance(messages, list) or not any(koog_message(m) is not m for m in messages):
        return messages
    read = [koog_message(m) for m in messages]
    return read[:1] if output else answered_in_order(read, "id")


def answered_in_order(messages: list[Any], id_key: str) -> list[Any]:
    """Tool messages that name no call, given the ids of the calls just before them, in order:
    Koog records a result without the id of the call it answers, right after that call."""
    out: list[Any] = []
    pending: list[str] = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "tool":
            if not message.get("tool_call_id") and pending:
                message = {**message, "tool_call_id": pending.pop(0)}
        elif isinstance(message, dict):
            calls = message.get("tool_calls")
            pending = [
                c[id_key] for c in calls or () if isinstance(c, dict) and isinstance(c.get(id_key), str) and c[id_key]
            ]
        out.append(message)
    return out
