"""The TRL sinks: preference pairs, unpaired preference rows and prompts, in TRL's conversational
forms (``trl.data_utils`` checks and renders them), from a conversation's labels
(``transforms.formats._labels``).

Every message is written as the ``hf`` sink writes it (``transforms.formats.hf``: the same seven
keys, calls with their arguments as objects, ``tools`` in the Chat Completions shape), so every
part of a multi-part output has one schema. One record per conversation:

- ``trl-dpo``: ``{"id", "prompt", "chosen", "rejected", "tools"}``, from a label that carries
  another output for the message it judges: a ``correction`` (chosen) against the logged
  continuation (rejected), or a ``rejected`` output (OpenPipe's ``rejected_message``) against the
  logged one (chosen). The first such label in the labels' order makes the pair; the others are
  counted ``other_pairs_left``. Refused: ``no_pair`` (no such label), ``same_continuation``.
- ``trl-kto``: ``{"id", "prompt", "completion", "label", "tools"}``. The label is a thumb (a bool
  label), or with ``--kto-threshold NAME=VALUE`` the numeric label NAME at or above VALUE. The
  continuation judged last in the conversation is written; refused: ``no_label``,
  ``labels_disagree`` (two thumbs on one continuation that say otherwise).
- ``trl-prompts``: ``{"id", "prompt", "answer", "reward", "scores", "reference", "tools"}`` for
  online RL: the prompt is the conversation before its final continuation (all of it when it
  ends on a user's turn), ``answer`` the logged continuation (``null``: none), ``reward`` the
  value of the label ``--reward NAME`` on it (a bool as 1.0 / 0.0; ``null``: none), ``scores``
  every label on it (name -> value), ``reference`` a correction of it (Braintrust's ``expected``).

Every sink refuses a prompt holding a call without its result (``unanswered_call``, as
``transforms.formats._common.check_results_adjacent`` says) and a prompt without a message
(``empty_prompt``); a continuation may end on its calls.
"""

from __future__ import annotations

import hashlib
from typing import Any

from transforms.core.jsontext import canonical_json, dumps_line
from transforms.formats._common import check_results_adjacent, normalized_messages, openai_tool
from transforms.formats._labels import (
    alternative,
    final_start,
    judged_start,
    record_labels,
    same_output,
    turn_end,
)
from transforms.formats._tools import tools_for
from transforms.formats.base import FormatError, WriteContext, Writer, count_written, register_writer
from transforms.formats.hf import HF_MESSAGE, _hf_messages
from transforms.formats.schema import BOOL, FLOAT, ID, JSON, STRING

DPO_SCHEMA = {ID: STRING, "prompt": [HF_MESSAGE], "chosen": [HF_MESSAGE], "rejected": [HF_MESSAGE], "tools": [JSON]}
KTO_SCHEMA = {ID: STRING, "prompt": [HF_MESSAGE], "completion": [HF_MESSAGE], "label": BOOL, "tools": [JSON]}
PROMPTS_SCHEMA = {
    ID: STRING,
    "prompt": [HF_MESSAGE],
    "answer": [HF_MESSAGE],
    "reward": FLOAT,
    "scores": JSON,
    "reference": [HF_MESSAGE],
    "tools": [JSON],
}


#: The writers of this module, and the option each reads.
TRL_SINKS = ("trl-dpo", "trl-kto", "trl-prompts")


def parse_threshold(text: str) -> tuple[str, float] | None:
    """``NAME=VALUE`` (``--kto-threshold``) as ``(name, value)``; ``None`` when it is not one."""
    name, equals, value = text.rpartition("=")
    if not equals or not name.strip():
        return None
    try:
        bound = float(value)
    except ValueError:
        return None
    return (name.strip(), bound) if bound == bound and abs(bound) != float("inf") else None


def _tools(record: dict[str, Any], ctx: WriteContext) -> list[Any] | None:
    tools = tools_for(record, ctx)
    if tools is None:
        return None
    written = [openai_tool(tool) for tool in tools]
    if any(tool.get("type") != "function" for tool in written):
        raise FormatError("unconvertible_tool", "a free-text custom tool has no JSON-schema form")
    return written


def _messages(record: dict[str, Any], ctx: WriteContext) -> list[Any]:
    messages = normalized_messages(record, ctx.messages_field)
    if not messages:
        raise FormatError("empty_conversation", "no messages to write")
    return messages


