"""AWS Bedrock Converse request bodies: a reader and a writer (``bedrock-converse``).

``{"modelId"?, "system"?: [SystemContentBlock], "messages": [{"role", "content":
[ContentBlock]}], "inferenceConfig"?, "toolConfig"?: {"tools": [Tool], "toolChoice"?}, ...}``,
or a bare message list. Converse blocks are untyped unions: an object with exactly one member
key, ``{"text": ...}``, ``{"toolUse": {...}}`` ...; that, and a ``system`` list of such blocks,
tells them from Anthropic's typed blocks (``{"type": "text", ...}``).

Reader:

- ``system`` → a leading system message: its ``text`` and ``guardContent`` text joined
  (``cachePoint`` markers hold nothing);
- ``text`` → the message's text; ``guardContent`` → its text (``[image]`` for a guarded image);
  ``citationsContent`` → its text, the citations counted in the ledger (``citations``);
- ``image`` / ``video`` / ``audio`` → ``[image]`` / ``[video]`` / ``[audio]``;
  ``document`` and ``searchResult`` → their text in the shared rendering
  (``[document: <name>]`` ..., ``transforms.formats._rendered``);
- ``toolUse {toolUseId, name, input}`` → a call, ``input`` verbatim as the arguments;
- ``toolResult {toolUseId, content, status}`` → one ``tool`` message per block, before the rest
  of its message; content blocks joined (``json`` as compact JSON, ``text``, media and
  documents as above); ``status: "error"`` → ``[error] `` before the text (the flat error flag);
- a ``toolUse`` of ``type: "server_tool_use"`` and the ``toolResult`` that answers it ran at the
  provider: not client calls, their text rendered in place (``[server tool call: <name>]``);
- ``reasoningContent`` → left out, counted in the ledger (its text; the signature and redacted
  content are opaque); ``cachePoint`` → nothing;
- any other block, or one holding two members, is an ``unknown_block`` dead letter.

Fields: every field but ``system`` is carried; ``toolConfig`` becomes ``tools`` (each
``toolSpec`` as a bare schema ``{name, description?, parameters: inputSchema.json, strict?}``,
``systemTool`` entries kept as they are, ``cachePoint`` entries left out) and its other keys
(``toolChoice``) top-level fields of their own.

Writer: see ``write_bedrock``.
"""

from __future__ import annotations

from typing import Any

from transforms.core.ledger import note, note_unread_keys
from transforms.core.normalize import content_text
from transforms.formats import media, reasoning
from transforms.formats._common import (
    ERROR_PREFIX,
    JOIN,
    SYSTEM_ROLES,
    add_turn,
    bare_list_conversation,
    check_results_adjacent,
    check_user_first,
    foreign_entry,
    joined_system,
    message_list,
    normalized_messages,
    record_model,
    trim_final_text,
    unsupported_role,
)
from transforms.formats._rendered import (
    NO_ORIGINALS,
    SERVER_CALL,
    SERVER_RESULT,
    Originals,
    render,
    unknown_block,
    without,
)
from transforms.formats._tools import bare_function_schema, called_tools, check_tool_name, tool_name, tools_for
from transforms.formats.anthropic import PERMISSIVE_SCHEMA, THINKING_ON, is_count, tool_ids, tool_input
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
from transforms.formats.schema import JSON, STRING

NAME = "bedrock-converse"
#: The members of a ``ContentBlock`` union, of a ``SystemContentBlock`` and of a
#: ``ToolResultContentBlock``.
_MEMBERS = frozenset(
    (
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
    )
)
_SYSTEM_MEMBERS = frozenset(("text", "guardContent", "cachePoint"))
_RESULT_MEMBERS = frozenset(("json", "text", "image", "document", "video", "searchResult"))
_MEDIA = {"image": "[image]", "video": "[video]", "audio": "[audio]"}
#: The ``toolUse`` type of a tool the provider runs itself.
SERVER_TOOL_USE = "server_tool_use"


# --------------------------------------------------------------------------------------------
# Reader


