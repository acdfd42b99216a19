"""What the providers accept, as checks: each function returns a list of problems (empty = fine).

Written from /work/shared/spec/FORMATS.md (sections 1, 2 and 4), independently of the writers:

- OpenAI Chat Completions / fine-tuning messages: roles system, developer, user, assistant,
  tool; string content (text-part lists allowed), ``null`` only on an assistant message with
  calls; calls ``{id, type: "function", function: {name, arguments: <string>}}`` or custom
  calls ``{id, type: "custom", custom: {name, input: <string>}}``; ids unique; the pairing
  rule "every call answered by a tool message right after; no tool message without a preceding
  call" (the run of tool messages right after an assistant message answers exactly its calls).
- Fine-tuning line: ``{messages, tools?, parallel_tool_calls?, functions?}``, at least one
  assistant message; tools ``{type: "function", function: {name, description?, parameters?}}``.
- Batch line: ``{custom_id, method: "POST", url: "/v1/chat/completions", body: {model, messages,
  ...}}``.
- Anthropic request: no system role in messages (``system`` is a top-level string or text
  blocks), alternating user/assistant roles, non-empty content, no empty or whitespace-only text
  blocks, ``tool_use`` only in assistant messages with ``input`` an object and an id matching
  ``[A-Za-z0-9_-]+``, each ``tool_use`` answered by a ``tool_result`` in the very next message
  (a user message) and each ``tool_result`` matching a ``tool_use`` of the message right before,
  ``tool_result`` blocks before any other block of their message, ids unique; a tool
  definition (``{name, description?, input_schema, cache_control?, strict?: bool}``, the SDK's
  ``ToolParam``, or a server tool with its own ``type``) for every tool a ``tool_use`` names.
"""

from __future__ import annotations

import re
from typing import Any

_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
_OPENAI_KEYS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    # reasoning_content / reasoning_details / reasoning: OpenAI-compatible providers' (DeepSeek, OpenRouter).
    "assistant": {"role", "content", "name", "tool_calls", "refusal", "weight"}
    | {"reasoning_content", "reasoning_details", "reasoning"},
    "tool": {"role", "content", "tool_call_id"},
}
_ANTHROPIC_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def _text_content_ok(content: Any, media: bool = False) -> bool:
    """A string, or a non-empty list of text parts (and, in a user message, ``media`` parts:
    ``image_url {url}``, ``input_audio {data, format: wav|mp3}``, ``file {file}``)."""
    if isinstance(content, str):
        return True
    return isinstance(content, list) and bool(content) and all(_part_ok(p, media) for p in content)


def _part_ok(part: Any, media: bool) -> bool:
    if not isinstance(part, dict):
        return False
    kind = part.get("type")
    if kind == "text":
        return isinstance(part.get("text"), str)
    if not media:
        return False
    if kind == "image_url":
        return isinstance(part.get("image_url"), dict) and isinstance(part["image_url"].get("url"), str)
    if kind == "input_audio":
        audio = part.get("input_audio")
        return isinstance(audio, dict) and audio.get("format") in ("wav", "mp3") and isinstance(audio.get("data"), str)
    if kind == "file":
        return isinstance(part.get("file"), dict)
    return False