def _prompt_and(prompt: list[Any], continuations: list[list[Any]], ctx: WriteContext) -> list[list[Any]]:
    """The prompt and each continuation after it, in the ``hf`` message shape; ``FormatError``
    when the prompt is empty or holds a call without its result, or a continuation's results
    are not where their calls are."""
    if not prompt:
        raise FormatError("empty_prompt", "nothing comes before the judged answer")
    check_results_adjacent(prompt)
    out = []
    for continuation in continuations:
        check_results_adjacent([*prompt, *continuation], open_last=True)
        out.append(_hf_messages([*prompt, *continuation], ctx)[len(prompt) :])
    return [_hf_messages(prompt, ctx), *out]


# --------------------------------------------------------------------------------------------
# trl-dpo


def _pair(messages: list[Any], label: dict[str, Any]) -> tuple[int, list[Any], list[Any], str] | None:
    """(prompt end, chosen, rejected, how) for a label carrying another output, else ``None``."""
    for key, how in (("correction", "correction"), ("rejected", "rejected_output")):
        if key in label:
            start = judged_start(messages, label)
            logged = messages[start : turn_end(messages, start)]
            other = alternative(label[key], key)
            return (start, other, logged, how) if key == "correction" else (start, logged, other, how)
    return None


def preference(label: dict[str, Any], pair_by: str | None) -> float | None:
    """How good a label says its continuation is, for pairs across conversations: the value of
    the label ``pair_by`` (a bool as 1.0 / 0.0), or without one a thumb's; ``None``: it says not."""
    value = label["value"]
    if pair_by is None:
        return (1.0 if value else 0.0) if isinstance(value, bool) else None
    if label["name"] != pair_by or isinstance(value, str):
        return None
    return 1.0 if value is True else 0.0 if value is False else float(value)


def _candidate(record: dict[str, Any], messages: list[Any], ctx: WriteContext) -> dict[str, Any]:
    """A conversation without a pair of its own, as a candidate for pairs across conversations
    (``transforms.record.pairs``): its row with its judged continuation on the rejected side and
    no chosen one, and its claim in ``ctx.pair_claim``: ``(prompt key, preference, label name,
    continuation as JSON text)``. ``FormatError`` when its labels do not decide."""
    judged: dict[int, set[tuple[str, float]]] = {}
    for label in record_labels(record):
        value = preference(label, ctx.pair_by)
        if value is not None:
            judged.setdefault(judged_start(messages, label), set()).add((label["name"], value))
    if not judged:
        wanted = "bool label (a thumb)" if ctx.pair_by is None else f"label {ctx.pair_by!r}"
        raise FormatError("no_pair", f"no corrected or rejected output, and no {wanted} to pair it by")
    start = max(judged)
    values = {value for _, value in judged[start]}
    if len(values) > 1:
        raise FormatError("labels_disagree", "the labels on the judged answer say both good and bad")
    prompt, continuation = _prompt_and(messages[:start], [messages[start : turn_end(messages, start)]], ctx)
    tools = _tools(record, ctx)
    name = min(name for name, _ in judged[start])
    try:
        # As JSON text: a claim travels in a shuffle, and text is a tenth of the objects' memory.
        text = dumps_line(continuation)
    except (TypeError, ValueError, RecursionError) as error:
        raise FormatError("not_json", f"the answer is not JSON: {error}") from None
    ctx.pair_claim = (prompt_key(prompt, tools), values.pop(), name, text)
    return {ctx.id_field: ctx.record_id, "prompt": prompt, "chosen": None, "rejected": continuation, "tools": tools}


def prompt_key(prompt: list[Any], tools: list[Any] | None) -> str:
    """The key conversations with one prompt share: the prompt and tools as written, hashed."""
    return hashlib.sha256(canonical_json([prompt, tools])).hexdigest()


