"""Labels: the judgements observability tools keep beside a trace, read and joined to the
conversation holding what they judge (no Beam import).

A label record is read like a call-log record (detected by its reader, ``Label`` pieces out):

- ``langfuse-scores``: a Langfuse ``scores/`` row (blob-storage export, snake case; the API's
  camel case alike): ``id``, ``trace_id``, ``observation_id`` (null for a trace-level score),
  ``name``, ``value``, ``string_value``, ``data_type`` (``NUMERIC``: the number; ``BOOLEAN``:
  ``true``/``false``; ``CATEGORICAL``: the category's name, ``string_value``; ``TEXT``: the
  text), ``comment``, ``updated_at`` (else ``timestamp``);
- ``langsmith-feedback``: a LangSmith feedback row: ``id``, ``run_id``, ``trace_id``, ``key``,
  ``score`` (else ``value``), ``comment``, ``correction``, ``modified_at``;
- ``phoenix-annotations``: a Phoenix span or trace annotation: ``span_id`` or ``trace_id``,
  ``name``, ``annotator_kind``, ``result: {label, score, explanation}`` (or the dataframe's
  ``label``, ``score``, ``explanation`` columns);
- a Helicone export row's ``feedback`` rating comes with its call (``proxies``).

**The join** (``join_id``, ``resolve``): a label is keyed by its trace id (else the id of the
call it judges); every assembled group offers each of its calls' ids and trace ids as targets.
Keys move, not records: labels and targets meet by key, and each label learns the group it
joins (the call it names, else the trace's conversation), or is counted ``label_unmatched``.
Duplicates and stale versions (one ``label_id``) leave the latest (``updated_at``), the others
counted ``superseded``. Then in its group's output shard a label is put on its conversation
(``attach``): on the message its call answered (``message``), or on the whole conversation.

**Scores** (``metadata.scores``: name -> one value). Of several labels of one name, a label of
the whole conversation wins over a label of one message; among whole-conversation labels, the
latest updated (then the greatest label id); among message labels, the one on the latest message,
then the latest updated. Every label stays in ``metadata.labels``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, NamedTuple

from transforms.calllogs.calls import CallLogReader, Label, ReadItem, register_call_log_reader
from transforms.calllogs.context import label_order
from transforms.calllogs.spans import span_id_text
from transforms.calllogs.times import time_nanos
from transforms.core.jsontext import canonical_json
from transforms.core.normalize import content_text
from transforms.formats.base import FormatError

LANGFUSE_SCORES = "langfuse-scores"
LANGSMITH_FEEDBACK = "langsmith-feedback"
PHOENIX_ANNOTATIONS = "phoenix-annotations"
#: The readers of label records alone (a Helicone rating comes with its call, in its group).
LABEL_READERS = frozenset((LANGFUSE_SCORES, LANGSMITH_FEEDBACK, PHOENIX_ANNOTATIONS))


def _text(value: Any) -> str:
    if value is None:
        return ""
    return (value if isinstance(value, str) else content_text(value)).strip()


def _first(record: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        value = record.get(key)
        if value is not None and value != "":
            return value
    return None


def _time(record: dict[str, Any], keys: tuple[str, ...], where: str) -> int:
    value = _first(record, *keys)
    return 0 if value is None else time_nanos(value, where)


def _number(value: Any, where: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise FormatError("bad_label_value", f"{where}: {value!r:.60} is not a number") from None
        else:
            raise FormatError("bad_label_value", f"{where}: {value!r:.60} is not a number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FormatError("bad_label_value", f"{where}: {value!r} is not a finite number")
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    return int(value)


def _boolean(value: Any, text: Any, where: str) -> bool:
    if isinstance(text, str) and text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    raise FormatError("bad_label_value", f"{where}: a BOOLEAN score is 0 or 1, not {value!r:.60}")


# --------------------------------------------------------------------------------------------
# Langfuse scores


def read_langfuse_score(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict):
        raise FormatError("not_a_score", "a Langfuse score is an object")
    label_id = _text(record.get("id"))
    where = f"score {label_id}"
    kind = _text(_first(record, "data_type", "dataType")).upper() or "NUMERIC"
    value: Any = record.get("value")
    text = _first(record, "string_value", "stringValue")
    if kind == "BOOLEAN":
        value = _boolean(value, text, where)
    elif kind in ("CATEGORICAL", "TEXT", "CORRECTION"):
        if text is None and value is None:
            raise FormatError("bad_label_value", f"{where}: a {kind} score has no string_value")
        value = _text(text) if text is not None else _number(value, where)
    else:
        value = _number(value, where)
    name = _text(record.get("name"))
    if not name:
        raise FormatError("missing_name", f"{where} has no name")
    trace_id = _text(_first(record, "trace_id", "traceId"))
    call_id = _text(_first(record, "observation_id", "observationId"))
    if not trace_id and not call_id:
        # A session- or dataset-run-level score judges no trace of a conversation.
        raise FormatError("no_trace", f"{where} names no trace and no observation (a session or dataset-run score)")
    start = _time(record, ("updated_at", "updatedAt", "timestamp", "created_at", "createdAt"), f"{where} updated_at")
    comment = record.get("comment")
    correction = [{"role": "assistant", "content": value}] if kind == "CORRECTION" and isinstance(value, str) else None
    return [
        Label(
            LANGFUSE_SCORES,
            join_id(trace_id, call_id),
            start,
            call_id,
            "langfuse",
            label_id,
            name,
            value,
            trace_id,
            comment if isinstance(comment, str) and comment else None,
            correction,
        )
    ]


def detect_langfuse_score(record: Any) -> bool:
    if "data_type" in record:
        return "name" in record and "value" in record and ("trace_id" in record or "observation_id" in record)
    if "dataType" in record:
        return "name" in record and "value" in record and ("traceId" in record or "observationId" in record)
    return False


# --------------------------------------------------------------------------------------------
# LangSmith feedback


def _correction(value: Any) -> list[dict[str, Any]] | None:
    """A LangSmith correction as assistant messages: a text, a message (``content``), or
    ``{"outputs": ...}`` / ``{"output": ...}`` holding either; anything else is not kept."""
    if isinstance(value, dict):
        for key in ("outputs", "output", "message"):
            if key in value:
                return _correction(value[key])
        content = value.get("content")
        if isinstance(content, str):
            return [{"role": "assistant", "content": content}]
        return None
    if isinstance(value, str) and value:
        return [{"role": "assistant", "content": value}]
    return None


def read_langsmith_feedback(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict):
        raise FormatError("not_feedback", "a LangSmith feedback is an object")
    label_id = _text(record.get("id"))
    where = f"feedback {label_id}"
    name = _text(record.get("key"))
    if not name:
        raise FormatError("missing_key", f"{where} has no key")
    score, value = record.get("score"), record.get("value")
    if isinstance(score, bool):
        judged: Any = score
    elif score is not None:
        judged = _number(score, where)
    elif isinstance(value, (str, bool)):
        judged = value
    elif value is not None:
        judged = _number(value, where)
    else:
        judged = None
    correction = _correction(record.get("correction"))
    if judged is None:
        if correction is None:
            raise FormatError("bad_label_value", f"{where} has no score, no value and no correction")
        judged = True  # a correction alone: the label says there is one
    run_id = _text(record.get("run_id"))
    trace_id = _text(record.get("trace_id"))
    if not run_id and not trace_id:
        raise FormatError("no_run", f"{where} names no run and no trace")
    start = _time(record, ("modified_at", "created_at"), f"{where} modified_at")
    comment = record.get("comment")
    return [
        Label(
            LANGSMITH_FEEDBACK,
            join_id(trace_id, run_id),
            start,
            run_id,
            "langsmith",
            label_id,
            name,
            judged,
            trace_id,
            comment if isinstance(comment, str) and comment else None,
            correction,
        )
    ]


def detect_langsmith_feedback(record: Any) -> bool:
    return "key" in record and ("run_id" in record or "feedback_source" in record) and "run_type" not in record


# --------------------------------------------------------------------------------------------
# Phoenix annotations


def read_phoenix_annotation(record: Any) -> list[ReadItem]:
    if not isinstance(record, dict):
        raise FormatError("not_an_annotation", "a Phoenix annotation is an object")
    result = record.get("result")
    result = result if isinstance(result, dict) else record
    name = _text(record.get("name"))
    label_id = _text(_first(record, "id", "identifier"))
    where = f"annotation {label_id or name}"
    if not name:
        raise FormatError("missing_name", f"{where} has no name")
    score, category = result.get("score"), result.get("label")
    if score is not None:
        value: Any = score if isinstance(score, bool) else _number(score, where)
    elif isinstance(category, str) and category:
        value = category
    else:
        raise FormatError("bad_label_value", f"{where} has no score and no label")
    call_id = _text(_first(record, "span_id", "spanId", "context.span_id"))
    trace_id = _text(_first(record, "trace_id", "traceId", "context.trace_id"))
    if not call_id and not trace_id:
        raise FormatError("no_span", f"{where} names no span and no trace")
    # Ids as the span readers spell them (no 0x, lower case), so the span's call matches.
    call_id, trace_id = span_id_text(call_id), span_id_text(trace_id)
    start = _time(record, ("updated_at", "created_at"), f"{where} updated_at")
    explanation = result.get("explanation")
    return [
        Label(
            PHOENIX_ANNOTATIONS,
            join_id(trace_id, call_id),
            start,
            call_id,
            "phoenix",
            label_id,
            name,
            value,
            trace_id,
            explanation if isinstance(explanation, str) and explanation else None,
        )
    ]


def detect_phoenix_annotation(record: Any) -> bool:
    if "annotator_kind" not in record and "annotatorKind" not in record:
        return False
    return "name" in record and any(k in record for k in ("span_id", "spanId", "trace_id", "traceId"))


# --------------------------------------------------------------------------------------------
# The join


def join_id(trace_id: str, call_id: str) -> str:
    """The id a label is joined by: its trace's (a trace's targets name each of its calls, so a
    label of a call is placed by its trace too), else its call's."""
    return trace_id or call_id


