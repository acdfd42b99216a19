"""Beam around the assembly of call logs (``transforms.calllogs.assemble``): the call-log
records a step handed on (``CallLogged``) -> batches of the conversations they make, for the
same step to normalize or check, and the assembly's partial summaries.

::

    CallLogged | pieces keyed by (format, group) | CombinePerKey(AssembleCalls)
               | conversations keyed by bucket | GroupByKey | sorted into batches

The combine keeps one state per group (its maximal histories, not every call's), and Beam
lifts it before the shuffle, so a trace of thousands of calls is not shuffled call by call.
The second shuffle puts a group's conversations in one of ``buckets`` output shards (a hash of
the group: the same on every runner and rerun), sorted, so each shard's file has the same bytes
whatever the order groups finish in.
"""

from __future__ import annotations

import zlib
from typing import Any, Iterable, Iterator, NamedTuple

import apache_beam as beam
from apache_beam import coders
from apache_beam.transforms import userstate
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import Timestamp

from transforms.calllogs.assemble import Assembled, GroupState, NoCalls, assemble, call_traces, group_key
from transforms.calllogs.calls import Call, Label, Rejected, ToolResult
from transforms.calllogs.labels import Joined, attach, label_counts, resolve, targets_of
from transforms.core.jsontext import canonical_json, dumps_line, parse_json
from transforms.record.inputs import Batch, Parsed, RawRecord, Unreadable
from transforms.record.record_settings import Settings
from transforms.record.record_steps import CallLogged, DeadLetterReason

#: The shard of batches of conversations assembled on a stream (``STREAM_SHARD`` is the input's).
STREAM_ASSEMBLED_SHARD = -2
#: On a stream, a conversation closes after this long without a call, and a call up to this
#: much later than that re-opens it (``AssembleConversations``, ``_Sessions``).
DEFAULT_SESSION_GAP_S = 30 * 60.0
DEFAULT_REOPEN_S = 24 * 3600.0

#: The output shards of assembled conversations, by default (a library user's graph): past
#: any input shard a plan makes. ``convnorm run`` numbers them after its input shards.
FIRST_ASSEMBLED_SHARD = 1 << 20


def keyed_pieces(logged: CallLogged) -> Iterator[tuple[tuple[str, str], tuple[str, int, Any]]]:
    for piece in logged.pieces:
        yield group_key(piece), (logged.source, logged.position, piece)


def call_log_partial(logged: Iterable[CallLogged]) -> dict[str, Any]:
    """The summary's ``call_logs`` counts of the records handed on: records, calls, tool
    results, parts that could not be read (``parts_refused``) and parts that are neither
    (``skipped_by_kind``)."""
    records = calls = results = refused = labels = 0
    skipped: dict[str, int] = {}
    for item in logged:
        records += 1
        for piece in item.pieces:
            if isinstance(piece, ToolResult):
                results += 1
            elif isinstance(piece, Rejected):
                refused += 1
            elif isinstance(piece, Label):
                labels += 1
            else:
                calls += 1
        for kind, n in (item.skipped or {}).items():
            skipped[kind] = skipped.get(kind, 0) + n
    counts: dict[str, Any] = {"records": records, "calls": calls, "tool_results": results}
    if refused:
        counts["parts_refused"] = refused
    if skipped:
        counts["skipped_by_kind"] = skipped
    return {"call_logs": counts, **label_counts(read=labels)}


class AssembleCalls(beam.CombineFn):
    """``(source, position, piece)`` of one group -> its ``GroupState``."""

    def create_accumulator(self) -> GroupState:
        return GroupState()

    def add_input(self, state: GroupState, item: tuple[str, int, Any]) -> GroupState:
        return state.add(*item)

    def merge_accumulators(self, states: Iterable[GroupState]) -> GroupState:
        states = iter(states)
        first = next(states)
        for state in states:
            first.merge(state)
        return first

    def extract_output(self, state: GroupState) -> GroupState:
        return state


class _Conversation(NamedTuple):
    """One output of the assembly, with its place in its shard's sorted order."""

    order: bytes
    raw: RawRecord
    #: The partial summary's counts this output adds.
    counts: dict[str, int]
    #: An assembled conversation's calls -> the message each answered (``Assembled.judged``).
    judged: dict[str, int] | None = None


def bucket_of(key: tuple[str, str], buckets: int) -> int:
    return zlib.crc32(canonical_json(list(key))) % buckets


