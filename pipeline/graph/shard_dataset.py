"""``--dedupe``: one chain of steps after the per-shard step, no tagged output, one leaf (what
every runner, DaskRunner included, can run). Only keys and verdicts are shuffled.

::

    ShardResult (outputs written first, claims) | claims by bucket of content keys | GroupByKey
            | resolve | duplicates by bucket of kept ones | GroupByKey | collapse: verdicts by shard
            | GroupByKey (each shard's result and verdicts) | the files of a shard with verdicts rewritten

The per-shard step writes a shard's outputs as a run without ``--dedupe`` writes them
(``ShardWork.writes_first``; with a Parquet output, to a spill file in the run's temporary
directory instead), and its result carries its files and its conversations' claims (full key,
prefix keys, place, id: ``transforms.record.dedupe.Claim``), no record. Plain
functions (``transforms.record.dedupe``) decide on the claims; a conversation that is kept as it
is gets no verdict, and only what is collapsed goes through the second shuffle. ``prefix``
first joins every shard's whole-content fingerprints (a side input of 8 bytes a conversation)
and claims only the prefixes among them: a prefix that is no conversation decides nothing, and
such claims (one per message) were most of what it shuffled. Claims travel in lists, one per
shard and bucket of content keys (``content_buckets``): Beam's cost per element would
otherwise outweigh the decision. Each
shard's result and verdicts then meet. A shard without a verdict (most) keeps its files; one
with verdicts has its files (or its spill) read once, in order: its kept conversations, split
by ``--split``, and their drop metrics are written as they come (a line without a verdict
copied as it is); its dead letters (its own and its duplicates) by position at the end. Every key says what it holds
(``_CONTENT``, ``_KEPT``, ``_OUT``): a shard's result travels under ``_OUT`` through the content
shuffles untouched. A ``--split`` alone needs none of this: the per-shard step writes each
split's records itself.
"""

from __future__ import annotations

import uuid
import zlib
from array import array
from typing import Any, Callable, Iterator

import apache_beam as beam

from pipeline.graph.shard_step import (
    OutputFiles,
    ShardResult,
    ShardWork,
    numbered_place,
    read_prefixes,
    read_spill,
    written_files,
)
from pipeline.io import files
from pipeline.io.file_formats import FILE_FORMATS
from pipeline.testhooks import pause_point
from transforms.core.jsontext import dumps_line, parse_json
from transforms.dataset.dataset_keys import TRAIN, split_output
from transforms.record.dedupe import (
    DROPS,
    KEPT,
    Claim,
    Conversation,
    Verdict,
    batch_outputs,
    collapse_kept,
    content_claims,
    none_known,
    pack_flat,
    resolve_content,
    shape,
    shard_outputs,
    sorted_letters,
    spilled_conversations,
    unpack,
)
from transforms.totals import summary as summaries
from transforms.totals.record_step import DEAD_LETTER

_CONTENT, _KEPT, _OUT = "content", "kept", "out"
_RESULT, _VERDICT = "result", "verdict"


def bucket_of(content: str, buckets: int) -> int:
    """A content key's bucket: the same in every process (not Python's salted ``hash``)."""
    return zlib.crc32(content.encode("utf-8")) % buckets


