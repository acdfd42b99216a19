"""``--dedupe``: one chain of steps after the per-shard step, no tagged output, one leaf (what
every runner, DaskRunner included, can run).

::

    ShardResult (outputs held) | by shard | GroupByKey | conversations by content key
                               | GroupByKey | resolve | by kept one | GroupByKey | collapse
                               | by shard | GroupByKey | each shard's outputs written (a ShardResult)

The per-shard step holds a shard's outputs instead of writing them (``ShardWork.holds``); the
conversations are brought together by plain functions (``transforms.record.dedupe``), and each
shard's kept conversations, split by ``--split``, its drop metrics and its dead letters (the
duplicates' included) are written and summarized here. Every key says what it holds
(``_SHARD``, ``_CONTENT``, ``_KEPT``, ``_OUT``): a shard's result and dead letters travel under
``_OUT`` through the content shuffles untouched. A ``--split`` alone needs none of this: the
per-shard step writes each split's records itself.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import apache_beam as beam

from pipeline.graph.shard_step import OutputFiles, ShardResult, ShardWork, numbered_place, written_files
from pipeline.testhooks import pause_point
from transforms.conversations import DEAD_LETTER
from transforms.dataset.dataset_keys import TRAIN, split_output
from transforms.record.dedupe import (
    DROPS,
    LETTERS,
    RECORDS,
    collapse_kept,
    content_claims,
    resolve_content,
    shard_conversations,
    shard_outputs,
)
from transforms.totals import summary as summaries

_SHARD, _CONTENT, _KEPT, _OUT = "shard", "content", "kept", "out"
_RESULT, _LETTER_BATCH = "result", "letter-batch"


def held_by_shard(result: ShardResult, main_output: str) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A shard's result (its held outputs taken off) and each held batch, keyed by its shard."""
    key = (_SHARD, result.shard)
    yield key, (_RESULT, result._replace(held=()))
    for name, batch in result.held:
        yield key, (RECORDS if name == main_output else DROPS if name != DEAD_LETTER else _LETTER_BATCH, batch)


def claims(element: tuple[tuple[Any, ...], Any]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A shard's batches -> its result and dead letters (kept by shard), and its conversations
    under each content key they claim (``transforms.record.dedupe.content_claims``)."""
    (_, shard), values = element
    out, tagged = (_OUT, shard), []
    for tag, value in values:
        if tag == _RESULT:
            yield out, (_RESULT, value)
        elif tag == _LETTER_BATCH:
            for letter in value.items:
                yield out, (LETTERS, letter)
        else:
            tagged.append((tag, value))
    for conversation in shard_conversations((shard, tagged)):
        for content, claim in content_claims(conversation):
            yield (_CONTENT, content), claim


def _passed(key: tuple[Any, ...], values: Any) -> Iterator[tuple[tuple[Any, ...], Any]]:
    for value in values:
        yield key, value


def resolved(element: tuple[tuple[Any, ...], Any]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A content key's claims -> what each conversation is, under the key of the one kept."""
    key, values = element
    if key[0] != _CONTENT:
        yield from _passed(key, values)
        return
    for target, value in resolve_content((key[1], values)):
        yield (_KEPT, target), value


def collapsed(element: tuple[tuple[Any, ...], Any], work: ShardWork) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A kept conversation and those collapsed into it -> each, by its shard (a ``duplicate``
    dead letter for each collapsed one)."""
    key, values = element
    if key[0] != _KEPT:
        yield from _passed(key, values)
        return
    for shard, value in collapse_kept((key[1], values), work.settings):
        yield (_OUT, shard), value


class _WriteShaped(beam.DoFn):
    """A shard's result, kept conversations and dead letters -> that result with its files
    written and its drop metrics and dead letters summarized."""

    def __init__(self, work: ShardWork, temp_root: str) -> None:
        self._work = work
        self._temp_root = temp_root

    def process(self, element):
        (_, shard), values = element
        values = list(values)
        (result,) = [value for tag, value in values if tag == _RESULT]
        yield write_shaped(result, values, self._work, self._temp_root)
        pause_point("write")


def write_shaped(result: ShardResult, values: list[tuple[str, Any]], work: ShardWork, temp_root: str) -> ShardResult:
    """``result`` with its shard's shaped outputs written (one file each) and summarized."""
    settings, step = work.settings, work.step
    names = (TRAIN, *(name for name, _ in settings.splits))
    out = OutputFiles(work, numbered_place(temp_root, result.shard, 0, uuid.uuid4().hex))
    starts: dict[str, int] = {}
    metrics: list[Any] = []
    letters: list[Any] = []
    try:
        for name, batch in shard_outputs(result.shard, values, names):
            output = {DROPS: DROPS, LETTERS: DEAD_LETTER}.get(name) or split_output(name)
            if output == DROPS:
                metrics = batch.items
            elif output == DEAD_LETTER:
                letters = batch.items
            starts[output] = batch.start
            out.writer(output).write(batch.items, batch.lines)
        measures = out.close()
    except BaseException:
        out.abandon()
        raise
    files = {
        name: written._replace(start=starts[name])
        for name, written in written_files(work, result.shard, 0, out.paths, measures).items()
    }
    partial = summaries.merge(result.partial, step.view.partial(0, metrics, letters))
    return result._replace(files=files, partial=partial)


@beam.typehints.with_input_types(beam.typehints.Any)
@beam.typehints.with_output_types(beam.typehints.Any)
class DedupeShards(beam.PTransform):
    """Shard results with their outputs held -> the same results with them deduplicated
    (``--dedupe``), split (``--split``) and written."""

    def __init__(self, work: ShardWork, temp_root: str) -> None:
        super().__init__()
        self._work = work
        self._temp_root = temp_root

    def expand(self, results):
        work = self._work
        return (
            results
            | "ByShard" >> beam.FlatMap(held_by_shard, work.step.main_output)
            | "GroupShards" >> beam.GroupByKey()
            | "ByContent" >> beam.FlatMap(claims)
            | "GroupContent" >> beam.GroupByKey()
            | "Resolve" >> beam.FlatMap(resolved)
            | "GroupKept" >> beam.GroupByKey()
            | "Collapse" >> beam.FlatMap(collapsed, work)
            | "GroupOutputs" >> beam.GroupByKey()
            | "WriteShaped" >> beam.ParDo(_WriteShaped(work, self._temp_root))
        )
