"""Who had a conversation, and where: the context a call log records beside each call, and the
``metadata`` an assembled conversation carries from its calls (no Beam import).

A reader gives each ``Call`` a ``context``: the few fields its format records of the call's
user, session, trace and deployment, under one set of names whatever the format
(``CONTEXT_KEYS``):

- ``user_id``, ``session_id``, ``trace_id``, ``environment``, ``release``: strings;
- ``tags``: a sorted list of unique strings.

An assembled conversation's ``metadata`` is made of its calls' contexts
(``conversation_metadata``): ``user_id``, ``session_id``, ``environment`` and ``release`` are
the latest call's that names them (as its ``tools`` and ``model`` are); ``trace_ids`` and
``tags`` the sorted union of every call's; ``model`` the conversation's; ``first_call_at`` and
``last_call_at`` its calls' earliest and latest start times (ISO-8601, UTC, to the
nanosecond; absent when no call recorded a time). A key no call recorded is absent: absent
means unknown.

``merge_context(a, b)`` merges two conversations' metadata by the same rules (``b`` the later):
the step that joins conversations across groups uses it.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from transforms.core.jsontext import canonical_json
from transforms.core.normalize import content_text

#: The context keys a call may carry (``Call.context``).
SCALAR_KEYS = ("user_id", "session_id", "environment", "release")
CONTEXT_KEYS = (*SCALAR_KEYS, "trace_id", "tags")
#: The keys of a conversation's ``metadata`` made from its calls (``conversation_metadata``).
METADATA_KEYS = (
    "user_id",
    "session_id",
    "trace_ids",
    "tags",
    "model",
    "environment",
    "release",
    "first_call_at",
    "last_call_at",
)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return (value if isinstance(value, str) else content_text(value)).strip()


def _tags(value: Any) -> list[str]:
    """Tags as a sorted list of unique non-empty strings: a list of strings, or a mapping (the
    names of its keys whose value is set: OpenPipe's and Helicone's properties are not tags)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return []
    return sorted({text for text in (_text(v) for v in value if isinstance(v, (str, int, float))) if text})


def call_context(
    *,
    user_id: Any = None,
    session_id: Any = None,
    trace_id: Any = None,
    tags: Any = None,
    environment: Any = None,
    release: Any = None,
) -> dict[str, Any] | None:
    """A call's context from its format's fields: the set ones only, as text (``None`` when
    none is set). Numbers are taken as their text; objects and lists (but ``tags``) are not ids."""
    found: dict[str, Any] = {}
    for key, value in (
        ("user_id", user_id),
        ("session_id", session_id),
        ("trace_id", trace_id),
        ("environment", environment),
        ("release", release),
    ):
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            text = _text(value)
            if text:
                found[key] = text
    listed = _tags(tags)
    if listed:
        found["tags"] = listed
    return found or None


def first_set(*values: Any) -> Any:
    """The first value that is not ``None`` nor an empty string."""
    for value in values:
        if value is not None and value != "":
            return value
    return None


def iso_time(nanos: int) -> str:
    """Nanoseconds since the epoch as ISO-8601 UTC (``2025-01-02T03:04:05.123456789Z``; the
    fraction's trailing zeros left out), exact for every time the readers take."""
    seconds, fraction = divmod(nanos, 1_000_000_000)
    when = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=seconds)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if fraction:
        text += "." + f"{fraction:09d}".rstrip("0")
    return text + "Z"


def conversation_metadata(
    contexts: Iterable[tuple[int, dict[str, Any] | None]], model: str | None = None
) -> dict[str, Any]:
    """A conversation's ``metadata`` from its calls' ``(start, context)``, in call order (the
    latest last): the rules of the module's docstring. ``{}`` when nothing is known."""
    scalars: dict[str, str] = {}
    traces: set[str] = set()
    tags: set[str] = set()
    starts: list[int] = []
    for start, context in contexts:
        if start > 0:
            starts.append(start)
        if not context:
            continue
        for key in SCALAR_KEYS:
            if key in context:
                scalars[key] = context[key]  # the latest call's that names it
        if "trace_id" in context:
            traces.add(context["trace_id"])
        tags.update(context.get("tags", ()))
    metadata: dict[str, Any] = {}
    for key in ("user_id", "session_id"):
        if key in scalars:
            metadata[key] = scalars[key]
    if traces:
        metadata["trace_ids"] = sorted(traces)
    if tags:
        metadata["tags"] = sorted(tags)
    if model:
        metadata["model"] = model
    for key in ("environment", "release"):
        if key in scalars:
            metadata[key] = scalars[key]
    if starts:
        metadata["first_call_at"] = iso_time(min(starts))
        metadata["last_call_at"] = iso_time(max(starts))
    return metadata