def claimed(result: ShardResult, buckets: int, wholes: bytes | None = None) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A shard's result (its claims taken off), by its shard; its claims under each content key
    they claim (``transforms.record.dedupe.content_claims``), a list per bucket of keys: a
    shuffled element per key would cost more than the decision. ``wholes`` (``--dedupe
    prefix``): every shard's whole-content fingerprints (``join_wholes``); only the prefixes
    among them are claimed."""
    yield (_OUT, result.shard), (_RESULT, result._replace(claims=b"", wholes=b"", prefixes=None))
    known = None if wholes is None else known_wholes(wholes)
    by_bucket: dict[int, list[tuple[str, Any]]] = {}
    for fields, links in _with_links(unpack(result.claims) if result.claims else [], result.prefixes, known):
        if links:
            for content, value in content_claims(Claim(fields[0], fields[1], fields[2], links), known):
                by_bucket.setdefault(bucket_of(content, buckets), []).append((content, value))
        else:  # its whole content only (``content_claims``' first), without a Claim made and
            # without its full key twice (``resolved`` puts it back): the lists are pickled
            # without a memo (``pack_flat``), which would write it twice.
            full = fields[2]
            by_bucket.setdefault(bucket_of(full, buckets), []).append((full, ("whole", fields[:2])))
    for bucket in sorted(by_bucket):
        yield (_CONTENT, bucket), pack_flat(by_bucket[bucket])


def _with_links(
    claims: list[tuple[Any, ...]], prefixes: str | None, known: frozenset[int] | None
) -> Iterator[tuple[tuple[Any, ...], bytes]]:
    """A shard's claims (``Claim``'s fields, packed) each with its prefix links (``--dedupe
    prefix``: kept on disk until now, a list per batch), or ``b""``: so for a batch none of
    whose links is a ``known`` whole (most), as nothing they link to is claimed."""
    if prefixes is None:
        for fields in claims:
            yield fields, fields[3]
        return
    at = 0
    for links in read_prefixes(prefixes):
        batch = claims[at : at + len(links)]
        at += len(links)
        if known is not None and none_known(b"".join(links), known):
            for fields in batch:
                yield fields, b""
        else:
            yield from zip(batch, links)
    for fields in claims[at:]:
        yield fields, fields[3]


class JoinWholes(beam.CombineFn):
    """Shard results -> every whole-content fingerprint of the run (``ShardResult.wholes``),
    sorted, once each, 8 bytes each: 8 MB for a million conversations."""

    def create_accumulator(self) -> list[bytes]:
        return []

    def add_input(self, accumulator: list[bytes], result: ShardResult) -> list[bytes]:
        accumulator.append(result.wholes)
        return accumulator

    def merge_accumulators(self, accumulators) -> list[bytes]:
        return [part for accumulator in accumulators for part in accumulator]

    def extract_output(self, accumulator: list[bytes]) -> bytes:
        return join_wholes(accumulator)


def join_wholes(parts: list[bytes]) -> bytes:
    """Shards' whole-content fingerprints -> one sorted run of them, each once."""
    return array("Q", sorted(set(memoryview(b"".join(parts)).cast("Q")))).tobytes()


#: The last ``wholes`` made a set in this process, and that set: each shard's ``claimed``
#: step looks its prefixes up in it, built once per process, not once per shard.
_KNOWN: tuple[bytes, frozenset[int]] | None = None


def known_wholes(wholes: bytes) -> frozenset[int]:
    """``join_wholes``' bytes as a set to look fingerprints up in (kept for the next shard)."""
    global _KNOWN
    cached = _KNOWN
    if cached is not None and (cached[0] is wholes or cached[0] == wholes):
        return cached[1]
    known = frozenset(memoryview(wholes).cast("Q"))
    _KNOWN = (wholes, known)
    return known


def _passed(key: tuple[Any, ...], values: Any) -> Iterator[tuple[tuple[Any, ...], Any]]:
    for value in values:
        yield key, value


def _by_key(packed: Any) -> dict[str, list[Any]]:
    """A bucket's packed lists of ``(key, value)`` pairs -> each key's values."""
    out: dict[str, list[Any]] = {}
    for pairs in packed:
        for key, value in unpack(pairs):
            out.setdefault(key, []).append(value)
    return out