def conversations_of(
    keyed: tuple[tuple[str, str], GroupState], settings: Settings, buckets: int
) -> Iterator[tuple[int, _Conversation]]:
    """One group's state -> its conversations (or its dead letter), each keyed by its bucket."""
    (fmt, group), state = keyed
    bucket = bucket_of((fmt, group), buckets)
    for n, (origin, part) in enumerate(sorted(state.rejected, key=lambda item: (item[0], item[1]))):
        # A part of a record that could not be read (the record's other parts are assembled):
        # a dead letter of its own, at its record's place, counted as one of the group's outputs.
        letter = Unreadable(DeadLetterReason.FORMAT_ERROR.value, part.detail, part.raw)
        order = canonical_json([fmt, group, -1, n])
        yield bucket, _Conversation(order, RawRecord(origin.source, origin.position, letter), {"conversations": 1})
    if not state.calls and not state.tool_results:
        # Only parts refused. (A bare return: Beam warns on the console of a generator whose
        # line starts "return " with anything after it, a comment included.)
        return
    try:
        made = assemble(
            fmt,
            group,
            state,
            id_field=settings.id_field,
            messages_field=settings.messages_field,
            tools_field=settings.tools_field,
        )
    except MemoryError:
        raise  # as ``guarded``: the machine's limit ends the run, saying so
    except Exception as error:  # noqa: BLE001 — as ``guarded``: a bug surfaces as data, not the job's end
        detail = f"{fmt} group {group!r} could not be assembled: {type(error).__name__}: {error}"
        origins = sorted([c.origin for c in state.calls] + [origin for origin, _ in state.tool_results])
        made = NoCalls("", -1, detail, tuple(dict.fromkeys((o.source, o.position) for o in origins)))
        reason = DeadLetterReason.INTERNAL_ERROR
    else:
        reason = DeadLetterReason.NO_LLM_CALLS
    if isinstance(made, NoCalls):
        # A dead letter at each of the group's records: every record read ends in one place.
        letter = Unreadable(reason.value, made.detail)
        for n, (source, position) in enumerate(made.places or ((made.source, made.position),)):
            order = canonical_json([fmt, group, 0, n])
            yield bucket, _Conversation(order, RawRecord(source, position, letter), {"conversations": 1})
        return
    for index, conversation in enumerate(made):
        yield bucket, _made(fmt, group, index, conversation)


def _made(fmt: str, group: str, index: int, conversation: Assembled) -> _Conversation:
    raw = RawRecord(
        conversation.source,
        conversation.position,
        Parsed(conversation.record, None, conversation.assembly, conversation.discarded),
    )
    counts = {
        "conversations": 1,
        "prefixes_collapsed": conversation.assembly["collapsed"],
        "branches": 1 if index else 0,
        "tool_results_filled": len(conversation.assembly.get("tool_results_filled", ())),
    }
    return _Conversation(canonical_json([fmt, group, index]), raw, counts, conversation.judged)


def labelled(made: list[Any]) -> tuple[list[_Conversation], dict[str, Any]]:
    """One output shard's conversations, with the labels joined to their groups put on them
    (``labels.attach``): a label of a call on the message that call answered, else on the
    conversation holding its trace (the group's first such), else on the group's conversation;
    a label whose group made no conversation (a dead letter) is counted unmatched. ``made``: the
    shard's ``_Conversation`` and ``Joined`` items, and partial counts (dicts) to add."""
    conversations = sorted((item for item in made if isinstance(item, _Conversation)), key=lambda c: c.order)
    joined = [item for item in made if isinstance(item, Joined)]
    counts: dict[str, Any] = {}
    for item in made:
        if isinstance(item, dict):
            counts = _added(counts, item)
    if not joined:
        return conversations, counts
    by_group: dict[tuple[str, str], list[int]] = {}
    for n, conversation in enumerate(conversations):
        order = parse_json(conversation.order)
        if len(order) == 3 and conversation.judged is not None:
            by_group.setdefault((order[0], order[1]), []).append(n)
    placed: dict[int, list[tuple[Label, int | None]]] = {}
    unmatched: dict[str, int] = {}
    for item in sorted(joined, key=lambda j: canonical_json([j.format, j.group, list(j.label)])):
        where = _place(item, [(n, conversations[n]) for n in by_group.get((item.format, item.group), ())])
        if where is None:
            unmatched[item.label.source] = unmatched.get(item.label.source, 0) + 1
        else:
            placed.setdefault(where[0], []).append((item.label, where[1]))
    out = list(conversations)
    for n, labels in placed.items():
        raw = out[n].raw
        payload = raw.payload
        out[n] = out[n]._replace(raw=raw._replace(payload=payload._replace(value=attach(payload.value, labels))))
    more = label_counts(joined=sum(len(labels) for labels in placed.values()), label_unmatched=unmatched)
    return out, _added(counts, more)