def openai_message_errors(messages: Any, open_end: bool = False) -> list[str]:
    """Problems of a Chat Completions message list, pairing rule included. ``open_end`` (a
    fine-tuning example): its last message's calls may be unanswered, the example's target."""
    if not isinstance(messages, list) or not messages:
        return ["messages is not a non-empty list"]
    errors = []
    seen_ids: set[str] = set()
    expecting: set[str] = set()  # ids of the last assistant message not answered yet
    in_results = False  # inside the run of tool messages right after an assistant with calls
    for n, m in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(m, dict):
            errors.append(f"{where}: not an object")
            continue
        role = m.get("role")
        if role not in _OPENAI_ROLES:
            errors.append(f"{where}: role {role!r}")
            continue
        extra = set(m) - _OPENAI_KEYS[role]
        if extra:
            errors.append(f"{where}: unexpected keys {sorted(extra)}")
        if role != "tool" and expecting:
            errors.append(f"{where}: calls {sorted(expecting)} not answered right after their call")
            expecting = set()
        if role != "tool":
            in_results = False
        calls = m.get("tool_calls")
        if role == "assistant" and calls is not None:
            if not isinstance(calls, list) or not calls:
                errors.append(f"{where}: tool_calls is not a non-empty list")
                calls = []
            for k, call in enumerate(calls):
                cwhere = f"{where}.tool_calls[{k}]"
                kind = call.get("type") if isinstance(call, dict) else None
                if kind not in ("function", "custom") or set(call) != {"id", "type", kind}:
                    errors.append(f"{cwhere}: not {{id, type: function|custom, function|custom}}")
                    continue
                if not isinstance(call["id"], str) or not call["id"]:
                    errors.append(f"{cwhere}: id {call['id']!r}")
                elif call["id"] in seen_ids:
                    errors.append(f"{cwhere}: id {call['id']!r} used twice")
                else:
                    seen_ids.add(call["id"])
                    expecting.add(call["id"])
                inner, value = call[kind], "arguments" if kind == "function" else "input"
                if not isinstance(inner, dict) or set(inner) != {"name", value}:
                    errors.append(f"{cwhere}.{kind}: not {{name, {value}}}")
                    continue
                if not isinstance(inner["name"], str) or not inner["name"]:
                    errors.append(f"{cwhere}.{kind}.name: {inner['name']!r}")
                if not isinstance(inner[value], str):
                    errors.append(f"{cwhere}.{kind}.{value}: not a string")
            in_results = True
            if m.get("content") is not None and not _text_content_ok(m.get("content")):
                errors.append(f"{where}: content is not text")
            continue
        if "content" not in m or not _text_content_ok(m["content"], media=role == "user"):
            errors.append(f"{where}: content missing or not text")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not in_results or call_id not in expecting:
                errors.append(f"{where}: tool message {call_id!r} without a preceding call")
            else:
                expecting.discard(call_id)
    if expecting and not (open_end and messages and messages[-1].get("tool_calls")):
        errors.append(f"end: calls {sorted(expecting)} never answered")
    return errors


def openai_tools_errors(tools: Any) -> list[str]:
    if not isinstance(tools, list) or not tools:
        return ["tools is not a non-empty list"]
    errors = []
    for k, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(tool, dict) and tool.get("type") == "custom" and set(tool) == {"type", "custom"}:
            if not isinstance(tool["custom"], dict) or not isinstance(tool["custom"].get("name"), str):
                errors.append(f"tools[{k}].custom: no name")
            continue
        if not isinstance(tool, dict) or tool.get("type") != "function" or set(tool) != {"type", "function"}:
            errors.append(f"tools[{k}]: not {{type: function, function}}")
        elif not isinstance(function, dict) or not isinstance(function.get("name"), str):
            errors.append(f"tools[{k}].function: no name")
        elif not set(function) <= {"name", "description", "parameters", "strict"}:
            errors.append(
                f"tools[{k}].function: unexpected keys {sorted(set(function) - {'name', 'description', 'parameters', 'strict'})}"
            )
        elif "parameters" in function and not isinstance(function["parameters"], dict):
            errors.append(f"tools[{k}].function.parameters: not an object")
    return errors


def openai_finetune_errors(line: Any) -> list[str]:
    """Problems of one OpenAI chat fine-tuning JSONL line."""
    if not isinstance(line, dict):
        return ["line is not an object"]
    errors = []
    extra = set(line) - {"messages", "tools", "parallel_tool_calls", "functions"}
    if extra:
        errors.append(f"unexpected keys {sorted(extra)}")
    errors += openai_message_errors(line.get("messages"), open_end=True)
    if isinstance(line.get("messages"), list) and not any(
        isinstance(m, dict) and m.get("role") == "assistant" for m in line["messages"]
    ):
        errors.append("no assistant message")
    if "tools" in line:
        errors += openai_tools_errors(line["tools"])
    if "parallel_tool_calls" in line and not isinstance(line["parallel_tool_calls"], bool):
        errors.append("parallel_tool_calls is not a boolean")
    return errors


