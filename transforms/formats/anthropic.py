"""Anthropic Messages: a reader for logged requests and a writer of request bodies.

Reader (``anthropic``): ``{"system"?, "messages": [...], ...}`` or a bare message list. The
top-level ``system`` (a string or text blocks) becomes a leading system message. Block content:
``text`` blocks are joined; ``tool_use`` blocks become calls with ``input`` verbatim as the
arguments (an object); each ``tool_result`` block becomes its own tool message, in block order,
before the rest of its message (text left beside results becomes a message of the same role
after them); ``is_error: true`` prefixes the result text with ``[error] ``, the only place the
flat shape can keep the flag. ``thinking`` / ``redacted_thinking`` blocks are dropped (no flat
equivalent; their signatures only matter when replaying to Anthropic), counted in the ledger,
as are the ``citations`` of a text block; image blocks become ``[image]``; server-side tool
calls and results (``server_tool_use``, ``web_search_tool_result`` ..., ``mcp_tool_use`` /
``mcp_tool_result``), documents, search results, container uploads and compaction summaries
keep their text in place, in the shared rendering (``transforms.formats._rendered``); a
``mid_conv_system`` block becomes a system message. Any other block type is an
``unknown_block`` dead letter, never text.

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
developer, user, assistant and tool are a FormatError (``unsupported_role``), and so is a tool
name outside Anthropic's ``^[a-zA-Z0-9_-]{1,64}$`` (``invalid_tool_name``). The server-side
blocks, documents and search results of an Anthropic source record are written back as they
were, byte for byte, where their rendering stands in the text.

Tools: the record's definitions at ``--tools-field`` (a dotted path; else ``tools`` / legacy
``functions``), converted by ``anthropic_tool``. A tool that a ``tool_use`` names and no
definition declares gets a derived one, ``{name, input_schema: {"type": "object"}}`` (any
object: the writer knows only the name), counted as ``derived_tool_definitions`` in the writer
report: Anthropic refuses a ``tool_use`` of an undefined tool, and a permissive definition
keeps the record instead of refusing it.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

from transforms.core.ledger import note, note_unread_keys
from transforms.core.normalize import content_text
from transforms.core.tool_blocks import first_free
from transforms.formats import media, reasoning
from transforms.formats._common import (
    ERROR_PREFIX,
    JOIN,
    SYSTEM_ROLES,
    add_turn,
    check_results_adjacent,
    check_user_first,
    foreign_entry,
    joined_system,
    message_list,
    normalized_messages,
    record_fields,
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
from transforms.formats._tools import called_tools, check_tool_name, tool_name, tools_for
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
from transforms.formats.schema import INT, JSON, STRING

#: Blocks the reader keeps as text in the shared rendering (``transforms.formats._rendered``):
#: server-side tool calls and their results (the provider ran the tool: not client calls, and
#: MEM-5 does not pair them), documents, search results, container uploads, compaction summaries.
SERVER_CALLS = frozenset(("server_tool_use", "mcp_tool_use"))
SERVER_RESULTS = frozenset(
    (
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_result",
    )
)
RENDERED = SERVER_CALLS | SERVER_RESULTS | {"document", "search_result", "container_upload", "compaction"}
_REASONING = frozenset(("thinking", "redacted_thinking"))
#: Every block type the reader knows; any other is an ``unknown_block`` dead letter.
KNOWN_BLOCKS = RENDERED | _REASONING | {"text", "image", "tool_use", "tool_result", "mid_conv_system", "tool_reference"}
# Block types no other format uses: enough to tell an Anthropic conversation by itself.
_ANTHROPIC_BLOCKS = KNOWN_BLOCKS - {"text", "image", "tool_reference"}

# --------------------------------------------------------------------------------------------
# Reader


def server_names(messages: list[Any]) -> dict[str, Any]:
    """``{id: name}`` of the server-side calls of a message list: their results' headers name them."""
    names: dict[str, Any] = {}
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") in SERVER_CALLS and isinstance(block.get("id"), str):
                names[block["id"]] = block.get("name")
    return names


