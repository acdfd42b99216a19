"""The assembly of call logs as records (no Beam import): the call-log records a step handed on
(``CallLogged``) -> the pieces keyed by group, each group's state (``transforms.calllogs.assemble``)
-> its conversations (or dead letters) as raw records keyed by output bucket, sorted into
batches, with the summary's ``call_logs`` counts.

What the Beam steps around it share (``pipeline.graph.shard_assembly``, the job's batch graph;
``pipeline.graph.call_assembly``, the composites for library users; ``pipeline.streaming``):
a group's conversations go to one of ``buckets`` output shards (a hash of the group: the same
on every runner and rerun), sorted, so each shard's file has the same bytes whatever the order
groups finish in.
"""

from __future__ import annotations

import itertools
import zlib
from typing import Any, Iterable, Iterator, NamedTuple

from transforms.calllogs.assemble import Assembled, GroupState, NoCalls, call_traces, group_key
from transforms.calllogs.calls import Fragment, Label, Rejected, ToolResult
from transforms.calllogs.chained import TEXTS_RESTORED
from transforms.calllogs.chains import assemble_chained
from transforms.calllogs.joins import is_join_key, joined_states
from transforms.calllogs.labels import label_counts
from transforms.calllogs.response_links import response_keys
from transforms.core.jsontext import canonical_json
from transforms.record.dedupe import pack, unpack
from transforms.record.inputs import Batch, Parsed, RawRecord, Unreadable
from transforms.record.record_settings import Settings
from transforms.record.record_steps import CallLogged, DeadLetterReason

#: The shard of batches of conversations assembled on a stream (``STREAM_SHARD`` is the input's).
STREAM_ASSEMBLED_SHARD = -2
#: On a stream, a conversation closes after this long without a call, and a call up to this
#: much later than that re-opens it (``pipeline.graph.call_assembly.AssembleConversations``).
DEFAULT_SESSION_GAP_S = 30 * 60.0
DEFAULT_REOPEN_S = 24 * 3600.0

#: The output shards of assembled conversations, by default (a library user's graph): past
#: any input shard a plan makes. ``convnorm run`` numbers them after its input shards.
FIRST_ASSEMBLED_SHARD = 1 << 20


def keyed_pieces(logged: CallLogged) -> Iterator[tuple[tuple[str, str], tuple[str, int, Any]]]:
    for piece in logged.pieces:
        yield group_key(piece), (logged.source, logged.position, piece)


class PackedGroup(NamedTuple):
    """A group's state packed while its shard is still read (``ShardGroups``), with what the
    assembly's shuffle needs of it unread: its labels (taken out of the state), whether it
    holds pieces, each call's id and trace (``call_traces``: the ids it offers labels), and its
    response ids."""

    packed: bytes
    labels: list[Label]
    holds: bool
    traces: list[tuple[str, str | None]]
    #: Its response ids held and lacked (``response_links.response_keys``).
    responses: list[Any]

    @staticmethod
    def of(key: tuple[str, str], state: GroupState) -> PackedGroup:
        labels, state.labels = state.labels, []
        held = list(response_keys(key, state))
        return PackedGroup(pack(state), labels, state.holds_pieces(), call_traces(state), held)

    def unpacked(self) -> GroupState:
        state: GroupState = unpack(self.packed)
        state.labels = list(self.labels)
        return state


#: A shard's groups kept as objects while it is read, the ones touched last; the others are
#: packed (``PackedGroup``: about a fifth of their size as objects).
LIVE_GROUPS = 4096


