"""One input shard, start to end, in one call: the per-shard step (plain code, no Beam graph).

``process_shard(shard, work, place)`` reads a shard (a path and a byte range,
``pipeline.io.shard.Shard``) in batches by the job's limits (``--batch-size``, ``--batch-bytes``,
``--max-record-bytes``: ``pipeline.io.read_shard.iter_batches``), runs the job's per-record step on each batch
(``records.normalize_batch`` with ``NORMALIZE`` or ``CHECK``), writes each output's items
through its ``pipeline.io.file_formats.FILE_FORMATS`` writer into the file ``place(output name)`` names, measuring
every file while it is written (records, bytes, sha256), and returns a ``ShardResult``: the
files written and the shard's partial summary (``transforms.totals.summary``; the records read and
blank lines included).

Who calls it:

- the batch graph (``pipeline.graph.per_shard``, the one every runner runs), one shard per
  element, naming temporary files under the run's temporary directory;
- streaming (``pipeline.streaming.driver``), one landed file per call.

A shard's outputs are one file per output, so its state (the ``taken`` values that keep a
unique field such as openai-batch's ``custom_id`` unique within a file) lives in this one call:
no runner's fusion or bundling is relied on. An output with no items gets no file unless
``empty_files`` asks for one. If anything fails, the files begun are closed and deleted and the
error is raised: the caller (a runner's retry, the streaming watcher) decides what happens next.
"""

from __future__ import annotations

import gc
import logging
import pickle
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

from apache_beam.io.filesystems import FileSystems

from pipeline.io import files
from pipeline.io.file_formats import FILE_FORMATS
from pipeline.io.parts import Part
from pipeline.io.read_shard import iter_part_batches
from pipeline.io.shard import Shard
from pipeline.io.written_files import WrittenFile, temp_name
from transforms.dataset.dataset_keys import CONTENT_KEYS, TRAIN, output_names, split_output
from transforms.record.assembled_calls import ShardGroups
from transforms.record.dedupe import batch_claims, pack
from transforms.record.inputs import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_SIZE, DEFAULT_MAX_RECORD_BYTES, Batch
from transforms.record.pairs import batch_pair_claims
from transforms.record.record_settings import Settings
from transforms.record.record_steps import ReaderHint
from transforms.record.records import BatchResult, normalize_batch
from transforms.totals import summary as summaries
from transforms.totals.record_step import CALLS, DEAD_LETTER, DROPS, RecordStep

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardWork:
    """What every shard of one job shares (small and picklable: it travels to workers)."""

    #: The job's per-record step (``transforms.totals.record_step.NORMALIZE`` or ``CHECK``).
    step: RecordStep
    settings: Settings
    #: Output name -> its file format (a ``FILE_FORMATS`` name); an output not named is JSON Lines.
    file_formats: Mapping[str, str] = field(default_factory=dict)
    batch_size: int = DEFAULT_BATCH_SIZE
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    batch_bytes: int = DEFAULT_BATCH_BYTES

    @property
    def outputs(self) -> tuple[str, ...]:
        """Every output's name: the step's, then each ``--split``'s records (beside ``normalized/``)."""
        splits = output_names(self.settings.splits)[1:] if self.step.main_output == "normalized" else ()
        return (*self.step.output_names, *splits)

    @property
    def holds(self) -> bool:
        """``--dedupe``, or ``--sink trl-dpo`` (pairs across conversations): only the step's
        claims (keys and places) go on, for the dataset step to decide across every shard; the
        outputs are written first and rewritten where a verdict touches them (``writes_first``),
        or spilled and written from the spill file (``pipeline.graph.shard_dataset``,
        ``pipeline.graph.shard_pairs``)."""
        return self.step.main_output == "normalized" and (self.settings.dedupe != "none" or self.settings.pairs_across)

    @property
    def writes_first(self) -> bool:
        """``--dedupe`` with every output a JSON Lines file: a shard's outputs are written as
        without it, its claims kept beside them, and the dataset step rewrites them only when a
        verdict touches the shard (``pipeline.graph.shard_dataset.rewrite_touched``, a copy of
        its lines): a shard with no duplicate is never copied. Else (trl-dpo's pairs, a Parquet
        output) they are spilled and written from the spill."""
        return (
            self.holds
            and not self.settings.pairs_across
            and all(FILE_FORMATS[self.file_format(name)].takes_lines for name in self.outputs)
        )

    @property
    def splits(self) -> bool:
        """``--split`` on the records (validate's violations have no split): each split's records
        to its own output, the dead letters by position (as ``transforms.record.dedupe.shard_outputs``)."""
        return self.step.main_output == "normalized" and bool(self.settings.splits)

    def file_format(self, output: str) -> str:
        return self.file_formats.get(output, "jsonl")

    def extension(self, output: str) -> str:
        """The file extension of ``output``'s files (``.jsonl``, ``.parquet``)."""
        return FILE_FORMATS[self.file_format(output)].extension


