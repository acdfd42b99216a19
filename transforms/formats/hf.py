"""The ``hf`` sink: Hugging Face's conversational shape, as TRL and ``apply_chat_template`` take it.

One record per conversation::

    {"id": "...",
     "messages": [{"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content", "weight"}, ...],
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}, ...] | null}

- Every message has the same seven keys, ``null`` where they do not apply, and every record the
  same three: one fixed schema across every part of a multi-part output (``HF_SCHEMA``).
- ``tool_calls``: ``{"id", "type": "function", "function": {"name", "arguments"}}`` with the
  arguments as an object (chat templates read ``arguments`` as a mapping); a JSON-string
  argument is parsed, one that is not a JSON object stays a string, counted
  ``arguments_kept_as_text``; a call without arguments gets ``{}``.
- A ``tool`` message names the function it answers (``name``: templates that show results by
  tool name read it).
- ``system`` and ``developer`` messages are ``system``; ``developer`` is counted ``developer_as_system``.
- ``reasoning_content`` when the flat message carries it (another option keeps it), else ``null``;
  ``weight`` 0 or 1 when weights are kept (``transforms.dataset.training``), else ``null``.
- ``tools``: the record's tool definitions (``--tools-field``) in the Chat Completions shape.
  A free-text custom tool has no JSON-schema form: ``unconvertible_tool``.
- Like ``openai-finetune``, a conversation without an assistant message is refused
  (``no_assistant_message``): nothing in it is trained on. The final message's calls may be
  unanswered (an example trimmed after its last assistant message ends on its calls).

Free-form values (the arguments, each tool) are ``JSON`` in the schema: ``datasets`` loads them
as ``Json`` features, decoded to objects; as Parquet (``--output-format parquet``) they are
Arrow JSON columns, so ``load_dataset("parquet", data_files=parts)`` needs nothing else. A run
writes a dataset card declaring the schema (``pipeline.io.dataset_card``), so that
``load_dataset(<output>)`` needs nothing either, JSON Lines or Parquet.
"""

from __future__ import annotations

from typing import Any

from transforms.core.jsontext import parse_json
from transforms.formats._common import (
    check_results_adjacent,
    normalized_messages,
    openai_tool,
    unsupported_role,
)
from transforms.formats._tools import tools_for
from transforms.formats.base import FormatError, WriteContext, Writer, count_written, register_writer
from transforms.formats.schema import ID, INT, JSON, STRING

#: The keys of every message, in order.
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content", "weight")

HF_MESSAGE = {
    "role": STRING,
    "content": STRING,
    "tool_calls": [{"id": STRING, "type": STRING, "function": {"name": STRING, "arguments": JSON}}],
    "tool_call_id": STRING,
    "name": STRING,
    "reasoning_content": STRING,
    "weight": INT,
}
HF_SCHEMA = {ID: STRING, "messages": [HF_MESSAGE], "tools": [JSON]}


def _arguments(args: Any, ctx: WriteContext) -> Any:
    """Call arguments as an object: parsed from JSON text; other text kept, counted."""
    if args is None:
        return {}
    if isinstance(args, str):
        try:
            parsed = parse_json(args)
        except (TypeError, ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        count_written(ctx, "arguments_kept_as_text")
        return args
    if not isinstance(args, dict):
        count_written(ctx, "arguments_kept_as_text")  # a list or a number: not a mapping
    return args


def _message(role: str, content: str, **given: Any) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(MESSAGE_KEYS)
    out["role"], out["content"] = role, content
    out.update(given)
    return out


def _hf_messages(messages: list[Any], ctx: WriteContext) -> list[dict[str, Any]]:
    names: dict[Any, Any] = {}  # call id -> function name, for the results
    out = []
    for message in messages:
        role = message["role"]
        extra = {key: message[key] for key in ("reasoning_content", "weight") if message.get(key) is not None}
        if role in ("system", "developer", "user"):
            if role == "developer":
                count_written(ctx, "developer_as_system")
            out.append(_message("user" if role == "user" else "system", message["content"], **extra))
        elif role == "assistant":
            calls = message.get("tool_calls") or None
            written = None
            if calls:
                written = []
                for call in calls:
                    names[call["tool_call_id"]] = call["name"]
                    function = {"name": call["name"], "arguments": _arguments(call.get("args"), ctx)}
                    written.append({"id": call["tool_call_id"], "type": "function", "function": function})
            out.append(_message("assistant", message["content"], tool_calls=written, **extra))
        elif role == "tool":
            call_id = message["tool_call_id"]
            out.append(_message("tool", message["content"], tool_call_id=call_id, name=names.get(call_id), **extra))
        else:
            raise unsupported_role(role, "Hugging Face chat")
    return out


def write_hf(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    messages = normalized_messages(record, ctx.messages_field)
    if not messages:
        raise FormatError("empty_conversation", "no messages to write")
    check_results_adjacent(messages, open_last=True)  # a training example may end on its calls
    if not any(m["role"] == "assistant" for m in messages):
        raise FormatError("no_assistant_message", "a training example needs an assistant message")
    tools = tools_for(record, ctx)
    written_tools = None
    if tools is not None:
        written_tools = [openai_tool(tool) for tool in tools]
        if any(tool.get("type") != "function" for tool in written_tools):
            raise FormatError("unconvertible_tool", "a free-text custom tool has no JSON-schema form")
    # The record id as text: a number would make the column a number in some parts, text in others.
    return {ctx.id_field: ctx.record_id, "messages": _hf_messages(messages, ctx), "tools": written_tools}


HF_WRITER = register_writer(
    Writer(
        "hf",
        write_hf,
        description="Hugging Face / TRL conversational record (messages with tool calls as objects, tools)",
        schema=HF_SCHEMA,
    )
)
