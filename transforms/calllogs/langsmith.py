"""LangSmith runs: JSONL exports and the SDK's ingestion payloads.

A record is one run (``id`` or ``run_id``, ``trace_id``, ``run_type``, ``inputs``, ``outputs``,
``extra``, ``start_time``), or an ingestion payload ``{"post": [runs], "patch": [runs]}`` (each
patch completes the post with the same ``id``, else the same ``dotted_order``: ``outputs`` and
``end_time`` arrive there; ``child_runs`` are runs too).

Runs of type ``llm`` are calls, in one of two dialects, told apart run by run:

- LangChain callbacks: ``inputs.messages`` a list of batches of LangChain-serialized messages
  (``{"lc": 1, "type": "constructor", "id": [..., "HumanMessage"], "kwargs": {...}}``, or the
  ``{"type": "human", "data": {...}}`` / ``{"type": "human", "content": ...}`` dicts) or
  ``inputs.prompts`` (strings); the output ``outputs.generations[0][0]`` (its ``message``, else
  its ``text``); tools in ``extra.invocation_params.tools``. Only the first batch is read.
- SDK wrappers (``wrap_openai``, ``wrap_anthropic``, ``@traceable(run_type="llm")``): ``inputs``
  is the provider request and ``outputs`` its response, read by the matching reader.

Runs of type ``tool`` are tool results: the call id and text of a ``ToolMessage`` output, else
the output as text. The conversation is ``extra.metadata``'s ``session_id``, ``thread_id`` or
``conversation_id`` (LangSmith's thread keys), else the trace id; the top-level ``session_id``
is the project, not a conversation, and is not used.
"""

from __future__ import annotations

from typing import Any

from transforms.calllogs.calls import (
    Call,
    CallLogReader,
    Fragment,
    Piece,
    ReadItem,
    Rejected,
    Skipped,
    ToolResult,
    register_call_log_reader,
    register_joiner,
)
from transforms.calllogs.embedded import (
    as_dict,
    check_blocks,
    decoded,
    merged_ledgers,
    part_text,
    parts_read,
    read_history,
    read_output,
    response_ids,
    strict_flat,
    tools_of,
)
from transforms.calllogs.times import time_nanos
from transforms.core.normalize import content_text
from transforms.formats._common import block_text
from transforms.formats.base import FormatError
from transforms.formats.openai import openai_to_flat

NAME = "langsmith"
_THREAD_KEYS = ("session_id", "thread_id", "conversation_id")
_RUN_IDS = frozenset(("id", "run_id", "trace_id", "dotted_order"))
#: LangChain message classes (the last element of an ``lc`` id) and ``type`` tags, by role.
_ROLES = {
    "HumanMessage": "user",
    "HumanMessageChunk": "user",
    "human": "user",
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "ai": "assistant",
    "SystemMessage": "system",
    "SystemMessageChunk": "system",
    "system": "system",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "tool": "tool",
    "FunctionMessage": "tool",
    "function": "tool",
}
#: Content blocks that repeat what ``tool_calls`` holds (Anthropic models put them in content).
_CALL_BLOCKS = frozenset(("tool_use", "tool_call", "function_call"))


def _text(value: Any) -> str:
    return "" if value is None else content_text(value)


def _content(content: Any, ledger: dict[str, Any]) -> str:
    check_blocks(content, "a LangChain message")
    if isinstance(content, list):
        content = [b for b in content if not (isinstance(b, dict) and _tag(b) in _CALL_BLOCKS)]
    return block_text(content, ledger)


def lc_message(entry: Any, ledger: dict[str, Any]) -> Any:
    """One LangChain message (serialized or as a dict) as a flat message; an entry of no known
    shape (a ``not_implemented`` stand-in, say) is handed on as it is, for the core to drop,
    counted; an OpenAI-style ``{role, content}`` message is read as OpenAI's."""
    if not isinstance(entry, dict):
        return entry
    if entry.get("lc") == 1 and isinstance(entry.get("id"), list):
        if entry.get("type") != "constructor" or not entry["id"]:
            return entry
        kind, kwargs = entry["id"][-1], entry.get("kwargs")
        if not isinstance(kind, str):
            return entry
    elif isinstance(entry.get("type"), str) and entry["type"] in _ROLES and "role" not in entry:
        kind = entry["type"]
        kwargs = entry.get("data") if isinstance(entry.get("data"), dict) else entry
    elif "role" in entry:
        return openai_to_flat([entry], None, ledger)[0]
    else:
        return entry
    kwargs = kwargs if isinstance(kwargs, dict) else {}
    role = _ROLES.get(kind) or (kwargs.get("role") if kind in ("ChatMessage", "chat") else None)
    if role is None:
        raise FormatError("unknown_message_class", f"LangChain message class {kind!r} is not one convnorm knows")
    flat: dict[str, Any] = {"role": role, "content": _content(kwargs.get("content"), ledger)}
    if role == "assistant":
        calls = _calls(kwargs, ledger)
        if calls:
            flat["tool_calls"] = calls
    elif role == "tool":
        flat["tool_call_id"] = _text(kwargs.get("tool_call_id")).strip()
    return flat