class ShardResult(NamedTuple):
    """What one shard gave: its files by output name, and its partial summary."""

    shard: int
    #: Output name -> the file written (its path as ``place`` named it, and its measure).
    files: dict[str, WrittenFile]
    #: The step's view's partial summary (``summaries.merge`` adds them up).
    partial: dict
    #: Its call-log records' pieces, for the assembly: ``((format, group), GroupState)`` pairs,
    #: each group's pieces folded in as they came (its longest histories, not every call's), a
    #: state packed (``PackedGroup``) when no call of it came for a while (``ShardGroups``).
    calls: Sequence[Any] = ()
    #: ``ShardWork.holds``: the spill file its outputs went to (``Spill``), or None.
    spill: str | None = None
    #: ``ShardWork.holds``: its conversations' claims, in order, packed
    #: (``transforms.record.dedupe.unpack_claims`` gives them back).
    claims: bytes = b""
    #: ``--dedupe prefix``: the ``fingerprint`` of each of its conversations' whole content,
    #: 8 bytes each (``array("Q")``): every shard's together say which prefixes can matter.
    wholes: bytes = b""
    #: ``--dedupe prefix``: the file of its conversations' prefix links (``Held``), or None.
    prefixes: str | None = None
    #: ``ShardWork.writes_first``: the partial summary of its drop metrics and dead letters as
    #: written first, not in ``partial`` until the dataset step adds it (or a rewrite's), else None.
    shaped: dict | None = None
    #: ``ShardWork.writes_first``: each batch's start and number of conversations, in input
    #: order (``array("q")``, two numbers a batch): a rewrite's places of its conversations.
    batches: bytes = b""
    #: ``ShardWork.writes_first``: the batch (its index) of each dead letter, in its file's order.
    letter_batches: bytes = b""


#: ``observe(batch, result)``: called after each batch (counters, progress); must not raise.
Observer = Callable[[Batch, BatchResult], None]


def process_shard(
    shard: Shard | Part,
    work: ShardWork,
    place: Callable[[str], str],
    *,
    observe: Observer | None = None,
    empty_files: bool = False,
    read: Callable[[Shard, Batch], None] | None = None,
    done: Callable[[Shard], None] | None = None,
    on_calls: Callable[[list[Any]], None] | None = None,
) -> ShardResult:
    """Read, process and write one shard, or a part's shards in order into one file per output
    (``pipeline.io.parts``); see the module's docstring.

    ``place(output name) -> path`` names each output's file (the caller's layout: a run's
    temporary directory, a landed file's directory). ``empty_files``: also write an empty file
    for an output that got no items (under ``holds``, the write step does).
    ``read(shard, batch)`` and ``done(shard)``: each shard's own batches as read, and its end
    (``read_shard.iter_part_batches``). ``on_calls``: see ``process_batches``.
    """
    shards = shard.shards if isinstance(shard, Part) else (shard,)
    stats = {"records": 0, "blank_lines": 0}
    batches = iter_part_batches(
        shards, shard.number, work.batch_size, stats, work.max_record_bytes, work.batch_bytes, read=read, done=done
    )
    result = process_batches(
        batches, shard.number, shard.start, work, place, observe=observe, empty_files=empty_files, on_calls=on_calls
    )
    partial = summaries.merge(result.partial, work.step.view.partial(0, blank_lines=stats["blank_lines"]))
    return result._replace(partial=partial)


