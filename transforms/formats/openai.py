"""OpenAI Chat Completions: a reader for logged chats, and the fine-tuning and Batch writers.

Reader (``openai``): ``{"messages": [...], ...}`` or a bare list. Calls ``{id, type:
"function", function: {name, arguments}}`` and custom calls ``{id, type: "custom", custom:
{name, input}}`` become flat calls with their arguments verbatim, and so do calls whose
``function`` is the name itself (``{id, function: "web_browser_go", arguments}``, as Inspect AI
logs them; the core reads no name there); ``developer`` becomes
``system``; content part lists are joined as text (``_common.part_text``: refusal parts give
their text, image/audio/file parts a placeholder such as ``[image]``; an empty part list is
empty text); an assistant's
``refusal`` is its text when it has no content. An assistant message that carries calls
(``tool_calls`` or a legacy ``function_call``) with ``content: null`` or no content gets ``""``:
null is how the API spells a call-only turn, ``""`` is how the flat shape spells it (null
content anywhere else is left as it is, for the core to cast and ``convnorm validate`` to
report). Legacy ``function_call`` / role ``function`` messages, and calls logged without an id
(the Hugging Face shape), get ids derived from their position (``call_<message index>[_<n>]``),
and id-less results are paired with them by position: a result answers the earliest pending
synthesized call of the same ``name``, else the earliest pending one; a message of any other
role ends the pending run. A result without ``tool_call_id`` that names its calls in a
``tool_call_ids`` list (SWE-agent trajectories) answers the list's id; a list of several ids
gives one result per id, each with the message's content, in list order, counted in the
reader report as ``tool_call_ids_split`` (the extra results); an empty list names nothing (an
orphan the core drops). Everything else on a message is left for the core, which keeps only
the flat keys (``weight``, ``name``, ``audio`` go).

The reader also reads OpenAI Batch API input lines (what ``openai-batch`` writes): an object
with a ``custom_id`` and a ``body`` object, and no message list of its own, e.g. ``{"custom_id",
"method", "url", "body": {"model", "messages", "tools"?, ...}}``. The messages are the body's
(at the message field); the fields are the line's own (``custom_id``, ``method``, ``url``) with
the body's fields (``model``, the message key, ``tools``, ``max_tokens``, ...) spliced in where
``body`` was, in order, so that writers find ``model`` and ``tools`` where a logged chat has
them. A body key the line also has is a FormatError (``batch_field_collision``), never a silent
overwrite. The job's record id is the ``--id-field`` (``id``); a Batch line that lacks that
field keeps its own ``custom_id`` (the key the Batch API matches results by).

Writers (``openai-finetune``, ``openai-batch``): one fine-tuning JSONL line, or one Batch API
input line for ``/v1/chat/completions``. Arguments become a JSON string (an object as compact
JSON, a string as is, none as ``"{}"``); an assistant message with calls and no text gets
``content: null``; messages keep their order. A Batch line this reader read (the job passes it
as ``WriteContext.source``) is written back with only its message list changed: every body
parameter and top-level key stays, ``custom_id`` is the record id, ``--model`` replaces the
body's model; so a line with nothing to repair comes back byte-identical. A result that is not in the block of tool
messages right after its call (MEM-5 keeps such a result where it is) is refused with
``FormatError("result_not_adjacent")`` instead of being moved: ``--profile lossless``
re-attaches displaced results, and reports it. ``tools`` in any known shape is written in the
Chat Completions shape, legacy ``functions`` becoming ``tools``; a call to a tool that
``tools`` declares as custom is written as a custom call. For records that are not Batch
lines only the keys of the target format are written: other record fields (ids, metadata,
sampling parameters of a logged chat) are not carried.
"""

from __future__ import annotations

from typing import Any, Sequence

from transforms.core.ledger import note
from transforms.core.normalize import content_text, pairing_key, raw_call_id
from transforms.formats import media, reasoning
from transforms.formats._common import (
    MESSAGE_KEYS,
    IdAllocator,
    check_results_adjacent,
    flatten_parts,
    foreign_entry,
    ids_in_messages,
    is_part_list_or_empty,
    message_list,
    normalized_messages,
    openai_tool,
    record_model,
    take_pending,
    unsupported_role,
)
from transforms.formats._tools import check_tool_name, tools_for
from transforms.formats.base import (
    Conversation,
    FormatError,
    Reader,
    RecordShapeError,
    WriteContext,
    Writer,
    count_written,
    register_reader,
    register_writer,
)
from transforms.formats.schema import BOOL, INT, JSON, OPENAI_MESSAGE, STRING

