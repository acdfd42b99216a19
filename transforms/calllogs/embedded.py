"""Provider payloads inside call-log records, read by the conversation readers.

A call-log record often holds what the application sent to and got from its provider, as it
was: an OpenAI chat request body, an Anthropic or Gemini one, Responses items, a list of
messages, and a completion, a Messages API reply, a Responses object or a Gemini response. These
functions find out which it is and read it with the reader convnorm already has for it
(``transforms.formats``), so a call log's messages are read exactly as the same payload read on
its own; OpenTelemetry GenAI parts and events, which no conversation reader knows, go to
``transforms.calllogs.genai``.

What the flat shape cannot hold (reasoning, annotations) goes to the ledger of discarded
fields, as the conversation readers do; ``Call.discarded`` carries it to the job.
"""

from __future__ import annotations

import json
from typing import Any, Callable, NamedTuple

from transforms.calllogs import genai, streams
from transforms.calllogs.calls import PART_TEXT_LIMIT, ReadItem
from transforms.core.jsontext import loads_as_json
from transforms.core.ledger import coercion_discards
from transforms.core.normalize import content_text, pairing_key
from transforms.formats import BUILT_IN_READERS
from transforms.formats import media as carried_media
from transforms.formats import reasoning as carried_reasoning
from transforms.formats._common import openai_tool
from transforms.formats.anthropic import anthropic_to_flat
from transforms.formats.base import READERS, FormatError, detect_reader
from transforms.formats.bedrock import bedrock_to_flat
from transforms.formats.flat import FLAT_READER
from transforms.formats.gemini import gemini_to_flat
from transforms.formats.openai import openai_to_flat
from transforms.formats.openai_responses import responses_to_flat