def _member(block: Any, members: frozenset[str]) -> tuple[str, Any]:
    """The one member of a union block, or ``unknown_block``."""
    if not isinstance(block, dict) or len(block) != 1:
        kind = sorted(map(str, block)) if isinstance(block, dict) else type(block).__name__
        raise unknown_block(kind, NAME)
    ((key, value),) = block.items()
    if key not in members:
        raise unknown_block(key, NAME)
    return key, value


def _guarded_text(value: Any) -> str:
    if isinstance(value, dict) and "image" in value:
        return _MEDIA["image"]
    text = value.get("text") if isinstance(value, dict) else None
    return content_text(text.get("text") if isinstance(text, dict) else text)


def _shared_text(key: str, value: Any, discarded: dict[str, Any]) -> str | None:
    """The text of a block that may stand in a message, the system or a tool result."""
    if key == "text":
        return content_text(value)
    if key in _MEDIA:
        return _MEDIA[key]
    if key == "document":
        return render("document", value.get("name") if isinstance(value, dict) else None, _without_name(value))
    if key == "searchResult":
        title = value.get("title") if isinstance(value, dict) else None
        return render("search result", title, without(value, "title") if isinstance(value, dict) else value)
    if key == "guardContent":
        return _guarded_text(value)
    if key == "json":
        return content_text(value)
    if key == "cachePoint":
        return None
    return None


def _without_name(value: Any) -> Any:
    return without(value, "name") if isinstance(value, dict) else value


def _server_calls(messages: list[Any]) -> dict[str, Any]:
    """The ids (and names) of the record's server-side calls: their results are rendered too."""
    found: dict[str, Any] = {}
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            use = block.get("toolUse") if isinstance(block, dict) else None
            if isinstance(use, dict) and use.get("type") == SERVER_TOOL_USE:
                found[content_text(use.get("toolUseId"))] = use.get("name")
    return found


def _rendered_server_block(key: str, value: Any, servers: dict[str, Any]) -> str | None:
    """The rendering of a server-side call or result block, else ``None`` (a client one)."""
    if not isinstance(value, dict):
        return None
    if key == "toolUse" and value.get("type") == SERVER_TOOL_USE:
        return render(SERVER_CALL, value.get("name"), value.get("input"))
    if key == "toolResult" and content_text(value.get("toolUseId")) in servers:
        name = servers[content_text(value.get("toolUseId"))]
        return render(SERVER_RESULT, name, without(value, "toolUseId", "type"))
    return None


def _result_text(value: dict[str, Any], discarded: dict[str, Any]) -> str:
    content = value.get("content")
    texts = []
    for block in content if isinstance(content, list) else [content] if content is not None else ():
        if isinstance(block, str):
            texts.append(block)
            continue
        key, inner = _member(block, _RESULT_MEMBERS)
        text = _shared_text(key, inner, discarded)
        if text:
            texts.append(text)
    text = JOIN.join(texts)
    return ERROR_PREFIX + text if value.get("status") == "error" else text


#: The keys of a ``toolResult`` the reader reads (``type`` is metadata).
_RESULT_READ = frozenset(("toolUseId", "content", "status", "type"))