def _calls(kwargs: dict[str, Any], ledger: dict[str, Any]) -> list[dict[str, Any]]:
    calls = kwargs.get("tool_calls")
    if isinstance(calls, list) and calls:
        out = []
        for call in calls:
            if isinstance(call, dict):
                one: dict[str, Any] = {"tool_call_id": _text(call.get("id")).strip(), "name": call.get("name")}
                if "args" in call:
                    one["args"] = call["args"]
                out.append(one)
        return out
    extra = kwargs.get("additional_kwargs")
    legacy = extra.get("tool_calls") if isinstance(extra, dict) else None
    if isinstance(legacy, list) and legacy:
        # An older AIMessage: the calls only in OpenAI's own form.
        read = openai_to_flat([{"role": "assistant", "content": "", "tool_calls": legacy}], None, ledger)[0]
        found: list[dict[str, Any]] = read.get("tool_calls") or []
        return found
    return []


def _batch(messages: Any) -> list[Any] | None:
    """The first batch of ``inputs.messages`` (a list of lists), or a flat list as it is."""
    if not isinstance(messages, list):
        return None
    if messages and isinstance(messages[0], list):
        return messages[0]
    return messages


def _is_lc(messages: list[Any]) -> bool:
    return any(isinstance(m, dict) and ("lc" in m or (_tag(m) in _ROLES and "role" not in m)) for m in messages)


def _tag(message: dict[str, Any]) -> str:
    kind = message.get("type")
    return kind if isinstance(kind, str) else ""


def _extra(run: dict[str, Any]) -> dict[str, Any]:
    """The run's ``extra``: an object, or JSON text (a Parquet bulk export stores it so)."""
    return as_dict(decoded(run.get("extra")))


def _metadata(run: dict[str, Any]) -> dict[str, Any]:
    extra = _extra(run)
    metadata = extra.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _group(run: dict[str, Any]) -> str:
    metadata = _metadata(run)
    for key in _THREAD_KEYS:
        if metadata.get(key) not in (None, ""):
            return _text(metadata[key])
    for value in (run.get("trace_id"), run.get("id"), run.get("run_id")):
        if value not in (None, ""):
            return _text(value)
    return ""


def _model(run: dict[str, Any], *found: str | None) -> str | None:
    extra = _extra(run)
    params = as_dict(extra.get("invocation_params"))
    for value in (params.get("model"), params.get("model_name"), *found, _metadata(run).get("ls_model_name")):
        if isinstance(value, str) and value:
            return value
    return None


def _run_id(run: dict[str, Any]) -> str:
    return _text(run.get("id", run.get("run_id")))


def _llm_call(run: dict[str, Any]) -> Call:
    where = f"run {_run_id(run)}"
    inputs = decoded(run.get("inputs"))
    outputs = decoded(run.get("outputs"))
    inputs = inputs if isinstance(inputs, dict) else {}
    ledger: dict[str, Any] = {}
    batch = _batch(inputs.get("messages"))
    history_model = output_model = None
    history_tools = output_tools = None
    if batch is not None and _is_lc(batch):
        history = [lc_message(m, ledger) for m in batch]
    elif batch is None and isinstance(inputs.get("prompts"), list):
        prompts = inputs["prompts"]
        history = [{"role": "user", "content": _text(prompts[0])}] if prompts else []
    else:
        read = read_history(inputs, f"{where} inputs")
        history, history_model, history_tools = read.messages, read.model, read.tools
        ledger = merged_ledgers(ledger, read.discarded) or {}
    truncated = False
    generations = outputs.get("generations") if isinstance(outputs, dict) else None
    if isinstance(generations, list):
        first = _batch(generations)
        generation = first[0] if first else None
        if isinstance(generation, dict) and isinstance(generation.get("message"), dict):
            output = [lc_message(generation["message"], ledger)]
        elif isinstance(generation, dict):
            output = [{"role": "assistant", "content": _text(generation.get("text"))}]
        else:
            output = []
    else:
        read_out = read_output(outputs, f"{where} outputs") if outputs else None
        output = read_out.messages if read_out else []
        if read_out is not None:
            output_model, output_tools = read_out.model, read_out.tools
            ledger = merged_ledgers(ledger, read_out.discarded) or {}
            truncated = read_out.truncated
    params = as_dict(_extra(run).get("invocation_params"))
    tools = tools_of(params.get("tools")) or history_tools or tools_of(inputs.get("tools")) or output_tools
    history = strict_flat(history, ledger)
    output = strict_flat(output, ledger)
    return Call(
        NAME,
        _group(run),
        time_nanos(run.get("start_time"), f"{where} start_time"),
        _run_id(run),
        history,
        output,
        tools,
        _model(run, history_model, output_model, inputs.get("model") if isinstance(inputs.get("model"), str) else None),
        ledger or None,
        truncated,
        *response_ids(inputs, outputs),
    )


