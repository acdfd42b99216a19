"""Helpers shared by the provider formats: content flattening, stable ids, result checks, tools.

Everything here is a pure function of its arguments (``IdAllocator`` holds the ids of one
record only). Not a format: it registers nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, TypeGuard

from transforms.core.ledger import note
from transforms.core.normalize import content_text, usable_id
from transforms.core.tool_blocks import first_free, tool_blocks
from transforms.formats._rendered import unknown_block
from transforms.formats.base import (
    Conversation,
    FormatError,
    RecordShapeError,
    WriteContext,
    count_written,
    not_a_record,
)

#: Separator between the text parts of one message when they are joined into flat content.
JOIN = "\n"

#: Prefix that marks a tool result the provider flagged as an error (Anthropic ``is_error``):
#: the flat shape has no flag, so the mark lives in the text, where a writer can find it again.
ERROR_PREFIX = "[error] "

# Part and block types whose text is the content itself, per provider:
# OpenAI chat ``text``, Responses ``input_text`` / ``output_text``, Anthropic ``text``.
_TEXT_TYPES = frozenset(("text", "input_text", "output_text"))
# Model-internal reasoning: no flat equivalent, and never training text for the final answer.
_REASONING_TYPES = frozenset(("thinking", "redacted_thinking", "reasoning"))
# Media become a short placeholder, so that a turn that held only an image is not blank.
_PLACEHOLDERS = {
    "image": "[image]",
    "image_url": "[image]",
    "input_image": "[image]",
    "audio": "[audio]",
    "input_audio": "[audio]",
    "video": "[video]",
    "file": "[file]",
    "input_file": "[file]",
}


# --------------------------------------------------------------------------------------------
# Reading


def message_list(record: Any, key: str) -> list[Any]:
    """The message list of a bare-list record or of an object record at ``key``."""
    if isinstance(record, list):
        return record
    if not isinstance(record, dict):
        raise not_a_record(record)
    if key not in record:
        raise RecordShapeError("missing_messages", f"no {key!r} field")
    messages = record[key]
    if not isinstance(messages, list):
        raise RecordShapeError("messages_not_a_list", f"{key!r} is {type(messages).__name__}, not a list")
    return messages


def bare_list_conversation(record: Any, to_flat: Callable[..., list[Any]]) -> Conversation | None:
    """A bare-list record read as it is: ``to_flat(record, discarded=...)``, no fields; ``None``
    for an object record, which the reader reads its own way; anything else is not a record."""
    if isinstance(record, list):
        discarded: dict[str, Any] = {}
        return Conversation(to_flat(record, discarded=discarded), {}, discarded=discarded or None)
    if not isinstance(record, dict):
        raise not_a_record(record)
    return None


#: The keys the core reads a message's text and pairing from, besides ``role`` (any set given
#: to ``foreign_entry`` holds ``content``).
MESSAGE_KEYS = frozenset(("content", "tool_calls", "tool_call_id"))
_PAIRING_KEYS = ("tool_calls", "tool_call_id")
_ROLE_ONLY = frozenset(("role",))


def foreign_entry(entries: list[Any], keys: frozenset[str] = MESSAGE_KEYS) -> int | None:
    """The index of the first entry that is an object in a message shape nobody reads, else ``None``.

    Such an entry has a key besides ``role`` but none of ``keys`` (nor a pairing key under
    ``metadata``, which the core reads in stored-buffer rows): its text sits under a key no
    chat reader reads (Gemini ``parts``, a ``text`` key), so coercion would blank it. An entry
    that is not an object, or has nothing but a role, hides nothing: the core drops or keeps
    it, counted.
    """
    for index, entry in enumerate(entries):
        if entry.__class__ is dict and "content" in entry:
            continue  # the usual message, first: this runs on every record
        if not isinstance(entry, dict) or not keys.isdisjoint(entry) or entry.keys() <= _ROLE_ONLY:
            continue
        metadata = entry.get("metadata")
        if isinstance(metadata, dict) and any(k in metadata for k in _PAIRING_KEYS):
            continue
        return index
    return None


def describe_entry(entries: list[Any], index: int, where: str) -> str:
    """A sentence about the foreign entry ``entries[index]`` found at ``where``."""
    entry = entries[index]
    shown = ", ".join(str(k) for k in list(entry)[:8])
    return (
        f"{where} entry {index} holds none of content, tool_calls, tool_call_id (its keys: {shown}): "
        "a message shape no reader knows, whose text flat coercion would erase"
    )


def is_part_list(value: Any) -> TypeGuard[list[Any]]:
    """A non-empty list of typed parts/blocks (``{"type": ...}`` objects): provider content."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in value)
    )