class Target(NamedTuple):
    """What a group offers the labels of one id: the group, and its calls bearing the id (the
    calls of the trace, when the id is a trace's; the call, when it is a call's)."""

    format: str
    group: str
    call_ids: tuple[str, ...]


#: Call-log formats whose labels may name the call alone, without its trace (a Phoenix span
#: annotation; a LangSmith feedback of a run without its trace id): their groups offer each
#: call's id too. Every other format's labels name their trace (a Langfuse score; a Helicone
#: rating, whose request is its trace), so its groups offer one target a trace, not one a call.
CALL_KEYED_FORMATS = frozenset(("otlp", "span-rows", "langsmith"))


def targets_of(key: tuple[str, str], calls: Iterable[tuple[str, str | None]]) -> list[tuple[str, Target]]:
    """A group's targets: ``(join id, Target)`` for each trace of its calls (with the calls of
    that trace), and in ``CALL_KEYED_FORMATS`` for each call by its id. ``calls``: ``(call id,
    trace id)`` of each call."""
    fmt, group = key
    by_trace: dict[str, set[str]] = {}
    out: list[tuple[str, Target]] = []
    for call_id, trace_id in calls:
        if trace_id:
            by_trace.setdefault(trace_id, set()).add(call_id)
        if call_id and fmt in CALL_KEYED_FORMATS:
            out.append((call_id, Target(fmt, group, (call_id,))))
    out.extend((trace_id, Target(fmt, group, tuple(sorted(ids)))) for trace_id, ids in sorted(by_trace.items()))
    return sorted(set(out))


