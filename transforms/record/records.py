"""The run step: one raw record in, exactly one outcome out (no Beam import).

Processing parses a raw record (``transforms.record.inputs``), reads it with a format reader,
normalizes its messages by the chosen profile, writes it with the chosen sink writer, and
returns either

- a normalized output record plus its per-conversation drop metrics, or
- a dead letter (``transforms.record.record_steps``: parsing, reading and the guard are shared with
  the validate step).

The Beam DoFn in ``transforms.conversations`` only calls ``normalize_batch`` and routes.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from transforms.calllogs.assemble import conversation_id
from transforms.calllogs.context import label_order, record_metadata
from transforms.core.jsontext import dumps_line
from transforms.core.ledger import add_to_report, coercion_discards
from transforms.core.ledger import report as ledger_report
from transforms.core.normalize import Trace, normalize_read
from transforms.core.tool_blocks import first_free
from transforms.core.validate import check_sendable, count_by_kind
from transforms.dataset.chat_template import TemplateRefused, check_rendered, count_tokens, render
from transforms.dataset.dataset_keys import CONTENT_KEYS, PAIR_CLAIM, content_keys, group_key, split_of
from transforms.dataset.redact import (
    Redaction,
    redact_assembly,
    redact_fields,
    redact_media,
    redact_names,
    redact_reasoning,
)
from transforms.dataset.training import (
    TRAILING_TURNS,
    TRAINING_SINKS,
    WEIGHT_KEYS,
    WEIGHT_SINKS,
    example_ends,
    example_messages,
    trailing_turns,
    trim_trailing,
    with_weights,
)
from transforms.formats import (
    READERS,
    WRITERS,
    Conversation,
    FormatError,
    WriteContext,
    plain_chat_messages,
    plain_chat_read,
)
from transforms.formats import media as carried_media
from transforms.formats import reasoning as carried_reasoning
from transforms.formats._tools import value_at
from transforms.formats.hf import write_hf
from transforms.formats.trl import TRL_SINKS
from transforms.record.inputs import Parsed, RawRecord
from transforms.record.output_records import DropMetrics
from transforms.record.record_settings import Settings, TokenSettings
from transforms.record.record_steps import (
    CallLogged,
    CallLogRead,
    DeadLettered,
    DeadLetterReason,
    Outcome,
    ReaderHint,
    RecordRefused,
    guarded,
    own_id,
    parse_payload,
    read_call_log,
    read_conversation,
    record_id,
)
from transforms.record.score_filter import score_refusal
from transforms.record.tokens import count_example, has_assistant_message, sink_view
from transforms.repairs.profiles import ProfileResult, normalize_with_profile
from transforms.repairs.roles import apply_role_options, drops_with_roles, repairs_with_roles


class BatchResult(NamedTuple):
    #: The records (normalizing with ``keep_records=False``: none, their lines are kept).
    records: list[Any]
    metrics: list[Any]
    dead_letters: list[Any]
    #: ``dumps_line`` of each record (normalizing only; ``None`` for ``check_record``).
    lines: list[Any] | None = None
    #: The call-log records, each as its pieces (``CallLogged``), for the assembly.
    calls: list[CallLogged] | tuple[()] = ()


#: A record read and normalized: the conversation; what the core normalized (its messages
#: after the role options, reasoning lifted off); the profile's result; the messages
#: ``--drop-role`` dropped and ``--map-role`` renamed; the reasoning lifted off (by input
#: index) with the core's origins of its output messages, or ``None``. A plain tuple,
#: unpacked at once: a NamedTuple costs a call to build.
_Carried = tuple[dict[int, dict[str, Any]], dict[int, list[Any]], list[int | None]]
_Normalized = tuple[Conversation, list[Any], ProfileResult, int, int, _Carried | None]


#: The message keys that carry something around the core (reasoning, media): a message with
#: none of them has nothing to lift.
_CARRIED_KEYS = frozenset((carried_reasoning.FIELD, carried_media.FIELD, *carried_reasoning.CHAT_KEYS))
_NOTHING_CARRIED: tuple[dict[int, dict[str, Any]], dict[int, list[Any]]] = ({}, {})


def _carries_something(messages: list[Any]) -> bool:
    """Whether a message may carry reasoning or media (one cheap pass: most carry neither)."""
    keys = _CARRIED_KEYS
    for message in messages:
        if message.__class__ is dict and len(message) > 2 and not keys.isdisjoint(message):
            return True
    return False


def _read_and_normalize(record: Any, settings: Settings, hint: ReaderHint | None) -> _Normalized | CallLogRead:
    """The record read (``read_conversation``), the role options applied, and its messages
    normalized by the profile.

    After a plain chat in a batch, under the ``spec`` profile and without role options, the
    core goes first, on the record's own messages: when it read them whole
    (``formats.plain_chat_read``) they are a plain chat that both plain readers hand on as it
    is, with nothing for the ledger, and the record needs no other pass. Otherwise the record
    is read as usual, and the core's result stands if the reader handed on that very list.
    """
    messages = None
    if (
        hint is not None
        and settings.profile == "spec"
        and settings.input_format == "auto"
        and not (settings.drop_roles or settings.map_roles)
    ):
        messages = plain_chat_messages(hint.reader, record, settings.messages_field)
    if hint is not None and messages is not None:
        core, reading = normalize_read(messages)
        result = ProfileResult(core.messages, core.dropped, core.drops, core.healed, {})  # the spec profile's
        plain = plain_chat_read(reading)
        if plain is not None:
            hint.reader = READERS[plain.reader]
            return Conversation(messages, record, keys_kept=True), messages, result, 0, 0, None
    pieces = read_call_log(record, settings)
    if pieces is not None:
        return pieces  # a call log: assembled with the other calls of its conversation
    conversation = read_conversation(record, settings, hint, for_core=True)
    if (
        messages is not None
        and conversation.messages is messages
        and (conversation.keys_kept or not _carries_something(messages))
    ):
        return conversation, messages, result, 0, 0, None
    # --drop-role / --map-role, before MEM-5 (which repairs the pairing a dropped message leaves).
    messages, role_drops, role_maps = apply_role_options(conversation.messages, settings.drop_roles, settings.map_roles)
    # A provider's reasoning goes around the core (rule 1 would discard it), and comes back on
    # the message the core made from its own by the core's mapping (transforms.formats.reasoning).
    reasoning, media = _NOTHING_CARRIED
    # Known to hold only the keys rule 1 keeps (a plain chat): nothing to lift, no pass.
    if not (conversation.keys_kept and messages is conversation.messages) and _carries_something(messages):
        messages, reasoning = carried_reasoning.lift(messages)
        messages, media = carried_media.lift(messages)  # media beside their placeholders, likewise
    if reasoning or media:
        trace = Trace()
        result = normalize_with_profile(messages, settings.profile, trace)
        return conversation, messages, result, role_drops, role_maps, (reasoning, media, trace.origins)
    return conversation, messages, normalize_with_profile(messages, settings.profile), role_drops, role_maps, None


def _with_read_metadata(record: Any, fields: dict[str, Any]) -> Any:
    """The record with the ``metadata`` its reader made (Braintrust's scores and labels, an
    OpenPipe entry's label), where the reader made one."""
    if isinstance(record, dict) and "metadata" in fields:
        return {**record, "metadata": fields["metadata"]}
    return record


def _process(raw: RawRecord, settings: Settings, hint: ReaderHint | None = None) -> tuple[Any, ...] | CallLogRead:
    """(record, metrics, line), and with ``--examples each`` the other examples (``Produced.more``);
    a call-log record's pieces instead."""
    record = parse_payload(raw)
    read = _read_and_normalize(record, settings, hint)
    if isinstance(read, CallLogRead):
        return read  # a call log's pieces (``guarded`` makes them a ``CallLogged``)
    conversation, messages, result, role_drops, role_maps, reasoning = read
    if isinstance(raw.payload, Parsed) and raw.payload.discarded:
        # An assembled conversation: what its call-log reader left out, the flat reader's ledger.
        conversation = conversation._replace(discarded=raw.payload.discarded)
    rid = record_id(record, settings)
    if not (isinstance(raw.payload, Parsed) and raw.payload.assembly is not None):
        # A whole record's context, from its own fields (an assembled one has its calls'), filling
        # the metadata its reader made (a label reader's scores and labels are the reader's).
        filled = record_metadata(_with_read_metadata(record, conversation.fields))
        if filled is not None:
            record = {**record, "metadata": filled}
            conversation = conversation._replace(fields={**conversation.fields, "metadata": filled})
    if settings.min_scores or settings.max_scores:
        judged = conversation.fields if "metadata" in conversation.fields else record
        refused = score_refusal(judged, settings.min_scores, settings.max_scores)
        if refused is not None:
            raise RecordRefused(DeadLetterReason(refused[0]), refused[1])
    training: dict[str, int] = {}
    written = _training_messages(messages, result, settings, training)
    redacted: dict[str, int] = {}
    fields, source = conversation.fields, record
    redaction = Redaction(settings.redact, settings.redact_region, redacted, {}) if settings.redact else None
    if redaction is not None:
        # --redact: after the core, before the writer (transforms.dataset.redact). Everything written:
        # the messages, the id, the other fields, and the record the writer copies from.
        written = redaction.messages(written)
        fields = redact_fields(fields, settings.id_field, settings.messages_field, redaction)
        rid, source = redaction.uncounted().id(rid), redaction.uncounted().value(record)  # counted once, above

    normalized = _with_messages_and_id(fields, written, rid, settings)
    _labels_on_written(normalized, conversation.messages, messages, len(written), settings)
    metrics: DropMetrics = {
        "id": rid,
        "source": raw.source,
        "position": raw.position,
        "dropped": result.dropped + role_drops,
        "drops": drops_with_roles(result.drops, role_drops),
        "healed": result.healed,
        "messages_in": len(conversation.messages),
        "messages_out": len(result.messages),
    }
    # What coercion discards beside the drops (a ledger, not MEM-5's count): the reader's part
    # (reasoning blocks) plus the message keys rule 1 does not keep.
    discarded = (
        conversation.discarded
        if conversation.keys_kept and messages is conversation.messages
        else coercion_discards(messages, conversation.discarded)
    )
    if reasoning is not None:
        discarded = _put_back_carried(normalized, written, reasoning, discarded, redaction, settings)
    if discarded:
        _report_discarded(metrics, discarded, training, settings)
    _note_labels(metrics, _with_read_metadata(record, conversation.fields), redaction)
    if settings.dedupe != "none" or settings.splits:
        _dataset_keys(record, split_fallback(raw, rid), written, normalized, settings, metrics, training)
    _note_counts_and_reports(metrics, raw, conversation, result, role_maps, training, redacted, redaction, settings)

    if settings.examples != "whole":
        produced = _examples(source, rid, written, normalized, settings, metrics, training, result.messages)
        if redaction is not None:
            for example_metrics in (metrics, *(more[1] for more in produced[3])):
                _redact_names(example_metrics, redaction)
        return produced
    output, line = _write(normalized, rid, source, settings, metrics)
    if redaction is not None:
        _redact_names(metrics, redaction)
    if settings.chat_template is not None:
        _check_template(normalized, rid, settings, metrics)
    tokens = settings.tokens
    if tokens is not None:  # opt-in: without --tokens, this test is all the per-record cost
        _count_tokens(output, result.messages, settings, tokens, metrics)
    return output, metrics, line


def _with_messages_and_id(fields: dict[str, Any], written: list[Any], rid: str, settings: Settings) -> dict[str, Any]:
    """The record's fields with its messages as written and a usable id."""
    normalized = dict(fields)
    # Assigning to an existing key keeps its place: the record keeps its key order.
    normalized[settings.messages_field] = written
    if settings.id_field not in normalized:
        normalized = {settings.id_field: rid, **normalized}
    elif normalized[settings.id_field] is not rid and own_id(normalized, settings.id_field) is None:
        # A null, empty or boolean id cannot join the outputs: use the derived one. (The id
        # ``record_id`` returned, the usual case, is a usable one: no second look.)
        normalized[settings.id_field] = rid
    return normalized


def _put_back_carried(
    normalized: dict[str, Any],
    written: list[Any],
    carried: tuple[Any, Any, list[Any]],
    discarded: dict[str, Any] | None,
    redaction: Redaction | None,
    settings: Settings,
) -> dict[str, Any]:
    """The reasoning and media lifted around the core, back on their messages where the sink
    takes them (``--redact`` on them too); else in the ledger, under their own names. The
    ledger, returned."""
    ledger = {} if discarded is None else discarded
    lifted, media, origins = carried
    # On the messages as shaped for training (weights, trailing turns trimmed: a prefix of
    # the core's output, in its order), so the core's origins still name each one's input.
    origins = origins[: len(written)]  # what trimming left (the rest is counted as not put back)
    out = carried_reasoning.attach(written, origins, lifted, _reasoning_kept(settings), ledger)
    out = carried_media.attach(out, origins, media, _media_carried(settings), ledger)
    normalized[settings.messages_field] = out if redaction is None else _redact_carried(out, redaction, ledger)
    return ledger


def _report_discarded(
    metrics: DropMetrics, discarded: dict[str, Any], training: dict[str, int], settings: Settings
) -> None:
    metrics["discarded"] = ledger_report(discarded)
    if training.get("weights_kept") and settings.sink in WEIGHT_SINKS:
        # Carried around the core and written: not discarded.
        for key in WEIGHT_KEYS:
            metrics["discarded"].pop(key, None)
        if not metrics["discarded"]:
            del metrics["discarded"]


def _note_counts_and_reports(
    metrics: DropMetrics,
    raw: RawRecord,
    conversation: Conversation,
    result: ProfileResult,
    role_maps: int,
    training: dict[str, int],
    redacted: dict[str, int],
    redaction: Redaction | None,
    settings: Settings,
) -> None:
    """The record's metrics beside its drops, each only when it has something to say; a
    training sink refuses a conversation holding a cut-off answer (``_truncated_stream``)."""
    if training:
        metrics["training"] = training
    if redacted:
        metrics["redacted"] = {kind: redacted[kind] for kind in sorted(redacted)}
    if result.repairs or role_maps:
        metrics["repairs"] = repairs_with_roles(result.repairs, role_maps)
    if conversation.report:
        metrics["reader_report"] = conversation.report
    if conversation.partial:
        # Its history is stored at the provider: results of calls made there are orphans here.
        metrics["partial_conversation"] = True
    if isinstance(raw.payload, Parsed):
        if raw.payload.nulled:
            # Values the reader wrote as null because JSON cannot hold them, by field.
            metrics["non_finite_nulled"] = raw.payload.nulled
        if raw.payload.assembly is not None:
            # A conversation assembled from call-log records: the calls that made it.
            assembly = raw.payload.assembly
            metrics["assembly"] = assembly if redaction is None else redact_assembly(assembly, redaction.uncounted())
            _truncated_stream(assembly, settings, metrics)
    if settings.check:
        metrics["violations"] = count_by_kind(check_sendable(result.messages))


def _truncated_stream(assembly: dict[str, Any], settings: Settings, metrics: DropMetrics) -> None:
    """A conversation holding answers whose event streams were cut off: marked (counted as
    ``truncated_streams``); refused by the training sinks and the TRL sinks, which would teach
    the cut answer as a whole one, unless ``--keep-truncated-streams``."""
    cut = assembly.get("truncated_stream", 0)
    if not cut:
        return
    if (settings.sink in TRAINING_SINKS or settings.sink in TRL_SINKS) and not settings.keep_truncated_streams:
        raise RecordRefused(
            DeadLetterReason.UNWRITABLE,
            f"{settings.sink}: truncated_stream: {cut} answer(s) arrived as an event stream cut off before its "
            "end (no finish_reason, no [DONE]); --keep-truncated-streams writes it",
        )
    metrics["truncated_stream"] = cut


def _redact_carried(messages: list[Any], redaction: Redaction, ledger: dict[str, Any]) -> list[Any]:
    """``--redact`` on the reasoning and media put back on the messages (the core never saw
    them); a signed reasoning holding a find is left out, into the ledger, and counted
    (``redact.redact_reasoning``)."""
    out = messages
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not (carried_reasoning.FIELD in message or carried_media.FIELD in message):
            continue
        copy = dict(message)
        if isinstance(message.get(carried_reasoning.FIELD), dict):
            value = redact_reasoning(message[carried_reasoning.FIELD], redaction)
            if value is None:
                del copy[carried_reasoning.FIELD]
                carried_reasoning.note_dropped(message[carried_reasoning.FIELD], ledger)
            else:
                copy[carried_reasoning.FIELD] = value
        if carried_media.FIELD in message:
            copy[carried_media.FIELD] = redact_media(message[carried_media.FIELD], redaction)
        if copy != message:
            out = list(out) if out is messages else out
            out[index] = copy
    return out


def _redact_names(metrics: Any, redaction: Redaction) -> None:
    """``--redact`` on the names the metrics count by: a message key, a field can be a secret."""
    for name in ("discarded", "reader_report", "writer_report", "non_finite_nulled"):
        if isinstance(metrics.get(name), dict):
            metrics[name] = redact_names(metrics[name], redaction.uncounted())  # names, not finds


def _write(
    normalized: dict[str, Any], rid: str, record: Any, settings: Settings, metrics: DropMetrics
) -> tuple[dict[str, Any], bytes]:
    """The record written by the sink's writer, and its line; ``RecordRefused`` if it cannot be."""
    context = WriteContext(
        rid,
        settings.messages_field,
        settings.id_field,
        settings.model,
        settings.max_tokens,
        settings.tools_field,
        source=record,
    )
    if settings.sink in TRL_SINKS:  # what they read of the options, only for them (the per-record cost)
        context.kto_threshold, context.reward = settings.kto_bound, settings.reward
        context.pairs_across, context.pair_by = settings.pairs_across, settings.pair_by
    try:
        output = WRITERS[settings.sink].write(normalized, context)
    except FormatError as error:
        raise RecordRefused(DeadLetterReason.UNWRITABLE, unwritable_detail(settings.sink, error)) from None
    if context.report:
        metrics["writer_report"] = context.report
    if context.pair_claim is not None:
        # A candidate for pairs across conversations: its claim, for the pairing step only.
        metrics[PAIR_CLAIM] = context.pair_claim  # type: ignore[literal-required]
    if context.discarded:
        # What the writer left out (reasoning a body cannot hold there), in the record's ledger.
        metrics["discarded"] = add_to_report(metrics.get("discarded"), context.discarded)
    try:
        # Serialize here, inside the guard: a value JSON cannot hold (a Parquet decimal, a
        # lone surrogate) must make this record a dead letter, not fail the file writer. The
        # file writer writes these bytes: each record is serialized once.
        line = dumps_line(output)
    except (TypeError, ValueError, RecursionError) as error:
        raise RecordRefused(DeadLetterReason.UNWRITABLE, f"not JSON: {type(error).__name__}: {error}") from None
    return output, line


def _examples(
    record: Any,
    rid: str,
    written: list[Any],
    normalized: dict[str, Any],
    settings: Settings,
    metrics: DropMetrics,
    counts: dict[str, int],
    core_messages: list[Any],
) -> tuple[dict[str, Any], DropMetrics, bytes, tuple[Any, ...]]:
    """``--examples last|each``: the conversation's examples, each trained on its last
    assistant message (``transforms.dataset.training``); the first with the conversation's metrics, the
    others (``each``) with their own, ids ``<id>#2``, ``#3`` ... (``more``)."""
    ends = example_ends(written)
    if settings.examples == "last":
        ends = ends[-1:]
    weighted = settings.keep_weights and settings.sink in WEIGHT_SINKS
    examples = [example_messages(written, end, weighted) for end in ends] if ends else [written]
    kept = [example for example in examples if example is not None]
    if len(kept) < len(examples):
        counts["examples_skipped_weight_0"] = len(examples) - len(kept)
    if not kept:
        raise RecordRefused(
            DeadLetterReason.UNWRITABLE, f"{settings.sink}: no_trainable_example: every assistant message has weight 0"
        )
    counts["examples_written"] = len(kept)
    metrics["training"] = counts
    produced = []
    for k, example in enumerate(kept, 1):
        eid = rid if k == 1 else f"{rid}#{k}"
        example_metrics: Any = metrics if k == 1 else _example_metrics(metrics, eid)
        if settings.examples == "each":
            example_metrics["example"] = {"k": k, "n": len(kept), "of": rid}
        if settings.dedupe != "none":
            tools = value_at(normalized, settings.tools_field)
            example_metrics[CONTENT_KEYS] = content_keys(example, tools, settings.dedupe == "prefix")
        fields = {**normalized, settings.messages_field: example}
        if k > 1 and settings.id_field in fields:
            fields[settings.id_field] = eid
        output, line = _write(fields, eid, record, settings, example_metrics)
        if settings.chat_template is not None:
            _check_template(fields, eid, settings, example_metrics)
        if settings.tokens is not None:
            _count_tokens(output, example, settings, settings.tokens, example_metrics)
        produced.append((output, example_metrics, line))
    first, *more = produced
    return (*first, tuple(more))


def _check_template(fields: dict[str, Any], eid: str, settings: Settings, metrics: Any) -> None:
    """``--chat-template``: the example rendered as the trainer renders it, its assistant
    messages shown, its tokens counted (``transforms.dataset.chat_template``); refused if it cannot be."""
    template = settings.chat_template
    assert template is not None
    context = WriteContext(eid, settings.messages_field, settings.id_field, tools_field=settings.tools_field)
    try:
        example = write_hf(fields, context)
        text = render(example, template)
        check_rendered(example, text)
    except (FormatError, TemplateRefused) as error:
        raise RecordRefused(DeadLetterReason.UNWRITABLE, f"chat-template: {error.reason}: {error}") from None
    counts = metrics.setdefault("training", {})
    counts["examples_rendered"] = counts.get("examples_rendered", 0) + 1
    tokens = count_tokens(text, template)
    if tokens is not None:
        metrics["template_tokens"] = tokens


def _example_metrics(metrics: DropMetrics, eid: str) -> dict[str, Any]:
    """The drop metrics of a conversation's second or later example: its place and split; the
    conversation's counts stay with its first (a run's totals count each conversation once)."""
    out: dict[str, Any] = {
        "id": eid,
        "source": metrics["source"],
        "position": metrics["position"],
        "dropped": 0,
        "drops": {},
        "healed": 0,
        "messages_in": 0,
        "messages_out": 0,
    }
    if "split" in metrics:
        out["split"] = metrics["split"]
    return out


def _training_messages(
    messages: list[Any], result: ProfileResult, settings: Settings, counts: dict[str, int]
) -> list[Any]:
    """The messages the writer gets: the core's, with the weights carried around it and the
    trailing turns trimmed or refused, as the settings say (``transforms.dataset.training``)."""
    written = result.messages
    if settings.keep_weights:
        written = with_weights(messages, settings.profile, result, settings.sink, counts).messages
    policy = settings.trailing_policy
    if policy == "trim":
        written = trim_trailing(written, counts)
    elif policy == "refuse":
        n = trailing_turns(written)
        if n:
            raise RecordRefused(
                DeadLetterReason.UNWRITABLE,
                f"{settings.sink}: {TRAILING_TURNS}: {n} message(s) after the last assistant message "
                "(--trailing refuse)",
            )
    return written


def _labels_on_written(
    normalized: dict[str, Any], read: list[Any], given: list[Any], written: int, settings: Settings
) -> None:
    """A label's ``message`` (the judged message's index in the messages read) made the index
    in the messages written: MEM-5 may drop messages before it (``--drop-role`` too). A label
    whose message was dropped keeps no index (it stays, ``message_dropped``)."""
    metadata = normalized.get("metadata")
    if not isinstance(metadata, dict):
        return
    labels = metadata.get("labels")
    if not isinstance(labels, list) or not any(isinstance(x, dict) and "message" in x for x in labels):
        return
    # Read index -> index among the messages the core was given (--drop-role drops some).
    given_at: dict[int, int] | None = None
    if settings.drop_roles:
        kept, given_at = 0, {}
        for at, message in enumerate(read):
            if not (isinstance(message, dict) and message.get("role") in settings.drop_roles):
                given_at[at] = kept
                kept += 1
    trace = Trace()
    normalize_with_profile(given, settings.profile, trace)
    out_at = {origin: n for n, origin in enumerate(trace.origins) if origin is not None and n < written}
    moved = []
    for label in labels:
        if not (isinstance(label, dict) and isinstance(label.get("message"), int)):
            moved.append(label)
            continue
        index: int | None = label["message"] if given_at is None else given_at.get(label["message"])
        where = out_at.get(index) if index is not None else None
        if where == label["message"]:
            moved.append(label)
        elif where is None:
            moved.append({**{k: v for k, v in label.items() if k != "message"}, "message_dropped": True})
        else:
            moved.append({**label, "message": where})
    normalized["metadata"] = {**metadata, "labels": sorted(moved, key=label_order)}


def _note_labels(metrics: DropMetrics, record: Any, redaction: Redaction | None) -> None:
    """A labelled conversation's scores and labels into its metrics (the report's statistics,
    ``convnorm explain``), a correction or a rejected output as its number of messages."""
    metadata = record.get("metadata") if isinstance(record, dict) else None
    if not isinstance(metadata, dict):
        return
    scores, labels = metadata.get("scores"), metadata.get("labels")
    if isinstance(scores, dict) and scores:
        metrics["scores"] = scores if redaction is None else redaction.uncounted().value(scores)
    if isinstance(labels, list) and labels:
        shown = [_counted_outputs(label) for label in labels]
        metrics["labels"] = shown if redaction is None else redaction.uncounted().value(shown)


def _counted_outputs(label: Any) -> Any:
    """A label with its ``correction`` and ``rejected`` outputs as their numbers of messages."""
    if not isinstance(label, dict):
        return label
    counted = {key: len(label[key]) for key in ("correction", "rejected") if isinstance(label.get(key), list)}
    return {**label, **counted} if counted else label


def split_fallback(raw: RawRecord, rid: str) -> str:
    """What a conversation's split is drawn from when ``--split-by`` names nothing for it: its
    id; for a conversation assembled from call logs, its group's conversation's id, so that a
    group's branches (``<group>#branch<n>``) land on the side of its conversation."""
    payload = raw.payload
    if isinstance(payload, Parsed) and payload.assembly is not None and isinstance(payload.assembly.get("group"), str):
        return conversation_id(payload.assembly["group"], 0)
    return rid


def _dataset_keys(
    record: Any,
    rid: str,
    written: list[Any],
    normalized: dict[str, Any],
    settings: Settings,
    metrics: DropMetrics,
    counts: dict[str, int],
) -> None:
    """What ``--dedupe`` and ``--split`` need of this conversation, into its metrics
    (``transforms.dataset.dataset_keys``): its content keys, its split (``rid``: the key it is
    drawn from without ``--split-by``, ``split_fallback``)."""
    if settings.dedupe != "none":
        tools = value_at(normalized, settings.tools_field)
        metrics[CONTENT_KEYS] = content_keys(written, tools, settings.dedupe == "prefix")  # type: ignore[literal-required]
    if settings.splits:
        key, found = group_key(record, settings.split_by, rid)
        if not found:
            counts["split_key_missing"] = counts.get("split_key_missing", 0) + 1
        metrics["split"] = split_of(key, settings.split_seed, settings.splits)
        # A split's statistics (the report) count the calls its conversations teach.
        metrics["tool_calls"] = _tool_calls(written)


def _tool_calls(written: list[Any]) -> int:
    """The tool calls of a conversation's messages (a dict's ``tool_calls`` list each). The
    messages are dicts but for odd input: a membership test per message (no method call) is
    all most of them cost; a message that is no dict makes the test or the lookup fail
    (or finds nothing), and the messages are then counted one by one, dicts only."""
    try:
        found = [m["tool_calls"] for m in written if "tool_calls" in m]
    except TypeError:
        found = [m["tool_calls"] for m in written if isinstance(m, dict) and "tool_calls" in m]
    return sum([len(calls) for calls in found if isinstance(calls, list)])


def _reasoning_kept(settings: Settings) -> Callable[[str], bool]:
    """Whether the sink writes back a provider's reasoning: ``--reasoning keep`` (the default of
    every sink but ``flat``) and a writer that takes that provider's (``Writer.reasoning``)."""
    writer = WRITERS[settings.sink]
    if (settings.reasoning or writer.reasoning_default) != carried_reasoning.KEEP:
        return lambda provider: False
    takes = writer.reasoning
    return lambda provider: provider in takes or "*" in takes


def _media_carried(settings: Settings) -> Callable[[dict[str, Any], str], bool]:
    """Which media items the sink writes where their placeholders stand (``Writer.media``):
    none with ``--media drop`` (the default of ``flat``)."""
    writer = WRITERS[settings.sink]
    if (settings.media or writer.media_default) != carried_media.KEEP or writer.media is None:
        return lambda item, role: False
    return writer.media


def _count_tokens(
    output: dict[str, Any], messages: list[Any], settings: Settings, tokens: TokenSettings, metrics: DropMetrics
) -> None:
    """``--tokens``: the example's count (as the sink wrote it) into its metrics; over
    ``--max-example-tokens`` it is flagged, or with ``--over-limit drop`` refused."""
    view = sink_view(settings.sink, settings.messages_field, settings.tools_field)
    if view is None:  # the options refuse --tokens for such a sink
        raise ValueError(f"--tokens: no token view of sink {settings.sink!r}")
    n = count_example(output, view, tokens.encoding)
    limit = tokens.max_example_tokens
    if limit is not None and n > limit and tokens.drop_over_limit:
        raise RecordRefused(
            DeadLetterReason.OVER_TOKEN_LIMIT,
            f"{n:,} tokens ({tokens.encoding}, as {settings.sink} writes it) > --max-example-tokens {limit:,}",
            tokens=n,
        )
    metrics["tokens"] = n
    if limit is not None and n > limit:
        metrics["over_token_limit"] = True
    if not has_assistant_message(messages):
        metrics["no_assistant_message"] = True


def unwritable_detail(sink: str, error: FormatError) -> str:
    """The detail of a record the sink's writer refuses: ``<sink>: <reason>: <why>``."""
    return f"{sink}: {error.reason}: {error}"


def refusal_reason(detail: str) -> str:
    """The writer's reason in an ``unwritable`` dead letter's detail (``unwritable_detail``)."""
    parts = detail.split(": ", 2)
    return parts[1] if len(parts) > 1 else detail


def process_record(raw: RawRecord, settings: Settings, hint: ReaderHint | None = None) -> Outcome:
    """Parse, read, normalize and write one raw record; never raises.

    ``hint`` (one per batch) carries the detected reader from record to record.
    """
    return guarded(_process, raw, settings, hint)


def normalize_batch(
    records: list[Any],
    settings: Settings,
    step: Callable[..., Outcome] = process_record,
    taken: dict[str, int] | None = None,
    keep_records: bool = True,
    hint: ReaderHint | None = None,
) -> BatchResult:
    """``step`` (``process_record`` or ``validate_step.check_record``) over a batch, split by destination,
    input order kept.

    ``taken`` is the state of the output file the batch goes to (the caller starts a new one
    per file): when the sink's writer has a ``unique_field``, repeated values are renamed
    (``make_unique``). ``keep_records=False`` (normalizing, for a writer that takes the lines):
    each record is dropped once its line is made, so that a batch's records do not stay alive
    until it is written (a batch is the loop's working set: measured, 0.5 round trips per
    record on a busy machine); ``records`` is then empty, unless renaming needs them.
    ``hint``: the reader of the record read before this batch (the caller keeps one per input
    file, so that a batch does not begin with full detection); ``None``: a new one.
    """
    outputs, metrics, letters = [], [], []
    calls: list[CallLogged] = []
    normalizing = step is process_record
    hints = ((ReaderHint() if hint is None else hint),) if normalizing else ()
    lines: list[Any] | None = [] if normalizing else None
    unique_field = WRITERS[settings.sink].unique_field if normalizing else None
    renaming = unique_field is not None and taken is not None
    keep = keep_records or not normalizing or renaming
    for raw in records:
        outcome = step(raw, settings, *hints)
        if isinstance(outcome, DeadLettered):
            letters.append(outcome.dead_letter)
            continue
        if isinstance(outcome, CallLogged):
            calls.append(outcome)
            continue
        if keep:
            outputs.append(outcome.record)
        if outcome.metrics is not None:
            metrics.append(outcome.metrics)
        if lines is not None:
            lines.append(outcome.line)
        for record, more_metrics, line in getattr(outcome, "more", ()):  # --examples each
            if keep:
                outputs.append(record)
            metrics.append(more_metrics)
            if lines is not None:
                lines.append(line)
    if unique_field is not None and taken is not None and lines is not None:  # (renaming)
        for index in make_unique(outputs, metrics, unique_field, taken):
            lines[index] = dumps_line(outputs[index])  # renamed after it was serialized
    return BatchResult(outputs, metrics, letters, lines, calls or ())


#: Separator of a renamed duplicate value and its occurrence number: ``<value>~2``.
UNIQUE_SEPARATOR = "~"


def make_unique(outputs: list[Any], metrics: list[Any], field: str, taken: dict[str, int]) -> list[int]:
    """Rename repeated ``field`` values in place, deterministically, in output order.

    The n-th occurrence of a value becomes ``<value>~n`` (``~n+1`` ... if that is taken too);
    ``taken`` maps every value used so far in the file to its occurrences. Each rename is
    counted in its record's writer report as ``duplicate_<field>_renamed``. Returns the
    indexes of the renamed outputs.
    """
    renamed_at = []
    for index, (output, record_metrics) in enumerate(zip(outputs, metrics)):
        value = output.get(field) if isinstance(output, dict) else None
        if not isinstance(value, str):
            continue
        if value not in taken:
            taken[value] = 1
            continue
        renamed, taken[value] = first_free(value, UNIQUE_SEPARATOR, taken[value] + 1, taken)
        taken[renamed] = 1
        output[field] = renamed
        renamed_at.append(index)
        report = record_metrics.setdefault("writer_report", {})
        name = f"duplicate_{field}_renamed"
        report[name] = report.get(name, 0) + 1
    return renamed_at