# --------------------------------------------------------------------------------------------
# Reader


def _first(*values: Any) -> Any:
    # The core's lenient precedence: the first spelling that is present and not null.
    for value in values:
        if value is not None:
            return value
    return None


def _named_by_function(call: Any) -> bool:
    """A call whose ``function`` is its name (``{"id", "function": "web_browser_go", "arguments"}``,
    as Inspect AI logs them): the core reads no name there."""
    return isinstance(call, dict) and isinstance(call.get("function"), str) and call.get("name") is None


def _read_call(call: Any) -> tuple[Any, bool]:
    """A provider call as a flat call, and whether it is provider-shaped (may get an id)."""
    if not isinstance(call, dict):
        return call, False
    function = call.get("function")
    if _named_by_function(call):
        # Eval frameworks (Inspect AI) log the name itself in `function`.
        flat = {"tool_call_id": raw_call_id(call), "name": function}
        args = _first(call.get("args"), call.get("arguments"))
        if args is not None:
            flat["args"] = args
        return flat, True
    inner = function if isinstance(function, dict) else call.get("custom")
    if not isinstance(inner, dict):
        return call, False  # already flat (or junk): the core reads it as it is
    flat = {"tool_call_id": raw_call_id(call)}
    name = _first(call.get("name"), inner.get("name"))
    if name is not None:
        flat["name"] = name
    args = _first(call.get("args"), call.get("arguments"), inner.get("arguments"), inner.get("input"))
    if args is not None:
        flat["args"] = args
    return flat, True


class _LazyIds:
    """``IdAllocator(ids_in_messages(messages))``, built on the first ``new``."""

    __slots__ = ("_messages", "_allocator")

    def __init__(self, messages: list[Any]) -> None:
        self._messages = messages
        self._allocator: IdAllocator | None = None

    def new(self, index: int, sub: int | None = None) -> str:
        if self._allocator is None:
            self._allocator = IdAllocator(ids_in_messages(self._messages))
        return self._allocator.new(index, sub)


