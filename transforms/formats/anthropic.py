"""Anthropic Messages: a reader for logged requests and a writer of request bodies.

Reader (``anthropic``): ``{"system"?, "messages": [...], ...}`` or a bare message list. The
top-level ``system`` (a string or text blocks) becomes a leading system message. Block content:
``text`` blocks are joined; ``tool_use`` blocks become calls with ``input`` verbatim as the
arguments (an object); each ``tool_result`` block becomes its own tool message, in block order,
before the rest of its message (text left beside results becomes a message of the same role
after them); ``is_error: true`` prefixes the result text with ``[error] ``, the only place the
flat shape can keep the flag. ``thinking`` / ``redacted_thinking`` blocks are dropped (no flat
equivalent; their signatures only matter when replaying to Anthropic); image and document
blocks become ``[image]`` / ``[document]``, other block types ``[<type>]``; a
``mid_conv_system`` block becomes a system message.

Writer (``anthropic``): a Messages API request body ``{model?, max_tokens?, system?, messages,
tools?}``. System (and ``developer``) messages are joined into ``system``; the block of tool
messages right after an assistant message becomes ONE user message of ``tool_result`` blocks
(in block order; any following user text after them). A result outside its call's block (MEM-5
keeps such a result where it is) is refused with ``FormatError("result_not_adjacent")``, not
moved: ``--profile lossless`` re-attaches displaced results. Adjacent same-role messages are
merged; blank text never makes a block, and a message left with no block is left out.
Arguments must be a JSON object: a string is parsed, none or a blank string is ``{}``, anything
else is a FormatError (``args_not_an_object`` / ``args_not_json``), since ``input`` cannot hold
it. Call ids outside ``[A-Za-z0-9_-]`` are rewritten (invalid characters to ``_``, then
``_<k>`` if taken) in both the ``tool_use`` and its ``tool_result``. Roles other than system,
developer, user, assistant and tool are a FormatError (``unsupported_role``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from transforms.formats._common import (
    ERROR_PREFIX,
    JOIN,
    anthropic_tool,
    block_text,
    check_results_adjacent,
    foreign_entry,
    message_list,
    normalized_messages,
    note_reasoning,
    part_text,
    record_fields,
    record_model,
    record_tools,
)
from transforms.formats.base import (
    Conversation,
    FormatError,
    Reader,
    WriteContext,
    Writer,
    register_reader,
    register_writer,
)

# Block types no other format uses: enough to tell an Anthropic conversation by itself.
_ANTHROPIC_BLOCKS = frozenset(
    (
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "search_result",
        "document",
        "mid_conv_system",
        "container_upload",
    )
)

# --------------------------------------------------------------------------------------------
# Reader


def _read_message(message: Any, out: list, discarded: dict) -> None:
    """Append the flat messages one Anthropic message becomes; reasoning blocks go to ``discarded``."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        out.append(message)  # string content (or junk) is already what the core reads
        return
    texts, calls, results, systems = [], [], [], []
    for block in message["content"]:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use":
            call = {"tool_call_id": block.get("id"), "name": block.get("name")}
            if block.get("input") is not None:
                call["args"] = block["input"]
            calls.append(call)
        elif kind == "tool_result":
            text = block_text(block.get("content"), discarded)
            if block.get("is_error") is True:
                text = ERROR_PREFIX + text
            results.append({"role": "tool", "content": text, "tool_call_id": block.get("tool_use_id")})
        elif kind == "mid_conv_system":
            systems.append({"role": "system", "content": block_text(block.get("content"), discarded)})
        else:
            text = part_text(block)
            if text:
                texts.append(text)
            elif text is None:
                note_reasoning(block, discarded)
    out.extend(systems)
    out.extend(results)
    flat = dict(message)
    flat["content"] = JOIN.join(texts)
    if calls:
        existing = message.get("tool_calls")
        flat["tool_calls"] = (existing if isinstance(existing, list) else []) + calls
    # A user message that only carried results has nothing left to say.
    if calls or flat["content"].strip() or not (results or systems):
        out.append(flat)


def anthropic_to_flat(messages: list, system: Any = None, discarded: dict | None = None) -> list:
    out = []
    discarded = {} if discarded is None else discarded
    system_text = block_text(system, discarded) if isinstance(system, (str, list)) else ""
    if system_text:
        out.append({"role": "system", "content": system_text})
    for message in messages:
        _read_message(message, out, discarded)
    return out


def read_anthropic(record: Any, messages_field: str) -> Conversation:
    messages = message_list(record, messages_field)
    system = record.get("system") if isinstance(record, dict) else None
    discarded: dict = {}
    flat = anthropic_to_flat(messages, system, discarded)
    return Conversation(flat, record_fields(record, ("system",)), discarded or None)


def _anthropic_signal(record: Any, messages: list) -> bool:
    if isinstance(record, dict) and isinstance(record.get("system"), (str, list)):
        return True  # the top-level system parameter is Anthropic's alone
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and (
                    block.get("type") in _ANTHROPIC_BLOCKS or (block.get("type") == "image" and "source" in block)
                ):
                    return True
    return False


