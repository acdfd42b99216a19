"""Media (images, audio, files) carried beside their placeholders, for sinks that can hold them.

A reader writes a media part as a placeholder in the text (``[image]``, ``[audio]``,
``[file]``, ``[video]``), so that a turn holding only an image is not blank and MEM-5 reads
text. The media itself travels as a named field of the message, ``FIELD``: a list of items,
one per placeholder, in text order::

    {"kind": "image", "placeholder": "[image]", "mime": "image/png", "data": "<base64>",
     "url": null, "provider": "anthropic", "part": <the source part, as it was>}

(``data`` and ``url`` as the source gave them: inline base64, an ``http(s)``/``gs://`` URL or a
file URI; ``mime`` when the source says it; ``part`` so that a sink of the same provider
writes it back byte for byte.) Like reasoning (``transforms.formats.reasoning``), the field is
lifted off before MEM-5 and put back on the message the core made from that message; a sink
whose writer can carry an item (``Writer.media``) writes it where its placeholder stands,
converted between encodings only where that is exact (base64 to base64 with the same MIME
type, a URL to a URL); an item it cannot carry stays a placeholder and is counted in the
ledger as ``media_<kind>`` (its URL's characters; base64 is opaque).
"""

from __future__ import annotations

from typing import Any, Callable

from transforms.core.ledger import note
from transforms.formats._common import JOIN  # the separator readers join a message's parts with

#: The flat message key that carries the media of a message.
FIELD = "media"
#: ``--media`` values.
KEEP = "keep"
DROP = "drop"

_ANTHROPIC_IMAGE = frozenset(("image/jpeg", "image/png", "image/gif", "image/webp"))


def item(kind: str, placeholder: str, provider: str, part: Any, **found: Any) -> dict[str, Any]:
    """One carried media item (``None`` values left out)."""
    out: dict[str, Any] = {"kind": kind, "placeholder": placeholder, "provider": provider}
    out.update((k, v) for k, v in found.items() if v is not None)
    out["part"] = part
    return out