def _place(item: Joined, group: list[tuple[int, _Conversation]]) -> tuple[int, int | None] | None:
    """Which of its group's conversations a label goes on, and on which message (``None``: the
    whole conversation)."""
    label = item.label
    if item.call:
        for n, conversation in group:
            if label.call_id in (conversation.judged or {}):
                return n, (conversation.judged or {})[label.call_id]
        for n, conversation in group:
            calls = conversation.raw.payload.assembly.get("calls", ())
            if any(call.get("call") == label.call_id for call in calls):
                return n, None
    for n, conversation in group:
        metadata = conversation.raw.payload.value.get("metadata") or {}
        if label.trace_id and label.trace_id in metadata.get("trace_ids", ()):
            return n, None
    return (group[0][0], None) if group else None


def _added(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict):
            out[key] = _added(out.get(key, {}), value)
        else:
            out[key] = out.get(key, 0) + value
    return out


def joined_in(states: dict[tuple[str, str], GroupState]) -> list[Any]:
    """The labels of ``states`` (groups' states, some holding labels only) joined to the groups
    among them (``labels.resolve``), as ``labelled`` takes them: ``Joined`` items and partial
    counts. For a run that holds every group in one place (the streaming driver's window)."""
    by_id: dict[str, tuple[list[Any], list[Any]]] = {}
    for _, state in sorted(states.items(), key=lambda item: item[0]):
        for label in state.labels:
            by_id.setdefault(label.group, ([], []))[0].append(label)
    if not by_id:
        return []
    for key, state in sorted(states.items(), key=lambda item: item[0]):
        if state.calls:
            for join_id, target in targets_of(key, call_traces(state)):
                if join_id in by_id:
                    by_id[join_id][1].append(target)
    out: list[Any] = []
    for join_id in sorted(by_id):
        joined, counts = resolve(*by_id[join_id])
        out.extend(joined)
        if counts:
            out.append({"labels": counts})
    return out


def shard_batches(keyed: tuple[int, Iterable[_Conversation]], first_shard: int, batch_size: int) -> Iterator[Batch]:
    """One bucket's conversations, sorted, as the batches of output shard ``first_shard + bucket``."""
    bucket, made = keyed
    ordered = sorted(made, key=lambda c: c.order)
    shard = first_shard + bucket
    for start in range(0, len(ordered), batch_size):
        yield Batch(shard, start, [c.raw for c in ordered[start : start + batch_size]])


def assembly_partial(keyed: tuple[int, Iterable[_Conversation]]) -> dict[str, Any]:
    """The ``call_logs`` counts of one bucket's outputs."""
    total: dict[str, int] = {}
    for made in keyed[1]:
        for name, n in made.counts.items():
            total[name] = total.get(name, 0) + n
    return {"call_logs": total}


_CALLS = userstate.CombiningValueStateSpec("calls", coders.PickleCoder(), AssembleCalls())
_LATEST = userstate.ReadModifyWriteStateSpec("latest", coders.PickleCoder())
_PANES = userstate.ReadModifyWriteStateSpec("panes", coders.PickleCoder())
_GAP = userstate.TimerSpec("gap", TimeDomain.WATERMARK)
_EXPIRE = userstate.TimerSpec("expire", TimeDomain.WATERMARK)
# Beam's state and timer parameters, as the DoFn's defaults take them.
_CALLS_STATE, _LATEST_STATE = beam.DoFn.StateParam(_CALLS), beam.DoFn.StateParam(_LATEST)
_PANES_STATE = beam.DoFn.StateParam(_PANES)
_GAP_TIMER, _EXPIRE_TIMER = beam.DoFn.TimerParam(_GAP), beam.DoFn.TimerParam(_EXPIRE)