def _with_text(message: dict[str, Any], discarded: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of ``message`` whose content part list, if any, is joined as text."""
    flat = dict(message)
    content = message.get("content")
    if is_part_list_or_empty(content):
        flat["content"] = flatten_parts(content, discarded)
        media.carry(flat, media.openai_items(content))
    return flat


def _read_calls(calls: Any, legacy: Any, index: int, ids: _LazyIds, pending: list[Any]) -> list[Any]:
    """An assistant's ``tool_calls`` and legacy ``function_call`` as flat calls; the ids this
    makes (calls logged without one) join ``pending``, for results paired by position."""
    new_calls = []
    listed = calls if isinstance(calls, list) else ()
    many = len(listed) > 1
    for sub, call in enumerate(listed):
        call, provider_shaped = _read_call(call)
        if provider_shaped and call["tool_call_id"] is None:
            call["tool_call_id"] = ids.new(index, sub if many else None)
            pending.append((call["tool_call_id"], call.get("name")))
        new_calls.append(call)
    if isinstance(legacy, dict):
        call_id = ids.new(index)
        call = {"tool_call_id": call_id, "name": legacy.get("name")}
        if legacy.get("arguments") is not None:
            call["args"] = legacy["arguments"]
        new_calls.append(call)
        pending.append((call_id, legacy.get("name")))
    return new_calls


def _read_assistant(
    message: dict[str, Any], index: int, ids: _LazyIds, pending: list[Any], discarded: dict[str, Any] | None
) -> dict[str, Any]:
    flat = _with_text(message, discarded)
    refusal = message.get("refusal")
    if not flat.get("content") and isinstance(refusal, str) and refusal:
        flat["content"] = refusal
    elif refusal is not None and discarded is not None:
        note(discarded, "refusal", refusal)
    flat.pop("refusal", None)
    calls = message.get("tool_calls")
    legacy = flat.pop("function_call", None)
    if flat.get("content") is None and ((isinstance(calls, list) and calls) or isinstance(legacy, dict)):
        flat["content"] = ""  # a call-only turn: the API's null is the flat shape's ""
    if isinstance(calls, list) or isinstance(legacy, dict):
        flat["tool_calls"] = _read_calls(calls, legacy, index, ids, pending)
    return flat


def _read_result(
    message: dict[str, Any],
    pending: list[Any],
    report: dict[str, Any] | None,
    discarded: dict[str, Any] | None,
    out: list[Any],
) -> None:
    """Append the flat result(s) a ``tool`` or ``function`` message becomes to ``out``."""
    flat = _with_text(message, discarded)
    flat["role"] = "tool"
    listed = flat.pop("tool_call_ids", None)
    unpaired = pairing_key(message, "tool_call_id") is None
    if unpaired and isinstance(listed, list) and listed:
        # Agent frameworks (SWE-agent) name the call in a list: one result per id.
        flat["tool_call_id"] = listed[0]
        for other in listed[1:]:
            out.append(flat)
            flat = {**flat, "tool_call_id": other}
        if report is not None and len(listed) > 1:
            report["tool_call_ids_split"] = report.get("tool_call_ids_split", 0) + len(listed) - 1
    elif unpaired and pending:
        flat["tool_call_id"] = take_pending(pending, message.get("name"))
    out.append(flat)


def scan_calls(calls: list[Any]) -> tuple[bool, bool]:
    """What a ``tool_calls`` list says of its message: ``(openai_ism, plain)``.

    ``openai_ism``: a call in the Chat Completions shape (a ``function`` or ``custom`` object),
    or named by its ``function`` (Inspect AI). ``plain``: the core reads every call as it reads
    ``_read_call``'s flat call, and none needs an id: junk and flat calls, and function calls
    that carry their id (the reader also reads ``function.input``, custom calls' spelling, and
    a name in ``function``; the core does not).
    """
    openai_ism, plain = False, True
    for call in calls:
        if not isinstance(call, dict):
            continue  # passed on as it is either way
        function = call.get("function")
        if isinstance(function, dict):
            openai_ism = True
            if plain and ("input" in function or (call.get("tool_call_id") is None and call.get("id") is None)):
                plain = False
        elif isinstance(call.get("custom"), dict) or _named_by_function(call):
            openai_ism, plain = True, False
    return openai_ism, plain


def _is_plain(message: dict[str, Any], role: Any, pending: Sequence[Any]) -> bool:
    """True when conversion would change nothing that the core or the ledger reads in ``message``.

    Such a message may still be provider-shaped: calls ``{id, type, function: {name,
    arguments}}`` with their ids (``raw_call_id``), a call-only turn's null (or missing)
    content. The core reads both as the converted message (``normalize_coerce.read_call``, null
    content cast to ``""``), and the ledger looks at neither a call's keys nor content.
    Anything the reader changes beyond that (part lists, refusals, legacy ``function_call``,
    ids to make, ``tool_call_ids``, ``developer`` / ``function`` roles, results paired by
    position with ``pending`` calls) is not plain.
    """
    content = message.get("content")
    if content.__class__ is not str and content is not None and is_part_list_or_empty(content):
        return False
    if role == "assistant":
        if "refusal" in message or "function_call" in message:
            return False
        calls = message.get("tool_calls")
        return not isinstance(calls, list) or scan_calls(calls)[1]
    if role == "tool":
        return "tool_call_ids" not in message and (not pending or pairing_key(message, "tool_call_id") is not None)
    return role not in ("developer", "function")


def plain_message(message: dict[str, Any], role: Any) -> bool:
    """``message`` (of ``role``) goes to the core as it is in a list with no call awaiting a
    result by position: conversion would change nothing the core or the ledger reads."""
    return _is_plain(message, role, ())


def _all_plain(messages: list[Any]) -> bool:
    """Every message is plain (nothing pending before the first call is converted)."""
    for message in messages:
        if isinstance(message, dict) and not _is_plain(message, message.get("role"), ()):
            return False
    return True


def openai_to_flat(
    messages: list[Any],
    report: dict[str, Any] | None = None,
    discarded: dict[str, Any] | None = None,
    keep_plain: bool = False,
) -> list[Any]:
    """Chat Completions messages (legacy function calling included) as flat messages.

    ``report`` (if given) counts ``tool_call_ids_split``: the extra results made from
    ``tool_call_ids`` lists of more than one id. What the flat shape cannot hold (reasoning
    parts, a refusal beside real content) goes to the ledger ``discarded`` when one is given.

    ``keep_plain``: a list for the core (and the ledger) alone. Messages that conversion would
    change in nothing they read (``_is_plain``) are passed on as they are, neither copied nor
    converted; the others are converted. The normalized output, drops, ledger and report are
    the same either way (tests/test_openai_fast_path.py); ``convnorm validate``, which checks
    the strict flat shape of the list itself, reads the converted one.
    """
    if keep_plain and _all_plain(messages):
        return list(messages)  # the usual log: one pass, no copies
    # The ids already taken are gathered only when an id must be made (most logs carry theirs):
    # gathering them costs a pass over every call and result of the record.
    ids = _LazyIds(messages)
    pending: list[tuple[str, Any]] = []  # (synthesized id, name) awaiting a positional result
    out: list[Any] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            out.append(message)  # the core drops it, counted
            continue
        role = message.get("role")
        if keep_plain and _is_plain(message, role, pending):
            out.append(message)
        elif role == "assistant":
            out.append(_read_assistant(message, index, ids, pending, discarded))
        elif role == "tool" or role == "function":
            _read_result(message, pending, report, discarded, out)
        else:
            flat = _with_text(message, discarded)
            if role == "developer":
                flat["role"] = "system"
            out.append(flat)
        if role != "assistant" and role != "tool" and role != "function":
            pending.clear()  # a new turn: later results cannot answer earlier calls by position
    return out


def is_batch_line(record: Any, messages_field: str) -> bool:
    """A Batch API input line: a ``custom_id`` and a ``body`` object, no message list beside them."""
    return (
        isinstance(record, dict)
        and messages_field not in record
        and "custom_id" in record
        and isinstance(record.get("body"), dict)
    )


def _batch_fields(record: dict[str, Any]) -> dict[str, Any]:
    """The line's fields with the body's fields spliced in where ``body`` was, in order."""
    fields: dict[str, Any] = {}
    for key, value in record.items():
        if key != "body":
            fields[key] = value
            continue
        for inner, inner_value in value.items():
            if inner in record:
                raise FormatError("batch_field_collision", f"the line and its body both have {inner!r}")
            fields[inner] = inner_value
    return fields


def read_openai(record: Any, messages_field: str, keep_plain: bool = False) -> Conversation:
    if is_batch_line(record, messages_field):
        body = record["body"]
        if messages_field not in body:
            raise RecordShapeError("missing_messages", f"the Batch line's body has no {messages_field!r} field")
        messages = message_list(body, messages_field)
        fields = _batch_fields(record)
    else:
        messages = message_list(record, messages_field)
        fields = record if isinstance(record, dict) else {}
    report: dict[str, Any] = {}
    discarded: dict[str, Any] = {}
    flat = openai_to_flat(messages, report, discarded, keep_plain)
    return Conversation(flat, fields, report or None, discarded or None)


def read_openai_for_core(record: Any, messages_field: str) -> Conversation:
    """``read_openai`` for the job's normalization: plain messages are passed on unconverted."""
    return read_openai(record, messages_field, keep_plain=True)


def _openai_ism(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    if message.get("role") in ("function", "developer") or "function_call" in message or "refusal" in message:
        return True
    if isinstance(message.get("tool_call_ids"), list) and "tool_call_id" not in message:
        return True  # an agent trajectory naming its calls in a list (SWE-agent)
    if is_part_list_or_empty(message.get("content")):
        return True
    calls = message.get("tool_calls")
    return isinstance(calls, list) and scan_calls(calls)[0]


#: Keys an OpenAI message may hold its text or its call in (a legacy call-only turn may have
#: no content at all).
_OPENAI_MESSAGE_KEYS = MESSAGE_KEYS | {"function_call", "refusal"}


def detect_openai(record: Any, messages_field: str) -> bool:
    # Only what this reader reads differently from the flat one, so that a record without any
    # of it gives the same conversation under either reader. A Batch line is OpenAI's alone.
    # Either way, every entry must look like a message: this reader reads no other shape.
    if is_batch_line(record, messages_field):
        messages = record["body"].get(messages_field)
        return isinstance(messages, list) and foreign_entry(messages, _OPENAI_MESSAGE_KEYS) is None
    messages = record if isinstance(record, list) else record.get(messages_field) if isinstance(record, dict) else None
    return (
        isinstance(messages, list)
        and any(_openai_ism(m) for m in messages)
        and foreign_entry(messages, _OPENAI_MESSAGE_KEYS) is None
    )


# --------------------------------------------------------------------------------------------
# Writers


def openai_arguments(args: Any) -> str:
    """Call arguments as the JSON string OpenAI wants: strings verbatim, objects compact."""
    if args is None:
        return "{}"
    if isinstance(args, str):
        return args
    return content_text(args)


def _openai_call(call: dict[str, Any], custom_tools: frozenset[str]) -> dict[str, Any]:
    check_tool_name(call["name"], "OpenAI")
    if call["name"] in custom_tools:
        # A call to a free-text custom tool: its arguments are the tool's input.
        args = call.get("args")
        text = "" if args is None else openai_arguments(args)
        return {"id": call["tool_call_id"], "type": "custom", "custom": {"name": call["name"], "input": text}}
    return {
        "id": call["tool_call_id"],
        "type": "function",
        "function": {"name": call["name"], "arguments": openai_arguments(call.get("args"))},
    }


def flat_to_openai(
    messages: list[Any],
    custom_tools: frozenset[str] = frozenset(),
    open_last: bool = False,
    with_reasoning: bool = False,
) -> list[Any]:
    """Normalized flat messages as Chat Completions messages, in the same order.

    A result that is not in the tool block right after its call is a ``FormatError``
    (``result_not_adjacent``, see ``check_results_adjacent``): the writer moves nothing.
    ``custom_tools`` names the record's custom (free-text) tools: calls to them are written as
    custom calls, the flat shape having no other trace of the difference. ``with_reasoning``:
    an assistant message's carried OpenAI-compatible reasoning keys (``reasoning_content`` ...)
    are written back beside its content, as they were.
    """
    if not messages:
        raise FormatError("empty_conversation", "no messages to write")
    check_results_adjacent(messages, open_last)  # open_last: a training example's final calls
    out = []
    for message in messages:
        role = message["role"]
        if role == "user" and message.get(media.FIELD):
            # Media where their placeholders stand: content as parts (text and image_url ...).
            out.append({"role": role, "content": media.with_media(message, _text_part, media.openai_chat_part)})
        elif role in ("system", "developer", "user"):
            out.append({"role": role, "content": message["content"]})
        elif role == "assistant":
            calls = message.get("tool_calls")
            if not calls:
                written = {"role": "assistant", "content": message["content"]}
            else:
                written = {
                    "role": "assistant",
                    # A call-only turn: null, as the API itself returns it.
                    "content": message["content"] or None,
                    "tool_calls": [_openai_call(call, custom_tools) for call in calls],
                }
            carried = reasoning.of(message, reasoning.OPENAI_CHAT) if with_reasoning else None
            if carried is not None:
                written.update(carried["fields"])
            out.append(written)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]})
        else:
            raise unsupported_role(role, "OpenAI")
    return out


