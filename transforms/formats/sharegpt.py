"""ShareGPT / LLaMA-Factory conversations: a reader, and a writer of LLaMA-Factory training records.

``{"conversations": [{"from", "value"}], "system"?, "tools"?, ...}``; the same turns under the
message field (read first when both hold a list: the other is carried) or as a bare list; and
LLaMA-Factory's ``role`` / ``content`` variants (mixed ``role`` / ``value`` or ``from`` /
``content`` tags too), including the v1 block content ``[{"type": "text" | "reasoning" |
"tool_call", "value"}]``.

- Roles: ``human``/``user`` → user, ``gpt``/``assistant``/``chatgpt``/``bing``/``bard``/``model``
  → assistant, ``system`` → system, ``function_call`` → assistant with calls,
  ``observation``/``tool``/``function`` → tool; any other role is kept as it is.
- A ``function_call`` value (and a v1 ``tool_call`` block) is JSON ``{"name", "arguments"}`` or a
  list of them (parallel calls); arguments are kept verbatim (usually an object). Unparseable
  JSON is a FormatError (``bad_function_call``): there is no call to keep.
- No ids exist: calls get ``call_<turn index>`` (``call_<turn index>_<n>`` for the n-th of
  several). A run of consecutive results answers the calls made since the last other turn, one
  result per call, in order; extra results are orphans and calls left over stay unanswered (the
  core drops and heals them, counted). A single result answering several calls is split when
  its text is a JSON list with exactly one element per call (LLaMA-Factory batches parallel
  results so: an element's ``content`` is its text, else its compact JSON); otherwise it answers
  the first call only.
- ``reasoning`` blocks are dropped (no flat equivalent); other block types as in
  ``_common.part_text``.
- The ``system`` column becomes the leading system message. The ``tools`` column, a JSON
  string in LLaMA-Factory, is carried parsed when it parses to a list (writers need the
  schemas), else as it is.

Writer (``sharegpt``): ``{<id field>, "conversations": [{"from", "value"}], "system"?,
"tools"?}``, the layout LLaMA-Factory (``formatting: sharegpt``) and Axolotl train on, one
record per conversation; see ``write_sharegpt``.
"""

from __future__ import annotations

import json
from typing import Any

from transforms.core.jsontext import compact_json
from transforms.core.ledger import note_unread_keys
from transforms.core.normalize import INTERRUPTED_RESULT, content_text
from transforms.formats._common import (
    JOIN,
    SYSTEM_ROLES,
    IdAllocator,
    bare_list_conversation,
    block_text,
    check_results_adjacent,
    joined_system,
    normalized_messages,
    note_reasoning,
    parse_tools_text,
    part_text,
    record_fields,
    take_pending,
    unsupported_role,
)
from transforms.formats._tools import bare_function_schema, tools_for
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
from transforms.formats.schema import ID, STRING

_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "model": "assistant",
    "system": "system",
    "function_call": "assistant",
    "observation": "tool",
    "tool": "tool",
    "function": "tool",
}
_TOOL_TAGS = ("function_call", "observation")
_V1_TYPES = frozenset(("text", "reasoning", "tool_call"))


def _parse_calls(value: Any) -> list[Any]:
    """The calls of a function_call value: ``[{"name", "args"?}]``."""
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError:
            raise FormatError("bad_function_call", f"function_call value is not JSON: {value[:80]!r}") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise FormatError("bad_function_call", "function_call value is not {name, arguments} or a list of them")
    calls = []
    for d in data:
        call = {"name": d.get("name")}
        if d.get("arguments") is not None:
            call["args"] = d["arguments"]
        calls.append(call)
    return calls


def _split_batch(text: str, count: int) -> list[Any] | None:
    """One result text per call when ``text`` is a JSON list of exactly ``count`` results."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, list) or len(data) != count:
        return None
    return [content_text(e["content"]) if isinstance(e, dict) and "content" in e else content_text(e) for e in data]


_TAG_KEYS = frozenset(("from", "role"))


def _turn(entry: dict[str, Any]) -> tuple[Any, Any]:
    # ShareGPT tags (from/value) first, LLaMA-Factory's OpenAI-style tags (role/content) else.
    if "value" not in entry and "content" not in entry and not entry.keys() <= _TAG_KEYS:
        # Its text is under a key this reader does not read: refuse rather than blank it.
        shown = ", ".join(map(str, list(entry)[:8]))
        raise FormatError("unreadable_turn", f"a turn with neither value nor content (its keys: {shown})")
    tag, text = _turn_keys(entry)
    return entry.get(tag), entry.get(text)


def _turn_keys(entry: dict[str, Any]) -> tuple[str, str]:
    """The keys of a turn's tag and text: ``from``/``value`` or ``role``/``content``, or mixed
    (LLaMA-Factory lets a dataset name its tags) when the usual text key is absent."""
    if "from" in entry:
        return "from", "value" if "value" in entry or "content" not in entry else "content"
    return "role", "content" if "content" in entry or "value" not in entry else "value"


_READ_KEYS = {
    keys: frozenset(keys) for keys in (("from", "value"), ("from", "content"), ("role", "content"), ("role", "value"))
}


def _note_unread(entry: dict[str, Any], discarded: dict[str, Any]) -> None:
    note_unread_keys(entry, _READ_KEYS[_turn_keys(entry)], discarded)


def _content(value: Any, discarded: dict[str, Any]) -> tuple[str, list[Any]]:
    """Text and raw calls of a turn's value: a string, or v1 blocks (reasoning to ``discarded``)."""
    if not isinstance(value, list):
        return block_text(value), []
    texts, calls = [], []
    for block in value:
        if isinstance(block, dict) and block.get("type") == "tool_call":
            calls.extend(_parse_calls(block.get("value")))
        else:
            text = part_text(block)
            if text:
                texts.append(text)
            elif text is None:
                note_reasoning(block, discarded)
    return JOIN.join(texts), calls


