"""Reasoning carried for the provider that made it (no Beam import).

A provider's reasoning is opaque state it wants back on replay: Anthropic ``thinking`` /
``redacted_thinking`` blocks with their ``signature`` (a 400 when thinking is on and the last
tool-use turn has none), Gemini ``thoughtSignature``s (Gemini 3 refuses a replayed call turn
without them), the ``reasoning_content`` / ``reasoning_details`` / ``reasoning`` keys of
OpenAI-compatible chat messages (DeepSeek's thinking mode refuses tool-call turns without it),
Responses ``reasoning`` items (``encrypted_content``) and Bedrock ``reasoningContent``.

The flat shape carries it as one named field of the assistant message it belongs to,
``FIELD``: ``{"provider": <name>, ...}`` with the provider's own values byte for byte. A
reader puts it there (the OpenAI-compatible keys are taken off the message by
``lift``); the record path lifts it off before MEM-5 (rule 1 would discard it: the core
never sees it and does not change) and puts it back on the assistant message the core kept,
by the core's own mapping of output to input messages (``normalize.Trace.origins``). A writer
whose ``Writer.reasoning`` names the provider writes it back; for any other sink, and with
``--reasoning drop``, it is left out and counted in the ledger under the names the readers
counted it by before (``thinking``, ``redacted_thinking``, ``thought``, ``thoughtSignature``,
``reasoning_content``, ``reasoning``, ``reasoningContent`` ...): ``note_dropped``.
"""

from __future__ import annotations

from typing import Any, Callable

from transforms.core.ledger import note

#: The flat message key that carries a provider's reasoning.
FIELD = "provider_reasoning"

ANTHROPIC = "anthropic"
GEMINI = "gemini"
#: OpenAI-compatible chat messages' reasoning keys (DeepSeek, OpenRouter, vLLM ...).
OPENAI_CHAT = "openai-chat"
RESPONSES = "openai-responses"
BEDROCK = "bedrock-converse"
PROVIDERS = (ANTHROPIC, GEMINI, OPENAI_CHAT, RESPONSES, BEDROCK)

#: The keys of an OpenAI-compatible assistant message that hold its reasoning, in the order
#: they are carried and written back.
CHAT_KEYS = ("reasoning_content", "reasoning_details", "reasoning")

#: ``--reasoning`` values.
KEEP = "keep"
DROP = "drop"
MODES = (KEEP, DROP)


def carried(provider: str, **values: Any) -> dict[str, Any]:
    """The value of ``FIELD`` for one message: its provider, then its values."""
    return {"provider": provider, **values}


def of(message: Any, provider: str) -> dict[str, Any] | None:
    """The reasoning ``message`` carries for ``provider``, else ``None``."""
    value = message.get(FIELD) if isinstance(message, dict) else None
    if isinstance(value, dict) and value.get("provider") == provider:
        return value
    return None


def _carried_value(value: Any) -> bool:
    return isinstance(value, dict) and value.get("provider") in PROVIDERS


def _chat_reasoning(message: dict[str, Any]) -> dict[str, Any] | None:
    # An empty ``reasoning_content`` is carried too: DeepSeek refuses a tool-call turn without the key.
    fields = {key: message[key] for key in CHAT_KEYS if message.get(key) is not None}
    return carried(OPENAI_CHAT, fields=fields) if fields else None


def lift(messages: list[Any]) -> tuple[list[Any], dict[int, dict[str, Any]]]:
    """``(messages, reasoning)``: the list without the reasoning of its assistant messages
    (copies of the messages that had some), and that reasoning by message index.

    Taken: ``FIELD`` (a reader's, or a flat record's own) and, on a message without it, the
    OpenAI-compatible ``CHAT_KEYS`` (a ``null`` one is left for the core: nothing to carry).
    A message of another role keeps everything: rule 1 discards it and the ledger counts it.
    The list comes back as it was when nothing is taken (the usual case: one pass, no copies).
    """
    taken: dict[int, dict[str, Any]] = {}
    out: list[Any] | None = None
    for index, message in enumerate(messages):
        if message.__class__ is not dict or message.get("role") != "assistant" or len(message) < 3:
            continue
        own = message.get(FIELD)
        value: dict[str, Any]
        if _carried_value(own):
            value = message[FIELD]
            drop: tuple[str, ...] = (FIELD,)
        else:
            chat = _chat_reasoning(message)
            if chat is None:
                continue
            value, drop = chat, tuple(chat["fields"])
        if out is None:
            out = list(messages)
        out[index] = {k: v for k, v in message.items() if k not in drop}
        taken[index] = value
    return (messages if out is None else out), taken


def attach(
    messages: list[Any],
    origins: list[int | None],
    reasoning: dict[int, dict[str, Any]],
    keep: Callable[[str], bool],
    ledger: dict[str, Any],
) -> list[Any]:
    """The normalized ``messages`` with each carried reasoning back on the assistant message
    made from the input message it was lifted from (``origins[j]``: the input index of output
    message ``j``); ``keep(provider)`` says whether the sink takes it. Every reasoning not put
    back (the sink does not take it, or the core dropped its message) is counted in ``ledger``
    (``note_dropped``): nothing goes uncounted."""
    out = messages
    placed: set[int] = set()
    for position, origin in enumerate(origins):
        if origin is None or origin in placed or origin not in reasoning:
            continue
        value = reasoning[origin]
        message = messages[position]
        if not isinstance(message, dict) or message.get("role") != "assistant" or not keep(value["provider"]):
            continue
        if out is messages:
            out = list(messages)
        out[position] = {**message, FIELD: value}
        placed.add(origin)
    for origin, value in reasoning.items():
        if origin not in placed:
            note_dropped(value, ledger)
    return out


def note_dropped(value: dict[str, Any], ledger: dict[str, Any]) -> None:
    """Count one carried reasoning in the ledger, under the names its reader used to count it by."""
    provider = value.get("provider")
    if provider == ANTHROPIC or provider == BEDROCK:
        for block in value.get("blocks") or ():
            name = block.get("type") if provider == ANTHROPIC and isinstance(block, dict) else "reasoningContent"
            if provider == BEDROCK and isinstance(block, dict):
                block = block.get("reasoningContent", block)
            note(ledger, name if isinstance(name, str) else "thinking", block)
    elif provider == GEMINI:
        for part in value.get("thoughts") or ():
            note(ledger, "thought", part.get("text") if isinstance(part, dict) else part)
        for signature in (value.get("call_signatures") or {}).values():
            note(ledger, "thoughtSignature", signature)
        note(ledger, "thoughtSignature", value.get("text_signature"))
        for part in value.get("signature_parts") or ():
            note(ledger, "thoughtSignature", part)
    elif provider == OPENAI_CHAT:
        for key, field in (value.get("fields") or {}).items():
            note(ledger, key, field)
    elif provider == RESPONSES:
        for entry in value.get("items") or ():
            note(ledger, "reasoning", entry.get("item") if isinstance(entry, dict) else entry)


def note_all(reasoning: dict[int, dict[str, Any]], ledger: dict[str, Any]) -> None:
    """Count every carried reasoning in ``ledger`` (none is written)."""
    for value in reasoning.values():
        note_dropped(value, ledger)