class Joined(NamedTuple):
    """A label and the group it joins; ``call`` says whether it judges one of its calls."""

    format: str
    group: str
    label: Label
    call: bool


def _exact(label: Label) -> bytes:
    return canonical_json(list(label))


def latest_versions(labels: Iterable[Label]) -> tuple[list[Label], int]:
    """The labels with one version of each (``source``, ``label_id``): the latest updated (then
    the one whose fields come first, so the choice depends on the labels only); how many were
    left out. Labels without an id are all kept."""
    kept: dict[tuple[str, str], Label] = {}
    loose: list[Label] = []
    superseded = 0
    for label in labels:
        if not label.label_id:
            loose.append(label)
            continue
        key = (label.source, label.label_id)
        known = kept.get(key)
        if known is None:
            kept[key] = label
            continue
        superseded += 1
        if (label.start, _exact(known)) > (known.start, _exact(label)):
            kept[key] = label
    return sorted([*kept.values(), *loose], key=_exact), superseded


def resolve(labels: list[Label], targets: list[Target]) -> tuple[list[Joined], dict[str, Any]]:
    """The labels of one join id, with the targets offered for it: each label joined to a group
    (the one holding its call; else, the id being a trace's, the first group of the trace), or
    counted unmatched; and the counts (``superseded``, ``label_unmatched`` by source)."""
    kept, superseded = latest_versions(labels)
    counts: dict[str, Any] = {}
    if superseded:
        counts["superseded"] = superseded
    by_call: dict[str, Target] = {}
    for target in sorted(set(targets)):
        for call_id in target.call_ids:
            by_call.setdefault(call_id, target)
    first = min(targets) if targets else None
    joined: list[Joined] = []
    for label in kept:
        held = by_call.get(label.call_id) if label.call_id else None
        if held is not None:
            joined.append(Joined(held.format, held.group, label, True))
        elif first is not None and label.trace_id:
            joined.append(Joined(first.format, first.group, label, False))
        else:
            unmatched = counts.setdefault("label_unmatched", {})
            unmatched[label.source] = unmatched.get(label.source, 0) + 1
    return joined, counts