class ShardGroups:
    """A shard's groups' states as its call-log records are read (``add``), each group's pieces
    folded in as they come. Only the ``live`` groups touched last are objects; older ones are
    packed (``settle``) and read again if a call of theirs comes after all: an export holds a
    trace's calls together, so a shard's memory does not grow with its groups."""

    def __init__(self, live: int = LIVE_GROUPS) -> None:
        self._live: dict[tuple[str, str], GroupState] = {}
        self._packed: dict[tuple[str, str], PackedGroup] = {}
        self._limit = live

    def add(self, logged: CallLogged) -> None:
        live = self._live
        for key, (source, position, piece) in keyed_pieces(logged):
            state = live.pop(key, None)  # put back last: the live groups in the order touched
            if state is None:
                packed = self._packed.pop(key, None)
                state = GroupState() if packed is None else packed.unpacked()
            live[key] = state
            state.add(source, position, piece)

    def settle(self) -> None:
        """Pack the groups past the ``live`` touched last."""
        live = self._live
        for key in list(itertools.islice(live, max(0, len(live) - self._limit))):
            self._packed[key] = PackedGroup.of(key, live.pop(key))

    def items(self) -> list[tuple[tuple[str, str], GroupState | PackedGroup]]:
        return [*self._packed.items(), *self._live.items()]


def call_log_partial(logged: Iterable[CallLogged]) -> dict[str, Any]:
    """The summary's ``call_logs`` counts of the records handed on: records, calls, tool
    results, parts that could not be read (``parts_refused``) and parts that are neither
    (``skipped_by_kind``)."""
    records = calls = results = refused = fragments = labels = 0
    skipped: dict[str, int] = {}
    for item in logged:
        records += 1
        for piece in item.pieces:
            if isinstance(piece, ToolResult):
                results += 1
            elif isinstance(piece, Rejected):
                refused += 1
            elif isinstance(piece, Fragment):
                fragments += 1
            elif isinstance(piece, Label):
                labels += 1
            else:
                calls += 1
        for kind, n in (item.skipped or {}).items():
            skipped[kind] = skipped.get(kind, 0) + n
    counts: dict[str, Any] = {"records": records, "calls": calls, "tool_results": results}
    if refused:
        counts["parts_refused"] = refused
    if fragments:
        counts["fragments"] = fragments
    if skipped:
        counts["skipped_by_kind"] = skipped
    return {"call_logs": counts, **label_counts(read=labels)}


class AssemblyOutput(NamedTuple):
    """One output of the assembly, with its place in its shard's sorted order."""

    order: bytes
    raw: RawRecord
    #: The partial summary's counts this output adds.
    counts: dict[str, int]
    #: An assembled conversation's keys for chaining across groups (``calllogs.chained``).
    fingerprints: Any = None
    #: An assembled conversation's calls -> the message each answered (``Assembled.judged``),
    #: for labels to be put on (``transforms.record.labelled_calls``).
    judged: dict[str, int] | None = None


class PackedOutputs(NamedTuple):
    """Outputs of the assembly (``AssemblyOutput``) of one output shard, packed as one value for
    a shuffle (``dedupe.pack``): an element and a pickle per conversation, each through Beam's
    coder, cost more than the conversations' own processing."""

    packed: bytes


def packed_outputs(made: list[AssemblyOutput]) -> PackedOutputs:
    return PackedOutputs(pack(made))


def each_output(value: Any) -> list[Any]:
    """The outputs a shuffled value holds: a ``PackedOutputs``' unpacked, any other value alone."""
    return unpack(value.packed) if isinstance(value, PackedOutputs) else [value]


def bucket_of(key: tuple[str, str], buckets: int) -> int:
    return zlib.crc32(canonical_json(list(key))) % buckets