#: A whole conversation record's own fields that fill its ``metadata`` (``record_metadata``):
#: each context name and the top-level keys it is read from, first found first.
RECORD_FIELDS = (
    ("user_id", ("user_id", "user")),
    ("session_id", ("session_id", "conversation_id", "thread_id")),
    ("trace_ids", ("trace_id",)),
    ("tags", ("tags",)),
)


_RECORD_KEYS = frozenset(key for _, keys in RECORD_FIELDS for key in keys)


def record_metadata(record: Any) -> dict[str, Any] | None:
    """A whole conversation record's ``metadata`` filled from its own top-level fields
    (``RECORD_FIELDS``: an OpenAI request's end-user ``user``, a ``session_id`` ...) where its
    ``metadata`` lacks them; the keys its ``metadata`` has are kept as they are. ``None`` when
    there is nothing to fill (the record is written as it was)."""
    if not isinstance(record, dict) or _RECORD_KEYS.isdisjoint(record):
        return None  # most records: one set test
    own = record.get("metadata")
    if own is not None and not isinstance(own, dict):
        return None  # a metadata that is no object is the record's own business
    own = own or {}
    found: dict[str, Any] = {}
    for name, keys in RECORD_FIELDS:
        if name in own:
            continue
        value = first_set(*(record.get(key) for key in keys))
        if name == "tags":
            listed = _tags(value)
            if listed:
                found[name] = listed
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool) and _text(value):
            found[name] = [_text(value)] if name == "trace_ids" else _text(value)
    if not found:
        return None
    return {**found, **own}


def merge_context(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    """Two conversations' ``metadata`` as one (``b`` the later conversation): ``trace_ids`` and
    ``tags`` united and sorted; ``first_call_at`` the earlier, ``last_call_at`` the later;
    ``scores`` ``a``'s updated by ``b``'s; ``labels`` both, in the labels' order; any other key
    ``b``'s where it has one, else ``a``'s. Neither argument is changed."""
    a, b = a or {}, b or {}
    merged: dict[str, Any] = {**a, **b}
    for key in ("trace_ids", "tags"):
        if key in a or key in b:
            merged[key] = sorted({*a.get(key, ()), *b.get(key, ())})
    if "first_call_at" in a and "first_call_at" in b:
        merged["first_call_at"] = min(a["first_call_at"], b["first_call_at"])
    if "last_call_at" in a and "last_call_at" in b:
        merged["last_call_at"] = max(a["last_call_at"], b["last_call_at"])
    if "scores" in a or "scores" in b:
        merged["scores"] = {**a.get("scores", {}), **b.get("scores", {})}
    if "labels" in a or "labels" in b:
        merged["labels"] = sorted([*a.get("labels", ()), *b.get("labels", ())], key=label_order)
    return {key: merged[key] for key in _ordered_keys(merged)}


def label_order(entry: Any) -> tuple[Any, ...]:
    """The order of a conversation's ``labels`` entries: whole-conversation labels first, then
    by message, name, source, value, comment, correction, rejected output."""
    return (
        entry.get("message", -1),
        entry.get("name", ""),
        entry.get("source", ""),
        canonical_json(entry.get("value")),
        entry.get("comment") or "",
        canonical_json(entry.get("correction")),
        canonical_json(entry.get("rejected")),
    )


def _ordered_keys(metadata: dict[str, Any]) -> list[str]:
    """The documented keys in their documented order, then any other in the order met."""
    known = [key for key in (*METADATA_KEYS, "scores", "labels") if key in metadata]
    return known + [key for key in metadata if key not in known]


__all__ = [
    "CONTEXT_KEYS",
    "METADATA_KEYS",
    "call_context",
    "conversation_metadata",
    "first_set",
    "iso_time",
    "label_order",
    "merge_context",
]
