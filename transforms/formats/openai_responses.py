"""OpenAI Responses API input items: a reader, and a writer of request bodies.

``{"input": [items] | "text", "instructions"?: ..., ...}`` or a bare item list.
``instructions`` (a string, or a list of items) becomes the leading system message(s); a string
``input`` is one user message. Items:

- ``message`` (``type`` may be omitted): role kept, ``developer`` becoming ``system``; content a
  string or parts (``input_text`` / ``output_text`` joined, images and files as placeholders);
- ``function_call`` / ``custom_tool_call``: a call ``{call_id → tool_call_id, name, arguments |
  input → args}`` (the item ``id`` is not the join key and is not kept). Consecutive calls, and
  the assistant message right before them, fold into ONE flat assistant message;
- ``function_call_output`` / ``custom_tool_call_output``: a tool message (``output`` string or
  parts);
- ``reasoning``: dropped (no flat equivalent; it carries ``encrypted_content`` that only the
  provider can read). It does not break the folding above.

- built-in tools the provider runs (``web_search_call``, ``file_search_call``,
  ``code_interpreter_call``, ``image_generation_call``, ``mcp_call``, ``mcp_list_tools``,
  ``mcp_approval_request``) and ``compaction`` items: not client calls; their text joins the
  assistant message in the shared rendering (``transforms.formats._rendered``), call then
  result; an ``mcp_approval_response`` is a user message in that rendering.

Items of built-in tools the client runs (``computer_call``, ``local_shell_call``,
``shell_call``, ``apply_patch_call`` and their outputs) and ``item_reference`` are a FormatError
(``unsupported_item``): their actions cannot be carried, and silently losing a turn would hide
them. An item type the reader does not know is ``unknown_block``.

Writer (``openai-responses``): a replay request body ``{model?, instructions?, input, tools?}``;
see ``write_responses``.
"""

from __future__ import annotations

from typing import Any

from transforms.core.ledger import note, note_unread_keys
from transforms.core.normalize import content_text
from transforms.formats import media, reasoning
from transforms.formats._common import (
    JOIN,
    SYSTEM_ROLES,
    bare_list_conversation,
    block_text,
    check_results_adjacent,
    joined_system,
    normalized_messages,
    openai_tool,
    record_fields,
    record_model,
    unsupported_role,
)
from transforms.formats._rendered import SERVER_CALL, SERVER_RESULT, render, unknown_block, without
from transforms.formats._tools import check_tool_name, tools_for
from transforms.formats.base import (
    Conversation,
    FormatError,
    Reader,
    WriteContext,
    Writer,
    count_written,
    register_reader,
    register_writer,
)
from transforms.formats.openai import openai_arguments
from transforms.formats.schema import JSON, STRING