def _read_message(message: Any, servers: dict[str, Any], out: list[Any], discarded: dict[str, Any]) -> None:
    """Append the flat messages one Converse message becomes."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        out.append(message)  # the core reads (or drops) it as it is
        return
    texts, calls, results = [], [], []
    thinking: list[Any] = []  # an assistant's reasoningContent blocks, carried as they were
    assistant = message.get("role") == "assistant"
    for block in message["content"]:
        key, value = _member(block, _MEMBERS)
        rendered = _rendered_server_block(key, value, servers)
        if rendered is not None:
            texts.append(rendered)
        elif key == "reasoningContent" and assistant:
            thinking.append(block)
        elif key == "toolUse":
            call = {"tool_call_id": value.get("toolUseId"), "name": value.get("name")}
            if value.get("input") is not None:
                call["args"] = value["input"]
            calls.append(call)
        elif key == "toolResult":
            note_unread_keys(value, _RESULT_READ, discarded)
            result = {"role": "tool", "content": _result_text(value, discarded)}
            results.append({**result, "tool_call_id": value.get("toolUseId")})
        elif key == "reasoningContent":
            note(discarded, key, value)
        elif key == "citationsContent":
            texts.append(
                JOIN.join(_shared_text("text", b.get("text"), discarded) or "" for b in _list(value, "content"))
            )
            note(discarded, "citations", value.get("citations") if isinstance(value, dict) else None)
        else:
            text = _shared_text(key, value, discarded)
            if text:
                texts.append(text)
    out.extend(results)
    flat = dict(message)
    flat["content"] = JOIN.join(t for t in texts if t)
    if calls:
        flat["tool_calls"] = calls
    if thinking:
        flat[reasoning.FIELD] = reasoning.carried(reasoning.BEDROCK, blocks=thinking)
    media.carry(flat, media.bedrock_items(message["content"]))
    if calls or flat["content"].strip() or not results:
        out.append(flat)
    else:
        note_unread_keys(message, frozenset(("role", "content")), discarded)


def _list(value: Any, key: str) -> list[Any]:
    inner = value.get(key) if isinstance(value, dict) else None
    return [b for b in inner if isinstance(b, dict)] if isinstance(inner, list) else []


def system_text(system: Any, discarded: dict[str, Any]) -> str:
    """The text of a ``system`` list of ``SystemContentBlock``s (or a plain string)."""
    if isinstance(system, str):
        return system
    texts = []
    for block in system if isinstance(system, list) else ():
        key, value = _member(block, _SYSTEM_MEMBERS)
        text = _shared_text(key, value, discarded)
        if text:
            texts.append(text)
    return JOIN.join(texts)


def bedrock_to_flat(messages: list[Any], system: Any = None, discarded: dict[str, Any] | None = None) -> list[Any]:
    discarded = {} if discarded is None else discarded
    out: list[Any] = []
    text = system_text(system, discarded) if system is not None else ""
    if text:
        out.append({"role": "system", "content": text})
    servers = _server_calls(messages)
    for message in messages:
        _read_message(message, servers, out, discarded)
    return out


def bedrock_tools(tools: Any) -> Any:
    """``toolConfig.tools`` as the list the writers read: each ``toolSpec`` a bare schema."""
    if not isinstance(tools, list):
        return tools
    out = []
    for tool in tools:
        spec = tool.get("toolSpec") if isinstance(tool, dict) and len(tool) == 1 else None
        if isinstance(tool, dict) and tool.keys() == {"cachePoint"}:
            continue  # a cache marker: no tool
        if not isinstance(spec, dict):
            out.append(tool)
            continue
        schema = spec.get("inputSchema")
        bare = {k: v for k, v in spec.items() if k != "inputSchema"}
        if isinstance(schema, dict) and "json" in schema:
            bare["parameters"] = schema["json"]
        elif schema is not None:
            bare["inputSchema"] = schema
        out.append(bare)
    return out


def _fields(record: dict[str, Any]) -> dict[str, Any]:
    """The record's fields but ``system``, ``toolConfig`` split into ``tools`` and its other keys."""
    fields: dict[str, Any] = {}
    for key, value in record.items():
        if key == "system":
            continue
        if key != "toolConfig" or not isinstance(value, dict):
            fields[key] = value
            continue
        for inner, inner_value in value.items():
            if inner in record:
                raise FormatError("field_collision", f"toolConfig.{inner} and the record's own {inner!r}")
            fields[inner] = bedrock_tools(inner_value) if inner == "tools" else inner_value
    return fields


def read_bedrock(record: Any, messages_field: str) -> Conversation:
    bare = bare_list_conversation(record, bedrock_to_flat)
    if bare is not None:
        return bare
    discarded: dict[str, Any] = {}
    messages = message_list(record, messages_field)
    flat = bedrock_to_flat(messages, record.get("system"), discarded)
    return Conversation(flat, _fields(record), discarded=discarded or None)