def openai_batch_errors(line: Any) -> list[str]:
    """Problems of one OpenAI Batch API input line for /v1/chat/completions."""
    if not isinstance(line, dict):
        return ["line is not an object"]
    errors = []
    if set(line) != {"custom_id", "method", "url", "body"}:
        errors.append(f"keys {sorted(line)} are not custom_id, method, url, body")
    if not isinstance(line.get("custom_id"), str) or not line.get("custom_id"):
        errors.append("custom_id is not a non-empty string")
    if line.get("method") != "POST":
        errors.append(f"method {line.get('method')!r}")
    if line.get("url") != "/v1/chat/completions":
        errors.append(f"url {line.get('url')!r}")
    body = line.get("body")
    if not isinstance(body, dict):
        return errors + ["body is not an object"]
    if not isinstance(body.get("model"), str) or not body.get("model"):
        errors.append("body.model is not a non-empty string")
    errors += [f"body.{e}" for e in openai_message_errors(body.get("messages"))]
    if "tools" in body:
        errors += [f"body.{e}" for e in openai_tools_errors(body["tools"])]
    if "parallel_tool_calls" in body and "tools" not in body:
        errors.append("body.parallel_tool_calls without tools")
    return errors


def _anthropic_blocks(content: Any, where: str, errors: list) -> list:
    if isinstance(content, str):
        if not content.strip():
            errors.append(f"{where}: empty string content")
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        errors.append(f"{where}: content is not a string or a non-empty block list")
        return []
    for k, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            errors.append(f"{where}.content[{k}]: not a block")
        elif block["type"] == "text" and (not isinstance(block.get("text"), str) or not block["text"].strip()):
            errors.append(f"{where}.content[{k}]: empty text block")
    return [b for b in content if isinstance(b, dict)]