def rendered_block(block: dict[str, Any], names: dict[str, Any]) -> str:
    """The text of a block of a ``RENDERED`` type, in the shared rendering."""
    kind = block["type"]
    if kind in SERVER_CALLS:
        return render(SERVER_CALL, block.get("name"), without(block, "name"))
    if kind in SERVER_RESULTS:
        call_id = block.get("tool_use_id")
        name = names.get(call_id) if isinstance(call_id, str) else None
        return render(SERVER_RESULT, name or kind.removesuffix("_tool_result"), block)
    if kind in ("document", "search_result"):
        return render(kind.replace("_", " "), block.get("title"), without(block, "title"))
    return render(kind.replace("_", " ") + (" summary" if kind == "compaction" else ""), None, block)


def _block_text(block: Any, names: dict[str, Any], discarded: dict[str, Any]) -> str | None:
    """The text one block contributes (``None``: nothing); reasoning and citations go to the
    ledger; an unknown type is refused."""
    if not isinstance(block, dict):
        return content_text(block)
    kind = block.get("type")
    if kind == "text":
        note(discarded, "citations", block.get("citations"))
        return content_text(block.get("text"))
    if kind in RENDERED:
        return rendered_block(block, names)
    if kind == "image":
        return "[image]"
    if kind in _REASONING:
        note(discarded, kind, block)
        return None
    if kind == "tool_reference":
        return render("tool reference", block.get("tool_name"), None)
    raise unknown_block(kind, "anthropic")


def _blocks_text(content: Any, names: dict[str, Any], discarded: dict[str, Any]) -> str:
    """Text of a content that may be a string, a block list or nothing (results, system)."""
    if content is None:
        return ""
    if not isinstance(content, list):
        return content_text(content)
    texts = (_block_text(block, names, discarded) for block in content)
    return JOIN.join(t for t in texts if t)


#: The keys read from a message that becomes tool results only.
_RESULTS_ONLY_READ = frozenset(("role", "content"))