def entry_of(label: Label, message: int | None) -> dict[str, Any]:
    """A label as its conversation's ``metadata.labels`` holds it."""
    entry: dict[str, Any] = {"name": label.name, "value": label.value, "source": label.source}
    if message is not None:
        entry["message"] = message
    if label.comment:
        entry["comment"] = label.comment
    if label.correction:
        entry["correction"] = label.correction
    return entry


def scores_of(placed: list[tuple[Label, int | None]]) -> dict[str, Any]:
    """``metadata.scores``: one value per name, by the rule of the module's docstring."""

    def rank(item: tuple[Label, int | None]) -> tuple[Any, ...]:
        label, message = item
        # Greatest wins: a whole-conversation label, then the latest message, then the latest.
        return (message is None, -1 if message is None else message, label.start, label.label_id, _exact(label))

    best: dict[str, tuple[Label, int | None]] = {}
    for item in placed:
        known = best.get(item[0].name)
        if known is None or rank(item) > rank(known):
            best[item[0].name] = item
    return {name: best[name][0].value for name in sorted(best)}


def attach(record: dict[str, Any], placed: list[tuple[Label, int | None]]) -> dict[str, Any]:
    """``record`` with its labels (each with the message it judges, or ``None``) in its
    ``metadata``: ``labels`` (every one, ordered) and ``scores`` (one value a name)."""
    if not placed:
        return record
    metadata = dict(record.get("metadata") or {})
    entries = [*metadata.get("labels", ()), *(entry_of(label, message) for label, message in placed)]
    metadata["scores"] = {**metadata.get("scores", {}), **scores_of(placed)}
    metadata["labels"] = sorted(entries, key=label_order)
    return {**record, "metadata": metadata}


def label_counts(read: int = 0, joined: int = 0, **more: Any) -> dict[str, Any]:
    """A partial summary's ``labels`` section."""
    counts: dict[str, Any] = {}
    if read:
        counts["read"] = read
    if joined:
        counts["joined"] = joined
    counts.update({name: n for name, n in more.items() if n})
    return {"labels": counts} if counts else {}


LANGFUSE_SCORES_READER = register_call_log_reader(
    CallLogReader(
        LANGFUSE_SCORES,
        read_langfuse_score,
        detect_langfuse_score,
        22,
        "Langfuse scores (scores/ export rows, API rows): labels of a trace or an observation",
    )
)
LANGSMITH_FEEDBACK_READER = register_call_log_reader(
    CallLogReader(
        LANGSMITH_FEEDBACK,
        read_langsmith_feedback,
        detect_langsmith_feedback,
        32,
        "LangSmith feedback rows: labels of a run or a trace",
    )
)
PHOENIX_ANNOTATIONS_READER = register_call_log_reader(
    CallLogReader(
        PHOENIX_ANNOTATIONS,
        read_phoenix_annotation,
        detect_phoenix_annotation,
        17,
        "Phoenix span and trace annotations: labels of a span or a trace",
    )
)