def process_batches(
    batches: Iterable[Batch],
    number: int,
    start: int,
    work: ShardWork,
    place: Callable[[str], str],
    *,
    observe: Observer | None = None,
    empty_files: bool = False,
    read: bool = True,
    on_calls: Callable[[list[Any]], None] | None = None,
) -> ShardResult:
    """``process_shard`` on batches however read (a shard's; the conversations assembled
    from call logs for one output shard): the result of shard ``number``, first item ``start``.
    ``read``: the batches' items are records read (``records_in``); not so for conversations
    assembled from records read already. ``on_calls``: each batch's call-log records
    (``CallLogged``) go to it as they come (the streaming driver keeps them on disk) instead of
    being folded into their groups' states in the result."""
    step, settings = work.step, work.settings
    taken: dict = {}  # one file per output for the whole shard: unique values are unique in it
    out = OutputFiles(work, place)
    total: dict = {}

    # A JSON Lines main output takes the lines the per-record guard made: the records need not
    # live on (records.normalize_batch). The reader hint lives for the shard (one file's records).
    lines_only = FILE_FORMATS[work.file_format(step.main_output)].takes_lines
    hint = ReaderHint()
    groups = ShardGroups()
    # --dedupe: only the claims go on; the outputs are written first (``writes_first``) or go
    # to a spill file, one entry per batch.
    held = Held(number, place, settings.dedupe == "prefix", settings.pairs_across) if work.holds else None
    routing = _Routing(work, out, held)
    try:
        for index, batch in enumerate(batches):
            result = normalize_batch(
                batch.items, settings, step.step, taken=taken, keep_records=not lines_only, hint=hint
            )
            # Held outputs are summarized once the dataset step has shaped them (as written).
            counted = result._replace(metrics=[], dead_letters=[]) if work.holds else result
            total = summaries.merge(total, step.partial(len(batch.items) if read else 0, counted))
            routing.claim(batch.start, result.metrics)
            spilled: dict[str, tuple[list, Any]] = {}
            for name, items, lines in step.routed(result, lines_only):
                if name == CALLS and on_calls is not None:
                    on_calls(items)
                elif name == CALLS:  # not an output: the assembly's input
                    for logged in items:
                        groups.add(logged)
                    groups.settle()
                    # The groups' states live until the shard ends and only grow: out of the
                    # cyclic collector's sight (they hold no cycle; freed by reference counts),
                    # or each full collection scans them all again (measured: a quarter of a
                    # call-log run's CPU).
                    gc.freeze()
                elif work.holds and not routing.first:
                    spilled[name] = (items, lines if name == step.main_output else None)
                else:
                    routing.write(index, batch.start, name, (items, lines), result.metrics)
            if held is not None and spilled:
                held.add(batch.start, spilled, step.main_output)
            if observe is not None:
                observe(batch, result)
        routing.finish(empty_files)
        measures = out.close()
        held_files = held.close() if held is not None else {}
    except BaseException:
        out.abandon()
        if held is not None:
            held.abandon()
        raise
    written = written_files(work, number, start, out.paths, measures)
    shard = ShardResult(number, written, total or step.view.partial(), groups.items())._replace(**held_files)
    return routing.result(shard)


class _Routing:
    """Where a shard's outputs go as the step routes them (``process_batches``): each to its
    file; with ``--split`` the records by split; with ``--split`` or ``writes_first`` the dead
    letters gathered and written in input order at the end. ``writes_first`` (``--dedupe``):
    its conversations claimed (``Held.claim``), and the files' starts and the summary of their
    drop metrics and dead letters kept apart, as a rewrite would give them
    (``pipeline.graph.shard_dataset.write_shaped``)."""

    def __init__(self, work: ShardWork, out: OutputFiles, held: Held | None) -> None:
        self._work = work
        self._out = out
        self._held = held
        self.first = work.writes_first
        self._shaped: dict = {}
        self._starts: dict[str, int] = {}  # each output's first batch
        self._letters: list[Any] = []
        self._letter_batches = array("q")  # the batch of each dead letter

    def claim(self, start: int, metrics: list[Any]) -> None:
        """A batch's conversations claimed, their content keys taken off (``writes_first``)."""
        if self.first and self._held is not None and metrics:
            self._held.claim(start, metrics)
            summaries.merge_into(self._shaped, self._work.step.view.partial(0, metrics, []))

    def write(self, index: int, start: int, name: str, output: tuple[list, Any], metrics: list[Any]) -> None:
        """One batch's items (and lines) of output ``name``: batch ``index``, first item ``start``."""
        items, lines = output
        if name == self._work.step.main_output and self._work.splits:
            for split, (its_items, its_lines) in by_split(items, lines, metrics).items():
                self._out.writer(split).write(its_items, its_lines)
                self._starts.setdefault(split, start)
        elif name == DEAD_LETTER and (self._work.splits or self.first):
            self._letters.extend(items)
            self._letter_batches.extend([index] * len(items))
        else:
            self._out.writer(name).write(items, lines)
            self._starts.setdefault(name, start)

    def finish(self, empty_files: bool) -> None:
        """The dead letters gathered, by position; the empty files asked for."""
        letters = self._letters
        if letters:
            order = sorted(range(len(letters)), key=lambda at: letters[at]["position"])
            letters = [letters[at] for at in order]
            self._out.writer(DEAD_LETTER).write(letters, None)
            if self.first:
                self._starts[DEAD_LETTER] = letters[0]["position"]
                self._letter_batches = array("q", [self._letter_batches[at] for at in order])
                summaries.merge_into(self._shaped, self._work.step.view.partial(0, [], letters))
        # Held outputs get theirs when written (``write_shaped``); written first, every output
        # has its file, as ``write_shaped`` gives it.
        if (empty_files and not self._work.holds) or self.first:
            for name in self._work.outputs:
                self._out.writer(name)

    def result(self, shard: ShardResult) -> ShardResult:
        """``shard``, and (``writes_first``) its files' starts, ``shaped`` and ``letter_batches``."""
        if not self.first:
            return shard
        return shard._replace(
            files={name: file._replace(start=self._starts.get(name, 0)) for name, file in shard.files.items()},
            shaped=self._shaped,
            letter_batches=self._letter_batches.tobytes(),
        )