def is_part_list_or_empty(value: Any) -> TypeGuard[list[Any]]:
    """A list of typed parts, or an empty list: provider content (an empty part list is empty
    text, not the ``"[]"`` the core's cast of a list would give)."""
    return value == [] or is_part_list(value)


def part_text(part: Any) -> str | None:
    """The text one content part contributes, or ``None`` when it contributes nothing.

    Text parts give their text (LLaMA-Factory's v1 blocks spell it ``value``); refusal parts
    their refusal; media a placeholder; reasoning nothing. A part of a type none of these is
    refused (``unknown_block``): turned into a placeholder, its text would be lost uncounted.
    """
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return content_text(part)
    kind = part.get("type")
    if kind in _TEXT_TYPES:
        text = part.get("text")
        if text is None:
            text = part.get("value")
        return content_text(text)
    if kind == "refusal":
        return content_text(part.get("refusal"))
    if kind in _REASONING_TYPES:
        return None
    if kind in _PLACEHOLDERS:
        return _PLACEHOLDERS[kind]
    if isinstance(kind, str):
        raise unknown_block(kind)
    return content_text(part)


def note_reasoning(part: Any, discarded: dict[str, Any] | None) -> None:
    """Put a reasoning part or block in the ledger ``discarded`` (under its type); else nothing."""
    if discarded is not None and isinstance(part, dict) and part.get("type") in _REASONING_TYPES:
        note(discarded, part["type"], part)


def flatten_parts(parts: list[Any], discarded: dict[str, Any] | None = None) -> str:
    """Join the non-empty texts of a part list with ``JOIN``; reasoning parts, and the
    annotations of text parts (citations a flat message cannot hold), go to ``discarded``."""
    texts = []
    for part in parts:
        text = part_text(part)
        if discarded is not None and isinstance(part, dict) and "annotations" in part:
            note(discarded, "annotations", part["annotations"])
        if text:
            texts.append(text)
        elif text is None:
            note_reasoning(part, discarded)
    return JOIN.join(texts)


def block_text(content: Any, discarded: dict[str, Any] | None = None) -> str:
    """Text of a content that may be a string, a part list or nothing (tool results, system)."""
    if content is None:
        return ""
    if isinstance(content, list):
        return flatten_parts(content, discarded)
    return content_text(content)


def record_fields(record: Any, consumed: tuple[str, ...]) -> dict[str, Any]:
    """The record's other fields, in order, without the keys a reader turned into messages."""
    if not isinstance(record, dict):
        return {}
    return {k: v for k, v in record.items() if k not in consumed}


class IdAllocator:
    """Stable call ids for formats that have none: derived from positions, never random.

    ``call_<message index>`` for the only call of a message, ``call_<message index>_<n>`` for
    the n-th of several; a candidate already used anywhere in the record gets ``_<k>`` added,
    so a synthesized id never pairs with a real one by accident.
    """

    def __init__(self, taken: set[str] | None = None) -> None:
        self._taken = set(taken or ())

    def new(self, index: int, sub: int | None = None) -> str:
        base = f"call_{index}" if sub is None else f"call_{index}_{sub}"
        candidate = base if base not in self._taken else first_free(base, "_", 1, self._taken)[0]
        self._taken.add(candidate)
        return candidate


def take_pending(pending: list[tuple[str, Any]], name: Any = None) -> str | None:
    """Pop the id of the pending call that an id-less result answers by position, else ``None``.

    ``pending`` holds ``(call id, name)`` pairs of calls that were given ids by position and
    are still unanswered, oldest first. The result answers the oldest one of its own ``name``
    (when it names one), else the oldest one. The OpenAI, Gemini and ShareGPT readers pair
    their id-less results with this one rule; each says when its pending run ends.
    """
    if not pending:
        return None
    if name is not None:
        for k, (_, call_name) in enumerate(pending):
            if call_name == name:
                return pending.pop(k)[0]
    return pending.pop(0)[0]


