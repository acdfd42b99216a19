"""Streamed responses kept as raw server-sent events, assembled into the response they stream.

A gateway that logs what it relays (Helicone) may keep a streamed response as the text of its
events (``data: {...}`` lines, blank-line separated, ``data: [DONE]`` at the end). Three
streams are assembled, by the shape of their events:

- OpenAI Chat Completions chunks (``object: chat.completion.chunk``): the first choice's
  ``delta`` pieces joined (``content``, ``refusal``, ``tool_calls`` by their ``index``: ids and
  names as sent, argument pieces concatenated);
- Anthropic Messages events (``message_start``, ``content_block_start`` / ``_delta`` /
  ``_stop``): text, thinking and ``tool_use`` blocks (the ``input_json_delta`` pieces joined
  and parsed as the call's input);
- OpenAI Responses events: the ``response`` of the ``response.completed`` event.

Any other stream is ``None``: the caller refuses it (``streamed_response``), since a guess would
lose text silently. A stream whose tool input does not parse is ``FormatError`` (``bad_stream``).

A stream that ends before it says it is done (``complete``: no ``data: [DONE]``, no
``finish_reason``, no ``message_stop`` or ``stop_reason``) was cut off: what it assembles is
the part that arrived, and the caller marks the call (``truncated_stream``) rather than take it
for a whole answer.
"""

from __future__ import annotations

import json
from typing import Any

from transforms.formats.base import FormatError


def is_stream(text: Any) -> bool:
    return isinstance(text, str) and text.lstrip().startswith(("data:", "event:"))


def _events(text: str) -> list[Any]:
    events = []
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if not data or data == "[DONE]":
            continue
        try:
            events.append(json.loads(data))
        except ValueError:
            raise FormatError("bad_stream", f"a stream event is not JSON: {data[:60]!r}") from None
    return events


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _openai(events: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    texts: list[str] = []
    refusals: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    model = None
    for event in events:
        model = model or event.get("model")
        for choice in event.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # only the first choice is the continuation
            delta = _dict(choice.get("delta"))
            if isinstance(delta.get("content"), str):
                texts.append(delta["content"])
            if isinstance(delta.get("refusal"), str):
                refusals.append(delta["refusal"])
            for piece in delta.get("tool_calls") or ():
                if not isinstance(piece, dict):
                    continue
                index = piece.get("index", len(calls))
                call = calls.setdefault(
                    index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if piece.get("id"):
                    call["id"] = piece["id"]
                function = _dict(piece.get("function"))
                if isinstance(function.get("name"), str):
                    call["function"]["name"] += function["name"]
                if isinstance(function.get("arguments"), str):
                    call["function"]["arguments"] += function["arguments"]
    message["content"] = "".join(texts) if texts or not calls else None
    if refusals:
        message["refusal"] = "".join(refusals)
    if calls:
        message["tool_calls"] = [calls[k] for k in sorted(calls, key=lambda k: (not isinstance(k, int), k))]
    return {"object": "chat.completion", "model": model, "choices": [{"index": 0, "message": message}]}


def _anthropic(events: list[dict[str, Any]]) -> dict[str, Any]:
    start = next((e.get("message") for e in events if e.get("type") == "message_start"), None)
    message = dict(start) if isinstance(start, dict) else {"type": "message", "role": "assistant"}
    blocks: dict[Any, dict[str, Any]] = {}
    inputs: dict[Any, list[str]] = {}
    for event in events:
        kind = event.get("type")
        index = event.get("index")
        if kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[index] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict) and index in blocks:
            delta, block = event["delta"], blocks[index]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif delta.get("type") == "input_json_delta":
                inputs.setdefault(index, []).append(str(delta.get("partial_json", "")))
    for index, pieces in inputs.items():
        text = "".join(pieces)
        try:
            blocks[index]["input"] = json.loads(text) if text.strip() else {}
        except ValueError:
            raise FormatError("bad_stream", f"the streamed input of tool block {index} is not JSON") from None
    message["type"] = "message"
    message["content"] = [blocks[k] for k in sorted(blocks, key=lambda k: (not isinstance(k, int), k))]
    return message


def complete(text: str) -> bool:
    """Whether a raw event stream says it ended: a ``data: [DONE]`` line, a first choice with a
    ``finish_reason`` (OpenAI chat chunks), a ``message_stop`` event or a ``stop_reason``
    (Anthropic), a ``response.completed`` event (Responses)."""
    if any(line.startswith("data:") and line[5:].strip() == "[DONE]" for line in text.splitlines()):
        return True
    for event in _events(text):
        if not isinstance(event, dict):
            continue
        if event.get("type") in ("message_stop", "response.completed"):
            return True
        if _dict(event.get("delta")).get("stop_reason"):
            return True
        for choice in event.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0 and choice.get("finish_reason"):
                return True
    return False


def assembled(text: str) -> dict[str, Any] | None:
    """The response a raw event stream streams, or ``None`` for a stream of another kind."""
    events = [e for e in _events(text) if isinstance(e, dict)]
    if any(e.get("object") == "chat.completion.chunk" for e in events):
        return _openai(events)
    if any(e.get("type") == "message_start" for e in events):
        return _anthropic(events)
    completed = next((e for e in events if e.get("type") == "response.completed"), None)
    if completed is not None and isinstance(completed.get("response"), dict):
        response: dict[str, Any] = completed["response"]
        return response
    return None
