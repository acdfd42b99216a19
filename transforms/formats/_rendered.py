"""Blocks kept as readable text: server-side tool calls and results, documents, search results.

Some content blocks hold text but have no place in the flat shape: a server-side tool call and
its result (Anthropic ``server_tool_use`` / ``web_search_tool_result``, Gemini
``executableCode`` / ``codeExecutionResult``, a Responses ``web_search_call``, a Bedrock
``toolUse`` of type ``server_tool_use`` ...), a document with a text source, a search result,
a compaction summary. The provider ran the tool itself: the call and its result are not client
tool calls, and MEM-5 must not pair them (they become neither ``tool_calls`` nor ``tool``
messages). Every reader keeps their text in the content of the message that holds them, in
one rendering::

    [server tool call: web_search]
    query: weather in Paris

    [server tool result: web_search]
    url: https://example.com/paris
    title: Paris weather

A header line ``[<label>: <name>]`` (``[<label>]`` without a name), then one line per value of
the block's body, in order: ``key: value`` for a value under a key (nested objects give their
own keys; a list repeats its key), a value under ``text``, ``content`` or a text source's
``data`` as it is. Left out: ``type`` tags, ids, cache markers, citation switches and opaque
payloads (``transforms.core.ledger.OPAQUE_KEYS``), none of which is text; so nothing with text is
lost, and the ledger has nothing to count.

The provider's own writer puts such blocks back as they were (``restore``): given the blocks
of the record as it was read (``WriteContext.source``) and the renderings the reader made of
them, it finds each rendering in the normalized text and writes the original block there,
byte for byte, the text around it as text blocks.
"""

from __future__ import annotations

from typing import Any, Iterable

from transforms.core.ledger import OPAQUE_KEYS
from transforms.core.normalize import content_text
from transforms.formats.base import FormatError

JOIN = "\n"

#: Labels of the header line.
SERVER_CALL = "server tool call"
SERVER_RESULT = "server tool result"

#: Keys whose values are never rendered: tags, ids, cache markers, opaque payloads.
_SKIPPED = OPAQUE_KEYS | {
    "type",
    "id",
    "tool_use_id",
    "toolUseId",
    "call_id",
    "cache_control",
    "cachePoint",
}
#: Keys whose string is the text itself: written without a ``key: `` label.
_RAW_KEYS = frozenset(("text", "content", "output", "code"))


def _is_text_source(value: dict[str, Any]) -> bool:
    """A document source holding plain text in ``data`` (not base64): its data is the text."""
    media = value.get("media_type") or value.get("mediaType")
    return value.get("type") == "text" or (isinstance(media, str) and media.startswith("text/"))


def _lines(value: Any, out: list[str], key: str | None) -> None:
    if value is None or value == "":
        return
    if isinstance(value, dict):
        text_source = _is_text_source(value)
        for inner, item in value.items():
            if inner == "data" and text_source:
                _lines(item, out, None)
            elif inner not in _SKIPPED and not (inner == "citations" and isinstance(item, dict)):
                _lines(item, out, inner)
    elif isinstance(value, list):
        for item in value:
            _lines(item, out, key)
    else:
        text = content_text(value)
        out.append(text if key is None or key in _RAW_KEYS else f"{key}: {text}")


def body_text(body: Any) -> str:
    """The body of a rendering: one line per value (see the module docstring)."""
    out: list[str] = []
    _lines(body, out, None)
    return JOIN.join(out)


def render(label: str, name: Any, body: Any) -> str:
    """``[<label>: <name>]`` (or ``[<label>]``), then the body's lines."""
    head = f"[{label}: {content_text(name)}]" if name not in (None, "") else f"[{label}]"
    text = body_text(body)
    return head + JOIN + text if text else head


def without(block: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``block`` without ``keys`` (the parts a rendering shows in its header or leaves out)."""
    return {k: v for k, v in block.items() if k not in keys}


def unknown_block(kind: Any, reader: str = "") -> FormatError:
    """The error for a block type a reader does not know: a dead letter, never text."""
    which = f"the {reader} reader" if reader else "its reader"
    return FormatError(
        "unknown_block",
        f"block type {kind!r} is not one {which} knows; its text would be lost, so the record is refused",
    )


# --------------------------------------------------------------------------------------------
# Writing: the original blocks back in place of their renderings


class Originals:
    """The blocks of a source record by their rendering, each used once, in source order."""

    def __init__(self, rendered: Iterable[tuple[str, Any]]) -> None:
        self._by_text: dict[str, list[Any]] = {}
        self._by_head: dict[str, list[str]] = {}
        for text, block in rendered:
            if text not in self._by_text:
                self._by_text[text] = []
                head = text.split(JOIN, 1)[0]
                self._by_head.setdefault(head, []).append(text)
            self._by_text[text].append(block)
        for texts in self._by_head.values():
            texts.sort(key=len, reverse=True)  # the longest rendering that fits wins

    def __bool__(self) -> bool:
        return bool(self._by_text)

    def _match(self, text: str, at: int) -> str | None:
        end = text.find(JOIN, at)
        head = text[at:] if end < 0 else text[at:end]
        for candidate in self._by_head.get(head, ()):
            stop = at + len(candidate)
            ends_a_line = stop == len(text) or text.startswith(JOIN, stop)
            if self._by_text[candidate] and ends_a_line and text.startswith(candidate, at):
                return candidate
        return None

    def split(self, text: str) -> list[tuple[str, Any]]:
        """``text`` as segments ``("text", str)`` and ``("block", original)``, in order.

        A rendering is found at the start of a line and must end the text or a line; the text
        before it loses the one newline that joined them, as the reader joined them.
        """
        if not self._by_text:
            return [("text", text)]
        segments: list[tuple[str, Any]] = []
        start = position = 0
        while position <= len(text):
            found = self._match(text, position) if text.startswith("[", position) else None
            if found is None:
                nxt = text.find(JOIN, position)
                if nxt < 0:
                    break
                position = nxt + 1
                continue
            before = text[start:position]
            if before:
                segments.append(("text", before[: -len(JOIN)] if before.endswith(JOIN) else before))
            segments.append(("block", self._by_text[found].pop(0)))
            position = start = position + len(found) + len(JOIN)
        if start < len(text):
            segments.append(("text", text[start:]))
        return segments


#: The originals of a source record that holds no rendered block (nothing to split: shared).
NO_ORIGINALS = Originals(())