def sharegpt_to_flat(turns: list[Any], system: Any = None, discarded: dict[str, Any] | None = None) -> list[Any]:
    out: list[Any] = []
    discarded = {} if discarded is None else discarded
    if isinstance(system, str) and system:
        out.append({"role": "system", "content": system})
    ids = IdAllocator()
    pending: list[tuple[str, Any]] = []  # (id, name) of calls since the last turn neither call nor result
    index = 0
    while index < len(turns):
        entry = turns[index]
        if not isinstance(entry, dict):
            out.append(entry)  # the core drops it, counted
            pending = []
            index += 1
            continue
        tag, value = _turn(entry)
        role = _ROLES.get(tag, tag) if isinstance(tag, str) else tag
        if role == "tool":
            # The whole run of consecutive results answers the pending calls together.
            run = []
            while index < len(turns) and isinstance(turns[index], dict):
                tag, value = _turn(turns[index])
                if not isinstance(tag, str) or _ROLES.get(tag, tag) != "tool":
                    break
                run.append(_content(value, discarded)[0])
                _note_unread(turns[index], discarded)
                index += 1
            if len(run) == 1 and len(pending) > 1:
                run = _split_batch(run[0], len(pending)) or run
            for text in run:  # in call order: a result has no name; one past the calls is an orphan
                out.append({"role": "tool", "content": text, "tool_call_id": take_pending(pending)})
            pending = []
            continue
        _note_unread(entry, discarded)
        if tag == "function_call":
            text, calls = "", _parse_calls(value)
        else:
            text, calls = _content(value, discarded)
        message: dict[str, Any] = {"role": role, "content": text}
        if calls:
            many = len(calls) > 1
            message["tool_calls"] = [
                {"tool_call_id": ids.new(index, n if many else None), **call} for n, call in enumerate(calls)
            ]
            pending.extend((call["tool_call_id"], call["name"]) for call in message["tool_calls"])
        else:
            pending = []
        out.append(message)
        index += 1
    return out


def read_sharegpt(record: Any, messages_field: str) -> Conversation:
    bare = bare_list_conversation(record, sharegpt_to_flat)
    if bare is not None:
        return bare
    discarded: dict[str, Any] = {}
    # The message field first when it holds a list: the record's own chat, which the output
    # writes over; 'conversations' beside it is then carried as it is, not lost.
    key = (
        messages_field
        if isinstance(record.get(messages_field), list) or not isinstance(record.get("conversations"), list)
        else "conversations"
    )
    turns = record.get(key)
    if not isinstance(turns, list):
        raise FormatError("missing_conversations", f"no list at 'conversations' or {messages_field!r}")
    system = record.get("system")
    # The message field, if that is where the turns were, stays for the job to replace in place;
    # a system column that is not text is not read, so it is carried.
    consumed: tuple[str, ...] = ("conversations",) if key == "conversations" else ()
    if isinstance(system, str) or system is None:
        consumed += ("system",)
    fields = record_fields(record, consumed)
    if "tools" in fields:
        fields["tools"] = parse_tools_text(fields["tools"])
    return Conversation(sharegpt_to_flat(turns, system, discarded), fields, discarded=discarded or None)


def _sharegpt_turn(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    if "from" in entry and "value" in entry:
        return True
    if entry.get("role") in _TOOL_TAGS:
        return True
    content = entry.get("content")
    # v1 blocks spell the text "value", never "text".
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in _V1_TYPES and "value" in b and "text" not in b for b in content
    )


