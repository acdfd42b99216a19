"""The ledger of what coercion discards (no Beam import).

MEM-5's rule 1 keeps only the flat keys of a message (``role``, ``content``, ``tool_calls`` on
an assistant, ``tool_call_id`` on a tool result): that is the law, and the normalized output
follows it. What goes is not a dropped message, so MEM-5's ``dropped`` does not count it; this
ledger does, apart and under its own name, so that a user sees what went.

An entry of the ledger is a *field*: a non-empty value (not null, ``""``, ``[]`` or ``{}``)
that was discarded, named by

- its message key, for keys the core's coercion does not keep (``reasoning_content``,
  ``reasoning``, ``name``, ``weight``, ``parts``, ``text``, ``function_call`` under the flat
  reader, ``tool_calls`` on a user message, ``metadata`` beyond the pairing key read from it);
- its block or item type, for content a reader leaves out because the flat shape has no place
  for it (reasoning: Anthropic ``thinking`` / ``redacted_thinking`` blocks, Responses
  ``reasoning`` items, reasoning parts and v1 blocks), and ``refusal`` for an OpenAI refusal
  beside real content.

Each name counts its ``fields`` and the ``chars`` of text they held: the total length of the
strings inside the value, dict keys not counted, nor the values of ``type`` tags, ``id``s and
opaque payloads (``OPAQUE_KEYS``: ``signature``, ``encrypted_content``, ``data``, ...) inside it
or named by it. Entries that the core drops whole
(not an object, no role) are message drops, counted there, not here.

The shape: ``{name: [fields, chars]}`` while counting (``note``), ``{name: {"fields": n,
"chars": c}}`` in reports (``report``), names sorted.
"""

from __future__ import annotations

from typing import Any

#: Keys whose strings are opaque payloads a provider alone can read (signatures, encrypted or
#: base64 content), in every spelling the formats use: never text, wherever they stand.
OPAQUE_KEYS = frozenset(
    (
        "signature",
        "encrypted_content",
        "encrypted_index",
        "data",
        "bytes",
        "redactedContent",
        "redacted_content",
        "thoughtSignature",
        "thought_signature",
    )
)
#: Strings that are tags, ids or opaque payloads, not text a person wrote or read.
_NOT_TEXT = OPAQUE_KEYS | {"type", "id"}

# The keys rule 1 keeps, by role (every other role keeps role and content only).
_KEPT_BY_DEFAULT = frozenset(("role", "content"))
_KEPT_ASSISTANT = frozenset(("role", "content", "tool_calls"))
_KEPT_TOOL = frozenset(("role", "content", "tool_call_id"))
_KEPT = {"assistant": _KEPT_ASSISTANT, "tool": _KEPT_TOOL}


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def text_chars(value: Any) -> int:
    """Characters of text in a value: its strings' lengths, keys, tags and opaque payloads aside."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(v for k, v in item.items() if k not in _NOT_TEXT)
        elif isinstance(item, list):
            stack.extend(item)
    return total


def note(ledger: dict[str, Any], name: str, value: Any) -> None:
    """Count one discarded field ``value`` under ``name`` (empty values are not discards).

    A field named by an opaque key (a message's own ``encrypted_content`` or ``signature``)
    counts as a field holding no text, like the same key inside a value.
    """
    if _empty(value):
        return
    chars = 0 if name in OPAQUE_KEYS else text_chars(value)
    entry = ledger.get(name)
    if entry is None:
        ledger[name] = [1, chars]
    else:
        entry[0] += 1
        entry[1] += chars


def note_unread_keys(entry: dict[str, Any], read: frozenset[str], ledger: dict[str, Any]) -> None:
    """Count the keys of a provider message a reader does not read (it builds a new flat
    message, so rule 1 never sees them): ``weight`` on a ShareGPT turn, say."""
    if entry.keys() <= read:
        return
    for key, value in entry.items():
        if key not in read:
            note(ledger, key, value)


def _note_message(entry: dict[str, Any], role: str, ledger: dict[str, Any]) -> None:
    """The slow path: which keys of one kept message rule 1 discards, as the core decides."""
    metadata_used = None  # the pairing key the core reads from ``metadata``
    for key, value in entry.items():
        if key == "role" or key == "content":
            continue
        if key == "tool_calls" and role == "assistant":
            if value is None:
                metadata_used = "tool_calls"
            elif not (isinstance(value, list) and value):
                note(ledger, key, value)  # not a list of calls: the core ignores it
            continue
        if key == "tool_call_id" and role == "tool":
            if value is None:
                metadata_used = "tool_call_id"
            continue
        if key == "metadata":
            continue  # below, once the pairing key it may supply is known
        note(ledger, key, value)
    if "metadata" in entry:
        metadata = entry["metadata"]
        if role == "assistant" and "tool_calls" not in entry:
            metadata_used = "tool_calls"
        elif role == "tool" and "tool_call_id" not in entry:
            metadata_used = "tool_call_id"
        if isinstance(metadata, dict) and metadata_used in metadata:
            used = metadata[metadata_used]
            if metadata_used == "tool_call_id" or (isinstance(used, list) and used):
                metadata = {k: v for k, v in metadata.items() if k != metadata_used}
        note(ledger, "metadata", metadata)


def _discards_of(entry: Any, ledger: dict[str, Any]) -> None:
    """What rule 1 discards from one entry, every case considered."""
    if not isinstance(entry, dict):
        return  # a message drop, counted by the core
    role = entry.get("role")
    if not isinstance(role, str) or not role.strip():
        return  # a message drop, counted by the core
    keys = entry.keys()
    if keys <= _KEPT.get(role, _KEPT_BY_DEFAULT):
        calls = entry.get("tool_calls")
        if calls is None or isinstance(calls, list):
            return
    _note_message(entry, role, ledger)


def coercion_discards(messages: Any, ledger: dict[str, Any] | None = None) -> dict[str, Any]:
    """Add to ``ledger`` (a new one by default) what rule 1 discards from ``messages``; return it.

    Mirrors ``transforms.core.normalize_coerce.coerce_entries`` without touching its output: the normalized
    conversation is the same whether or not the ledger is kept.
    """
    ledger = {} if ledger is None else ledger
    if not isinstance(messages, list):
        return ledger
    # The usual messages first, cheaply (this runs on every conversation); anything else
    # takes the full path.
    for entry in messages:
        if entry.__class__ is dict and "content" in entry and "role" in entry:
            size = len(entry)
            if size == 2:
                continue  # role and content: all kept
            if size == 3:
                role = entry["role"]
                if role == "tool":
                    if "tool_call_id" in entry:
                        continue
                elif role == "assistant" and "tool_calls" in entry:
                    calls = entry["tool_calls"]
                    if calls is None or calls.__class__ is list:
                        continue
        _discards_of(entry, ledger)
    return ledger


def report(ledger: dict[str, Any]) -> dict[str, Any]:
    """The ledger as reported: ``{name: {"fields": n, "chars": c}}``, names sorted."""
    return {name: {"fields": ledger[name][0], "chars": ledger[name][1]} for name in sorted(ledger)}


def add_to_report(reported: dict[str, Any] | None, ledger: dict[str, Any]) -> dict[str, Any]:
    """A reported ledger (``report``'s shape, or ``None``) with ``ledger`` added, names sorted."""
    merged = dict(reported or {})
    for name, (fields, chars) in ledger.items():
        entry = merged.get(name, {"fields": 0, "chars": 0})
        merged[name] = {"fields": entry["fields"] + fields, "chars": entry["chars"] + chars}
    return {name: merged[name] for name in sorted(merged)}