def write_dpo(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    messages = _messages(record, ctx)
    pairs = [pair for label in record_labels(record) if (pair := _pair(messages, label)) is not None]
    if not pairs and ctx.pairs_across:
        return _candidate(record, messages, ctx)
    if not pairs:
        raise FormatError("no_pair", "no label carries a corrected or a rejected output to pair the logged one with")
    start, chosen, rejected, how = pairs[0]
    if len(pairs) > 1:
        count_written(ctx, "other_pairs_left", len(pairs) - 1)
    if same_output(chosen, rejected):
        raise FormatError("same_continuation", "the chosen and the rejected output say the same")
    prompt, chosen_out, rejected_out = _prompt_and(messages[:start], [chosen, rejected], ctx)
    count_written(ctx, "pairs_from", key=how)
    tools = _tools(record, ctx)
    return {
        ctx.id_field: ctx.record_id,
        "prompt": prompt,
        "chosen": chosen_out,
        "rejected": rejected_out,
        "tools": tools,
    }


# --------------------------------------------------------------------------------------------
# trl-kto


def _thumb(label: dict[str, Any], threshold: tuple[str, float] | None) -> bool | None:
    """The label as a thumb: a bool label's value, or with a threshold the numeric label it names
    compared with it; ``None`` when the label is no thumb."""
    value = label["value"]
    if threshold is None:
        return value if isinstance(value, bool) else None
    name, bound = threshold
    if label["name"] != name or isinstance(value, (bool, str)):
        return None
    return bool(value >= bound)


def write_kto(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    messages = _messages(record, ctx)
    thumbs: dict[int, set[bool]] = {}
    for label in record_labels(record):
        thumb = _thumb(label, ctx.kto_threshold)
        if thumb is not None:
            thumbs.setdefault(judged_start(messages, label), set()).add(thumb)
    if not thumbs:
        wanted = "bool label (a thumb)" if ctx.kto_threshold is None else f"numeric label {ctx.kto_threshold[0]!r}"
        raise FormatError("no_label", f"no {wanted} judges an answer of the conversation")
    start = max(thumbs)
    if len(thumbs[start]) > 1:
        raise FormatError("labels_disagree", "the labels on the judged answer say both good and bad")
    if len(thumbs) > 1:
        count_written(ctx, "earlier_labels_left", len(thumbs) - 1)
    (thumb,) = thumbs[start]
    prompt, completion = _prompt_and(messages[:start], [messages[start : turn_end(messages, start)]], ctx)
    count_written(ctx, "labels_written", key=str(thumb).lower())
    return {
        ctx.id_field: ctx.record_id,
        "prompt": prompt,
        "completion": completion,
        "label": thumb,
        "tools": _tools(record, ctx),
    }


# --------------------------------------------------------------------------------------------
# trl-prompts


def _reward(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    return None


def write_prompts(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    messages = _messages(record, ctx)
    start = final_start(messages)
    end = len(messages) if start is None else turn_end(messages, start)
    if end < len(messages):
        raise FormatError("trailing_turns", "messages follow the final answer")  # final_start says not
    on_answer = []
    if start is not None:
        on_answer = [label for label in record_labels(record) if judged_start(messages, label) == start]
    # The labels that judge it; one carrying another output (a reference, a rejected one) is no score.
    scores = {
        label["name"]: label["value"] for label in on_answer if "correction" not in label and "rejected" not in label
    }
    reward = None
    if ctx.reward is not None and ctx.reward in scores:
        reward = _reward(scores[ctx.reward])
        if reward is None:
            raise FormatError("reward_not_a_number", f"the label {ctx.reward!r} is text, not a reward")
    references = [alternative(label["correction"], "correction") for label in on_answer if "correction" in label]
    prompt_end = len(messages) if start is None else start
    continuations = [messages[prompt_end:end]] if start is not None else []
    prompt, *written = _prompt_and(messages[:prompt_end], [*continuations, *references[:1]], ctx)
    answer = written[0] if start is not None else None
    reference = written[-1] if references else None
    count_written(ctx, "prompts_with", key="answer" if answer is not None else "no_answer")
    return {
        ctx.id_field: ctx.record_id,
        "prompt": prompt,
        "answer": answer,
        "reward": reward,
        "scores": scores or None,
        "reference": reference,
        "tools": _tools(record, ctx),
    }


TRL_DPO_WRITER = register_writer(
    Writer(
        "trl-dpo",
        write_dpo,
        description="TRL preference pairs (prompt, chosen, rejected message lists, tools) from corrections and "
        "rejected outputs",
        schema=DPO_SCHEMA,
    )
)
TRL_KTO_WRITER = register_writer(
    Writer(
        "trl-kto",
        write_kto,
        description="TRL unpaired preference rows (prompt, completion, label) from thumbs or a score threshold",
        schema=KTO_SCHEMA,
    )
)
TRL_PROMPTS_WRITER = register_writer(
    Writer(
        "trl-prompts",
        write_prompts,
        description="TRL prompts for online RL (prompt, tools, the logged answer, its reward and scores)",
        schema=PROMPTS_SCHEMA,
    )
)
