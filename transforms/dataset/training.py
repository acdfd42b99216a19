"""A training set, not just a file: per-message weights and trailing turns (no Beam import).

Both act on the core's output, never inside it (``transforms.core.normalize`` is MEM-5 to the
letter), and both are counted per conversation under ``training`` in the drop metrics and
summed in ``summary.json`` (docs/fine-tuning.md, "A training set").

**Weights.** OpenAI's fine-tuning lines mark an assistant message ``"weight": 0`` to leave it
out of training (``1``: train on it). A flat input may say the same with ``"train": false``.
Rule 1 removes both keys; with weights kept (``--weights``: by default on the sinks that write
them), they are carried around the core (``transforms.repairs.message_extras``) and come back as one
spelling, ``weight`` 0 or 1, on the message they were on:

- ``openai-finetune`` writes it on assistant messages (the only ones OpenAI weighs); a weight
  on another role is left out, counted by the writer (``weight_not_on_assistant_left_out``);
- ``hf`` writes it on every message (``null`` where the input had none);
- ``flat`` (``--weights keep`` only: its default is MEM-5's flat shape exactly) writes it as is;
- ``sharegpt`` has no per-turn weight: the weights are counted (``weights_not_written``),
  and not written.

A value that is not 0, 1, true or false (``weight: 0.5``) is not a weight: counted
(``weights_invalid``) and left out. ``weight`` wins over ``train`` on one message.

**Trailing turns.** Messages after the last assistant message (a tool result, a user's
follow-up) cost tokens in training and teach nothing. ``--trailing trim`` (the training sinks'
default) leaves them out, counted ``trailing_trimmed``; ``refuse`` makes such a conversation an
``unwritable`` dead letter (``<sink>: trailing_turns: ...``); ``keep`` writes them. A
conversation without an assistant message is left as it is (the sink decides).
"""

from __future__ import annotations

from typing import Any

from transforms.repairs.message_extras import Carried, carry_around_core
from transforms.repairs.profiles import ProfileResult

#: The sinks that write training examples: trailing turns are trimmed there by default.
TRAINING_SINKS = ("openai-finetune", "sharegpt", "hf")
#: The sinks that can write a per-message weight, and those that keep it without being asked.
WEIGHT_SINKS = ("openai-finetune", "hf", "flat")
WEIGHTS_BY_DEFAULT = ("openai-finetune", "hf", "sharegpt")

#: ``--weights``: ``auto`` is the sink's default (kept on ``WEIGHTS_BY_DEFAULT``).
WEIGHT_CHOICES = ("auto", "keep", "drop")
#: ``--trailing``: ``auto`` is ``trim`` on ``TRAINING_SINKS``, ``keep`` elsewhere.
TRAILING_CHOICES = ("auto", "trim", "keep", "refuse")

#: ``--examples``: the conversation as one example; one, trained on its last assistant message
#: only; one per assistant message, its prefix as history (``example_ends``).
EXAMPLE_CHOICES = ("whole", "last", "each")

#: The message keys a weight is read from, in precedence order.
WEIGHT_KEYS = ("weight", "train")
WEIGHT = "weight"

#: The counts ``summary.json`` lists under ``training``, in this order.
TRAINING_COUNTS = (
    "weights_kept",
    "weights_not_written",
    "weights_invalid",
    "weights_lost_with_message",
    "trailing_trimmed",
    "conversations_trimmed",
    "split_key_missing",
)

#: The reason of a conversation refused for its trailing turns (``--trailing refuse``).
TRAILING_TURNS = "trailing_turns"


def keeps_weights(sink: str, weights: str) -> bool:
    """Are weights carried around the core for this sink and ``--weights`` value?"""
    if weights == "auto":
        return sink in WEIGHTS_BY_DEFAULT
    return weights == "keep"


def trailing_policy(sink: str, trailing: str) -> str:
    """``trim``, ``keep`` or ``refuse``: ``--trailing``, or the sink's default for ``auto``."""
    if trailing == "auto":
        return "trim" if sink in TRAINING_SINKS else "keep"
    return trailing


def _weight(extra: dict[str, Any]) -> int | None:
    """The weight one message's lifted keys say: 0, 1, or ``None`` (not a weight)."""
    value = extra.get(WEIGHT, extra.get("train"))
    if value is True or value is False:
        return int(value)
    if value.__class__ is int and value in (0, 1):
        return value
    return None


def with_weights(
    messages: list[Any], profile: str, result: ProfileResult, sink: str, counts: dict[str, int]
) -> ProfileResult:
    """The core's ``result`` with each surviving message's weight back on it (``weight`` 0 or 1);
    ``counts`` gets what became of the weights. ``messages``: the list the core normalized."""
    carried: Carried | None = carry_around_core(messages, profile, WEIGHT_KEYS, result)
    if carried is None:
        return result
    out = []
    kept = invalid = 0
    for message in carried.result.messages:
        if WEIGHT not in message and "train" not in message:
            out.append(message)
            continue
        weight = _weight(message)
        message = {k: v for k, v in message.items() if k not in WEIGHT_KEYS}
        if weight is None:
            invalid += 1
        else:
            message[WEIGHT] = weight
            kept += 1
        out.append(message)
    if sink not in WEIGHT_SINKS:
        # A training sink that has no place for them (ShareGPT): counted, not written.
        _add(counts, "weights_not_written", kept)
        out = [{k: v for k, v in m.items() if k != WEIGHT} if WEIGHT in m else m for m in out]
    else:
        _add(counts, "weights_kept", kept)
    _add(counts, "weights_invalid", invalid)
    _add(counts, "weights_lost_with_message", carried.lost_with_message)
    return carried.result._replace(messages=out)


def trailing_turns(messages: list[Any]) -> int:
    """How many messages follow the last assistant message (0 when there is none)."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.__class__ is dict and message.get("role") == "assistant":
            return len(messages) - 1 - position
    return 0


def trim_trailing(messages: list[Any], counts: dict[str, int]) -> list[Any]:
    """``messages`` without the ones after the last assistant message (counted ``trailing_trimmed``)."""
    n = trailing_turns(messages)
    if not n:
        return messages
    _add(counts, "trailing_trimmed", n)
    _add(counts, "conversations_trimmed", 1)
    return messages[: len(messages) - n]


def _add(counts: dict[str, int], name: str, n: int) -> None:
    if n:
        counts[name] = counts.get(name, 0) + n


def example_ends(messages: list[Any]) -> list[int]:
    """Where each example of ``--examples each`` ends: just after each assistant message."""
    return [n + 1 for n, m in enumerate(messages) if m.__class__ is dict and m.get("role") == "assistant"]


def example_messages(messages: list[Any], end: int, weighted: bool) -> list[Any] | None:
    """The example of ``messages[:end]`` trained on its last message alone: with ``weighted``
    (the sink writes weights) every earlier assistant message gets ``weight`` 0 and the last
    keeps its own, else 1. ``None`` when the last message says ``weight`` 0 (nothing to learn)."""
    example = messages[:end]
    if example[-1].get(WEIGHT) == 0:
        return None
    if not weighted:
        return example
    out = [{**m, WEIGHT: 0} if m.get("role") == "assistant" else m for m in example[:-1]]
    return [*out, {**example[-1], WEIGHT: 1}]