#: The run's temporary directory's folders of spill files and of prefix links (no output is
#: named so: an output's name is a word, a split's too).
SPILL, PREFIXES = "_spill", "_prefixes"


class Held:
    """What a shard under ``--dedupe`` keeps while the claims decide: its outputs in a spill
    file (unless ``ShardWork.writes_first``: then none), its conversations' claims (packed into
    its result), and with ``prefix`` the fingerprints of their whole contents (in its result)
    and their prefixes' links, in a file of their own, one list per batch in the claims' order
    (``read_prefixes``): most of a claim's bytes, they stay on disk until the step that looks
    them up reads them (the result would carry them through the runner's buffers)."""

    def __init__(self, number: int, place: Callable[[str], str], prefix: bool, pairs: bool = False) -> None:
        self._number = number
        #: trl-dpo's pairs across conversations (``transforms.record.pairs``): their claims, not
        #: --dedupe's (the two are never asked together).
        self._pairs = pairs
        self._spill = Spill(place(SPILL))
        self._prefixes = Spill(place(PREFIXES)) if prefix else None
        self._claims: list[Any] = []
        self._wholes = array("Q")
        self._batches = array("q")

    def add(self, start: int, spilled: dict[str, tuple[list, Any]], main_output: str) -> None:
        """One batch's held outputs (output name -> its items and lines), spilled."""
        records, lines = spilled.get(main_output, ([], None))
        metrics = spilled.get(DROPS, ([], None))[0]
        if self._pairs:
            self._claims.extend(batch_pair_claims(self._number, start, metrics))
        else:
            self.claim(start, metrics)
        self._spill.dump((start, metrics, records, lines, spilled.get(DEAD_LETTER, ([], None))[0]))

    def claim(self, start: int, metrics: list[dict[str, Any]]) -> None:
        """One batch's conversations (their drop metrics) claimed; their content keys taken off
        (they need not be spilled or written, nor taken off when written)."""
        self._claims.extend(batch_claims(self._number, start, metrics, links=False))
        self._batches.extend((start, len(metrics)))
        keys = [m.pop(CONTENT_KEYS) for m in metrics]
        if self._prefixes is not None and keys:
            self._prefixes.dump([links for _, links in keys])
            # Each full key's first 8 bytes (``fingerprint``), the batch's in one go.
            self._wholes.frombytes(bytes.fromhex("".join([full[:16] for full, _ in keys])))

    def close(self) -> dict[str, Any]:
        """The ``ShardResult`` fields of what is held."""
        return {
            "spill": self._spill.close(),
            "claims": pack(self._claims) if self._claims else b"",
            "wholes": self._wholes.tobytes(),
            "prefixes": self._prefixes.close() if self._prefixes is not None else None,
            "batches": self._batches.tobytes(),
        }

    def abandon(self) -> None:
        self._spill.abandon()
        if self._prefixes is not None:
            self._prefixes.abandon()


def read_prefixes(path: str | None) -> Iterator[list[bytes]]:
    """A shard's prefix links (``Held``), a list per batch of a bytes value per conversation,
    in its claims' order."""
    yield from read_spill(path)