def resolved(element: tuple[tuple[Any, ...], Any], buckets: int) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A bucket's content keys and their claims -> what each conversation is, under the key of
    the one kept (a list per bucket of those keys)."""
    key, values = element
    if key[0] != _CONTENT:
        yield from _passed(key, values)
        return
    by_bucket: dict[int, list[tuple[str, Any]]] = {}
    for content, claims in _by_key(values).items():
        if len(claims) == 1:  # a key claimed once (most) decides nothing (``resolve_content``)
            continue
        # A whole claimed without its full key (``claimed``): the key it is claimed under.
        claims = [(kind, (*ref, content)) if kind == "whole" and len(ref) == 2 else (kind, ref) for kind, ref in claims]
        for target, value in resolve_content((content, claims)):
            by_bucket.setdefault(bucket_of(target, buckets), []).append((target, value))
    for bucket in sorted(by_bucket):
        yield (_KEPT, bucket), pack_flat(by_bucket[bucket])


def collapsed(element: tuple[tuple[Any, ...], Any]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A bucket's kept conversations' claims and those collapsed into each -> their verdicts,
    a list per shard."""
    key, values = element
    if key[0] != _KEPT:
        yield from _passed(key, values)
        return
    by_shard: dict[int, list[Verdict]] = {}
    for target, claims in _by_key(values).items():
        for shard, verdict in collapse_kept((target, claims)):
            by_shard.setdefault(shard, []).append(verdict)
    for shard in sorted(by_shard):
        yield (_OUT, shard), (_VERDICT, by_shard[shard])


class _WriteShaped(beam.DoFn):
    """A shard's result and verdicts -> that result with its files written from its spill and
    its drop metrics and dead letters summarized. ``shaper``: what a verdict makes of a
    conversation (``transforms.record.dedupe.shape``; the pairs' ``transforms.record.pairs.shape_pair``)."""

    def __init__(self, work: ShardWork, temp_root: str, shaper: Shaper = shape) -> None:
        self._work = work
        self._temp_root = temp_root
        self._shaper = shaper

    def process(self, element):
        _, values = element
        (result,) = [value for tag, value in values if tag == _RESULT]
        verdicts = [verdict for tag, value in values if tag == _VERDICT for verdict in value]
        if result.shaped is not None:  # its files written first (``ShardWork.writes_first``)
            yield rewrite_touched(result, verdicts, self._work, self._temp_root)
        else:
            yield write_shaped(result, verdicts, self._work, self._temp_root, self._shaper)
        pause_point("write")


class _Outputs:
    """A shard's shaped outputs, written as they come: a JSON Lines file takes them batch by
    batch (its bytes are the same); another format's (Parquet: a row group per write) are
    gathered and written once, as one batch per shard and output."""

    def __init__(self, work: ShardWork, out: OutputFiles) -> None:
        self._work = work
        self._out = out
        self._gathered: dict[str, tuple[list, list | None]] = {}
        #: Output name -> the start of its first batch (its file's ``start``).
        self.starts: dict[str, int] = {}

    def write(self, output: str, start: int, items: list, lines: list | None) -> None:
        self.starts.setdefault(output, start)
        if FILE_FORMATS[self._work.file_format(output)].takes_lines:
            self._out.writer(output).write(items, lines)
            return
        gathered = self._gathered.setdefault(output, ([], []))
        gathered[0].extend(items)
        if gathered[1] is not None and lines is not None:
            gathered[1].extend(lines)
        else:
            self._gathered[output] = (gathered[0], None)

    def flush(self) -> None:
        for output, (items, lines) in self._gathered.items():
            self._out.writer(output).write(items, lines)
        self._gathered.clear()


#: ``shaper(conversation, its verdict or None, settings) -> (KEPT, conversation) | (LETTERS, letter)``.
Shaper = Callable[[Conversation, Any, Any], tuple[str, Any]]