class Embedded(NamedTuple):
    """Messages read from a provider payload, with what the payload says beside them."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    model: str | None = None
    #: The ledger of what reading left out (``transforms.core.ledger``), ``None`` when nothing.
    discarded: dict[str, Any] | None = None
    #: The payload was a stream of events cut off before its end (``streams.complete``): the
    #: messages are the part that arrived.
    truncated: bool = False


def response_ids(request: Any, response: Any) -> tuple[str, str]:
    """``(response id, previous response id)`` of a Responses API call, from its request body
    (``previous_response_id``) and its response object (``id``, and ``previous_response_id``
    echoed); ``("", "")`` for any other payload."""
    request, response = decoded(request), decoded(response)
    own = previous = ""
    if isinstance(response, dict) and response.get("object") == "response":
        found = response.get("id"), response.get("previous_response_id")
        own, previous = (value if isinstance(value, str) else "" for value in found)
    if isinstance(request, dict) and isinstance(request.get("previous_response_id"), str):
        previous = request["previous_response_id"] or previous
    return own.strip(), previous.strip()


def decoded(value: Any) -> Any:
    """A value that exports keep as a JSON string (Langfuse ``input``, OTLP attributes, LiteLLM
    SpendLogs), parsed; a string that is not JSON (plain text) as it is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in '[{"':
        return value
    try:
        return loads_as_json(text)
    except ValueError:
        return value


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else an empty one (a missing or malformed part)."""
    return value if isinstance(value, dict) else {}


def merged_ledgers(*ledgers: dict[str, Any] | None) -> dict[str, Any] | None:
    """One ledger of discarded fields from several (counts and characters added, by name)."""
    out: dict[str, Any] = {}
    for ledger in ledgers:
        for name, (count, chars) in (ledger or {}).items():
            seen = out.get(name)
            out[name] = [count, chars] if seen is None else [seen[0] + count, seen[1] + chars]
    return out or None


def strict_flat(messages: list[Any], ledger: dict[str, Any] | None) -> list[Any]:
    """``messages`` with only the keys of the flat shape, each ``content`` a string, the keys
    left out counted in ``ledger`` as coercion would count them (``transforms.core.ledger``).

    A reader passes some messages on as it found them (a plain chat); a call's history and its
    output must compare key for key with the next call's history, so every piece holds the
    flat shape itself. An entry the core drops whole (not an object, no role) is handed on as
    it is, for the core to drop and count.
    """
    plain = role_and_text_only(messages)
    if plain is not None:
        return plain
    if ledger is not None:
        # Reasoning and media a provider reader carried beside a message (the ``FIELD`` of
        # formats.reasoning and of formats.media) are not carried through call logs: counted
        # under their own names, as a sink that cannot take them counts them, and the rest as
        # coercion would.
        messages, reasoning = carried_reasoning.lift(messages)
        messages, media = carried_media.lift(messages)
        carried_reasoning.note_all(reasoning, ledger)
        carried_media.note_all(media, ledger)
        coercion_discards(messages, ledger)
    out: list[Any] = []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(role, str) or not role.strip():
            out.append(message)
            continue
        flat: dict[str, Any] = {"role": role, "content": content_text(message.get("content"))}
        if role == "assistant":
            calls = pairing_key(message, "tool_calls")
            if isinstance(calls, list) and calls:
                flat["tool_calls"] = calls
        elif role == "tool":
            flat["tool_call_id"] = pairing_key(message, "tool_call_id")
        out.append(flat)
    return out


def role_and_text_only(messages: list[Any]) -> list[Any] | None:
    """``strict_flat`` of messages that each hold a string role and a string content and no
    other key (nearly every call's history): the same messages, keys in the flat shape's order,
    nothing for the ledger (such a message carries no reasoning, media or discarded key);
    ``None`` for any other list. A tool message takes the full path (it gains its pairing key)."""
    out: list[Any] = []
    for message in messages:
        if message.__class__ is not dict or len(message) != 2:
            return None
        role = message.get("role")
        content = message.get("content")
        if role.__class__ is not str or content.__class__ is not str or role == "tool" or not role.strip():
            return None
        out.append({"role": role, "content": content})
    return out


def _text_message(role: str, text: str) -> list[dict[str, Any]]:
    return [{"role": role, "content": text}]


def _model_of(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def read_history(payload: Any, where: str, text_role: str = "user") -> Embedded:
    """The messages a call sent, from whatever the record holds for them.

    ``None`` (not recorded) gives no messages; plain text one ``text_role`` message; OTel GenAI
    messages (``parts``) and GenAI event lists go to ``genai``; a single message object is a
    list of one; anything else is given to the conversation reader whose detection accepts it
    (a message list, an OpenAI / Anthropic / Gemini / Responses request body ...). A payload no
    reader accepts is a ``FormatError`` (``unknown_messages``), never read as empty.
    """
    payload = decoded(payload)
    if payload is None or payload == "":
        return Embedded([])
    if isinstance(payload, str):
        return Embedded(_text_message(text_role, payload))
    if isinstance(payload, dict) and isinstance(payload.get("role"), str) and "messages" not in payload:
        payload = [payload]
    if isinstance(payload, dict):
        prompt = _prompt_request(payload)
        if prompt is not None:
            return Embedded(prompt, model=_model_of(payload.get("model")))
        payload = _genai_sdk_request(payload)
    if isinstance(payload, list) and not payload:
        return Embedded([])
    if not isinstance(payload, (list, dict)):
        raise FormatError("unknown_messages", f"{where}: {_describe(payload)} is not a message shape any reader knows")
    ledger: dict[str, Any] = {}
    if isinstance(payload, list) and genai.is_genai_messages(payload):
        return Embedded(genai.genai_to_flat(payload, ledger), discarded=ledger or None)
    if isinstance(payload, list) and genai.is_event_list(payload):
        history, _output = genai.event_messages(payload, ledger)
        return Embedded(history, discarded=ledger or None)
    if isinstance(payload, dict) and genai.is_genai_messages(payload.get("messages")):
        # A request body whose messages are GenAI parts (openinference-genai's ``input``).
        flat = genai.genai_to_flat(payload["messages"], ledger)
        return Embedded(flat, tools_of(payload.get("tools")), _model_of(payload.get("model")), ledger or None)
    for entries in [payload] if isinstance(payload, list) else [v for v in payload.values() if isinstance(v, list)]:
        check_blocks(entries, where)
    reader = FLAT_READER if plain_chat(payload) else detect_reader(payload)
    if reader is None:
        raise FormatError("unknown_messages", f"{where}: {_describe(payload)} is not a message shape any reader knows")
    conversation = reader.read(payload, "messages")
    fields = conversation.fields
    return Embedded(
        list(conversation.messages),
        tools_of(fields.get("tools")),
        _model_of(fields.get("model")),
        conversation.discarded,
    )


#: Roles a detection before the flat reader's looks for (OpenAI's, ShareGPT's tool tags).
_SIGNAL_ROLES = frozenset(("function", "developer", "function_call", "observation"))
_ROLE_AND_CONTENT = frozenset(("role", "content"))


def plain_chat(payload: Any) -> bool:
    """A list of messages of a string role and a string content, nothing else, and no role a
    provider reader looks for: every built-in reader's detection but the flat one's refuses
    it (each looks for a content list, a ``type``, ``parts``, ``from``, or one of those roles),
    so ``detect_reader`` would answer the flat reader after asking them all. A call's history
    is read for every call, its messages over again: this answers it in one pass. With a
    reader of a library user's registered, detection decides as always."""
    if not isinstance(payload, list) or not READERS.keys() <= BUILT_IN_READERS:
        return False
    for message in payload:
        if message.__class__ is not dict or not message.keys() <= _ROLE_AND_CONTENT:
            return False
        role = message.get("role")
        if role.__class__ is not str or role in _SIGNAL_ROLES or message.get("content").__class__ is not str:
            return False
    return True


def plain_flat(payload: Any) -> list[dict[str, Any]] | None:
    """``role_and_text_only(payload)`` of a ``plain_chat`` whose entries are not Koog's listed
    calls, in one pass: new messages of the same role and text. ``None`` for any other payload,
    and for one with a content that opens with ``[`` (Koog writes its calls so): the caller
    reads those the long way."""
    if payload.__class__ is not list or not READERS.keys() <= BUILT_IN_READERS:
        return None
    out = []
    for message in payload:
        if message.__class__ is not dict or len(message) != 2:
            return None
        role = message.get("role")
        content = message.get("content")
        if (
            role.__class__ is not str
            or content.__class__ is not str
            or role in _SIGNAL_ROLES
            or role == "tool"
            or content[:1] == "["
            or not role.strip()
        ):
            return None
        out.append({"role": role, "content": content})
    return out


#: The keys of a prompt-only request (the Vercel AI SDK's ``{prompt, system}``).
_PROMPT_KEYS = frozenset(("prompt", "system", "model"))


def _prompt_request(payload: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A request whose whole input is one ``prompt`` text (and a ``system`` text): the Vercel AI
    SDK's ``generateText({prompt})``; ``None`` for any other object."""
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not payload.keys() <= _PROMPT_KEYS:
        return None
    system = payload.get("system")
    lead = [{"role": "system", "content": system}] if isinstance(system, str) and system else []
    return [*lead, {"role": "user", "content": prompt}]


def _genai_sdk_request(payload: dict[str, Any]) -> dict[str, Any]:
    """A google-genai SDK request (``generate_content(model, contents, config)``) in the REST
    body's shape the Gemini reader reads: ``contents`` given as one text is one user content;
    ``config``'s system instruction and tools move to the top level. Anything else as it is."""
    if "contents" not in payload:
        return payload
    out = dict(payload)
    if isinstance(out["contents"], str):
        out["contents"] = [{"role": "user", "parts": [{"text": out["contents"]}]}]
    config = as_dict(out.get("config"))
    for snake, camel in (("system_instruction", "systemInstruction"), ("tools", "tools")):
        value = config.get(snake, config.get(camel))
        if value is not None and snake not in out and camel not in out:
            out[camel] = value
    return out


def _vercel_calls(payload: Any) -> list[dict[str, Any]] | None:
    """The Vercel AI SDK's ``ai.response.toolCalls`` (``[{toolCallId, toolName, input}]``) as one
    assistant message of calls (``input``, the arguments, kept as it is); else ``None``."""
    if not isinstance(payload, list) or not payload:
        return None
    if not all(isinstance(c, dict) and "toolCallId" in c and "toolName" in c for c in payload):
        return None
    calls = [
        {
            "tool_call_id": content_text(c["toolCallId"]).strip(),
            "name": c["toolName"],
            "args": c.get("input", c.get("args")),
        }
        for c in payload
    ]
    return [{"role": "assistant", "content": "", "tool_calls": calls}]


def _describe(payload: Any) -> str:
    if isinstance(payload, dict):
        keys = ", ".join(str(k) for k in list(payload)[:8])
        return f"an object with keys {keys}"
    if isinstance(payload, list):
        return f"a list of {len(payload)} entries"
    return f"a {type(payload).__name__}"


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else None


def read_output(payload: Any, where: str) -> Embedded:
    """The assistant message(s) a call got back, from a provider response or a message.

    Read: an OpenAI chat completion (``choices[0].message``; a legacy completion's
    ``choices[0].text``), an Anthropic Messages reply (``content`` blocks), a Responses object
    (its ``output`` items), a Gemini response (``candidates[0].content``), a Bedrock Converse
    reply (``output.message``), a google-adk ``LlmResponse`` (``content``), the Vercel AI SDK's
    ``[{toolCallId, toolName, input}]``, a GenAI-events choice (``{index, message}``), a message
    object or a message list (read as ``read_history`` reads one), plain text (one assistant
    message).
    Only the first choice / candidate is the continuation: the others are left out. A response
    kept as raw server-sent events is assembled first (``transforms.calllogs.streams``); a
    stream of a kind convnorm does not assemble is refused (``streamed_response``); one cut off
    before its end is read, ``truncated``.
    """
    if streams.is_stream(payload):
        stream, payload = payload, _assembled_stream(payload, where)
        if not streams.complete(stream):
            return read_output(payload, where)._replace(truncated=True)
    payload = decoded(payload)
    if payload is None or payload == "":
        return Embedded([])
    if isinstance(payload, str):
        return Embedded(_text_message("assistant", payload))
    vercel = _vercel_calls(payload)
    if vercel is not None:
        return Embedded(vercel)
    if not isinstance(payload, dict):
        return read_history(payload, where, "assistant")
    return _read_response_object(payload, where)


def _assembled_stream(stream: Any, where: str) -> Any:
    """A response kept as raw server-sent events, assembled; ``streamed_response`` for a kind
    convnorm does not assemble."""
    payload = streams.assembled(stream)
    if payload is None:
        raise FormatError(
            "streamed_response",
            f"{where} is a stream of server-sent events of a kind convnorm does not assemble "
            "(OpenAI chat chunks, Anthropic message events and Responses events are)",
        )
    return payload


def _read_response_object(payload: dict[str, Any], where: str) -> Embedded:
    """``read_output`` of an object: the provider response its keys name, a GenAI-events
    choice, or a message; ``unknown_output`` for anything else."""
    ledger: dict[str, Any] = {}
    model = _model_of(payload.get("model"))
    choices = payload.get("choices")
    if isinstance(choices, list):
        return _read_first_choice(choices, model)
    if payload.get("type") == "message" and isinstance(payload.get("content"), list):
        check_blocks(payload["content"], where)
        flat = anthropic_to_flat([{"role": "assistant", "content": payload["content"]}], None, ledger)
        return Embedded(flat, model=model, discarded=ledger or None)
    if payload.get("object") == "response" or (isinstance(payload.get("output"), list) and "instructions" in payload):
        items = payload.get("output")
        check_blocks(items, where)
        flat = responses_to_flat(items if isinstance(items, list) else [], ledger)
        return Embedded(flat, tools_of(payload.get("tools")), model, ledger or None)
    candidates = payload.get("candidates")
    if isinstance(candidates, list):
        return _read_first_candidate(candidates, _model_of(payload.get("modelVersion")))
    content = payload.get("content")
    if isinstance(content, dict) and isinstance(content.get("parts"), list):
        # A google-adk LlmResponse: a Gemini Content beside finish_reason and usage.
        return Embedded(gemini_to_flat([{"role": "model", **content}], None, ledger), discarded=ledger or None)
    output = payload.get("output")
    if isinstance(output, dict) and isinstance(output.get("message"), dict):
        return Embedded(bedrock_to_flat([output["message"]], None, ledger), discarded=ledger or None)
    if isinstance(payload.get("message"), dict) and "index" in payload:
        return read_history(payload["message"], where, "assistant")
    if "role" in payload:
        return read_history(payload, where, "assistant")
    raise FormatError("unknown_output", f"{where}: {_describe(payload)} is not a response shape any reader knows")


def _read_first_choice(choices: list[Any], model: str | None) -> Embedded:
    """An OpenAI chat completion's first choice: its message, or a legacy completion's text."""
    choice = _first(choices)
    if not isinstance(choice, dict):
        return Embedded([], model=model)
    ledger: dict[str, Any] = {}
    message = choice.get("message")
    if isinstance(message, dict):
        return Embedded(openai_to_flat([_assistant(message)], None, ledger), model=model, discarded=ledger or None)
    if isinstance(choice.get("text"), str):
        return Embedded(_text_message("assistant", choice["text"]), model=model)
    return Embedded([], model=model)


def _read_first_candidate(candidates: list[Any], model: str | None) -> Embedded:
    """A Gemini response's first candidate's content."""
    content = as_dict(_first(candidates)).get("content")
    if not isinstance(content, dict):
        return Embedded([], model=model)
    ledger: dict[str, Any] = {}
    flat = gemini_to_flat([{"role": "model", **content}], None, ledger)
    return Embedded(flat, model=model, discarded=ledger or None)


def check_blocks(content: Any, where: str) -> None:
    """Refuse a content list holding a block whose ``type`` is not a string, at any depth of
    nested ``content`` lists (the provider readers look types up by name): ``bad_block``,
    before any reader sees it."""
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if "type" in block and not isinstance(block["type"], str):
                raise FormatError("bad_block", f"{where}: a content block's type is {type(block['type']).__name__}")
            check_blocks(block.get("content"), where)


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    # A response message may leave its role out (streamed deltas merged by a client).
    return message if message.get("role") else {**message, "role": "assistant"}


def tools_of(value: Any) -> list[dict[str, Any]] | None:
    """Tool definitions as OpenAI function tools (``{"type": "function", "function": {...}}``):
    chat, Responses, bare and Anthropic definitions converted; one that has no function form
    (a provider's built-in tool) kept as it is. ``None`` when there are none."""
    value = decoded(value)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        return None
    out = []
    for tool in value:
        tool = decoded(tool)
        try:
            out.append(openai_tool(tool))
        except FormatError:
            out.append(tool if isinstance(tool, dict) else {"type": "unknown", "value": tool})
    return out


def result_text(value: Any) -> str:
    """A tool result as text: a string as it is (a JSON object stays as it was written), except
    a JSON string literal (``"\"sunny\""``: a string exported as JSON) which is its text;
    anything else as the core casts content (objects and lists as compact JSON)."""
    if isinstance(value, str):
        if value.lstrip().startswith('"'):
            inner = decoded(value)
            if isinstance(inner, str):
                return inner
        return value
    return content_text(value)


def parts_read(
    parts: list[Any],
    read: Callable[[Any], list[ReadItem]],
    rejected: Callable[[int, Any, FormatError], ReadItem],
) -> list[ReadItem]:
    """``read(part)`` for each part of a record. A record of one part that cannot be read is
    refused whole (the ``FormatError`` goes on); in a record of several, a part that cannot be
    read gives ``rejected(index, part, error)`` (a ``Rejected``: a dead letter of its own) and
    the other parts are read as usual."""
    if len(parts) <= 1:
        return [item for part in parts for item in read(part)]
    out: list[ReadItem] = []
    for index, part in enumerate(parts):
        try:
            out.extend(read(part))
        except FormatError as error:
            out.append(rejected(index, part, error))
    return out


def part_text(part: Any) -> str:
    """A refused part as JSON text, cut to ``PART_TEXT_LIMIT`` characters, for its dead letter."""
    try:
        text = json.dumps(part, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(part)
    return text[:PART_TEXT_LIMIT]