def _tool_result(run: dict[str, Any]) -> ToolResult | None:
    outputs = decoded(run.get("outputs"))
    if outputs is None:
        return None
    output = outputs.get("output", outputs) if isinstance(outputs, dict) else outputs
    call_id, content = "", output
    message = lc_message(output, {}) if isinstance(output, dict) else None
    if isinstance(message, dict) and message.get("role") == "tool":
        call_id, content = message["tool_call_id"], message["content"]
    inputs = as_dict(run.get("inputs"))
    if not call_id and isinstance(inputs.get("tool_call_id"), str):
        call_id = inputs["tool_call_id"].strip()
    return ToolResult(
        NAME,
        _group(run),
        time_nanos(run.get("start_time"), f"run {_run_id(run)} start_time"),
        _run_id(run),
        call_id,
        _text(run.get("name")),
        content_text(content),
    )


def _one_run(run: Any) -> list[ReadItem]:
    """The piece of one run (not its children), or a ``Skipped`` by its type."""
    if not isinstance(run, dict):
        raise FormatError("bad_run", f"a run is {type(run).__name__}, not an object")
    kind = run.get("run_type")
    if kind == "llm":
        return [_llm_call(run)]
    if kind == "tool":
        result = _tool_result(run)
        return [Skipped("tool_without_result")] if result is None else [result]
    return [Skipped(kind.lower() if isinstance(kind, str) and kind else "other")]


def _runs(run: Any) -> list[Any]:
    """A run and, depth first, its ``child_runs``."""
    found = [run]
    children = run.get("child_runs") if isinstance(run, dict) else None
    for child in children if isinstance(children, list) else ():
        found.extend(_runs(child))
    return found


def _rejected(index: int, run: Any, error: FormatError) -> Rejected:
    """A run of a payload (or of a run's children) that cannot be read: a dead letter of its own."""
    found = run if isinstance(run, dict) else {}
    own = _run_id(found) or f"#{index}"
    try:
        start = time_nanos(found.get("start_time"), "start_time")
    except FormatError:
        start = 0
    detail = f"{NAME}: run {index} (id {own}): {error.reason}: {error}"
    return Rejected(NAME, _group(found) or own, start, own, error.reason, detail, part_text(run))


def run_pieces(run: Any) -> list[ReadItem]:
    """The pieces of one run and of its ``child_runs``."""
    return parts_read(_runs(run), _one_run, _rejected)


def run_key(run: dict[str, Any]) -> str:
    """The id a post or patch names its run by: ``id`` (``run_id``), else the id that ends its
    ``dotted_order`` (``<time>Z<id>``, the run's own segment last: the JS SDK's patches have no
    ``id``); "" when it names none."""
    own = _run_id(run).strip()
    if own:
        return own
    order = run.get("dotted_order")
    if isinstance(order, str) and order:
        return order.rsplit(".", 1)[-1].partition("Z")[2].strip()
    return ""


def _patched(run: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A run updated by its patch: the patch's fields win, but for those it leaves empty
    (``None``: the Python SDK sends ``parent_run_id: null``), and its ``extra`` and metadata add
    to the post's (a patch need not repeat the thread a post's metadata names)."""
    out = dict(run)
    for key, value in patch.items():
        if value is None and key in out:
            continue
        if key == "extra":
            mine, theirs = _extra(out), as_dict(decoded(value))
            metadata = {**as_dict(mine.get("metadata")), **as_dict(theirs.get("metadata"))}
            value = {**mine, **theirs, **({"metadata": metadata} if metadata else {})}
        out[key] = value
    return out


def _payload_parts(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The runs of an ingestion payload, each ``("whole", run)`` (a post with its patch here),
    ``("post", run)`` (its patch not here) or ``("patch", run)`` (its post not here). A post
    and a patch meet by ``run_key``."""
    posts = [dict(run) for run in record.get("post") or () if isinstance(run, dict)]
    by_key: dict[str, int] = {}
    for index, run in enumerate(posts):
        key = run_key(run)
        if key:
            by_key.setdefault(key, index)
    patched: set[int] = set()
    alone: list[tuple[str, dict[str, Any]]] = []
    for patch in record.get("patch") or ():
        if not isinstance(patch, dict):
            raise FormatError("bad_run", "a patch is not an object")
        target = by_key.get(run_key(patch))
        if target is None:
            alone.append(("patch", patch))
        else:
            posts[target] = _patched(posts[target], patch)
            patched.add(target)
    parts = [("whole" if index in patched else "post", run) for index, run in enumerate(posts)]
    return parts + alone