def _read_message(message: Any, names: dict[str, Any], out: list[Any], discarded: dict[str, Any]) -> None:
    """Append the flat messages one Anthropic message becomes; reasoning blocks go to ``discarded``."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        out.append(message)  # string content (or junk) is already what the core reads
        return
    texts, calls, results, systems = [], [], [], []
    thinking: list[Any] = []  # an assistant's reasoning blocks, carried as they were
    assistant = message.get("role") == "assistant"
    for block in message["content"]:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in _REASONING and assistant:
            thinking.append(block)
        elif kind == "tool_use":
            call = {"tool_call_id": block.get("id"), "name": block.get("name")}
            if block.get("input") is not None:
                call["args"] = block["input"]
            calls.append(call)
        elif kind == "tool_result":
            text = _blocks_text(block.get("content"), names, discarded)
            if block.get("is_error") is True:
                text = ERROR_PREFIX + text
            results.append({"role": "tool", "content": text, "tool_call_id": block.get("tool_use_id")})
            media.carry(results[-1], media.anthropic_items(block.get("content")))
        elif kind == "mid_conv_system":
            systems.append({"role": "system", "content": _blocks_text(block.get("content"), names, discarded)})
        else:
            found = _block_text(block, names, discarded)
            if found:
                texts.append(found)
    out.extend(systems)
    out.extend(results)
    flat = dict(message)
    flat["content"] = JOIN.join(texts)
    if calls:
        existing = message.get("tool_calls")
        flat["tool_calls"] = (existing if isinstance(existing, list) else []) + calls
    if thinking:
        flat[reasoning.FIELD] = reasoning.carried(reasoning.ANTHROPIC, blocks=thinking)
    media.carry(flat, media.anthropic_items(message["content"]))
    # A user message that only carried results has nothing left to say.
    if calls or flat["content"].strip() or thinking or not (results or systems):
        out.append(flat)
    else:
        note_unread_keys(message, _RESULTS_ONLY_READ, discarded)  # its other keys: in the ledger


def anthropic_to_flat(messages: list[Any], system: Any = None, discarded: dict[str, Any] | None = None) -> list[Any]:
    out = []
    discarded = {} if discarded is None else discarded
    names = server_names(messages)
    system_text = _blocks_text(system, names, discarded) if isinstance(system, (str, list)) else ""
    if system_text:
        out.append({"role": "system", "content": system_text})
    for message in messages:
        _read_message(message, names, out, discarded)
    return out


def read_anthropic(record: Any, messages_field: str) -> Conversation:
    messages = message_list(record, messages_field)
    system = record.get("system") if isinstance(record, dict) else None
    discarded: dict[str, Any] = {}
    flat = anthropic_to_flat(messages, system, discarded)
    return Conversation(flat, record_fields(record, ("system",)), discarded=discarded or None)


def _untyped(blocks: Any) -> bool:
    """A block list holding an object without a ``type``: another format's blocks (Bedrock
    Converse ``{"text": ...}`` / ``{"toolUse": ...}``), which this reader does not read."""
    return isinstance(blocks, list) and any(isinstance(b, dict) and not isinstance(b.get("type"), str) for b in blocks)


def _anthropic_signal(record: Any, messages: list[Any]) -> bool:
    system = record.get("system") if isinstance(record, dict) else None
    if _untyped(system) or any(_untyped(m.get("content")) for m in messages if isinstance(m, dict)):
        return False
    if isinstance(system, (str, list)):
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
    messages: Any
    if isinstance(record, list):
        messages = record
    elif isinstance(record, dict):
        messages = record.get(messages_field)
    else:
        return False
    # Every entry must look like a message as well: this reader reads no other shape.
    return isinstance(messages, list) and _anthropic_signal(record, messages) and foreign_entry(messages) is None


_MESSAGE_KEYS = frozenset(("role", "content"))


def _valid_message(message: Any) -> bool:
    if not isinstance(message, dict) or not message.keys() <= _MESSAGE_KEYS:
        return False
    content = message.get("content")
    blocks_ok = isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") in KNOWN_BLOCKS for b in content
    )
    return message.get("role") in ("user", "assistant") and (isinstance(content, str) or blocks_ok)


def accepts_anthropic(record: Any, messages_field: str) -> bool:
    """A Messages API body as it is: messages of role user / assistant holding only ``role`` and
    ``content`` (a string or known blocks), a ``system`` string or typed blocks beside them."""
    messages = record if isinstance(record, list) else record.get(messages_field) if isinstance(record, dict) else None
    if not isinstance(messages, list) or not messages:
        return False
    system = record.get("system") if isinstance(record, dict) else None
    if system is not None and not isinstance(system, str) and (not isinstance(system, list) or _untyped(system)):
        return False
    return all(_valid_message(m) for m in messages)


# --------------------------------------------------------------------------------------------
# Writer

_VALID_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def tool_ids(messages: list[Any]) -> dict[str, str]:
    """Anthropic-valid ids for every call: valid ones kept, others sanitized and made unique."""
    ids = [c["tool_call_id"] for m in messages for c in (m.get("tool_calls") or ())]
    taken = {i for i in ids if _VALID_ID.match(i)}
    mapping = {}
    for call_id in ids:
        if _VALID_ID.match(call_id):
            mapping[call_id] = call_id
            continue
        base = re.sub(r"[^A-Za-z0-9_-]", "_", call_id)
        candidate = base if base not in taken else first_free(base, "_", 1, taken)[0]
        taken.add(candidate)
        mapping[call_id] = candidate
    return mapping


def tool_input(args: Any) -> dict[str, Any]:
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


def _renderings(source: Any, messages_field: str) -> Originals:
    """The rendered blocks of an Anthropic source record, by the rendering the reader made."""
    messages = source if isinstance(source, list) else source.get(messages_field) if isinstance(source, dict) else None
    if not isinstance(messages, list):
        return NO_ORIGINALS
    blocks = [
        block
        for message in messages
        if message.__class__ is dict and isinstance(content := message.get("content"), list)
        for block in content
        if block.__class__ is dict and block.get("type") in RENDERED
    ]
    if not blocks:
        return NO_ORIGINALS  # the usual record: one cheap pass
    names = server_names(messages)
    return Originals((rendered_block(block, names), block) for block in blocks)


def _text_blocks(text: str, originals: Originals) -> list[Any]:
    """Text as blocks: the source's rendered blocks back in place, the rest text blocks (the
    API rejects empty and whitespace-only ones)."""
    if not originals:
        return [{"type": "text", "text": text}] if text.strip() else []
    blocks = []
    for kind, value in originals.split(text):
        if kind == "block":
            blocks.append(value)
        elif value.strip():
            blocks.append({"type": "text", "text": value})
    return blocks


def _tool_use(call: dict[str, Any], ids: dict[str, Any]) -> dict[str, Any]:
    call_id = ids[call["tool_call_id"]]
    name = check_tool_name(call["name"], "Anthropic")
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input(call.get("args"))}


def _tool_result(message: dict[str, Any], ids: dict[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids[message["tool_call_id"]]}
    text = message["content"]
    is_error = text.startswith(ERROR_PREFIX)
    if is_error:
        text = text[len(ERROR_PREFIX) :]
    if message.get(media.FIELD):
        # Images the result held: back as blocks of its content, where their placeholders stand.
        text_block = lambda piece: [{"type": "text", "text": piece}] if piece.strip() else []  # noqa: E731
        block["content"] = media.with_media({**message, "content": text}, text_block, media.anthropic_block)
    elif text:
        block["content"] = text
    if is_error:
        block["is_error"] = True
    return block


def flat_to_anthropic(messages: list[Any], originals: Originals | None = None) -> tuple[str, list[Any]]:
    """Normalized flat messages as ``(system, messages)`` of a Messages request; ``originals``
    are the source record's rendered blocks, written back where their renderings stand."""
    originals = NO_ORIGINALS if originals is None else originals
    # Blank system text is left out like blank turns: the API refuses empty text.
    system = joined_system(messages)
    check_results_adjacent(messages)  # on the list as normalized: nothing is moved
    rest = [m for m in messages if m["role"] not in SYSTEM_ROLES]
    ids = tool_ids(rest)
    turns: list[dict[str, Any]] = []
    for message in rest:
        role = message["role"]
        if role == "user":
            text_blocks = lambda text: _text_blocks(text, originals)  # noqa: E731 - one use, here
            blocks, turn_role = media.with_media(message, text_blocks, media.anthropic_block), "user"
        elif role == "assistant":
            calls = [_tool_use(c, ids) for c in message.get("tool_calls") or ()]
            carried = reasoning.of(message, reasoning.ANTHROPIC)
            # Thinking blocks first, unmodified and in their order (the API checks both).
            thinking = list(carried["blocks"]) if carried is not None else []
            blocks, turn_role = thinking + _text_blocks(message["content"], originals) + calls, "assistant"
        elif role == "tool":
            # Results follow their assistant message, so they open the next user turn.
            blocks, turn_role = [_tool_result(message, ids)], "user"
        else:
            raise unsupported_role(role, "Anthropic")
        add_turn(turns, turn_role, blocks, "content")
    # Content stays a block list, also for one text block (the API's string shorthand would make
    # the field a string in some records and a list in others: no one schema would load them).
    return system, turns