def detect_anthropic(record: Any, messages_field: str) -> bool:
    if isinstance(record, list):
        messages = record
    elif isinstance(record, dict):
        messages = record.get(messages_field)
    else:
        return False
    # Every entry must look like a message as well: this reader reads no other shape.
    return isinstance(messages, list) and _anthropic_signal(record, messages) and foreign_entry(messages) is None


# --------------------------------------------------------------------------------------------
# Writer

_VALID_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def _tool_ids(messages: list) -> dict[str, str]:
    """Anthropic-valid ids for every call: valid ones kept, others sanitized and made unique."""
    ids = [c["tool_call_id"] for m in messages for c in (m.get("tool_calls") or ())]
    taken = {i for i in ids if _VALID_ID.match(i)}
    mapping = {}
    for call_id in ids:
        if _VALID_ID.match(call_id):
            mapping[call_id] = call_id
            continue
        base = re.sub(r"[^A-Za-z0-9_-]", "_", call_id)
        candidate, k = base, 0
        while candidate in taken:
            k += 1
            candidate = f"{base}_{k}"
        taken.add(candidate)
        mapping[call_id] = candidate
    return mapping


def tool_input(args: Any) -> dict:
    """Flat call arguments as the object ``tool_use.input`` requires."""
    if args is None or (isinstance(args, str) and not args.strip()):
        return {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError as err:
            raise FormatError("args_not_json", f"arguments are not JSON: {err}") from None
    if not isinstance(args, dict):
        raise FormatError("args_not_an_object", f"arguments are a {type(args).__name__}, not an object")
    return args


def _text_blocks(text: str) -> list:
    # The API rejects empty and whitespace-only text blocks.
    return [{"type": "text", "text": text}] if text.strip() else []


def _tool_use(call: dict, ids: dict) -> dict:
    call_id = ids[call["tool_call_id"]]
    return {"type": "tool_use", "id": call_id, "name": call["name"], "input": tool_input(call.get("args"))}


def _tool_result(message: dict, ids: dict) -> dict:
    block = {"type": "tool_result", "tool_use_id": ids[message["tool_call_id"]]}
    text = message["content"]
    is_error = text.startswith(ERROR_PREFIX)
    if is_error:
        text = text[len(ERROR_PREFIX) :]
    if text:
        block["content"] = text
    if is_error:
        block["is_error"] = True
    return block


def flat_to_anthropic(messages: list) -> tuple[str, list]:
    """Normalized flat messages as ``(system, messages)`` of a Messages request."""
    # Blank system text is left out like blank turns: the API refuses empty text.
    system = JOIN.join(m["content"] for m in messages if m["role"] in ("system", "developer") and m["content"].strip())
    check_results_adjacent(messages)  # on the list as normalized: nothing is moved
    rest = [m for m in messages if m["role"] not in ("system", "developer")]
    ids = _tool_ids(rest)
    turns: list[dict] = []
    for message in rest:
        role = message["role"]
        if role == "user":
            blocks, turn_role = _text_blocks(message["content"]), "user"
        elif role == "assistant":
            blocks = _text_blocks(message["content"]) + [_tool_use(c, ids) for c in message.get("tool_calls") or ()]
            turn_role = "assistant"
        elif role == "tool":
            # Results follow their assistant message, so they open the next user turn.
            blocks, turn_role = [_tool_result(message, ids)], "user"
        else:
            raise FormatError("unsupported_role", f"role {role!r} has no Anthropic equivalent")
        if not blocks:
            continue
        if turns and turns[-1]["role"] == turn_role:
            turns[-1]["content"].extend(blocks)  # the API would merge them anyway
        else:
            turns.append({"role": turn_role, "content": blocks})
    for turn in turns:
        blocks = turn["content"]
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            turn["content"] = blocks[0]["text"]
    return system, turns


def write_anthropic(record: dict, ctx: WriteContext) -> dict:
    system, turns = flat_to_anthropic(normalized_messages(record, ctx.messages_field))
    if not turns:
        raise FormatError("empty_conversation", "no user or assistant content to write")
    out: dict = {}
    model = record_model(record, ctx.model)
    if model is not None:
        out["model"] = model
    # The Messages API requires max_tokens: the record's own, else --max-tokens.
    if isinstance(record.get("max_tokens"), int) and not isinstance(record["max_tokens"], bool):
        out["max_tokens"] = record["max_tokens"]
    elif ctx.max_tokens is not None:
        out["max_tokens"] = ctx.max_tokens
    if system:
        out["system"] = system
    out["messages"] = turns
    tools = record_tools(record)
    if tools is not None:
        out["tools"] = [anthropic_tool(t) for t in tools]
    return out


ANTHROPIC_READER = register_reader(
    Reader(
        "anthropic",
        read_anthropic,
        detect_anthropic,
        priority=30,
        description="Anthropic Messages (system parameter, tool_use / tool_result blocks)",
    )
)
ANTHROPIC_WRITER = register_writer(
    Writer(
        "anthropic",
        write_anthropic,
        description="Anthropic Messages API request body",
        uses=("model", "max_tokens"),  # --model, else the record's; the record's max_tokens, else --max-tokens
    )
)