def anthropic_request_errors(body: Any) -> list[str]:
    """Problems of one Anthropic Messages API request body."""
    if not isinstance(body, dict):
        return ["body is not an object"]
    errors = []
    extra = set(body) - {
        "model",
        "max_tokens",
        "system",
        "messages",
        "tools",
        "tool_choice",
        "metadata",
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "thinking",
        "stream",
    }
    if extra:
        errors.append(f"unexpected keys {sorted(extra)}")
    system = body.get("system")
    if system is not None and not (
        (isinstance(system, str) and system.strip())
        or (
            isinstance(system, list)
            and all(isinstance(b, dict) and b.get("type") == "text" and str(b.get("text", "")).strip() for b in system)
        )
    ):
        errors.append("system is not non-empty text or text blocks")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return errors + ["messages is not a non-empty list"]
    seen_ids: set[str] = set()
    previous_uses: set[str] = set()
    previous_role = None
    for n, m in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(m, dict) or set(m) != {"role", "content"}:
            errors.append(f"{where}: not {{role, content}}")
            continue
        role = m["role"]
        if role not in ("user", "assistant"):
            errors.append(f"{where}: role {role!r}")
        if role == previous_role:
            errors.append(f"{where}: second {role} message in a row")
        blocks = _anthropic_blocks(m["content"], where, errors)
        uses, answered = set(), set()
        results_done = False
        for k, block in enumerate(blocks):
            bwhere = f"{where}.content[{k}]"
            kind = block.get("type")
            if kind == "tool_use":
                if role != "assistant":
                    errors.append(f"{bwhere}: tool_use outside an assistant message")
                if not isinstance(block.get("id"), str) or not _ANTHROPIC_ID.match(block["id"]):
                    errors.append(f"{bwhere}: id {block.get('id')!r}")
                elif block["id"] in seen_ids:
                    errors.append(f"{bwhere}: id {block['id']!r} used twice")
                else:
                    seen_ids.add(block["id"])
                    uses.add(block["id"])
                if not isinstance(block.get("name"), str) or not block["name"]:
                    errors.append(f"{bwhere}: name {block.get('name')!r}")
                if not isinstance(block.get("input"), dict):
                    errors.append(f"{bwhere}: input is not an object")
            elif kind == "tool_result":
                if role != "user":
                    errors.append(f"{bwhere}: tool_result outside a user message")
                if results_done:
                    errors.append(f"{bwhere}: tool_result after other content")
                call_id = block.get("tool_use_id")
                if call_id not in previous_uses:
                    errors.append(f"{bwhere}: tool_result {call_id!r} without a tool_use in the previous message")
                elif call_id in answered:
                    errors.append(f"{bwhere}: tool_result {call_id!r} twice")
                answered.add(call_id)
                content = block.get("content")
                if content is not None and not isinstance(content, (str, list)):
                    errors.append(f"{bwhere}: content is not a string or blocks")
                if "is_error" in block and not isinstance(block["is_error"], bool):
                    errors.append(f"{bwhere}: is_error is not a boolean")
            else:
                results_done = True
        missing = previous_uses - answered
        if missing:
            errors.append(f"{where}: tool_use ids {sorted(missing)} have no tool_result in this message")
        previous_uses, previous_role = uses, role
    if previous_uses:
        errors.append(f"end: tool_use ids {sorted(previous_uses)} never answered")
    tools = body.get("tools")
    defined: set = set()
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            errors.append("tools is not a non-empty list")
        else:
            for k, tool in enumerate(tools):
                if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                    errors.append(f"tools[{k}]: no name")
                    continue
                defined.add(tool["name"])
                if "type" not in tool and not isinstance(tool.get("input_schema"), dict):
                    errors.append(f"tools[{k}]: input_schema is not an object")
                elif "type" not in tool and not set(tool) <= {
                    "name",
                    "description",
                    "input_schema",
                    "cache_control",
                    "strict",
                }:
                    errors.append(f"tools[{k}]: unexpected keys {sorted(tool)}")
                elif "strict" in tool and not isinstance(tool["strict"], bool):
                    errors.append(f"tools[{k}]: strict is not a boolean")
    # Every tool a tool_use names needs a definition in `tools`.
    for n, m in enumerate(messages):
        content = m.get("content") if isinstance(m, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") not in defined:
                errors.append(f"messages[{n}]: tool_use of {block.get('name')!r}, which has no tool definition")
    return errors


# --------------------------------------------------------------------------------------------
# LLaMA-Factory ShareGPT training records (hiyouga/LLaMA-Factory data/README.md and
# src/llamafactory/data/converter.py, as summarized in FORMATS.md §6): `conversations` of
# {from, value} with human/observation at odd positions and gpt/function_call at even ones, an
# even number of turns, function_call values JSON {name, arguments: object} or a list of them,
# `system` a string, `tools` a JSON string of a list of {name, description?, parameters?}.

_LF_ODD, _LF_EVEN = ("human", "observation"), ("gpt", "function_call")


def sharegpt_training_errors(record: Any) -> list[str]:
    if not isinstance(record, dict):
        return ["record is not an object"]
    errors = []
    turns = record.get("conversations")
    if not isinstance(turns, list) or not turns:
        return ["conversations is not a non-empty list"]
    for n, turn in enumerate(turns):
        where = f"conversations[{n}]"
        if not isinstance(turn, dict) or set(turn) != {"from", "value"} or not isinstance(turn.get("value"), str):
            errors.append(f"{where}: not {{from, value: str}}")
            continue
        allowed = _LF_ODD if n % 2 == 0 else _LF_EVEN
        if turn["from"] not in allowed:
            errors.append(f"{where}: {turn['from']!r} where {allowed} belong")
        if turn["from"] == "function_call":
            try:
                value = __import__("json").loads(turn["value"])
            except ValueError:
                errors.append(f"{where}: function_call value is not JSON")
                continue
            calls = value if isinstance(value, list) else [value]
            for call in calls:
                if (
                    not isinstance(call, dict)
                    or set(call) != {"name", "arguments"}
                    or not isinstance(call["name"], str)
                ):
                    errors.append(f"{where}: a call is not {{name, arguments}}")
    if len(turns) % 2:
        errors.append(f"{len(turns)} turns, not an even number")
    if "system" in record and not isinstance(record["system"], str):
        errors.append("system is not a string")
    if "tools" in record:
        try:
            tools = __import__("json").loads(record["tools"]) if isinstance(record["tools"], str) else None
        except ValueError:
            tools = None
        if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) and set(t) <= {"name", "description", "parameters"}
            for t in tools
        ):
            errors.append("tools is not a JSON string of a list of {name, description?, parameters?}")
    return errors