def ids_in_messages(messages: list[Any]) -> set[str]:
    """Every usable id a message list already holds (calls under either spelling, results)."""
    taken: set[str] = set()
    for message in messages:
        if not isinstance(message, dict):
            continue
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict):
                for key in ("tool_call_id", "id"):
                    found = usable_id(call.get(key))
                    if found:
                        taken.add(found)
        found = usable_id(message.get("tool_call_id"))
        if found:
            taken.add(found)
    return taken


def parse_tools_text(tools: Any) -> Any:
    """A ``tools`` column kept as a JSON string (LLaMA-Factory): the parsed list, else as is."""
    if isinstance(tools, str):
        try:
            parsed = json.loads(tools)
        except ValueError:
            return tools
        if isinstance(parsed, list):
            return parsed
    return tools


# --------------------------------------------------------------------------------------------
# Writing


def normalized_messages(record: dict[str, Any], key: str) -> list[Any]:
    messages = record.get(key) if isinstance(record, dict) else None
    if not isinstance(messages, list):
        raise FormatError("messages_not_a_list", f"the normalized record has no list at {key!r}")
    return messages


#: The roles a writer whose format keeps the system prompt apart takes out of the turns.
SYSTEM_ROLES = ("system", "developer")


def joined_system(messages: list[Any]) -> str:
    """The system (and ``developer``) messages' text joined with ``JOIN``, blank ones left out.

    What the writers whose format keeps the system prompt apart from the turns put there
    (Anthropic ``system``, Gemini ``systemInstruction``, Responses ``instructions``,
    ShareGPT's ``system`` column): APIs refuse empty text.
    """
    return JOIN.join(m["content"] for m in messages if m["role"] in SYSTEM_ROLES and m["content"].strip())


def unsupported_role(role: object, target: str) -> FormatError:
    """A role the target format has no place for; the message names the flags that fix it."""
    return FormatError(
        "unsupported_role",
        f"role {role!r} has no {target} equivalent; --map-role {role}=ROLE gives it one "
        f"(user or assistant, say), --drop-role {role} drops its messages (counted)",
    )


def add_turn(turns: list[Any], role: str, blocks: list[Any], key: str) -> None:
    """Append ``{"role": role, key: blocks}`` to ``turns``, or extend the last turn if it has
    ``role`` (the APIs that want roles to alternate would merge them anyway); no blocks, no turn."""
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1][key].extend(blocks)
    else:
        turns.append({"role": role, key: blocks})


def check_results_adjacent(messages: list[Any], open_last: bool = False) -> None:
    """Refuse a list whose results are not where every provider requires them; change nothing.

    Every call must be answered exactly once, by a ``tool`` message in *its block*: the run of
    consecutive ``tool`` messages directly after the assistant message that declares the call
    (the order inside the block is free). Blocks come from ``transforms.core.tool_blocks``, as in
    ``convnorm validate`` (``transforms.core.validate``): a writer refuses exactly the normalized
    records in which the check reports ``result_not_adjacent``.

    MEM-5 (``--profile spec``) keeps a result separated from its call's turn where it is
    (``[user, tool c1, assistant c1]``, ``[assistant c1, user, tool c1]``). Moving it would be
    a repair beyond MEM-5, which only ``--profile lossless`` makes (and reports): such a record
    is a ``FormatError`` (``result_not_adjacent``). A call declared twice, a call without a
    result, a second result or a result without a call means the record was not normalized:
    ``redeclared_call``, ``unanswered_call``, ``duplicate_result``, ``orphan_result``.

    ``open_last`` (the training writers): the calls of the last message may have no result, as
    in an example trimmed after its last assistant message (``transforms.dataset.training``), whose
    target is the call itself; MEM-5's output never has one (step C heals it).
    """
    last = len(messages) - 1 if open_last else -1
    turn_of: dict[str, Any] = {}  # call id -> index of the assistant message that declares it
    block: dict[str, Any] = {}  # call id -> (index of its result, index of the turn whose block holds it)
    for position, (message, block_turn) in enumerate(zip(messages, tool_blocks(messages))):
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id in block:
                raise FormatError("duplicate_result", f"two results for call {call_id!r}")
            block[call_id] = (position, block_turn)
            continue
        for call in message.get("tool_calls") or ():
            call_id = call.get("tool_call_id")
            if call_id in turn_of:
                raise FormatError("redeclared_call", f"call {call_id!r} is declared twice")
            turn_of[call_id] = position
    for call_id, turn in turn_of.items():
        if call_id not in block:
            if turn == last:
                continue
            raise FormatError("unanswered_call", f"call {call_id!r} has no result")
        position, owner = block[call_id]
        if owner != turn:
            place = "before" if position < turn else "after"
            raise FormatError(
                "result_not_adjacent",
                f"the result of call {call_id!r} (message {position}) is {place} its call (message {turn}) but "
                "not in the tool block right after it; --profile lossless re-attaches displaced results",
            )
    for call_id in block:
        if call_id not in turn_of:
            raise FormatError("orphan_result", f"result for undeclared call {call_id!r}")