_CALLS = ("function_call", "custom_tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
#: Items of built-in tools the provider runs itself: (the tool's name, or ``None`` for the
#: item's own ``name``; the keys of the call; the keys of its result). Not client calls: their
#: text is kept in the assistant message, in the shared rendering (``_rendered``).
_SERVER_ITEMS: dict[str, tuple[str | None, tuple[str, ...], tuple[str, ...]]] = {
    "web_search_call": ("web_search", ("action",), ()),
    "file_search_call": ("file_search", ("queries",), ("results",)),
    "code_interpreter_call": ("code_interpreter", ("container_id", "code"), ("outputs",)),
    "image_generation_call": ("image_generation", ("revised_prompt",), ()),
    "mcp_call": (None, ("server_label", "arguments"), ("output", "error")),
    "mcp_list_tools": ("mcp_list_tools", ("server_label",), ("tools", "error")),
    "mcp_approval_request": (None, ("server_label", "arguments"), ()),
}
#: Items of built-in tools the client runs (paired by ``call_id`` like function calls, but with
#: actions a flat call cannot hold and no writer could send back), and references to stored
#: items whose content the record does not hold: refused (``unsupported_item``).
_UNSUPPORTED = frozenset(
    (
        "computer_call",
        "computer_call_output",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "item_reference",
    )
)
_TYPED = frozenset(
    ("message", "reasoning", "compaction", "mcp_approval_response") + _CALLS + _OUTPUTS + tuple(_SERVER_ITEMS)
)
_PART_TYPES = frozenset(("input_text", "output_text", "input_image", "input_file", "input_audio"))


#: What a message item may hold besides its content: nothing that is text.
_MESSAGE_ITEM_KEYS = frozenset(("type", "role", "id", "status"))


#: The keys of each item kind the reader reads (or that are item metadata); any other key of
#: an item goes to the ledger.
_MESSAGE_READ = _MESSAGE_ITEM_KEYS | {"content"}
_CALL_READ = frozenset(("type", "id", "status", "call_id", "name", "arguments", "input"))
_OUTPUT_READ = frozenset(("type", "id", "status", "call_id", "output"))


def _lost_message(item: Any) -> bool:
    """A message item without ``content`` that holds other keys: its text is somewhere unread."""
    return (
        isinstance(item, dict)
        and (item.get("type") or "message") == "message"
        and "content" not in item
        and not item.keys() <= _MESSAGE_ITEM_KEYS
    )


def server_item_text(item: dict[str, Any]) -> str:
    """The rendering of a built-in tool item the provider ran: its call, then its result (an
    image generation's base64 image is an ``[image]`` placeholder, as media are elsewhere)."""
    name, call_keys, result_keys = _SERVER_ITEMS[item["type"]]
    name = name or content_text(item.get("name"))
    call = render(SERVER_CALL, name, {k: item[k] for k in call_keys if k in item})
    result: Any = {k: item[k] for k in result_keys if item.get(k) not in (None, "", [], {})}
    if item["type"] == "image_generation_call" and item.get("result"):
        result = "[image]"
    return call + JOIN + render(SERVER_RESULT, name, result) if result else call


def _note_unrendered(item: dict[str, Any], discarded: dict[str, Any]) -> None:
    """Count the keys of a server item its rendering does not show (item metadata aside)."""
    _, call_keys, result_keys = _SERVER_ITEMS[item["type"]]
    shown = ("type", "id", "status", "name", "result") + call_keys + result_keys
    note_unread_keys(item, frozenset(shown), discarded)


def responses_to_flat(items: list[Any], discarded: dict[str, Any] | None = None) -> list[Any]:
    """Responses items as flat messages; reasoning items and parts go to the ledger ``discarded``."""
    out = []
    discarded = {} if discarded is None else discarded
    folding: dict[str, Any] | None = None  # the assistant message that a following call joins
    thinking: list[Any] = []  # reasoning items awaiting the assistant item they precede
    for item in items:
        kind = (item.get("type") or "message") if isinstance(item, dict) else None
        if thinking and not _carries(kind, item):
            for pending in thinking:  # no assistant item of its own follows: left out, counted
                note(discarded, "reasoning", pending)
            thinking = []
        if not isinstance(item, dict):
            out.append(item)  # the core drops it, counted
            folding = None
            continue
        if kind == "message":
            folding = _add_message(item, out, thinking, discarded)
        elif kind in _CALLS:
            folding = _add_call(kind, item, out, folding, thinking, discarded)
        elif kind in _OUTPUTS:
            _add_output(item, out, discarded)
            folding = None
        elif kind in _SERVER_ITEMS or kind == "compaction":
            folding = _add_server_item(kind, item, out, folding, discarded)
        elif kind == "mcp_approval_response":
            # The client's answer to an approval request: its turn.
            text = render("server tool approval", None, without(item, "approval_request_id"))
            out.append({"role": "user", "content": text})
            folding = None
        elif kind == "reasoning":
            thinking.append(item)  # carried on the assistant item it precedes
            continue
        elif kind in _UNSUPPORTED:
            raise FormatError("unsupported_item", f"input item type {kind!r} has no flat equivalent")
        else:
            raise unknown_block(kind, "openai-responses")
    for pending in thinking:
        note(discarded, "reasoning", pending)
    return out


def _add_message(
    item: dict[str, Any], out: list[Any], thinking: list[Any], discarded: dict[str, Any]
) -> dict[str, Any] | None:
    """A message item as a flat message; the reasoning before an assistant one is carried on
    it. The message a following call joins (an assistant one), or None."""
    if _lost_message(item):
        shown = ", ".join(map(str, list(item)[:8]))
        raise FormatError("unsupported_item", f"a message item without content (its keys: {shown})")
    note_unread_keys(item, _MESSAGE_READ, discarded)
    role = item.get("role")
    text = block_text(item.get("content"), discarded)
    message = {"role": "system" if role == "developer" else role, "content": text}
    media.carry(message, media.openai_items(item.get("content"), "openai-responses"))
    out.append(message)
    folding = message if role == "assistant" else None
    if thinking and folding is not None:
        _carry(folding, thinking, None)
    return folding


def _add_call(
    kind: str,
    item: dict[str, Any],
    out: list[Any],
    folding: dict[str, Any] | None,
    thinking: list[Any],
    discarded: dict[str, Any],
) -> dict[str, Any]:
    """A call item, joined to the assistant message before it (or one of its own), which
    carries the reasoning before the call; that message."""
    note_unread_keys(item, _CALL_READ, discarded)
    call = {"tool_call_id": item.get("call_id"), "name": item.get("name")}
    args = item.get("arguments") if kind == "function_call" else item.get("input")
    if args is not None:
        call["args"] = args
    if folding is None:
        folding = {"role": "assistant", "content": ""}
        out.append(folding)
    folding.setdefault("tool_calls", []).append(call)
    if thinking:
        _carry(folding, thinking, call["tool_call_id"])
    return folding


def _add_output(item: dict[str, Any], out: list[Any], discarded: dict[str, Any]) -> None:
    """A call's output item as a tool message."""
    note_unread_keys(item, _OUTPUT_READ, discarded)
    output = block_text(item.get("output"), discarded)
    out.append({"role": "tool", "content": output, "tool_call_id": item.get("call_id")})
    media.carry(out[-1], media.openai_items(item.get("output"), "openai-responses"))


def _add_server_item(
    kind: str, item: dict[str, Any], out: list[Any], folding: dict[str, Any] | None, discarded: dict[str, Any]
) -> dict[str, Any]:
    """An item the provider ran (a built-in tool, a compaction): text in the assistant message,
    not a call for MEM-5 to pair; a message of its own after one with calls. That message."""
    if kind == "compaction":
        text = render("compaction summary", None, item)  # its content is encrypted
    else:
        _note_unrendered(item, discarded)
        text = server_item_text(item)
    if folding is None or folding.get("tool_calls"):
        folding = {"role": "assistant", "content": text}
        out.append(folding)
    else:
        folding["content"] = JOIN.join(t for t in (folding["content"], text) if t)
    return folding


def _carries(kind: Any, item: Any) -> bool:
    """Whether an item takes the reasoning items before it: another reasoning item, an
    assistant message or a call (the items a reasoning item precedes in a model's output)."""
    if kind == "reasoning" or kind in _CALLS:
        return True
    return kind == "message" and isinstance(item, dict) and item.get("role") == "assistant"


def _carry(message: dict[str, Any], thinking: list[Any], before: Any) -> None:
    """Carry ``thinking`` (emptied) on ``message``, each item noting the call it preceded
    (``None``: the message itself), so the writer puts it back right before that item."""
    carried = message.get(reasoning.FIELD)
    if carried is None:
        carried = message[reasoning.FIELD] = reasoning.carried(reasoning.RESPONSES, items=[])
    carried["items"].extend({"before": before, "item": item} for item in thinking)
    thinking.clear()


def read_responses(record: Any, messages_field: str) -> Conversation:
    bare = bare_list_conversation(record, responses_to_flat)
    if bare is not None:
        return bare
    discarded: dict[str, Any] = {}
    if "input" not in record:
        raise FormatError("missing_input", "no 'input' field")
    if messages_field != "input" and isinstance(record.get(messages_field), list):
        # The output goes to the message field: reading 'input' would overwrite that list.
        raise FormatError(
            "ambiguous_messages",
            f"the record holds both 'input' and a {messages_field!r} list; "
            "read the list with --format auto, or 'input' with --messages-field input",
        )
    items = record["input"]
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list):
        raise FormatError("input_not_a_list", f"'input' is {type(items).__name__}, not a list or a string")
    instructions = record.get("instructions")
    if isinstance(instructions, str):
        lead = [{"role": "system", "content": instructions}] if instructions else []
    elif isinstance(instructions, list):
        lead = responses_to_flat(instructions, discarded)
    elif instructions is None:
        lead = []
    else:
        raise FormatError("bad_instructions", f"'instructions' is {type(instructions).__name__}")
    flat = lead + responses_to_flat(items, discarded)
    # The history of a continued request is stored at the provider, not in the record.
    partial = bool(record.get("previous_response_id") or record.get("conversation"))
    fields = record_fields(record, ("input", "instructions"))
    return Conversation(flat, fields, discarded=discarded or None, partial=partial)