def _data_url(url: Any) -> tuple[str, str] | None:
    """``(mime, base64)`` of a ``data:<mime>;base64,<data>`` URL, else ``None``."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[: -len(";base64")], data


def _web_url(url: Any) -> bool:
    return isinstance(url, str) and url.startswith(("http://", "https://"))


# --------------------------------------------------------------------------------------------
# Readers: the media items of one message's parts, in order


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def anthropic_items(blocks: Any) -> list[dict[str, Any]]:
    """Anthropic ``image`` blocks: ``source`` base64 (``media_type``, ``data``) or ``url``."""
    found = []
    for block in blocks if isinstance(blocks, list) else ():
        if not isinstance(block, dict) or block.get("type") != "image":
            continue
        source = _dict(block.get("source"))
        inline = source.get("type") == "base64"
        mime, data = (source.get("media_type"), source.get("data")) if inline else (None, None)
        url = source.get("url") if source.get("type") == "url" else None
        found.append(item("image", "[image]", "anthropic", block, mime=mime, data=data, url=url))
    return found


def gemini_items(parts: Any) -> list[dict[str, Any]]:
    """Gemini ``inlineData {mimeType, data}`` and ``fileData {mimeType, fileUri}`` parts."""
    found = []
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict) or part.get("thought") is True:
            continue
        inline = _dict(part.get("inlineData", part.get("inline_data")))
        file = _dict(part.get("fileData", part.get("file_data")))
        media = inline or file
        if not media:
            continue
        mime = media.get("mimeType", media.get("mime_type"))
        kind = "image" if isinstance(mime, str) and mime.startswith("image/") else "file"
        data = inline.get("data") if inline else None
        uri = None if inline else file.get("fileUri", file.get("file_uri"))
        found.append(item(kind, f"[{kind}]", "gemini", part, mime=mime, data=data, url=uri))
    return found


#: OpenAI chat and Responses media part types, by the kind their reader's placeholder names.
_OPENAI_MEDIA = {
    "image_url": "image",
    "input_image": "image",
    "input_audio": "audio",
    "file": "file",
    "input_file": "file",
    "image": "image",
    "audio": "audio",
    "video": "video",
}
_AUDIO_FORMATS = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def openai_items(parts: Any, provider: str = "openai") -> list[dict[str, Any]]:
    """OpenAI chat (``image_url {url}``, ``input_audio {data, format}``, ``file {file:
    {file_data, filename}}``) and Responses (``input_image {image_url}``, ``input_file
    {file_data, file_url, filename}``) media parts."""
    found = []
    for part in parts if isinstance(parts, list) else ():
        ptype = part.get("type") if isinstance(part, dict) else None
        kind = _OPENAI_MEDIA.get(ptype) if isinstance(ptype, str) else None
        if kind is None:
            continue
        url: Any = None
        mime: Any = None
        data: Any = None
        if ptype == "image_url":
            inner = part.get("image_url")
            url = inner.get("url") if isinstance(inner, dict) else inner
        elif ptype == "input_image":
            url = part.get("image_url")
        elif ptype == "input_audio":
            audio = _dict(part.get("input_audio"))
            data, mime = audio.get("data"), _AUDIO_FORMATS.get(str(audio.get("format")))
        elif ptype in ("file", "input_file"):
            inner = _dict(part.get("file")) if ptype == "file" else part
            url = inner.get("file_data") or inner.get("file_url")
        decoded = _data_url(url)
        if decoded is not None:
            (mime, data), url = decoded, None
        found.append(item(kind, f"[{kind}]", provider, part, mime=mime, data=data, url=url))
    return found


_BEDROCK_MEDIA = ("image", "video", "audio")
_BEDROCK_IMAGE = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


def bedrock_items(blocks: Any) -> list[dict[str, Any]]:
    """Bedrock Converse ``image`` / ``video`` / ``audio`` blocks (``{format, source: {bytes}}``)."""
    found = []
    for block in blocks if isinstance(blocks, list) else ():
        if not isinstance(block, dict) or len(block) != 1:
            continue
        ((key, value),) = block.items()
        if key not in _BEDROCK_MEDIA or not isinstance(value, dict):
            continue
        source = _dict(value.get("source"))
        mime = _BEDROCK_IMAGE.get(str(value.get("format"))) if key == "image" else None
        data, url = source.get("bytes"), _dict(source.get("s3Location")).get("uri")
        found.append(item(key, f"[{key}]", "bedrock-converse", block, mime=mime, data=data, url=url))
    return found


def carry(message: dict[str, Any], items: list[dict[str, Any]]) -> None:
    """Put ``items`` on a flat message the reader made (nothing when there are none)."""
    if items:
        message[FIELD] = items


# --------------------------------------------------------------------------------------------
# The record path: around MEM-5


def lift(messages: list[Any]) -> tuple[list[Any], dict[int, list[Any]]]:
    """``(messages, media)``: the list without ``FIELD`` (copies of the messages that had it)
    and the items by message index; the list as it was when no message has any."""
    taken: dict[int, list[Any]] = {}
    out: list[Any] | None = None
    for index, message in enumerate(messages):
        if message.__class__ is not dict or FIELD not in message or not isinstance(message[FIELD], list):
            continue
        if out is None:
            out = list(messages)
        out[index] = {k: v for k, v in message.items() if k != FIELD}
        taken[index] = message[FIELD]
    return (messages if out is None else out), taken


def attach(
    messages: list[Any],
    origins: list[int | None],
    media: dict[int, list[Any]],
    carries: Callable[[dict[str, Any], str], bool],
    ledger: dict[str, Any],
) -> list[Any]:
    """The normalized ``messages`` with each message's items that the sink ``carries(item,
    role)`` back on the message made from its input message; every other item (the sink cannot
    hold it, its placeholder is no longer in the text, or MEM-5 dropped its message) stays a
    placeholder and is counted in ``ledger`` as ``media_<kind>``."""
    out = messages
    placed: set[int] = set()
    for position, origin in enumerate(origins):
        if origin is None or origin in placed or origin not in media:
            continue
        message = messages[position]
        if not isinstance(message, dict) or not _placeholders_match(message.get("content"), media[origin]):
            continue
        kept = [i for i in media[origin] if isinstance(i, dict) and carries(i, str(message.get("role")))]
        for left in media[origin]:
            if not any(left is k for k in kept):
                _note(left, ledger)
        placed.add(origin)
        if kept:
            if out is messages:
                out = list(messages)
            out[position] = {**message, FIELD: kept}
    for origin, items in media.items():
        if origin not in placed:
            for left in items:
                _note(left, ledger)
    return out


def _placeholders_match(content: Any, items: list[Any]) -> bool:
    """Whether the text holds the items' placeholders, at least as many of each as items."""
    if not isinstance(content, str):
        return False
    wanted: dict[str, int] = {}
    for entry in items:
        placeholder = entry.get("placeholder") if isinstance(entry, dict) else None
        if not isinstance(placeholder, str):
            return False
        wanted[placeholder] = wanted.get(placeholder, 0) + 1
    return all(content.count(p) >= n for p, n in wanted.items())