def record_tools(record: dict[str, Any]) -> list[Any] | None:
    """The record's tool definitions as a list, or ``None`` when it has none.

    ``tools`` wins; legacy ``functions`` (bare function schemas) is used when there is no
    ``tools``. A JSON-string ``tools`` is parsed; a blank one means none.
    """
    tools = record.get("tools")
    if tools is None or tools == [] or (isinstance(tools, str) and not tools.strip()):
        functions = record.get("functions")
        if isinstance(functions, list) and functions:
            return [{"type": "function", "function": f} if isinstance(f, dict) else f for f in functions]
        return None
    tools = parse_tools_text(tools)
    if not isinstance(tools, list):
        raise FormatError("tools_not_a_list", f"tools is {type(tools).__name__}, not a list")
    return tools or None


_OPENAI_FUNCTION_KEYS = frozenset(("name", "description", "parameters", "strict"))
_ANTHROPIC_CLIENT_KEYS = frozenset(("type", "name", "description", "input_schema"))


def _unconvertible(tool: Any, target: str) -> FormatError:
    name = tool.get("name") if isinstance(tool, dict) else None
    if name is None and isinstance(tool, dict):  # chat tools keep the name in `function` / `custom`
        inner = tool.get("function") if isinstance(tool.get("function"), dict) else tool.get("custom")
        name = inner.get("name") if isinstance(inner, dict) else None
    if name is None:  # an unnamed tool (Gemini's googleSearch, say): say what it is
        what = f"with keys {sorted(map(str, tool))}" if isinstance(tool, dict) else f"{tool!r:.60}"
        return FormatError("unconvertible_tool", f"tool definition {what} cannot be written as a {target} tool")
    return FormatError("unconvertible_tool", f"tool {name!r} cannot be written as a {target} tool without loss")


def _function_schema(tool: dict[str, Any]) -> dict[str, Any] | None:
    """The function schema inside a chat, Responses or bare tool definition, else ``None``."""
    kind = tool.get("type")
    function = tool.get("function")
    if kind == "function" and isinstance(function, dict):
        return function
    if kind == "function" and "function" not in tool:
        return {k: v for k, v in tool.items() if k != "type"}
    if kind is None and "input_schema" not in tool and isinstance(tool.get("name"), str):
        return tool
    return None


def openai_tool(tool: Any) -> dict[str, Any]:
    """One tool definition in the Chat Completions shape ``{type: function, function: {...}}``."""
    if not isinstance(tool, dict):
        raise _unconvertible(tool, "OpenAI")
    if tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        return tool
    if tool.get("type") == "custom" and isinstance(tool.get("custom"), dict):
        return tool  # Chat Completions custom (free-text) tool: already OpenAI
    if tool.get("type") == "custom" and "input_schema" not in tool and isinstance(tool.get("name"), str):
        # The Responses spelling of a custom tool, flat instead of nested.
        return {"type": "custom", "custom": {k: v for k, v in tool.items() if k != "type"}}
    if "input_schema" in tool and tool.keys() <= _ANTHROPIC_CLIENT_KEYS and tool.get("type") in (None, "custom"):
        function: dict[str, Any] = {"name": tool.get("name")}
        if "description" in tool:
            function["description"] = tool["description"]
        function["parameters"] = tool["input_schema"]
        return {"type": "function", "function": function}
    schema = _function_schema(tool)
    if schema is None or not schema.keys() <= _OPENAI_FUNCTION_KEYS:
        raise _unconvertible(tool, "OpenAI")
    return {"type": "function", "function": schema}