def _responses_item(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    # An unsupported item type is Responses' too: refused as unsupported_item wherever it stands,
    # not unknown_format when no other item tells the record's format.
    if item.get("type") in _TYPED or item.get("type") in _UNSUPPORTED:
        return True
    content = item.get("content")
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") in _PART_TYPES for p in content)


#: Request parameters that make ``{"input": "<text>"}`` a Responses request (and not, say, an
#: eval record's prompt).
_STRING_REQUEST_KEYS = frozenset(("instructions", "model", "previous_response_id", "conversation"))


def detect_responses(record: Any, messages_field: str) -> bool:
    if isinstance(record, list):
        return any(_responses_item(i) for i in record) and not any(_lost_message(i) for i in record)
    if not isinstance(record, dict):
        return False
    if messages_field != "input" and isinstance(record.get(messages_field), list):
        return False  # its own message list: another reader reads it, 'input' is carried
    items = record.get("input")
    if isinstance(items, str):
        # A plain-string request: one user message, told by a request parameter beside it.
        return not _STRING_REQUEST_KEYS.isdisjoint(record)
    if not isinstance(items, list) or any(_lost_message(i) for i in items):
        return False
    return "instructions" in record or any(_responses_item(i) or (isinstance(i, dict) and "role" in i) for i in items)


RESPONSES_READER = register_reader(
    Reader(
        "openai-responses",
        read_responses,
        detect_responses,
        priority=40,
        description="OpenAI Responses API input items (function_call / function_call_output by call_id)",
    )
)


# --------------------------------------------------------------------------------------------
# Writer


def _responses_tool(tool: Any, ctx: WriteContext) -> dict[str, Any]:
    """A tool definition in the Responses shape: the chat definition with ``function`` (or
    ``custom``) flattened into it, ``{type: "function", name, description?, parameters,
    strict}`` / ``{type: "custom", name, ...}``.

    A function tool always has ``parameters`` and ``strict`` (``FunctionToolParam`` requires
    both; either may be null): the source's when it has them; else ``parameters: null`` (no
    schema, as the source had none) and ``strict: false`` for a tool of another shape (Chat
    Completions and the other providers' tools are not strict unless they say so), ``strict:
    null`` for one already in the Responses shape (the API's default, as the source relied on
    it). Each one added is counted ``derived_tool_fields`` by key.
    """
    chat = openai_tool(tool)  # names the tool in its FormatError when it cannot convert
    kind = chat["type"]
    out = {"type": kind, **chat[kind]}
    if kind == "function":
        if "parameters" not in out:
            out["parameters"] = None
            count_written(ctx, "derived_tool_fields", key="parameters")
        if "strict" not in out:
            responses_shaped = isinstance(tool, dict) and tool.get("type") == "function" and "function" not in tool
            out["strict"] = None if responses_shaped else False
            count_written(ctx, "derived_tool_fields", key="strict")
    return out


def write_responses(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    """A Responses API request body from a normalized flat record.

    - System (and ``developer``) messages → ``instructions`` (joined with a newline, blank
      ones left out).
    - User and assistant messages → ``message`` items ``{type, role, content: <text>}``; an
      assistant message with calls and no text gives no message item, only its calls.
    - Calls → ``function_call`` items ``{type, call_id, name, arguments}`` (arguments a JSON
      string: a string as is, an object as compact JSON, none as ``"{}"``); a call to a tool the
      record declares custom → ``custom_tool_call`` with ``input``.
    - Results → ``function_call_output`` (or ``custom_tool_call_output``) ``{type, call_id,
      output}``, in place.
    - ``tools`` (``--tools-field``) in the Responses shape (``_responses_tool``: a function tool
      always with ``parameters`` and ``strict``); ``model`` = ``--model``, else the
      record's (left out when neither exists).

    Like the other provider writers it moves nothing: a result outside the tool block right
    after its call is a ``FormatError`` (``result_not_adjacent``).
    """
    messages = normalized_messages(record, ctx.messages_field)
    if not messages:
        raise FormatError("empty_conversation", "no messages to write")
    check_results_adjacent(messages)
    tools = tools_for(record, ctx)
    tools = [_responses_tool(t, ctx) for t in tools] if tools else None
    custom = frozenset(t.get("name") for t in tools or () if t["type"] == "custom")
    instructions = joined_system(messages)
    items = _input_items(messages, custom)
    out: dict[str, Any] = {}
    model = record_model(record, ctx.model, "OpenAI")
    if model is not None:
        out["model"] = model
    if instructions:
        out["instructions"] = instructions
    out["input"] = items
    if tools:
        out["tools"] = tools
    return out


def _input_items(messages: list[Any], custom: frozenset[str]) -> list[dict[str, Any]]:
    """The ``input`` items of the messages other than system ones; ``custom`` names the
    record's custom tools, whose calls and results take the ``custom_tool_call`` types."""
    custom_calls: set[str] = set()
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role in SYSTEM_ROLES:
            continue
        if role == "user" and message.get(media.FIELD):
            text_part = lambda text: [{"type": "input_text", "text": text}] if text else []  # noqa: E731
            content = media.with_media(message, text_part, media.responses_part)
            items.append({"type": "message", "role": "user", "content": content})
        elif role == "user":
            items.append({"type": "message", "role": "user", "content": message["content"]})
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            carried = reasoning.of(message, reasoning.RESPONSES)
            before = _reasoning_before(carried, calls)
            items.extend(before.pop(None, ()))
            if message["content"] or not calls:
                items.append({"type": "message", "role": "assistant", "content": message["content"]})
            for call in calls:
                items.extend(before.pop(call["tool_call_id"], ()))
                items.append(_call_item(call, custom, custom_calls))
        elif role == "tool":
            kind = "custom_tool_call_output" if message["tool_call_id"] in custom_calls else "function_call_output"
            items.append({"type": kind, "call_id": message["tool_call_id"], "output": message["content"]})
        else:
            raise unsupported_role(role, "Responses")
    return items


def _reasoning_before(carried: dict[str, Any] | None, calls: list[Any]) -> dict[Any, list[Any]]:
    """A message's carried reasoning items by the item they go right before: a call id, or
    ``None`` for the message's first item (also those whose call is gone)."""
    if carried is None:
        return {}
    ids = {call["tool_call_id"] for call in calls}
    before: dict[Any, list[Any]] = {}
    for entry in carried["items"]:
        key = entry["before"] if entry["before"] in ids else None
        before.setdefault(key, []).append(entry["item"])
    return before


def _call_item(call: dict[str, Any], custom: frozenset[str], custom_calls: set[str]) -> dict[str, Any]:
    """A ``function_call`` item, or a ``custom_tool_call`` (noted in ``custom_calls``) for a custom tool."""
    check_tool_name(call["name"], "OpenAI")
    if call["name"] in custom:
        args = call.get("args")
        custom_calls.add(call["tool_call_id"])
        return {
            "type": "custom_tool_call",
            "call_id": call["tool_call_id"],
            "name": call["name"],
            "input": "" if args is None else openai_arguments(args),
        }
    return {
        "type": "function_call",
        "call_id": call["tool_call_id"],
        "name": call["name"],
        "arguments": openai_arguments(call.get("args")),
    }


RESPONSES_WRITER = register_writer(
    Writer(
        "openai-responses",
        write_responses,
        description="OpenAI Responses API request body (input items, instructions)",
        uses=("model",),  # --model, else the record's own; left out when neither
        schema={"model": STRING, "instructions": STRING, "input": [JSON], "tools": [JSON]},
        reasoning=(reasoning.RESPONSES,),
        media=media.carrier(media.responses_part, ("user",)),
    )
)