class _Sessions(beam.DoFn):
    """A stream's pieces, by group -> each group's conversations, once the stream's watermark
    is ``gap_s`` past the group's latest call (its start time: event time); a call whose start
    time is unknown holds its group open to the end of the stream.

    A stateful DoFn in the global window, not session windows: a window drops what comes
    behind the watermark past its allowed lateness, and a replay of old logs is all behind it;
    here no call is ever dropped. The group's state (a ``GroupState``, combined call by call)
    is kept until the watermark is ``keep_s`` past that: a call in that time re-opens it, and
    the conversation is emitted again, whole, with every call so far (``assembly.pane`` counts
    the emissions; the summary counts it ``reopened``): the newest record of an id is the one
    to keep. A call after that starts the group afresh; its history makes the conversation
    again (less the calls and the tool results recorded apart before it)."""

    def __init__(self, settings: Settings, gap_s: float, keep_s: float) -> None:
        self._settings = settings
        self._gap = gap_s
        self._keep = keep_s

    def process(
        self,
        element,
        calls=_CALLS_STATE,
        latest=_LATEST_STATE,
        gap=_GAP_TIMER,
        expire=_EXPIRE_TIMER,
    ):
        calls.add(element[1])
        start = element[1][2].start
        before = latest.read() or 0
        # -1: a call of unknown time, now or before: the group is open to the end of the stream.
        seen = -1 if start <= 0 or before == -1 else max(before, start)
        latest.write(seen)
        end = GlobalWindow().max_timestamp()
        if seen == -1:
            gap.set(end)  # no expiry: the state ends with the stream (a timer there too could fire first)
            return
        close = Timestamp(micros=seen // 1000) + self._gap
        gap.set(min(close, end))
        expire.set(min(close + self._keep, end))

    @userstate.on_timer(_GAP)
    def closed(self, key=beam.DoFn.KeyParam, calls=_CALLS_STATE, panes=_PANES_STATE):
        pane = panes.read() or 0
        state = calls.read()
        if not state.calls and not state.tool_results and not state.rejected:
            return  # expired already: nothing left to emit
        for _, made in conversations_of((key, state), self._settings, 1):
            if isinstance(made.raw.payload, Parsed) and made.raw.payload.assembly is not None:
                made.raw.payload.assembly["pane"] = pane
            if pane:
                made = made._replace(counts={**made.counts, "reopened": 1})
            yield made
        panes.write(pane + 1)

    @userstate.on_timer(_EXPIRE)
    def expired(self, calls=_CALLS_STATE, latest=_LATEST_STATE, panes=_PANES_STATE):
        calls.clear()
        latest.clear()
        panes.clear()


#: The "shard" of the batches that carry the assembly's partial summaries (never written).
TOTALS_SHARD = -3


def _as_batches(partials: tuple[Any, ...]) -> Any:
    """Partial summaries as batches of one (the composites' every output is batches)."""
    return (
        partials
        | "AssemblyTotals" >> beam.Flatten()
        | "AsBatches" >> beam.Map(lambda part: Batch(TOTALS_SHARD, 0, [part])).with_output_types(Batch)
    )


def joined_by_bucket(keyed: tuple[str, Iterable[Any]], buckets: int) -> Iterator[tuple[int, Any]]:
    """The labels and targets of one join id -> each label keyed by the output shard of the group
    it joins (``labels.resolve``), its counts by the join id's."""
    join_id, items = keyed
    items = list(items)
    labels = [item for item in items if isinstance(item, Label)]
    if not labels:
        return
    joined, counts = resolve(labels, [item for item in items if not isinstance(item, Label)])
    for item in joined:
        yield bucket_of((item.format, item.group), buckets), item
    if counts:
        yield bucket_of(("", join_id), buckets), {"labels": counts}


def labelled_batches(keyed: tuple[int, Iterable[Any]], first_shard: int, batch_size: int) -> Iterator[Batch]:
    """``shard_batches`` of one output shard's conversations, labelled (``labelled``)."""
    made, _ = labelled(list(keyed[1]))
    yield from shard_batches((keyed[0], made), first_shard, batch_size)


def labelled_partial(keyed: tuple[int, Iterable[Any]]) -> dict[str, Any]:
    """``assembly_partial`` of one output shard, with its labels' counts."""
    made, counts = labelled(list(keyed[1]))
    return _added(assembly_partial((keyed[0], made)), counts)


class AssembledBatches(NamedTuple):
    #: Batches of raw records (assembled conversations, a group's dead letter), by output shard.
    batches: beam.PCollection
    #: Partial summaries (``{"call_logs": ...}``) of the records handed on and of the outputs,
    #: as batches of one.
    partials: beam.PCollection


class AssembleConversations(beam.PTransform):
    """``CallLogged`` batches -> the conversations their calls make, as raw-record batches, and
    the assembly's partial summaries (``AssembledBatches``)."""

    def __init__(
        self,
        settings: Settings,
        batch_size: int,
        buckets: int = 1,
        first_shard: int = FIRST_ASSEMBLED_SHARD,
        session_gap_s: float = DEFAULT_SESSION_GAP_S,
        reopen_s: float = DEFAULT_REOPEN_S,
    ):
        super().__init__()
        self._settings = settings
        self._batch_size = batch_size
        self._buckets = max(1, buckets)
        self._first_shard = first_shard
        self._gap = session_gap_s
        self._lateness = reopen_s

    def _sessions(self, pieces):
        """On a stream: ``_Sessions`` (a group's conversation emitted after ``session_gap_s``
        without a call; a later call re-opens it): its batches, and its partial summaries."""
        made = pieces | "Sessions" >> beam.ParDo(_Sessions(self._settings, self._gap, self._lateness))
        batches = made | "Batches" >> beam.Map(lambda c: Batch(STREAM_ASSEMBLED_SHARD, 0, [c.raw])).with_output_types(
            Batch
        )
        counted = made | "Made" >> beam.Map(lambda c: {"call_logs": c.counts})
        return batches, counted

    def expand(self, logged_batches):
        handed_on = logged_batches | "HandedOn" >> beam.Map(lambda batch: call_log_partial(batch.items))
        pieces = (
            logged_batches
            | "Records" >> beam.FlatMap(lambda batch: batch.items)
            | "Pieces" >> beam.FlatMap(keyed_pieces)
        )
        call_pieces = pieces | "CallPieces" >> beam.Filter(lambda keyed: not isinstance(keyed[1][2], Label))
        labels = (
            pieces
            | "LabelPieces" >> beam.Filter(lambda keyed: isinstance(keyed[1][2], Label))
            | "ByJoinId" >> beam.Map(lambda keyed: (keyed[1][2].group, keyed[1][2]))
        )
        if not logged_batches.is_bounded:
            # A stream's labels are not joined here (the landing-directory driver joins them at a
            # window's close): counted unmatched, never lost silently.
            unmatched = labels | "LabelsUnmatched" >> beam.Map(
                lambda keyed: label_counts(label_unmatched={keyed[1].source: 1})
            )
            batches, counted = self._sessions(call_pieces)
            return AssembledBatches(batches, _as_batches((handed_on, counted, unmatched)))
        states = call_pieces | "AssembleGroups" >> beam.CombinePerKey(AssembleCalls())
        conversations = states | "Conversations" >> beam.FlatMap(conversations_of, self._settings, self._buckets)
        targets = states | "Targets" >> beam.FlatMap(lambda keyed: targets_of(keyed[0], call_traces(keyed[1])))
        joined = (
            (targets, labels)
            | "LabelsAndTargets" >> beam.Flatten()
            | "JoinLabels" >> beam.GroupByKey()
            | "Joined" >> beam.FlatMap(joined_by_bucket, self._buckets)
        )
        by_bucket = (conversations, joined) | "WithLabels" >> beam.Flatten() | "ByShard" >> beam.GroupByKey()
        batches = by_bucket | "Batches" >> beam.FlatMap(
            labelled_batches, self._first_shard, self._batch_size
        ).with_output_types(Batch)
        made = by_bucket | "Made" >> beam.Map(labelled_partial)
        return AssembledBatches(batches, _as_batches((handed_on, made)))


# --------------------------------------------------------------------------------------------
# Pieces kept on disk (the streaming driver's ``calls.jsonl``: pipeline.streaming.assembled)

#: A piece's ``kind`` in its JSON line -> its type.
PIECE_KINDS: dict[str, type] = {"call": Call, "tool_result": ToolResult, "rejected": Rejected, "label": Label}
_KIND_OF = {piece_type: kind for kind, piece_type in PIECE_KINDS.items()}


def piece_line(source: str, position: int, piece: Any) -> bytes:
    """One piece as a JSON line: its record's source and position, its kind and its fields,
    enough to rebuild it exactly (``piece_of_line``: integers of any size, floats to the bit)."""
    kind = _KIND_OF[type(piece)]
    return dumps_line({"source": source, "position": position, "kind": kind, "piece": piece._asdict()}) + b"\n"


def logged_lines(logged: Iterable[CallLogged]) -> Iterator[bytes]:
    """The pieces of call-log records handed on, as JSON lines, in the order read."""
    for item in logged:
        for piece in item.pieces:
            yield piece_line(item.source, item.position, piece)


def piece_of_line(line: bytes) -> tuple[str, int, Any]:
    """``(source, position, piece)`` back from a ``piece_line``."""
    doc = parse_json(line)
    return doc["source"], doc["position"], PIECE_KINDS[doc["kind"]](**doc["piece"])


def emitted_again(made: _Conversation, pane: int) -> _Conversation:
    """A conversation emitted for the ``pane``-th time (0: the first): ``assembly.pane`` says so,
    and from the second time on it counts as ``reopened``."""
    if isinstance(made.raw.payload, Parsed) and made.raw.payload.assembly is not None:
        made.raw.payload.assembly["pane"] = pane
    return made._replace(counts={**made.counts, "reopened": 1}) if pane else made