def _text_part(text: str) -> list[Any]:
    return [{"type": "text", "text": text}] if text else []


def _tools(record: dict[str, Any], ctx: WriteContext) -> tuple[list[Any] | None, frozenset[str]]:
    """The record's tools in the Chat Completions shape, and the names of its custom tools."""
    tools = tools_for(record, ctx)  # --tools-field, else tools / functions
    if tools is None:
        return None, frozenset()
    tools = [openai_tool(t) for t in tools]
    return tools, frozenset(t["custom"].get("name") for t in tools if t.get("type") == "custom")


def write_openai_finetune(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    tools, custom_tools = _tools(record, ctx)
    if custom_tools:
        # The fine-tuning line's tools are function tools only (FineTuneChatRequestInput): a
        # custom tool's free-text input has no function-call form to convert it to exactly.
        names = ", ".join(sorted(repr(n) for n in custom_tools))
        raise FormatError(
            "unconvertible_tool",
            f"custom (free-text) tool(s) {names}: OpenAI fine-tuning lines take function tools only",
        )
    flat = normalized_messages(record, ctx.messages_field)
    messages = flat_to_openai(flat, custom_tools, open_last=True)
    if not any(m["role"] == "assistant" for m in messages):
        raise FormatError("no_assistant_message", "a fine-tuning example needs an assistant message")
    _write_weights(flat, messages, ctx)
    out: dict[str, Any] = {"messages": messages}
    if tools is not None:
        out["tools"] = tools
    if isinstance(record.get("parallel_tool_calls"), bool):
        out["parallel_tool_calls"] = record["parallel_tool_calls"]
    return out


def _write_weights(flat: list[Any], messages: list[Any], ctx: WriteContext) -> None:
    """The weights carried around the core (``transforms.dataset.training``) onto the written messages
    (one per flat message, in order): OpenAI weighs assistant messages only; a weight on
    another role is left out, counted."""
    for source, written in zip(flat, messages):
        if "weight" not in source:
            continue
        if written["role"] == "assistant":
            written["weight"] = source["weight"]
        else:
            count_written(ctx, "weight_not_on_assistant_left_out")


def _rewrite_batch_line(line: dict[str, Any], messages: list[Any], ctx: WriteContext) -> dict[str, Any]:
    """A Batch line read by this reader, written back: only its message list changes.

    Every top-level key and body parameter stays where it was, with its value (``tools``,
    ``temperature``, ``response_format``, ``metadata``, ...); ``custom_id`` is the record id,
    which is the line's own ``custom_id`` unless ``--id-field`` names a field it has, and ``--model``, when
    given, replaces the body's ``model``. A line with nothing to repair comes back as it was.
    """
    body = dict(line["body"])
    body[ctx.messages_field] = messages
    if ctx.model:
        body = body if "model" in body else {"model": None, **body}
        body["model"] = ctx.model
    return {
        key: ctx.record_id if key == "custom_id" else body if key == "body" else value for key, value in line.items()
    }


def write_openai_batch(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    if not isinstance(ctx.record_id, str) or not ctx.record_id:
        raise FormatError("missing_record_id", "a Batch line needs the record id as custom_id")
    model = record_model(record, ctx.model)
    if model is None:
        raise FormatError("missing_model", "a Batch request needs a model: pass --model")
    tools, custom_tools = _tools(record, ctx)
    messages = flat_to_openai(normalized_messages(record, ctx.messages_field), custom_tools, with_reasoning=True)
    if is_batch_line(ctx.source, ctx.messages_field):
        return _rewrite_batch_line(ctx.source, messages, ctx)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if tools is not None:
        body["tools"] = tools
        # The API refuses parallel_tool_calls without tools.
        if isinstance(record.get("parallel_tool_calls"), bool):
            body["parallel_tool_calls"] = record["parallel_tool_calls"]
    return {"custom_id": ctx.record_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


OPENAI_READER = register_reader(
    Reader(
        "openai",
        read_openai,
        detect_openai,
        priority=60,
        description="OpenAI Chat Completions messages (tool_calls, legacy function_call, content parts; "
        "Batch API input lines)",
        read_for_core=read_openai_for_core,
    )
)
OPENAI_FINETUNE_WRITER = register_writer(
    Writer(
        "openai-finetune",
        write_openai_finetune,
        description="OpenAI chat fine-tuning JSONL line",
        # weight: 0 or 1 on an assistant message (transforms.dataset.training), else absent. No media: a
        # line's content stays one string, the schema that loads every part as one dataset
        # (placeholders left are counted in the ledger).
        schema={"messages": [{**OPENAI_MESSAGE, "weight": INT}], "tools": [JSON], "parallel_tool_calls": BOOL},
    )
)
OPENAI_BATCH_WRITER = register_writer(
    Writer(
        "openai-batch",
        write_openai_batch,
        description="OpenAI Batch API input line (/v1/chat/completions)",
        uses=("model",),  # body.model: --model, else the record's own
        unique_field="custom_id",  # the Batch API refuses a file that repeats one
        # Chat Completions-compatible providers (DeepSeek, OpenRouter) want their reasoning back.
        reasoning=(reasoning.OPENAI_CHAT,),
        media=media.carrier(media.openai_chat_part, ("user",)),
        # A Batch line written back keeps every body parameter it had: the body is free-form.
        schema={"custom_id": STRING, "method": STRING, "url": STRING, "body": JSON},
    )
)