def write_shaped(
    result: ShardResult, verdicts: list[Any], work: ShardWork, temp_root: str, shaper: Shaper = shape
) -> ShardResult:
    """``result`` with its shard's shaped outputs written (one file each) from its spill, in
    input order, and summarized."""
    settings, view = work.settings, work.step.view
    names = (TRAIN, *(name for name, _ in settings.splits))
    by_order = {verdict.order: verdict for verdict in verdicts}
    decided = {order[1] for order in by_order}  # the batches (by start) that hold a verdict
    out = OutputFiles(work, numbered_place(temp_root, result.shard, 0, uuid.uuid4().hex))
    outputs = _Outputs(work, out)
    partial = result.partial
    letters: list[Any] = []
    try:
        for start, metrics, records, lines, its_letters in read_spill(result.spill):
            letters.extend(its_letters)
            if start not in decided and shaper is shape:  # every conversation kept as it is (most batches)
                shaped = batch_outputs(result.shard, start, metrics, records, lines, names)
            else:
                kept: list[Conversation] = []
                for conversation in spilled_conversations(result.shard, start, metrics, records, lines):
                    kind, value = shaper(conversation, by_order.get(conversation.order), settings)
                    (kept if kind == KEPT else letters).append(value)
                shaped = shard_outputs(result.shard, kept, names)
            for name, batch in shaped:
                if name == DROPS:
                    partial = summaries.merge(partial, view.partial(0, batch.items, []))
                outputs.write(DROPS if name == DROPS else split_output(name), batch.start, batch.items, batch.lines)
        if letters:
            letters = sorted_letters(letters)
            partial = summaries.merge(partial, view.partial(0, [], letters))
            outputs.write(DEAD_LETTER, letters[0]["position"], letters, None)
        outputs.flush()
        files = _closed(out, outputs, work, result.shard)
    except BaseException:
        out.abandon()
        raise
    return result._replace(files=files, partial=partial, spill=None)


def _closed(out: OutputFiles, outputs: _Outputs, work: ShardWork, shard: int) -> dict[str, Any]:
    """Every output's file of a shard written by the dataset step (an empty one too, as
    without --dedupe), closed: its measures, each starting where its first line was read."""
    for name in work.outputs:
        out.writer(name)
    measures = out.close()
    return {
        name: written._replace(start=outputs.starts.get(name, 0))
        for name, written in written_files(work, shard, 0, out.paths, measures).items()
    }


