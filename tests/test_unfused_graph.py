"""``NormalizeConversation`` (the public DoFn) says which run of its state made each batch
(``Batch.scope``): a unique field (openai-batch's ``custom_id``) is kept unique among the
records of one shard in one bundle, so a writer of the DoFn's outputs in a pipeline of the
user's starts a new file when the scope changes. (convnorm's own job reads, normalizes and
writes a shard in one step, ``pipeline.graph.shard_step``: no fusion is relied on there.)
"""

from __future__ import annotations

import json

from transforms.conversations import NormalizeConversation
from transforms.record.inputs import Batch, RawRecord


def _record(i: int) -> RawRecord:
    line = {"id": "same-id", "messages": [{"role": "user", "content": f"question {i}"}]}
    return RawRecord("in.jsonl", i * 100, json.dumps(line).encode())


def test_a_normalizer_keeps_one_scope_for_a_shard_within_a_bundle():
    # One bundle, one shard, one scope, so one file.
    normalize = NormalizeConversation(sink="openai-batch", model="gpt-4o-mini")
    normalize.setup()
    normalize.start_bundle()

    def scope(shard: int, start: int) -> int:
        (records,) = [out for out in normalize.process(Batch(shard, start, [_record(start)])) if isinstance(out, Batch)]
        return records.scope

    first, second, other = scope(0, 0), scope(0, 100), scope(1, 0)
    assert first == second != other
    normalize.start_bundle()
    assert scope(0, 200) != first  # a new bundle: a new scope, so a new file