def write_anthropic(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    originals = _renderings(ctx.source, ctx.messages_field)
    system, turns = flat_to_anthropic(normalized_messages(record, ctx.messages_field), originals)
    trim_final_text(turns, ctx, lambda block: block.get("type") == "text")
    if not turns:
        raise FormatError("empty_conversation", "no user or assistant content to write")
    check_user_first(turns, "Anthropic")
    out: dict[str, Any] = {}
    model = record_model(record, ctx.model, "Anthropic")
    if model is not None:
        out["model"] = model
    # The Messages API requires max_tokens: the record's own, else --max-tokens.
    if is_count(record.get("max_tokens")):
        out["max_tokens"] = record["max_tokens"]
    elif ctx.max_tokens is not None:
        out["max_tokens"] = ctx.max_tokens
    if system:
        out["system"] = system
    thinking = _thinking_config(record, turns, ctx, out.get("max_tokens"))
    if thinking is not None:
        out["thinking"] = thinking
    if thinking is None or thinking.get("type") == "disabled":
        _drop_final_thinking(turns, ctx)
    out["messages"] = turns
    tools = tools_for(record, ctx)
    tools = [anthropic_tool(t, ctx) for t in tools] if tools is not None else []
    # Anthropic needs a definition for every tool a tool_use names: derive what is missing.
    defined = {t.get("name") for t in tools}
    for name in called_tools(normalized_messages(record, ctx.messages_field)):
        if name not in defined:
            tools.append({"name": name, "input_schema": dict(PERMISSIVE_SCHEMA)})
            count_written(ctx, "derived_tool_definitions")
    if tools:
        out["tools"] = tools
    return out


#: The request's ``thinking`` config types (SDK ``ThinkingConfigParam``).
_THINKING_TYPES = frozenset(("enabled", "adaptive", "disabled", "between_tools"))
#: The types that turn thinking on (Claude's on Bedrock too: ``bedrock._model_fields``).
THINKING_ON = frozenset(("enabled", "adaptive"))


def _thinking_config(record: dict[str, Any], turns: list[Any], ctx: WriteContext, max_tokens: Any) -> Any:
    """The record's ``thinking`` config to write back, or ``None``.

    Written when it is Anthropic's shape and the body can be sent with it: thinking on needs
    the assistant turn that opens the last tool use to start with a thinking block (the API's
    400 otherwise); without one the config is left out and counted (``thinking_config_dropped``):
    the replay runs with thinking off, as the body's turns do. A ``budget_tokens`` not below the
    body's ``max_tokens`` (which the API refuses) is a ``FormatError``
    (``thinking_budget_too_large``): the budget is the logged one, and a larger max_tokens is the
    user's call (``--max-tokens`` for records without one).
    """
    config = record.get("thinking")
    if not isinstance(config, dict) or config.get("type") not in _THINKING_TYPES:
        return None
    if config["type"] in THINKING_ON and not _last_tool_turn_thinks(turns):
        count_written(ctx, "thinking_config_dropped")
        return None
    budget = config.get("budget_tokens")
    if is_count(budget) and is_count(max_tokens) and budget >= max_tokens:
        whose = "the record's own" if is_count(record.get("max_tokens")) else "--max-tokens: pass a larger one"
        raise FormatError(
            "thinking_budget_too_large",
            f"thinking.budget_tokens {budget} is not below max_tokens {max_tokens} ({whose}), which Anthropic refuses",
        )
    return config


def is_count(value: Any) -> TypeGuard[int]:
    """An int that is not a bool (a token count or budget as the API takes it)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _drop_final_thinking(turns: list[Any], ctx: WriteContext) -> None:
    """With thinking off, the reasoning blocks of a final assistant turn are left out, counted
    in the ledger under their type and ``final_thinking_dropped``: the API refuses them there
    ("When thinking is disabled, an assistant message in the final position cannot contain
    thinking"), and takes (and ignores) those of earlier turns, which stay as they were."""
    if not turns or turns[-1]["role"] != "assistant":
        return
    blocks = turns[-1]["content"]
    kept = [b for b in blocks if not (isinstance(b, dict) and b.get("type") in _REASONING)]
    if len(kept) == len(blocks):
        return
    for block in blocks:
        if isinstance(block, dict) and block.get("type") in _REASONING:
            note(ctx.discarded, block["type"], block)
    count_written(ctx, "final_thinking_dropped")
    if kept:
        turns[-1] = {**turns[-1], "content": kept}
    else:
        turns.pop()  # only reasoning: the turn goes (the user's before it ends the body)


def _last_tool_turn_thinks(turns: list[Any]) -> bool:
    """The last assistant turn holding a ``tool_use`` starts with a reasoning block (or there is none)."""
    for turn in reversed(turns):
        if turn["role"] != "assistant":
            continue
        blocks = turn["content"]
        if any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks):
            return bool(blocks) and isinstance(blocks[0], dict) and blocks[0].get("type") in _REASONING
    return True


#: The input schema of a derived tool definition: any object (the calls' inputs are objects).
PERMISSIVE_SCHEMA = {"type": "object"}
#: Function-schema keys with an Anthropic equivalent (``parameters`` becomes ``input_schema``).
_FUNCTION_KEYS = frozenset(("name", "description", "parameters", "strict", "type", "required"))


def _not_convertible(name: Any, why: str) -> FormatError:
    return FormatError("unconvertible_tool", f"tool {name!r} cannot be written as an Anthropic tool: {why}")


#: Anthropic's own server tools are typed by a versioned name (``web_search_20250305``,
#: ``code_execution_20250825``, ``bash_20250124`` ...); the MCP connector's tool sets by
#: ``mcp_toolset``. Other typed tools (OpenAI's ``web_search_preview``, ``file_search``,
#: OpenRouter's ``openrouter:*``) have no Anthropic equivalent.
_SERVER_TOOL_TYPE = re.compile(r"^[a-z][a-z0-9_]*_\d{8}$|^mcp_toolset$")


def anthropic_server_tool(kind: Any) -> bool:
    return isinstance(kind, str) and _SERVER_TOOL_TYPE.match(kind) is not None


def anthropic_tool(tool: Any, ctx: WriteContext) -> dict[str, Any]:
    """One tool definition in the Anthropic shape ``{name, description?, input_schema, strict?}``.

    Anthropic-native definitions (``input_schema``, or a server tool's own versioned
    ``type``) pass as they are; other typed tools (OpenAI built-ins such as
    ``web_search_preview``, ``openrouter:*``) are ``unconvertible_tool``. A function schema
    (chat ``{type: function, function: {...}}``, Responses ``{type: function, name, ...}`` or
    bare ``{name, ...}``) converts: ``parameters`` →
    ``input_schema`` (none → an empty object schema); ``strict`` true/false kept (Anthropic has
    it), ``strict: null`` dropped; a redundant ``type: "function"`` inside ``function`` dropped;
    a function-level ``required`` list moved into ``input_schema`` when the schema has none,
    dropped when the schema's is the same; ``description: null`` dropped. Every drop is counted
    in the writer report under ``discarded_tool_fields`` by key (``strict``,
    ``function.type``, ``required``, ``description``), every move under ``mapped_tool_fields``.
    Anything else is a ``FormatError`` (``unconvertible_tool``) that names the tool.
    """
    name = tool_name(tool)
    if not isinstance(tool, dict):
        raise _not_convertible(name, f"a tool definition is an object, not {type(tool).__name__}")
    kind = tool.get("type")
    if "input_schema" in tool or anthropic_server_tool(kind):
        return tool
    if kind == "custom":
        raise _not_convertible(name, "a free-text custom tool has no Anthropic equivalent")
    if kind not in (None, "function"):
        what = f"tool {name!r}" if name is not None else f"tool definition with keys {sorted(map(str, tool))}"
        raise FormatError("unconvertible_tool", f"{what} ({kind}) has no Anthropic equivalent")
    function, nested = _function_of(tool, name)
    if not isinstance(name, str) or not name:
        raise FormatError("unconvertible_tool", f"tool definition with keys {sorted(map(str, tool))} has no name")
    unknown = sorted(set(function) - _FUNCTION_KEYS)
    if unknown:
        raise _not_convertible(name, f"key(s) {unknown} have no Anthropic equivalent")
    out: dict[str, Any] = {"name": name}
    description = _description(function, name, ctx)
    if description is not None:
        out["description"] = description
    schema = _parameters(function, name)
    _drop_function_type(function, name, nested, ctx)
    out["input_schema"] = _with_required(schema, function, name, ctx)
    strict = _strict(function, name, ctx)
    if strict is not None:
        out["strict"] = strict
    return out


def _function_of(tool: dict[str, Any], name: Any) -> tuple[dict[str, Any], bool]:
    """The function schema of a chat tool (nested in ``function``: ``True``) or of a Responses
    or bare one (the tool itself without ``type``: ``False``)."""
    if tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        extra = set(tool) - {"type", "function"}
        if extra:
            raise _not_convertible(name, f"key(s) {sorted(extra)} beside 'function'")
        return tool["function"], True
    return {k: v for k, v in tool.items() if k != "type"}, False


def _description(function: dict[str, Any], name: Any, ctx: WriteContext) -> str | None:
    """The description to write, or ``None``; ``description: null`` is dropped, counted."""
    description = function.get("description")
    if isinstance(description, str):
        return description
    if "description" in function:
        if description is not None:
            raise _not_convertible(name, f"description is a {type(description).__name__}")
        count_written(ctx, "discarded_tool_fields", key="description")
    return None


def _parameters(function: dict[str, Any], name: Any) -> dict[str, Any]:
    """``parameters``, the future ``input_schema``; none is an empty object schema."""
    schema = function.get("parameters")
    if schema is None:
        return {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise _not_convertible(name, f"parameters is a {type(schema).__name__}, not an object")
    return schema


def _drop_function_type(function: dict[str, Any], name: Any, nested: bool, ctx: WriteContext) -> None:
    """A redundant ``type: "function"`` inside a nested ``function`` is dropped, counted; any other is refused."""
    if "type" in function:
        if function["type"] != "function" or not nested:
            raise _not_convertible(name, f"type {function['type']!r} inside the function schema")
        count_written(ctx, "discarded_tool_fields", key="function.type")


def _with_required(schema: dict[str, Any], function: dict[str, Any], name: Any, ctx: WriteContext) -> dict[str, Any]:
    """``schema`` with a function-level ``required`` list moved into it (when it has none) or
    dropped (when it has the same); a different or malformed one is refused."""
    if "required" not in function:
        return schema
    required = function["required"]
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise _not_convertible(name, "a function-level 'required' that is not a list of names")
    if "required" not in schema:
        count_written(ctx, "mapped_tool_fields", key="required")
        return {**schema, "required": required}
    if schema["required"] == required:
        count_written(ctx, "discarded_tool_fields", key="required")
        return schema
    raise _not_convertible(name, "its function-level 'required' differs from parameters.required")


def _strict(function: dict[str, Any], name: Any, ctx: WriteContext) -> bool | None:
    """``strict`` true/false to write, or ``None``; ``strict: null`` is dropped, counted."""
    strict = function.get("strict")
    if isinstance(strict, bool):
        return strict
    if "strict" in function:
        if function["strict"] is not None:
            raise _not_convertible(name, f"strict is a {type(function['strict']).__name__}")
        count_written(ctx, "discarded_tool_fields", key="strict")
    return None


ANTHROPIC_READER = register_reader(
    Reader(
        "anthropic",
        read_anthropic,
        detect_anthropic,
        priority=30,
        description="Anthropic Messages (system parameter, tool_use / tool_result blocks)",
        accepts=accepts_anthropic,
    )
)
ANTHROPIC_WRITER = register_writer(
    Writer(
        "anthropic",
        write_anthropic,
        description="Anthropic Messages API request body",
        uses=("model", "max_tokens"),  # --model, else the record's; the record's max_tokens, else --max-tokens
        reasoning=(reasoning.ANTHROPIC,),
        media=media.carrier(media.anthropic_block, ("user", "tool")),
        # Content is a string or blocks, tools and blocks free-form.
        schema={
            "model": STRING,
            "max_tokens": INT,
            "system": STRING,
            "thinking": JSON,
            "messages": [{"role": STRING, "content": JSON}],
            "tools": [JSON],
        },
    )
)
