"""OpenInference LLM and TOOL spans (Arize Phoenix's instrumentors): flat attributes to messages.

OpenInference flattens a call's messages into indexed attribute keys:
``llm.input_messages.<i>.message.role`` / ``.content`` / ``.name`` / ``.tool_call_id``, multi-part
content as ``...message.contents.<j>.message_content.type`` / ``.text`` / ``.image.image.url``,
calls as ``...message.tool_calls.<k>.tool_call.id`` / ``.function.name`` /
``.function.arguments`` (a JSON string, kept as it is), the same under ``llm.output_messages``
(one entry per choice: the first is the output; of a Responses call, one per output item, an
assistant message and the calls after it folded into one turn), the tools offered as
``llm.tools.<i>.tool.json_schema`` (a JSON string of an OpenAI tool). Indices are read as
numbers (``.10`` comes after ``.9``); gaps (masked keys) are skipped. A Phoenix dataframe dump
writes the message list as one attribute, a list of dicts with dotted keys: read the same way.

This module reads attributes only; ``transforms.calllogs.spans`` finds the spans and makes the
pieces.
"""

from __future__ import annotations

import json
from typing import Any

from transforms.calllogs.embedded import tools_of
from transforms.calllogs.genai import JOIN, indexed
from transforms.core.ledger import note
from transforms.core.normalize import content_text
from transforms.formats._rendered import unknown_block

SPAN_KIND = "openinference.span.kind"
INPUT = "llm.input_messages"
OUTPUT = "llm.output_messages"
_PLACEHOLDERS = {"image": "[image]", "audio": "[audio]", "video": "[video]", "file": "[file]"}


def is_openinference(attributes: dict[str, Any]) -> bool:
    """The span follows OpenInference (its kind attribute, or its message keys)."""
    if SPAN_KIND in attributes:
        return True
    return any(key.startswith((INPUT, OUTPUT)) for key in attributes)


def span_kind(attributes: dict[str, Any]) -> str:
    """``LLM``, ``TOOL``, ``CHAIN`` ... in upper case (a Phoenix dataframe writes ``llm``); a span
    with message keys but no kind attribute is an LLM span."""
    kind = attributes.get(SPAN_KIND)
    if isinstance(kind, str) and kind:
        return kind.upper()
    return "LLM" if any(key.startswith((INPUT, OUTPUT)) for key in attributes) else ""


def _entries(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    listed = attributes.get(prefix)
    if isinstance(listed, list):
        # The dataframe form: one attribute holding the list, each entry keyed "message.role" ...
        return [_flat_keys(entry) for entry in listed if isinstance(entry, dict)]
    return indexed(attributes, prefix)


def _flat_keys(entry: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts (``{"message": {"role": ...}}``) as dotted keys; dotted keys as they are."""
    out: dict[str, Any] = {}
    for key, value in entry.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat_keys(value, name + "."))
        else:
            out[name] = value
    return out


def _content_text(entry: dict[str, Any], discarded: dict[str, Any] | None) -> str:
    content = entry.get("message.content")
    if content not in (None, ""):
        return content_text(content)
    texts = []
    for part in indexed(entry, "message.contents"):
        kind = part.get("message_content.type")
        if not isinstance(kind, str):
            raise unknown_block(kind, "OpenInference")
        if kind == "text":
            text = content_text(part.get("message_content.text"))
            if text:
                texts.append(text)
        elif kind in _PLACEHOLDERS:
            texts.append(_PLACEHOLDERS[kind])
        elif kind in ("reasoning", "thinking"):
            if discarded is not None:
                note(discarded, "reasoning", part.get("message_content.text"))
        elif kind in ("tool_use", "tool_call"):
            continue  # the call itself is read from message.tool_calls
        else:
            raise unknown_block(kind, "OpenInference")
    return JOIN.join(texts)


def _calls(entry: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for call in indexed(entry, "message.tool_calls"):
        flat: dict[str, Any] = {
            "tool_call_id": content_text(call.get("tool_call.id")).strip(),
            "name": call.get("tool_call.function.name"),
        }
        if "tool_call.function.arguments" in call:
            flat["args"] = call["tool_call.function.arguments"]
        calls.append(flat)
    return calls


def message(entry: dict[str, Any], discarded: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ``llm.*_messages.<i>`` entry (its keys after the index) as a flat message."""
    role = entry.get("message.role")
    flat: dict[str, Any] = {"role": role, "content": _content_text(entry, discarded)}
    calls = _calls(entry)
    if calls and role == "assistant":
        flat["tool_calls"] = calls
    if role == "tool":
        flat["tool_call_id"] = content_text(entry.get("message.tool_call_id")).strip()
    return flat


def has_messages(attributes: dict[str, Any]) -> bool:
    return any(key.startswith((INPUT, OUTPUT)) for key in attributes)


def _is_responses_call(attributes: dict[str, Any]) -> bool:
    """Whether the span records a Responses API call: its ``output.value`` is a Responses object."""
    raw = attributes.get("output.value")
    if not isinstance(raw, str) or '"response"' not in raw:
        return False
    try:
        value = json.loads(raw)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("object") == "response"


def _fold_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Responses call's messages are its items: an assistant ``message`` item and the
    ``function_call`` items after it are one assistant turn, folded as the Responses reader
    folds them (transforms.formats.openai_responses)."""
    folded: list[dict[str, Any]] = []
    for item in messages:
        last = folded[-1] if folded else None
        if (
            last is not None
            and last["role"] == item["role"] == "assistant"
            and item.get("tool_calls")
            and item["content"] == ""
        ):
            folded[-1] = {**last, "tool_calls": [*last.get("tool_calls", []), *item["tool_calls"]]}
        else:
            folded.append(item)
    return folded


def history(attributes: dict[str, Any], discarded: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    messages = [message(entry, discarded) for entry in _entries(attributes, INPUT)]
    return _fold_items(messages) if _is_responses_call(attributes) else messages


def output(attributes: dict[str, Any], discarded: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The first choice's message (later ones are other choices, not the continuation). A
    Responses call's output messages are its output items, folded into one turn."""
    entries = _entries(attributes, OUTPUT)
    if len(entries) > 1 and _is_responses_call(attributes):
        return _fold_items([message(entry, discarded) for entry in entries])[:1]
    return [message(entries[0], discarded)] if entries else []


def tools(attributes: dict[str, Any]) -> list[dict[str, Any]] | None:
    schemas = [entry.get("tool.json_schema") for entry in indexed(attributes, "llm.tools")]
    return tools_of([s for s in schemas if s is not None])


def model(attributes: dict[str, Any]) -> str | None:
    name = attributes.get("llm.model_name")
    return name if isinstance(name, str) and name else None


def tool_result(attributes: dict[str, Any]) -> tuple[str, str, str] | None:
    """(tool call id, tool name, result text) of a TOOL span, ``None`` when it recorded no
    result (``output.value``)."""
    if "output.value" not in attributes:
        return None
    call_id = attributes.get("tool_call.id", attributes.get("tool.id", ""))
    name = content_text(attributes.get("tool.name"))
    return content_text(call_id).strip(), name, content_text(attributes["output.value"])