def _note(entry: Any, ledger: dict[str, Any]) -> None:
    """One item left as its placeholder: a field of ``media_<kind>``, its URL's characters (a
    type tag and base64 hold no text)."""
    kind = entry.get("kind") if isinstance(entry, dict) else None
    kind = kind if isinstance(kind, str) else "file"
    url = entry.get("url") if isinstance(entry, dict) else None
    note(ledger, f"media_{kind}", {"type": kind, "url": url} if isinstance(url, str) else {"type": kind})


def note_all(media: dict[int, list[Any]], ledger: dict[str, Any]) -> None:
    """Count every carried item in ``ledger`` (none is written)."""
    for items in media.values():
        for entry in items:
            _note(entry, ledger)


# --------------------------------------------------------------------------------------------
# Writers: where each placeholder stands, the target's part


def split(text: str, items: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """``text`` cut at its items' placeholders, in order: ``("text", str)`` and ``("media",
    item)`` pieces. The newline a reader joined a media part's placeholder with is taken off
    the text beside it (the part was a part of its own); a placeholder with no item left stays text."""
    pieces: list[tuple[str, Any]] = []
    rest = text
    for entry in items:
        at = rest.find(entry["placeholder"])
        if at < 0:
            continue
        before = rest[:at]
        if pieces and pieces[-1][0] == "media":
            before = before.removeprefix(JOIN)
        before = before.removesuffix(JOIN)
        if before:
            pieces.append(("text", before))
        pieces.append(("media", entry))
        rest = rest[at + len(entry["placeholder"]) :]
    if pieces and pieces[-1][0] == "media":
        rest = rest.removeprefix(JOIN)
    if rest:
        pieces.append(("text", rest))
    return pieces


def with_media(
    message: dict[str, Any], text_parts: Callable[[str], list[Any]], convert: Callable[[dict[str, Any]], Any]
) -> list[Any]:
    """A message's content as the target's parts: ``text_parts(text)`` for its text, and
    ``convert(item)`` where each carried item's placeholder stands (the record path carries only
    items the writer converts: ``Writer.media``)."""
    items = message.get(FIELD)
    if not items:
        return text_parts(message["content"])
    out: list[Any] = []
    for kind, value in split(message["content"], items):
        if kind == "text":
            out.extend(text_parts(value))
        else:
            out.append(convert(value))
    return out


def anthropic_block(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The Anthropic block of an item: its own block from Anthropic; else an image from base64
    of a type Anthropic takes, or from a web URL; a PDF as a ``document``; else ``None``."""
    if entry["provider"] == "anthropic":
        return dict(entry["part"])
    mime, data, url = entry.get("mime"), entry.get("data"), entry.get("url")
    if entry["kind"] == "image" and data is not None and mime in _ANTHROPIC_IMAGE:
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
    if entry["kind"] == "image" and _web_url(url):
        return {"type": "image", "source": {"type": "url", "url": url}}
    if mime == "application/pdf" and data is not None:
        return {"type": "document", "source": {"type": "base64", "media_type": mime, "data": data}}
    return None


def gemini_part(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The Gemini part of an item: its own part from Gemini; else ``inlineData`` from base64
    with a MIME type; else ``None`` (a URL carries no MIME type, which ``fileData`` requires)."""
    if entry["provider"] == "gemini":
        return dict(entry["part"])
    if entry.get("data") is not None and isinstance(entry.get("mime"), str):
        return {"inlineData": {"mimeType": entry["mime"], "data": entry["data"]}}
    return None


_BEDROCK_FORMAT = {mime: fmt for fmt, mime in _BEDROCK_IMAGE.items()}


def bedrock_block(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The Converse block of an item: its own block from Bedrock; else an image from base64 of a
    type Converse takes (``format`` without ``image/``); else ``None`` (Converse fetches no URL)."""
    if entry["provider"] == "bedrock-converse":
        return dict(entry["part"])
    if entry["kind"] == "image" and entry.get("data") is not None and entry.get("mime") in _BEDROCK_FORMAT:
        return {"image": {"format": _BEDROCK_FORMAT[entry["mime"]], "source": {"bytes": entry["data"]}}}
    return None


def openai_chat_part(entry: dict[str, Any], audio: bool = True) -> dict[str, Any] | None:
    """The Chat Completions content part of an item (a user message's): an image from base64
    (a data URL) or a web URL; wav/mp3 audio as ``input_audio`` (``audio``); a PDF as a
    ``file`` data URL; else ``None``."""
    if entry["provider"] == "openai" and entry["part"].get("type") in ("image_url", "input_audio", "file"):
        part = dict(entry["part"])
        return part if audio or part["type"] != "input_audio" else None
    mime, data, url = entry.get("mime"), entry.get("data"), entry.get("url")
    if entry["kind"] == "image" and data is not None and isinstance(mime, str):
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    if entry["kind"] == "image" and _web_url(url):
        return {"type": "image_url", "image_url": {"url": url}}
    formats = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
    if audio and entry["kind"] == "audio" and data is not None and mime in formats:
        return {"type": "input_audio", "input_audio": {"data": data, "format": formats[mime]}}
    if mime == "application/pdf" and data is not None:
        return {"type": "file", "file": {"filename": "document.pdf", "file_data": f"data:{mime};base64,{data}"}}
    return None


def responses_part(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The Responses input part of an item: ``input_image`` from base64 or a web URL,
    ``input_file`` from a base64 PDF; else ``None``."""
    if entry["provider"] == "openai-responses" and entry["part"].get("type") in ("input_image", "input_file"):
        return dict(entry["part"])
    mime, data, url = entry.get("mime"), entry.get("data"), entry.get("url")
    if entry["kind"] == "image" and data is not None and isinstance(mime, str):
        return {"type": "input_image", "image_url": f"data:{mime};base64,{data}", "detail": "auto"}
    if entry["kind"] == "image" and _web_url(url):
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if mime == "application/pdf" and data is not None:
        return {"type": "input_file", "filename": "document.pdf", "file_data": f"data:{mime};base64,{data}"}
    return None


def carrier(convert: Callable[[dict[str, Any]], Any], roles: tuple[str, ...]) -> Callable[[dict[str, Any], str], bool]:
    """A ``Writer.media`` test: the item converts (``convert`` gives a part) and its message's role is in ``roles``."""

    def carries(entry: dict[str, Any], role: str) -> bool:
        return role in roles and isinstance(entry.get("part"), dict) and convert(entry) is not None

    return carries