def _start_of(run: dict[str, Any], where: str) -> int:
    when = run.get("start_time")
    if when is None:
        when = run.get("end_time")  # a patch may say only when its run ended
    return time_nanos(when, where)


def _payload_part(part: tuple[str, dict[str, Any]]) -> list[ReadItem]:
    """One run of a payload: read (a post with its patch; a run of no LLM or tool type), or a
    ``Fragment`` keyed by its run, to meet its post or patch wherever that was read."""
    kind, run = part
    run_type = run.get("run_type")
    if kind == "whole" or (kind == "post" and run.get("end_time") is not None):
        return run_pieces(run)  # whole here (a post sent after its run ended holds its end)
    if kind == "patch" and run_type is not None and run_type not in ("llm", "tool"):
        return run_pieces(run)  # a patch of a chain or retriever run: skipped, by its type
    key = run_key(run)
    if not key:
        raise FormatError("bad_run", f"a {kind} names no run (no id, no dotted_order)")
    own = f"{kind} of run {key}"
    if kind == "post" and run_type not in ("llm", "tool"):
        # Read now (skipped by type); the fragment only lets a patch sent later meet it.
        data: Any = {"run_type": run_type if isinstance(run_type, str) else None, "id": key}
        return [*run_pieces(run), Fragment(NAME, "", 0, key, f"run:{key}", "post", data)]
    group = ""
    if kind == "post":
        run_pieces(run)  # a post that cannot be read is refused here, as a run read whole is
        group = _group(run)
    return [Fragment(NAME, group, _start_of(run, f"{own} start_time"), key, f"run:{key}", kind, run)]


def join_runs(fragments: list[tuple[str, int, Fragment]]) -> list[tuple[str, int, Piece]]:
    """The posts and patches of one run, read wherever they were: the post updated by each
    patch, read as a run at the post's place (``read_langsmith``); patches that meet no post are
    dead letters (``unmatched_patch``), each at its own record's place."""
    posts = [item for item in fragments if item[2].part == "post"]
    patches = [item for item in fragments if item[2].part == "patch"]
    if not posts:
        out: list[tuple[str, int, Piece]] = []
        for source, position, patch in patches:
            detail = f"{NAME}: patch of run {patch.call_id}: no post of this run was read"
            group = _group(patch.data) or patch.call_id
            out.append(
                (
                    source,
                    position,
                    Rejected(NAME, group, patch.start, patch.call_id, "unmatched_patch", detail, part_text(patch.data)),
                )
            )
        return out
    source, position, post = posts[0]
    if post.data.get("run_type") not in ("llm", "tool"):
        return []  # a run of another type: skipped when its post was read
    run = dict(post.data)
    for _, _, more in [*posts[1:], *patches]:
        run = _patched(run, more.data)
    try:
        items = run_pieces(run)
    except FormatError as error:
        items = [_rejected(0, run, error)]
    return [(source, position, piece) for piece in items if not isinstance(piece, Skipped)]


def read_langsmith(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict):
        raise FormatError("not_langsmith", "a LangSmith run is an object")
    if "run_type" not in record:
        if not isinstance(record.get("post", []), list) or not isinstance(record.get("patch", []), list):
            raise FormatError("bad_payload", "an ingestion payload's post and patch are lists of runs")
        parts = _payload_parts(record)
        return parts_read(parts, _payload_part, lambda index, part, error: _rejected(index, part[1], error))
    return run_pieces(record)


register_joiner(NAME, join_runs)


def _run_like(run: Any) -> bool:
    return isinstance(run, dict) and "run_type" in run and "inputs" in run


def _patch_like(run: Any) -> bool:
    """A patch: names its run and trace, and brings what a run ends with."""
    if not isinstance(run, dict) or not ("id" in run or "dotted_order" in run) or "trace_id" not in run:
        return False
    return "outputs" in run or "end_time" in run or "error" in run


def detect_langsmith(record: Any) -> bool:
    if "run_type" in record:
        return "inputs" in record and not _RUN_IDS.isdisjoint(record)
    posts, patches = record.get("post"), record.get("patch")
    if isinstance(posts, list) and posts and _run_like(posts[0]):
        return True
    return isinstance(patches, list) and bool(patches) and (_run_like(patches[0]) or _patch_like(patches[0]))


LANGSMITH_READER = register_call_log_reader(
    CallLogReader(NAME, read_langsmith, detect_langsmith, 30, "LangSmith runs (JSONL exports, SDK ingestion payloads)")
)
