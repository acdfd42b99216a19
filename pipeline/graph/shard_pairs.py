"""``--sink trl-dpo``: pairs across conversations of one prompt, one chain of steps after the
per-shard step, no tagged output, one leaf (what every runner, DaskRunner included, can run).
Only claims and verdicts are shuffled.

::

    ShardResult (outputs spilled, claims) | claims by bucket of prompt keys | GroupByKey
            | decide each prompt's pairs: verdicts by shard
            | GroupByKey (each shard's result and verdicts) | each shard's outputs written from its spill

The per-shard step writes a shard's outputs to a spill file (``pipeline.graph.shard_step``) and
its result carries its candidates' claims (``transforms.record.pairs.PairClaim``: prompt key,
preference, the judged continuation, place, id), no record. Each prompt's claims meet and
``transforms.record.pairs.decide_pairs`` gives every candidate its verdict; each shard's result
and verdicts then meet, and ``pipeline.graph.shard_dataset.write_shaped`` writes the shard's
outputs from its spill with ``transforms.record.pairs.shape_pair``: a pair's row gets the
chosen continuation, a candidate in no pair becomes a dead letter saying why. A conversation
with a pair of its own (a correction, a rejected output) is no candidate and is written as it is.
"""

from __future__ import annotations

from typing import Any, Iterator

import apache_beam as beam

from pipeline.graph.shard_dataset import _OUT, _RESULT, _VERDICT, _WriteShaped, bucket_of, content_buckets
from pipeline.graph.shard_step import ShardResult, ShardWork
from transforms.record.dedupe import pack, unpack
from transforms.record.pairs import PairClaim, decide_routed, shape_pair

_PROMPT = "prompt"


def claimed_prompts(result: ShardResult, buckets: int) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A shard's result (its claims taken off), by its shard; its claims under the bucket of
    their route (a prompt, or a call-log group: ``PairClaim.route``), a list per bucket."""
    yield (_OUT, result.shard), (_RESULT, result._replace(claims=b""))
    by_bucket: dict[int, list[Any]] = {}
    for claim in unpack(result.claims) if result.claims else ():
        by_bucket.setdefault(bucket_of(PairClaim(*claim).route, buckets), []).append(claim)
    for bucket in sorted(by_bucket):
        yield (_PROMPT, bucket), pack(by_bucket[bucket])


def decided(element: tuple[tuple[Any, ...], Any]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """A bucket's claims -> each route's verdicts, a list per shard; a shard's result passes."""
    key, values = element
    if key[0] != _PROMPT:
        for value in values:
            yield key, value
        return
    by_route: dict[str, list[PairClaim]] = {}
    for packed in values:
        for fields in unpack(packed):
            claim = PairClaim(*fields)
            by_route.setdefault(claim.route, []).append(claim)
    by_shard: dict[int, list[Any]] = {}
    for route in sorted(by_route):
        for shard, verdict in decide_routed(by_route[route]):
            by_shard.setdefault(shard, []).append(verdict)
    for shard in sorted(by_shard):
        yield (_OUT, shard), (_VERDICT, by_shard[shard])


@beam.typehints.with_input_types(beam.typehints.Any)
@beam.typehints.with_output_types(beam.typehints.Any)
class PairShards(beam.PTransform):
    """Shard results with their outputs spilled -> the same results with their candidates
    paired across conversations (``--sink trl-dpo``), split (``--split``) and written."""

    def __init__(self, work: ShardWork, temp_root: str, shards: int = 1) -> None:
        super().__init__()
        self._work = work
        self._temp_root = temp_root
        self._buckets = content_buckets(shards)

    def expand(self, results):
        return (
            results
            | "ByPrompt" >> beam.FlatMap(claimed_prompts, self._buckets)
            | "GroupPrompts" >> beam.GroupByKey()
            | "Decide" >> beam.FlatMap(decided)
            | "GroupOutputs" >> beam.GroupByKey()
            | "WriteShaped" >> beam.ParDo(_WriteShaped(self._work, self._temp_root, shape_pair))
        )