def _untyped_block(block: Any, members: frozenset[str]) -> bool:
    return isinstance(block, dict) and "type" not in block and not members.isdisjoint(block)


def _bedrock_signal(record: Any, messages: list[Any]) -> bool:
    if isinstance(record, dict):
        system = record.get("system")
        if isinstance(system, list) and system and all(_untyped_block(b, _SYSTEM_MEMBERS) for b in system):
            return True
        config = record.get("toolConfig")
        tools = config.get("tools") if isinstance(config, dict) else None
        if isinstance(tools, list) and any(
            isinstance(t, dict) and ("toolSpec" in t or "systemTool" in t) for t in tools
        ):
            return True
    return any(has_untyped_blocks(message) for message in messages)


def has_untyped_blocks(message: Any) -> bool:
    """A message whose content list holds a Converse block (an untyped union member)."""
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any(_untyped_block(b, _MEMBERS) for b in content)


def detect_bedrock(record: Any, messages_field: str) -> bool:
    messages = record if isinstance(record, list) else record.get(messages_field) if isinstance(record, dict) else None
    return isinstance(messages, list) and foreign_entry(messages) is None and _bedrock_signal(record, messages)


BEDROCK_READER = register_reader(
    Reader(
        NAME,
        read_bedrock,
        detect_bedrock,
        priority=25,
        description="AWS Bedrock Converse (untyped blocks: toolUse / toolResult, system and toolConfig lists)",
    )
)


# --------------------------------------------------------------------------------------------
# Writer


def _renderings(source: Any, messages_field: str) -> Originals:
    """The server-side blocks of a Converse source record, by the rendering the reader made."""
    messages = source if isinstance(source, list) else source.get(messages_field) if isinstance(source, dict) else None
    if not isinstance(messages, list):
        return NO_ORIGINALS
    servers = _server_calls(messages)
    found = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and len(block) == 1:
                ((key, value),) = block.items()
                rendered = _rendered_server_block(key, value, servers)
                if rendered is not None:
                    found.append((rendered, block))
    return Originals(found) if found else NO_ORIGINALS


def _text_blocks(text: str, originals: Originals) -> list[Any]:
    """Text as Converse blocks: server-side blocks of the source back in place, the rest text
    (blank text makes no block: Converse refuses it)."""
    if not originals:
        return [{"text": text}] if text.strip() else []
    blocks = []
    for kind, value in originals.split(text):
        if kind == "block":
            blocks.append(value)
        elif value.strip():
            blocks.append({"text": value})
    return blocks


def _tool_result(message: dict[str, Any], ids: dict[str, Any]) -> dict[str, Any]:
    text = message["content"]
    is_error = text.startswith(ERROR_PREFIX)
    if is_error:
        text = text[len(ERROR_PREFIX) :]
    text_block = lambda piece: [{"text": piece}] if piece else []  # noqa: E731 - one use, here
    content = media.with_media({**message, "content": text}, text_block, media.bedrock_block)
    result: dict[str, Any] = {"toolUseId": ids[message["tool_call_id"]], "content": content}
    if is_error:
        result["status"] = "error"
    return {"toolResult": result}


def _tool_use(call: dict[str, Any], ids: dict[str, Any]) -> dict[str, Any]:
    name = check_tool_name(call["name"], "Bedrock Converse")
    return {"toolUse": {"toolUseId": ids[call["tool_call_id"]], "name": name, "input": tool_input(call.get("args"))}}


def _converse_messages(messages: list[Any], originals: Originals) -> list[Any]:
    rest = [m for m in messages if m["role"] not in SYSTEM_ROLES]
    ids = tool_ids(rest)
    turns: list[dict[str, Any]] = []
    for message in rest:
        role = message["role"]
        if role == "user":
            text_blocks = lambda text: _text_blocks(text, originals)  # noqa: E731 - one use, here
            blocks, turn_role = media.with_media(message, text_blocks, media.bedrock_block), "user"
        elif role == "assistant":
            calls = [_tool_use(c, ids) for c in message.get("tool_calls") or ()]
            carried = reasoning.of(message, reasoning.BEDROCK)
            thinking = list(carried["blocks"]) if carried is not None else []  # first, as they were
            blocks, turn_role = thinking + _text_blocks(message["content"], originals) + calls, "assistant"
        elif role == "tool":
            blocks, turn_role = [_tool_result(message, ids)], "user"
        else:
            raise unsupported_role(role, "Bedrock Converse")
        add_turn(turns, turn_role, blocks, "content")
    return turns