def _any_sharegpt_turn(entries: list[Any]) -> bool:
    for entry in entries:
        # The usual chat message first (detection runs on every record): a role and text.
        if entry.__class__ is dict and "from" not in entry and entry.get("content").__class__ is not list:
            if entry.get("role") in _TOOL_TAGS:
                return True
        elif _sharegpt_turn(entry):
            return True
    return False


def detect_sharegpt(record: Any, messages_field: str) -> bool:
    if isinstance(record, list):
        return _any_sharegpt_turn(record)
    if not isinstance(record, dict):
        return False
    for key in ("conversations", messages_field):
        turns = record.get(key)
        if isinstance(turns, list) and _any_sharegpt_turn(turns):
            return True
    return False


SHAREGPT_READER = register_reader(
    Reader(
        "sharegpt",
        read_sharegpt,
        detect_sharegpt,
        priority=20,
        description="ShareGPT / LLaMA-Factory conversations (function_call / observation, v1 blocks)",
    )
)


# --------------------------------------------------------------------------------------------
# Writer

#: LLaMA-Factory's parity rule: human/observation turns at odd positions (1st, 3rd ...),
#: gpt/function_call turns at even ones, and an even number of turns.
_ODD_TAGS = ("human", "observation")
_EVEN_TAGS = ("gpt", "function_call")


def _dumps(value: Any) -> str:
    # json.dumps' default separators, non-ASCII kept: how LLaMA-Factory's own data is written.
    return json.dumps(value, ensure_ascii=False)


def _call_value(calls: list[Any], ctx: WriteContext) -> str:
    entries = []
    for call in calls:
        args = call.get("args")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                count_written(ctx, "arguments_kept_as_text")  # not JSON: LLaMA-Factory gets the text
        entries.append({"name": call["name"], "arguments": {} if args is None else args})
    return _dumps(entries[0] if len(entries) == 1 else entries)


def _observation_value(texts: list[str]) -> str:
    """One observation for a block of results: the text, or a JSON list of them (in call order).

    A result whose text is compact JSON of an object (without a ``content`` key) or a list is
    embedded as that value, the way LLaMA-Factory batches results; any other text as a string.
    The reader splits such a list back into the same texts.
    """
    if len(texts) == 1:
        return texts[0]
    values = []
    for text in texts:
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        compact = isinstance(value, (dict, list)) and (compact_json(value) == text)
        keep = compact and not (isinstance(value, dict) and "content" in value)
        values.append(value if keep else text)
    return _dumps(values)