# --------------------------------------------------------------------------------------------
# OpenAI Responses request bodies (FORMATS.md §3, openai-python types/responses): `input` items
# message {type?, role, content}, function_call {call_id, name, arguments: str},
# function_call_output {call_id, output}, custom_tool_call {call_id, name, input: str} /
# custom_tool_call_output; "every function_call needs a function_call_output with the same
# call_id, and vice versa"; call ids unique; `instructions` a string.

_RS_ROLES = ("user", "assistant", "system", "developer")


def openai_responses_errors(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["body is not an object"]
    errors = []
    extra = set(body) - {
        "model",
        "instructions",
        "input",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "max_output_tokens",
        "metadata",
        "reasoning",
        "store",
        "text",
    }
    if extra:
        errors.append(f"unexpected keys {sorted(extra)}")
    if "instructions" in body and not isinstance(body["instructions"], str):
        errors.append("instructions is not a string")
    items = body.get("input")
    if not isinstance(items, list) or not items:
        return errors + ["input is not a non-empty list"]
    calls: dict = {}  # call_id -> kind of its output
    answered: set = set()
    for n, item in enumerate(items):
        where = f"input[{n}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message":
            if item.get("role") not in _RS_ROLES or not isinstance(item.get("content"), (str, list)):
                errors.append(f"{where}: not a message {{role, content}}")
        elif kind in ("function_call", "custom_tool_call"):
            value = "arguments" if kind == "function_call" else "input"
            if set(item) != {"type", "call_id", "name", value}:
                errors.append(f"{where}: keys {sorted(item)}")
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                errors.append(f"{where}: call_id {call_id!r}")
            elif call_id in calls:
                errors.append(f"{where}: call_id {call_id!r} used twice")
            else:
                calls[call_id] = kind + "_output" if kind == "custom_tool_call" else "function_call_output"
            if not isinstance(item.get("name"), str) or not item.get("name"):
                errors.append(f"{where}: name {item.get('name')!r}")
            if not isinstance(item.get(value), str):
                errors.append(f"{where}: {value} is not a string")
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            if set(item) != {"type", "call_id", "output"} or not isinstance(item.get("output"), (str, list)):
                errors.append(f"{where}: not {{type, call_id, output}}")
            if calls.get(call_id) != kind:
                errors.append(f"{where}: no {kind[:-7]} with call_id {call_id!r} before it")
            elif call_id in answered:
                errors.append(f"{where}: second output for {call_id!r}")
            answered.add(call_id)
        elif kind == "reasoning":
            # Replayed as it came (id, summary, encrypted_content): right before the item it preceded.
            if not isinstance(item.get("id"), str) or not isinstance(item.get("summary"), list):
                errors.append(f"{where}: a reasoning item without id and summary")
            following = items[n + 1] if n + 1 < len(items) else None
            if not isinstance(following, dict) or following.get("type") == "function_call_output":
                errors.append(f"{where}: a reasoning item without its following item")
        else:
            errors.append(f"{where}: item type {kind!r}")
    missing = set(calls) - answered
    if missing:
        errors.append(f"calls {sorted(missing)} have no output")
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            errors.append("tools is not a non-empty list")
        else:
            for k, tool in enumerate(tools):
                if (
                    not isinstance(tool, dict)
                    or tool.get("type") not in ("function", "custom")
                    or not isinstance(tool.get("name"), str)
                ):
                    errors.append(f"tools[{k}]: not {{type: function|custom, name, ...}}")
                elif tool["type"] == "function" and not set(tool) <= {
                    "type",
                    "name",
                    "description",
                    "parameters",
                    "strict",
                }:
                    errors.append(f"tools[{k}]: unexpected keys {sorted(tool)}")
    return errors


# --------------------------------------------------------------------------------------------
# Gemini generateContent bodies (FORMATS.md §5, python-genai types): `contents` of {role:
# user|model, parts}, one data kind per part, functionCall {id?, name, args: object} only in
# model turns, functionResponse {id?, name, response: object} only in user turns; "the response
# turn right after the call turn, same number of parts" (Gemini's error: "Please ensure that the
# number of function response parts is equal to the number of function call parts of the
# function call turn."), names (and ids, when given) matching; roles alternating; no blank text.

_GEMINI_KEYS = {
    "contents",
    "systemInstruction",
    "tools",
    "toolConfig",
    "generationConfig",
    "safetySettings",
    "cachedContent",
}
_GEMINI_DATA = {
    "text",
    "functionCall",
    "functionResponse",
    "inlineData",
    "fileData",
    "executableCode",
    "codeExecutionResult",
    "toolCall",
    "toolResponse",
}


def gemini_request_errors(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["body is not an object"]
    errors = []
    if set(body) - _GEMINI_KEYS:
        errors.append(f"unexpected keys {sorted(set(body) - _GEMINI_KEYS)}")
    system = body.get("systemInstruction")
    if system is not None and not (
        isinstance(system, dict)
        and isinstance(system.get("parts"), list)
        and system["parts"]
        and all(isinstance(p, dict) and str(p.get("text", "")).strip() for p in system["parts"])
    ):
        errors.append("systemInstruction is not a content of non-blank text parts")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return errors + ["contents is not a non-empty list"]
    previous_calls: list = []  # (id, name) of the model turn before, awaiting responses
    previous_role = None
    for n, content in enumerate(contents):
        where = f"contents[{n}]"
        if (
            not isinstance(content, dict)
            or set(content) != {"role", "parts"}
            or content["role"] not in ("user", "model")
        ):
            errors.append(f"{where}: not {{role: user|model, parts}}")
            previous_calls, previous_role = [], None
            continue
        role, parts = content["role"], content["parts"]
        if role == previous_role:
            errors.append(f"{where}: second {role} content in a row")
        if not isinstance(parts, list) or not parts:
            errors.append(f"{where}: parts is not a non-empty list")
            parts = []
        calls, responses = [], []
        for k, part in enumerate(parts):
            pwhere = f"{where}.parts[{k}]"
            kinds = set(part) & _GEMINI_DATA if isinstance(part, dict) else set()
            if len(kinds) != 1:
                errors.append(f"{pwhere}: not exactly one data kind")
                continue
            (kind,) = kinds
            if kind == "text" and (not isinstance(part["text"], str) or not part["text"].strip()):
                errors.append(f"{pwhere}: blank text")
            elif kind == "functionCall":
                call = part["functionCall"]
                if role != "model":
                    errors.append(f"{pwhere}: functionCall outside a model content")
                if (
                    not isinstance(call, dict)
                    or not isinstance(call.get("name"), str)
                    or not isinstance(call.get("args"), dict)
                ):
                    errors.append(f"{pwhere}: functionCall is not {{name, args: object}}")
                else:
                    calls.append((call.get("id"), call["name"]))
            elif kind == "functionResponse":
                response = part["functionResponse"]
                if role != "user":
                    errors.append(f"{pwhere}: functionResponse outside a user content")
                if (
                    not isinstance(response, dict)
                    or not isinstance(response.get("name"), str)
                    or not isinstance(response.get("response"), dict)
                ):
                    errors.append(f"{pwhere}: functionResponse is not {{name, response: object}}")
                else:
                    responses.append((response.get("id"), response["name"]))
        if previous_calls or responses:
            if len(responses) != len(previous_calls):
                errors.append(
                    f"{where}: {len(responses)} function responses for {len(previous_calls)} calls of the turn before"
                )
            elif sorted(name for _, name in responses) != sorted(name for _, name in previous_calls):
                errors.append(f"{where}: function response names do not match the calls")
            elif all(i is not None for i, _ in previous_calls) and {i for i, _ in responses} != {
                i for i, _ in previous_calls
            }:
                errors.append(f"{where}: function response ids do not match the calls")
        previous_calls, previous_role = calls, role
    if previous_calls:
        errors.append("end: function calls never answered")
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            errors.append("tools is not a non-empty list")
        else:
            for k, tool in enumerate(tools):
                declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
                if not isinstance(declarations, list) or not all(
                    isinstance(d, dict)
                    and isinstance(d.get("name"), str)
                    and set(d) <= {"name", "description", "parameters"}
                    for d in declarations
                ):
                    errors.append(f"tools[{k}]: not {{functionDeclarations: [{{name, description?, parameters?}}]}}")
    return errors


# --------------------------------------------------------------------------------------------
# AWS Bedrock Converse request bodies (the Converse API reference: Message, ContentBlock,
# ToolUseBlock, ToolResultBlock, ToolConfiguration, ToolSpecification): messages {role:
# user|assistant, content: [ContentBlock]} starting with a user message and alternating; each
# block a union of exactly one member; no blank text; toolUse {toolUseId, name, input: object}
# only in assistant messages, ids and names matching [a-zA-Z0-9_-]+ (1 to 64), each answered
# by a toolResult {toolUseId, content: [ToolResultContentBlock], status?: success|error} in the
# next (user) message, results before any other block there; a toolConfig whose toolSpecs name
# every tool a toolUse calls ("The toolConfig field must be defined when using toolUse and
# toolResult content blocks"); system a list of {text} blocks. A toolUse of type
# "server_tool_use" (a system tool the provider runs) and the toolResult answering it are the
# model's own output, in its message: no toolSpec, no pairing with the next message.

_BEDROCK_KEYS = {
    "modelId",
    "messages",
    "system",
    "inferenceConfig",
    "toolConfig",
    "guardrailConfig",
    "additionalModelRequestFields",
    "additionalModelResponseFieldPaths",
    "promptVariables",
    "requestMetadata",
    "performanceConfig",
}
_BEDROCK_MEMBERS = {
    "text",
    "image",
    "document",
    "video",
    "audio",
    "toolUse",
    "toolResult",
    "guardContent",
    "cachePoint",
    "reasoningContent",
    "citationsContent",
    "searchResult",
}
_BEDROCK_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _bedrock_block(block: Any, where: str, errors: list) -> tuple[str, Any]:
    if not isinstance(block, dict) or len(block) != 1 or next(iter(block)) not in _BEDROCK_MEMBERS:
        errors.append(f"{where}: not a one-member ContentBlock")
        return "", None
    ((key, value),) = block.items()
    if key == "text" and (not isinstance(value, str) or not value.strip()):
        errors.append(f"{where}: blank text")
    return key, value


def bedrock_request_errors(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["body is not an object"]
    errors = []
    if set(body) - _BEDROCK_KEYS:
        errors.append(f"unexpected keys {sorted(set(body) - _BEDROCK_KEYS)}")
    system = body.get("system")
    if system is not None and not (
        isinstance(system, list)
        and system
        and all(isinstance(b, dict) and isinstance(b.get("text"), str) and b["text"].strip() for b in system)
    ):
        errors.append("system is not a list of non-blank {text} blocks")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return errors + ["messages is not a non-empty list"]
    uses_named: set = set()
    server_uses: set = set()
    previous_uses: set = set()
    previous_role = None
    for n, message in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            errors.append(f"{where}: not {{role, content}}")
            continue
        role = message["role"]
        if role not in ("user", "assistant"):
            errors.append(f"{where}: role {role!r}")
        if n == 0 and role != "user":
            errors.append(f"{where}: a conversation must start with a user message")
        if role == previous_role:
            errors.append(f"{where}: second {role} message in a row")
        content = message["content"]
        if not isinstance(content, list) or not content:
            errors.append(f"{where}: content is not a non-empty block list")
            content = []
        uses, answered = set(), set()
        results_done = False
        for k, block in enumerate(content):
            key, value = _bedrock_block(block, f"{where}.content[{k}]", errors)
            if key == "toolUse" and isinstance(value, dict) and value.get("type") == "server_tool_use":
                server_uses.add(value.get("toolUseId"))
            elif key == "toolResult" and isinstance(value, dict) and value.get("toolUseId") in server_uses:
                pass
            elif key == "toolUse":
                if role != "assistant":
                    errors.append(f"{where}.content[{k}]: toolUse outside an assistant message")
                if not isinstance(value, dict) or not isinstance(value.get("input"), dict):
                    errors.append(f"{where}.content[{k}]: toolUse input is not an object")
                    continue
                for field in ("toolUseId", "name"):
                    if not isinstance(value.get(field), str) or not _BEDROCK_NAME.match(value[field]):
                        errors.append(f"{where}.content[{k}]: toolUse {field} {value.get(field)!r}")
                uses.add(value.get("toolUseId"))
                uses_named.add(value.get("name"))
            elif key == "toolResult":
                if role != "user":
                    errors.append(f"{where}.content[{k}]: toolResult outside a user message")
                if results_done:
                    errors.append(f"{where}.content[{k}]: toolResult after other content")
                call_id = value.get("toolUseId") if isinstance(value, dict) else None
                if call_id not in previous_uses:
                    errors.append(f"{where}.content[{k}]: toolResult {call_id!r} without a toolUse just before")
                answered.add(call_id)
                if not isinstance(value.get("content"), list) or value.get("status") not in (None, "success", "error"):
                    errors.append(f"{where}.content[{k}]: toolResult is not {{toolUseId, content: [...], status?}}")
            else:
                results_done = True
        if previous_uses - answered:
            errors.append(f"{where}: toolUse ids {sorted(previous_uses - answered)} have no toolResult here")
        previous_uses, previous_role = uses, role
    if previous_uses:
        errors.append("end: toolUse ids never answered")
    config = body.get("toolConfig")
    specs = set()
    if config is not None:
        tools = config.get("tools") if isinstance(config, dict) else None
        if not isinstance(tools, list) or not tools:
            errors.append("toolConfig.tools is not a non-empty list")
        for k, tool in enumerate(tools or ()):
            if isinstance(tool, dict) and tool.keys() == {"systemTool"}:
                continue  # a tool the provider runs (nova_grounding, say)
            spec = tool.get("toolSpec") if isinstance(tool, dict) else None
            if not isinstance(spec, dict) or not _BEDROCK_NAME.match(str(spec.get("name"))):
                errors.append(f"toolConfig.tools[{k}]: not a toolSpec with a valid name")
                continue
            schema = spec.get("inputSchema")
            if not isinstance(schema, dict) or not isinstance(schema.get("json"), dict):
                errors.append(f"toolConfig.tools[{k}]: inputSchema is not {{json: object}}")
            specs.add(spec["name"])
    if uses_named - specs:
        errors.append(f"toolUse of {sorted(map(str, uses_named - specs))} without a toolSpec in toolConfig")
    return errors