def rewrite_touched(result: ShardResult, verdicts: list[Any], work: ShardWork, temp_root: str) -> ShardResult:
    """``result`` of a shard whose files were written first (``ShardWork.writes_first``): as
    it is when no verdict touches it (most shards: no copy), else with its files rewritten
    from them, as ``write_shaped`` writes them from a spill: a line of a conversation without
    a verdict is copied as it is, and a dead letter's, in the order ``write_shaped`` gives."""
    done = result._replace(shaped=None, batches=b"", letter_batches=b"")
    if not verdicts:
        return done._replace(partial=summaries.merge(result.partial, result.shaped or {}))
    names = (TRAIN, *(name for name, _ in work.settings.splits))
    by_order = {verdict.order: verdict for verdict in verdicts}
    view = work.step.view
    own = [(parse_json(line), line) for line in _file_lines(result.files.get(DEAD_LETTER))]
    in_batch = memoryview(result.letter_batches).cast("q")
    # (position, batch, own letter before a duplicate, place): the stable sort by position of
    # ``write_shaped``'s letters, gathered batch by batch (its own, then its duplicates).
    letters = [((letter["position"], in_batch[at], 0, at), letter, line) for at, (letter, line) in enumerate(own)]
    out = OutputFiles(work, numbered_place(temp_root, result.shard, 0, uuid.uuid4().hex))
    outputs = _Outputs(work, out)
    partial = result.partial
    try:
        drops = ((parse_json(line), line) for line in _file_lines(result.files.get(DROPS)))
        records = {name: iter(_file_lines(result.files.get(split_output(name)))) for name in names}
        sizes = memoryview(result.batches).cast("q")
        for index in range(0, len(sizes), 2):
            start, count = sizes[index], sizes[index + 1]
            kept = _touched_batch(result.shard, start, count, drops, records, by_order, work, letters, index // 2)
            if kept[0]:
                partial = summaries.merge(partial, view.partial(0, kept[0], []))
                outputs.write(DROPS, start, kept[0], kept[1])
            for name in names:
                if kept[2][name]:
                    outputs.write(split_output(name), start, kept[2][name], kept[2][name])
        if letters:
            letters.sort(key=lambda each: each[0])
            partial = summaries.merge(partial, view.partial(0, [], [letter for _, letter, _ in letters]))
            lines = [line if line is not None else dumps_line(letter) for _, letter, line in letters]
            outputs.write(DEAD_LETTER, letters[0][1]["position"], [], lines)
        files = _closed(out, outputs, work, result.shard)
    except BaseException:
        out.abandon()
        raise
    return done._replace(files=files, partial=partial)


def _touched_batch(
    shard: int,
    start: int,
    count: int,
    drops: Iterator[tuple[Any, bytes]],
    records: dict[str, Iterator[bytes]],
    by_order: dict[Any, Any],
    work: ShardWork,
    letters: list[Any],
    batch: int,
) -> tuple[list[Any], list[bytes], dict[str, list[bytes]]]:
    """One batch of a touched shard, as its files hold it -> its kept conversations' drop
    metrics and lines and each split's record lines; its duplicates added to ``letters``."""
    metrics_out: list[Any] = []
    lines_out: list[bytes] = []
    by_split: dict[str, list[bytes]] = {name: [] for name in records}
    for offset in range(count):
        metrics, line = next(drops)
        split = metrics.get("split", TRAIN)
        record = next(records[split])
        verdict = by_order.get((shard, start, offset))
        if verdict is not None:
            conversation = Conversation(shard, start, offset, metrics, record, record)
            kind, value = shape(conversation, verdict, work.settings)
            if kind != KEPT:
                letters.append(((value["position"], batch, 1, offset), value, None))
                continue
            metrics, line, record = value.metrics, dumps_line(value.metrics), value.line
        metrics_out.append(metrics)
        lines_out.append(line)
        by_split[split].append(record)
    return metrics_out, lines_out, by_split


def _file_lines(written: Any) -> Iterator[bytes]:
    """A JSON Lines file written first (``WrittenFile`` or None): its lines, without newlines."""
    if written is None:
        return
    with files.open_input(written.temp) as handle:
        for line in handle:
            yield line[:-1] if line.endswith(b"\n") else line


#: The most buckets of content keys: a bucket holds a share of the run's claims, not a shard's.
MAX_BUCKETS = 1024


def content_buckets(shards: int) -> int:
    """Buckets of content keys for ``shards`` planned shards: four a shard (each holds about a
    quarter of a shard's claims, and they spread over workers), at most ``MAX_BUCKETS``."""
    return max(1, min(4 * shards, MAX_BUCKETS))


@beam.typehints.with_input_types(beam.typehints.Any)
@beam.typehints.with_output_types(beam.typehints.Any)
class DedupeShards(beam.PTransform):
    """Shard results with their outputs spilled -> the same results with them deduplicated
    (``--dedupe``), split (``--split``) and written."""

    def __init__(self, work: ShardWork, temp_root: str, shards: int = 1) -> None:
        super().__init__()
        self._work = work
        self._temp_root = temp_root
        self._buckets = content_buckets(shards)

    def expand(self, results):
        wholes = None
        if self._work.settings.dedupe == "prefix":
            # Every conversation's whole-content fingerprint, as a side input: a prefix that is
            # none of them is not claimed (most prefixes), so it is never shuffled.
            wholes = beam.pvalue.AsSingleton(
                # At least one shard is always planned: no default needed.
                results | "Wholes" >> beam.CombineGlobally(JoinWholes()).without_defaults()
            )
        return (
            results
            | "ByContent" >> beam.FlatMap(claimed, self._buckets, wholes)
            | "GroupContent" >> beam.GroupByKey()
            | "Resolve" >> beam.FlatMap(resolved, self._buckets)
            | "GroupKept" >> beam.GroupByKey()
            | "Collapse" >> beam.FlatMap(collapsed)
            | "GroupOutputs" >> beam.GroupByKey()
            | "WriteShaped" >> beam.ParDo(_WriteShaped(self._work, self._temp_root))
        )