def write_sharegpt(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    """One LLaMA-Factory / Axolotl training record from a normalized flat record.

    - System (and ``developer``) messages → the ``system`` column (joined with a newline,
      blank ones left out); user → ``human``; assistant text → ``gpt``; an assistant message's
      calls → ONE ``function_call`` turn, ``{"name", "arguments"}`` (arguments as an object; a
      JSON-string argument is parsed, one that is not JSON stays text, counted
      ``arguments_kept_as_text``) or a JSON list of them for parallel calls; the block of
      results after it → ONE ``observation`` turn, the result text, or for several results a
      JSON list of them in the order of the calls (the format has no ids: order pairs them).
    - Text beside calls has no place (a ``gpt`` turn before a ``function_call`` turn breaks
      LLaMA-Factory's turn order): it is dropped and counted, ``text_beside_calls_dropped``,
      in the message of the calls or in the assistant message of text right before it.
    - Adjacent user messages, and adjacent assistant texts, are joined into one turn (newline),
      counted ``merged_turns``; user text right after results joins the text of the last of
      them (in call order, newline), in their ``observation`` turn, counted
      ``user_text_merged_into_observation``: LLaMA-Factory's turn order has no place for a
      ``human`` turn there, and the text is kept (a list of several results keeps one element
      per call, so it still pairs).
    - A trailing block of results that are all MEM-5's synthetic "interrupted" results (the
      calls a conversation ended on, healed) is left out, counted
      ``interrupted_results_left_out``: no input held that text, and the record read back heals
      the calls again.
    - LLaMA-Factory drops a conversation whose turns are not human/observation at odd and
      gpt/function_call at even positions, or whose turn count is odd: such a record is a
      ``FormatError`` (``turn_order``, e.g. a conversation ending on a real result or on user
      text under ``--trailing keep``), never written to be dropped silently later: none has a
      lossless rendering. (The training default, ``--trailing trim``, leaves out what follows
      the last assistant message before the writer: ``transforms.dataset.training``.)
    - ``tools``: the record's tool definitions (``--tools-field``) as a JSON string of bare
      ``{name, description?, parameters?}`` schemas; other keys (``strict`` ...) are counted
      under ``discarded_tool_fields``.
    - The record id is written under the id field; no other field is carried.
    """
    messages = normalized_messages(record, ctx.messages_field)
    check_results_adjacent(messages, open_last=True)  # a training example may end on its calls
    system = joined_system(messages)
    turns = _sharegpt_turns(messages, ctx)
    if not turns:
        raise FormatError("empty_conversation", "no turns to write")
    _check_turn_order(turns)
    # The record id as text (a number would make the column a number in some parts, text in others).
    out: dict[str, Any] = {ctx.id_field: ctx.record_id, "conversations": turns}
    if system:
        out["system"] = system
    tools = tools_for(record, ctx)
    if tools:
        out["tools"] = _dumps([bare_function_schema(t, ctx, "LLaMA-Factory") for t in tools])
    return out


def _sharegpt_turns(messages: list[Any], ctx: WriteContext) -> list[dict[str, Any]]:
    """The ``{"from", "value"}`` turns of the messages other than system ones, in order."""
    turns: list[dict[str, Any]] = []
    order: dict[Any, int] = {}  # call id -> its index among the calls of its message
    results: list[Any] = []  # (call id, text) of the block of results being gathered
    after: list[str] = []  # the text of user messages right after that block
    for message in messages:
        role = message["role"]
        if role in SYSTEM_ROLES:
            continue
        if role == "tool":
            results.append((message["tool_call_id"], message["content"]))
            continue
        if role == "user" and results:
            # User text right after results: the same side of the turn order, so one turn.
            after.append(message["content"])
            count_written(ctx, "user_text_merged_into_observation")
            continue
        _add_observation(turns, results, after, order)
        if role == "user":
            _add_text(turns, "human", message["content"], ctx)
        elif role == "assistant":
            _add_assistant(turns, message, order, ctx)
        else:
            raise unsupported_role(role, "ShareGPT")
    if results and not after and all(text == INTERRUPTED_RESULT for _, text in results):
        # Trailing calls MEM-5 healed (SFT data whose target is the call): their results are
        # its synthetic text, held by no input; read back, the calls are healed again.
        count_written(ctx, "interrupted_results_left_out", len(results))
        results.clear()
    _add_observation(turns, results, after, order)
    return turns


def _add_observation(turns: list[Any], results: list[Any], after: list[str], order: dict[Any, int]) -> None:
    """The gathered block of results as ONE observation turn, in the order of their calls; user
    text right after the block (``after``) joins the text of its last result."""
    if results:
        texts = [text for _, text in sorted(results, key=lambda r: order.get(r[0], 0))]
        texts[-1] = JOIN.join(t for t in (texts[-1], *after) if t) if after else texts[-1]
        turns.append({"from": "observation", "value": _observation_value(texts)})
        results.clear()
        after.clear()


def _add_text(turns: list[Any], tag: str, value: str, ctx: WriteContext) -> None:
    """A ``human`` or ``gpt`` turn, joined to the last one when that has the same tag (counted)."""
    if turns and turns[-1]["from"] == tag:
        turns[-1]["value"] += JOIN + value
        count_written(ctx, "merged_turns")
    else:
        turns.append({"from": tag, "value": value})


def _add_assistant(turns: list[Any], message: dict[str, Any], order: dict[str, Any], ctx: WriteContext) -> None:
    """An assistant message: its text as ``gpt``, or its calls as ONE ``function_call`` turn
    (text beside calls has no place: dropped, counted)."""
    calls = message.get("tool_calls") or []
    if not calls:
        _add_text(turns, "gpt", message["content"], ctx)
        return
    if message["content"].strip():
        count_written(ctx, "text_beside_calls_dropped")
    if turns and turns[-1]["from"] == "gpt":
        # Assistant text right before this message of calls: text beside calls, split over two
        # messages (a gpt turn before a function_call turn breaks the turn order): dropped, counted.
        turns.pop()
        count_written(ctx, "text_beside_calls_dropped")
    order.update({c["tool_call_id"]: k for k, c in enumerate(calls)})
    turns.append({"from": "function_call", "value": _call_value(calls, ctx)})


def _check_turn_order(turns: list[Any]) -> None:
    """Refuse what LLaMA-Factory would drop: tags off their parity, or an odd number of turns."""
    for position, turn in enumerate(turns):
        allowed = _ODD_TAGS if position % 2 == 0 else _EVEN_TAGS
        if turn["from"] not in allowed:
            raise FormatError(
                "turn_order",
                f"turn {position + 1} is {turn['from']!r} where LLaMA-Factory needs {' or '.join(allowed)}",
            )
    if len(turns) % 2:
        raise FormatError(
            "turn_order", f"{len(turns)} turns: LLaMA-Factory needs an even number (ending on gpt or function_call)"
        )


SHAREGPT_WRITER = register_writer(
    Writer(
        "sharegpt",
        write_sharegpt,
        description="LLaMA-Factory / Axolotl ShareGPT training record (conversations + tools)",
        schema={ID: STRING, "conversations": [{"from": STRING, "value": STRING}], "system": STRING, "tools": STRING},
    )
)