def conversations_of(
    keyed: tuple[tuple[str, str], GroupState], settings: Settings, buckets: int
) -> Iterator[tuple[int, AssemblyOutput]]:
    """One group's state -> its conversations (or its dead letter), each keyed by its bucket.

    A key of fragments not joined before (a stream's ``_Sessions``) is joined here, and its
    pieces assembled as groups of their own."""
    if is_join_key(keyed[0]):
        for group_state in joined_states(*keyed):
            yield from conversations_of(group_state, settings, buckets)
        return
    (fmt, group), state = keyed
    bucket = bucket_of((fmt, group), buckets)
    joined: dict[str, int] = {"calls_joined": state.joined} if state.joined else {}
    for n, (origin, part) in enumerate(sorted(state.rejected, key=lambda item: (item[0], item[1]))):
        # A part of a record that could not be read (the record's other parts are assembled):
        # a dead letter of its own, at its record's place, counted as one of the group's outputs.
        letter = Unreadable(DeadLetterReason.FORMAT_ERROR.value, part.detail, part.raw)
        order = canonical_json([fmt, group, -1, n])
        yield (
            bucket,
            AssemblyOutput(order, RawRecord(origin.source, origin.position, letter), {"conversations": 1, **joined}),
        )
        joined = {}
    if not state.calls and not state.tool_results and not state.chained:
        # Only parts refused. (A bare return: Beam warns on the console of a generator whose
        # line starts "return " with anything after it, a comment included.)
        return
    try:
        made = assemble_chained(
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
        origins = sorted(
            [c.origin for c in state.calls] + [o for o, _ in state.chained] + [o for o, _ in state.tool_results]
        )
        made = NoCalls("", -1, detail, tuple(dict.fromkeys((o.source, o.position) for o in origins)))
        reason = DeadLetterReason.INTERNAL_ERROR
    else:
        reason = DeadLetterReason.NO_LLM_CALLS
    if isinstance(made, NoCalls):
        # A dead letter at each of the group's records: every record read ends in one place.
        letter = Unreadable(reason.value, made.detail)
        for n, (source, position) in enumerate(made.places or ((made.source, made.position),)):
            order = canonical_json([fmt, group, 0, n])
            yield bucket, AssemblyOutput(order, RawRecord(source, position, letter), {"conversations": 1, **joined})
            joined = {}
        return
    for index, conversation in enumerate(made):
        found = _made(fmt, group, index, conversation)
        yield bucket, found._replace(counts={**found.counts, **joined}) if joined else found
        joined = {}


def _made(fmt: str, group: str, index: int, conversation: Assembled) -> AssemblyOutput:
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
    for name in ("responses_chained", "responses_unchained", TEXTS_RESTORED):
        if conversation.assembly.get(name):
            counts[name] = conversation.assembly[name]
    output = AssemblyOutput(canonical_json([fmt, group, index]), raw, counts)
    return output._replace(fingerprints=conversation.fingerprints, judged=conversation.judged)


def shard_batches(keyed: tuple[int, Iterable[AssemblyOutput]], first_shard: int, batch_size: int) -> Iterator[Batch]:
    """One bucket's conversations, sorted, as the batches of output shard ``first_shard + bucket``."""
    bucket, made = keyed
    ordered = sorted(made, key=lambda c: c.order)
    shard = first_shard + bucket
    for start in range(0, len(ordered), batch_size):
        yield Batch(shard, start, [c.raw for c in ordered[start : start + batch_size]])


#: Counts of what was read, not of the conversation written: they stay counted when a
#: conversation is chained into another across groups and left out (``chain_groups``).
READ_COUNTS = ("calls_joined", "responses_chained", "responses_unchained")


def assembly_partial(
    keyed: tuple[int, Iterable[AssemblyOutput]], assembled: Iterable[AssemblyOutput] | None = None
) -> dict[str, Any]:
    """The ``call_logs`` counts of one bucket's outputs; ``assembled``: its outputs as assembled,
    before any were chained away, whose ``READ_COUNTS`` are the ones counted."""
    total: dict[str, int] = {}
    for made in keyed[1]:
        for name, n in made.counts.items():
            if assembled is None or name not in READ_COUNTS:
                total[name] = total.get(name, 0) + n
    for made in assembled or ():
        for name in READ_COUNTS:
            if made.counts.get(name):
                total[name] = total.get(name, 0) + made.counts[name]
    return {"call_logs": total}


def emitted_again(made: AssemblyOutput, pane: int) -> AssemblyOutput:
    """A conversation emitted for the ``pane``-th time (0: the first): ``assembly.pane`` says so,
    and from the second time on it counts as ``reopened``."""
    if isinstance(made.raw.payload, Parsed) and made.raw.payload.assembly is not None:
        made.raw.payload.assembly["pane"] = pane
    return made._replace(counts={**made.counts, "reopened": 1}) if pane else made