#: Model names whose provider is plain from the name, by provider: a body for one provider
#: must not carry another's (a call log from OpenAI written for Anthropic names gpt-4o-mini).
_MODEL_PROVIDERS = (
    ("OpenAI", re.compile(r"(?:openai/)?(?:gpt-|chatgpt-|o[1-9](?:-|$)|ft:gpt-|davinci|babbage)")),
    ("Anthropic", re.compile(r"(?:anthropic/)?claude-")),
    ("Google", re.compile(r"(?:google/|models/)?(?:gemini-|gemma-)")),
    ("Bedrock", re.compile(r"(?:(?:us|eu|apac|global)\.)?(?:anthropic|amazon|meta|mistral|cohere|ai21)\.")),
    ("Cohere", re.compile(r"(?:cohere/)?(?:command-|command$|c4ai-)")),
)


def model_provider(model: str) -> str | None:
    """The provider a model name plainly belongs to, or None (a fine-tune, a self-hosted name)."""
    for provider, pattern in _MODEL_PROVIDERS:
        if pattern.match(model):
            return provider
    return None


def record_model(record: dict[str, Any], ctx_model: str | None, target: str | None = None) -> str | None:
    """``--model`` when given, else the record's own ``model`` string.

    With ``target`` (the provider the body is for), a record's own model that plainly belongs to
    another provider is refused (``foreign_model``): a replay would send it where it does not
    exist, and silently dropping it leaves a body the API refuses. ``--model`` replaces it."""
    if ctx_model:
        return ctx_model
    model = record.get("model")
    if not (isinstance(model, str) and model):
        return None
    provider = model_provider(model) if target is not None else None
    if provider is not None and provider != target:
        raise FormatError(
            "foreign_model",
            f"the record's model {model[:80]!r} is {provider}'s, not {target}'s "
            f"(give --model to name the {target} model)",
        )
    return model


def check_user_first(turns: list[Any], target: str) -> None:
    """``FormatError("leading_assistant")`` when the first written turn is not the user's (a log
    that opens with a greeting, or a leading user turn left blank): one rule for every target
    whose API wants the first turn to be the user's, the one ``convnorm validate`` reports as
    ``leading_assistant``: Anthropic ("first message must use the user role", as Bedrock and
    Vertex still enforce it), Bedrock Converse ("A conversation must start with a user
    message") and Gemini ("First content should be with role 'user'")."""
    if turns and turns[0]["role"] != "user":
        raise FormatError(
            "leading_assistant",
            f"a {target} conversation must start with a user message; this one opens with the "
            f"{turns[0]['role']}'s (drop or map that message with --drop-role / --map-role, or leave such records out)",
        )


def trim_final_text(turns: list[Any], ctx: WriteContext, is_text: Callable[[Any], bool]) -> None:
    """Anthropic refuses a body whose final assistant turn (a prefill) ends in whitespace
    ("final assistant content cannot end with trailing whitespace"): its last text block (of
    the turn's ``content``, ``is_text``, its text under ``text``: Messages and Converse alike)
    is right-stripped (a block left blank is left out, and a turn left empty), counted
    ``final_whitespace_trimmed``."""
    if not turns or turns[-1]["role"] != "assistant":
        return
    blocks = turns[-1]["content"]
    if not blocks or not is_text(blocks[-1]):
        return
    text = blocks[-1]["text"]
    trimmed = text.rstrip()
    if trimmed == text:
        return
    if trimmed:
        blocks[-1] = {**blocks[-1], "text": trimmed}
    else:
        blocks.pop()
        if not blocks:
            turns.pop()
    count_written(ctx, "final_whitespace_trimmed")