def _tool_spec(tool: Any, ctx: WriteContext) -> dict[str, Any]:
    """One tool definition as a Converse ``Tool``: ``{toolSpec: {name, description?, inputSchema: {json}}}``
    (an empty ``description`` left out, counted ``discarded_tool_fields.description``)."""
    if isinstance(tool, dict) and len(tool) == 1 and ("toolSpec" in tool or "systemTool" in tool):
        return tool  # already a Converse tool
    name = tool_name(tool)
    if isinstance(tool, dict) and isinstance(tool.get("input_schema"), dict) and isinstance(name, str):
        spec = {"name": name, "description": tool.get("description"), "parameters": tool["input_schema"]}
    else:
        spec = bare_function_schema(tool, ctx, "Bedrock Converse")
    out: dict[str, Any] = {"name": spec["name"]}
    description = spec.get("description")
    if isinstance(description, str) and description:
        out["description"] = description
    elif description == "":
        # Converse refuses a description of length 0 (its minimum is 1); an empty one says nothing.
        count_written(ctx, "discarded_tool_fields", key="description")
    out["inputSchema"] = {"json": spec.get("parameters") or {"type": "object", "properties": {}}}
    return {"toolSpec": out}


def _tool_config(record: dict[str, Any], messages: list[Any], ctx: WriteContext) -> dict[str, Any] | None:
    tools = tools_for(record, ctx)
    converted = [_tool_spec(t, ctx) for t in tools] if tools else []
    defined = {t["toolSpec"]["name"] for t in converted if "toolSpec" in t}
    # Converse refuses toolUse blocks without a toolConfig naming the tool: derive what is missing.
    for name in called_tools(messages):
        if name not in defined:
            converted.append({"toolSpec": {"name": name, "inputSchema": {"json": dict[str, Any](PERMISSIVE_SCHEMA)}}})
            count_written(ctx, "derived_tool_definitions")
    if not converted:
        return None
    config: dict[str, Any] = {"tools": converted}
    if isinstance(record.get("toolChoice"), dict):
        config["toolChoice"] = record["toolChoice"]
    return config


def _model_fields(record: dict[str, Any], turns: list[Any], ctx: WriteContext) -> dict[str, Any] | None:
    """The record's ``additionalModelRequestFields`` to write back (Claude's ``thinking`` config
    is there), under Anthropic's rules: thinking on needs the turn that opens the last tool use
    to start with its ``reasoningContent``, else the ``thinking`` key is left out (the other
    fields stay), counted ``thinking_config_dropped``; a ``budget_tokens`` not below the
    ``inferenceConfig.maxTokens`` is a ``FormatError`` (``thinking_budget_too_large``)."""
    fields = record.get("additionalModelRequestFields")
    if not isinstance(fields, dict):
        return None
    thinking = fields.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") not in THINKING_ON:
        return fields
    if not _last_tool_turn_reasons(turns):
        count_written(ctx, "thinking_config_dropped")
        return {k: v for k, v in fields.items() if k != "thinking"}
    budget = thinking.get("budget_tokens")
    inference = record.get("inferenceConfig")
    max_tokens = inference.get("maxTokens") if isinstance(inference, dict) else None
    if is_count(budget) and is_count(max_tokens) and budget >= max_tokens:
        raise FormatError(
            "thinking_budget_too_large",
            f"thinking.budget_tokens {budget} is not below inferenceConfig.maxTokens {max_tokens}, "
            "which Claude refuses",
        )
    return fields