class Spill:
    """A shard's outputs under ``--dedupe``, kept on disk while the claims decide: one pickled
    entry per batch, ``(start, drop metrics, records, their lines or None, dead letters)``, in
    input order. Opened when first added to; the run's temporary directory holds it (its
    removal at the end of the run removes it: a retried write step reads it again)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._handle: Any = None

    def add(self, start: int, metrics: list, records: list, lines: list | None, letters: list) -> None:
        self.dump((start, metrics, records, lines, letters))

    def dump(self, entry: Any) -> None:
        """One entry, pickled (``read_spill`` gives them back in order)."""
        if self._handle is None:
            self._handle = files.create(self.path)
        pickle.dump(entry, self._handle, protocol=pickle.HIGHEST_PROTOCOL)

    def close(self) -> str | None:
        """The spill file's path, or None when nothing was added."""
        if self._handle is None:
            return None
        self._handle.close()
        return self.path

    def abandon(self) -> None:
        if self._handle is None:
            return
        try:
            self._handle.close()
            files.delete(self.path)
        except Exception:  # noqa: BLE001 — cleaning up after another error, which is raised
            LOG.warning("could not delete the unfinished file %s", self.path)


def read_spill(path: str | None) -> Iterator[Any]:
    """A spill file's entries (``Spill.add``'s: ``(start, drop metrics, records, lines, dead
    letters)``; or what ``Spill.dump`` was given), in the order they were added."""
    if path is None:
        return
    with files.open_input(path) as handle:
        while True:
            try:
                yield pickle.load(handle)
            except EOFError:
                return


def written_files(work: ShardWork, number: int, start: int, paths: dict, measures: dict) -> dict[str, WrittenFile]:
    """Each output's file (its path and measure), in the outputs' order."""
    return {name: WrittenFile(number, start, paths[name], *measures[name]) for name in work.outputs if name in measures}


def by_split(items: list[Any], lines: list[Any] | None, metrics: list[Any]) -> dict[str, tuple[list, list | None]]:
    """A batch's records (and lines) by the output of their split (``--split``; ``train``'s is
    ``normalized``), each split's in input order: its drop metrics say which split it is in."""
    out: dict[str, tuple[list, list | None]] = {}
    for index, m in enumerate(metrics):
        its = out.setdefault(split_output(m.get("split", TRAIN)), ([], None if lines is None else []))
        its[0].append(items[index])
        if its[1] is not None and lines is not None:
            its[1].append(lines[index])
    return out


class OutputFiles:
    """A shard's files, one per output, each opened in the place ``place(output name)`` names
    when it is first written to, by its ``FILE_FORMATS`` writer."""

    def __init__(self, work: ShardWork, place: Callable[[str], str]) -> None:
        self._work = work
        self._place = place
        self._writers: dict[str, Any] = {}
        #: Output name -> the path of its file.
        self.paths: dict[str, str] = {}

    def writer(self, name: str):
        if name not in self._writers:
            settings = self._work.settings
            self.paths[name] = self._place(name)
            self._writers[name] = FILE_FORMATS[self._work.file_format(name)].open(
                self.paths[name], settings.id_field, settings.messages_field, settings.sink
            )
        return self._writers[name]

    def close(self) -> dict[str, Any]:
        """Output name -> its file's measure (records, bytes, sha256)."""
        return {name: self._writers.pop(name).close() for name in list(self._writers)}

    def abandon(self) -> None:
        """After a failure: close what is open and delete every file begun (best effort)."""
        for writer in self._writers.values():
            try:
                writer.close()
            except Exception:  # noqa: BLE001 — cleaning up after another error, which is raised
                pass
        for path in self.paths.values():
            try:
                files.delete(path)
            except Exception:  # noqa: BLE001 — as above
                LOG.warning("could not delete the unfinished file %s", path)


def temp_place(temp_root: str, shard: Shard | Part, attempt: str) -> Callable[[str], str]:
    """The batch job's naming: ``TEMP_ROOT/<output>/<shard>-<start>-<attempt>``, the names
    (``attempt`` unique per try: a retry never clobbers another)."""
    return numbered_place(temp_root, shard.number, shard.start, attempt)


def numbered_place(temp_root: str, number: int, start: int, attempt: str) -> Callable[[str], str]:
    """``temp_place`` for output shard ``number`` (an input shard's, or assembled conversations')."""
    join = FileSystems.get_filesystem(temp_root).join  # looked up once per shard, not per file

    def place(name: str) -> str:
        return join(temp_root, name, temp_name(number, start, attempt))

    return place