def _last_tool_turn_reasons(turns: list[Any]) -> bool:
    """The last assistant turn holding a ``toolUse`` starts with ``reasoningContent`` (or there is none)."""
    for turn in reversed(turns):
        if turn["role"] != "assistant":
            continue
        blocks = turn["content"]
        if any(isinstance(b, dict) and "toolUse" in b for b in blocks):
            return isinstance(blocks[0], dict) and "reasoningContent" in blocks[0]
    return True


def write_bedrock(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    """A Converse request body ``{modelId?, system?, messages, inferenceConfig?, toolConfig?}``.

    - System (and ``developer``) messages → ``system``: one ``{"text"}`` block (joined with a
      newline, blank ones left out).
    - User → a ``user`` message of a ``text`` block; assistant → an ``assistant`` message: its
      ``text`` block, then one ``toolUse {toolUseId, name, input}`` per call (``input`` an
      object: a JSON string is parsed, none or blank is ``{}``, anything else is refused,
      ``args_not_json`` / ``args_not_an_object``); a tool name outside ``[a-zA-Z0-9_-]{1,64}``
      is refused (``invalid_tool_name``).
    - The block of results after a call turn → ONE ``user`` message of ``toolResult
      {toolUseId, content: [{text}], status?}`` blocks, ``status: "error"`` for a result marked
      ``[error] ``; user text after the results joins that message.
    - Adjacent messages of one role are merged (Converse wants them to alternate); blank text
      makes no block, a message left without blocks is left out. A conversation whose first
      message is the assistant's is refused (``leading_assistant``): Converse requires a user
      message first.
    - Ids outside ``[a-zA-Z0-9_-]`` are rewritten as the anthropic writer does.
    - ``toolConfig``: the record's tools (``--tools-field``) as ``toolSpec``s, a derived one
      (``{"type": "object"}``) for every called tool without one (counted
      ``derived_tool_definitions``), and the record's ``toolChoice``.
    - ``modelId`` = ``--model``, else the record's ``modelId`` or ``model``; the record's
      ``inferenceConfig`` when it has one, and its ``additionalModelRequestFields``
      (``_model_fields``: Claude's ``thinking`` config under Anthropic's rules).
    - Server-side blocks of a Converse source record are written back as they were.
    """
    messages = normalized_messages(record, ctx.messages_field)
    check_results_adjacent(messages)
    originals = _renderings(ctx.source, ctx.messages_field)
    turns = _converse_messages(messages, originals)
    if not turns:
        raise FormatError("empty_conversation", "no user or assistant content to write")
    check_user_first(turns, "Bedrock Converse")  # "A conversation must start with a user message."
    trim_final_text(turns, ctx, lambda block: "text" in block)  # Claude's prefill rule
    out: dict[str, Any] = {}
    model = record_model(record, ctx.model, "Bedrock") or (
        record.get("modelId") if isinstance(record.get("modelId"), str) else None
    )
    if model:
        out["modelId"] = model
    system = joined_system(messages)
    if system:
        out["system"] = [{"text": system}]
    out["messages"] = turns
    if isinstance(record.get("inferenceConfig"), dict):
        out["inferenceConfig"] = record["inferenceConfig"]
    model_fields = _model_fields(record, turns, ctx)
    if model_fields:
        out["additionalModelRequestFields"] = model_fields
    config = _tool_config(record, messages, ctx)
    if config is not None:
        out["toolConfig"] = config
    return out


BEDROCK_WRITER = register_writer(
    Writer(
        NAME,
        write_bedrock,
        description="AWS Bedrock Converse request body",
        uses=("model",),  # modelId: --model, else the record's own
        reasoning=(reasoning.BEDROCK,),
        media=media.carrier(media.bedrock_block, ("user", "tool")),
        schema={
            "modelId": STRING,
            "system": [JSON],
            "messages": [{"role": STRING, "content": [JSON]}],
            "inferenceConfig": JSON,
            "additionalModelRequestFields": JSON,
            "toolConfig": JSON,
        },
    )
)
