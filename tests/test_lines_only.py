"""A JSON Lines run carries each record as its line (``lines_only``): the same bytes, fewer objects.

The job's normalizing DoFn drops each output record once its line is made when the file writer
takes lines (``pipeline.graph.build``: JSON Lines), so a batch's records do not stay alive until the
batch is written. What reaches the writer must be what it would have written from the records:
the same lines, in order, with the same drops and dead letters, renames of a unique field
included (the golden tests hold whole runs to their digests).
"""

from __future__ import annotations

import orjson

from transforms.conversations import NORMALIZE, RouteConversations
from transforms.core.jsontext import dumps_line
from transforms.record.inputs import Batch, RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import normalize_batch

RECORDS = [
    {
        "id": "a",
        "custom_id": "x",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "o"}],
    },
    {"id": "b", "custom_id": "x", "messages": [{"role": "tool", "content": "r", "tool_call_id": "c1"}, "junk"]},
    {
        "id": "c",
        "custom_id": "x",
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
    },
    "not a record",
]
RAW = [RawRecord("in.jsonl", i, orjson.dumps(r)) for i, r in enumerate(RECORDS)]


def test_a_batch_without_its_records_has_the_same_lines_metrics_and_dead_letters():
    settings = Settings()
    kept = normalize_batch(RAW, settings, taken={})
    lean = normalize_batch(RAW, settings, taken={}, keep_records=False)
    assert lean.records == []
    assert lean.lines == kept.lines == [dumps_line(r) for r in kept.records]
    assert (lean.metrics, lean.dead_letters) == (kept.metrics, kept.dead_letters)


def test_renaming_a_unique_field_still_happens_without_kept_records():
    settings = Settings(sink="openai-batch", model="m", id_field="custom_id")
    kept = normalize_batch(RAW, settings, taken={})
    lean = normalize_batch(RAW, settings, taken={}, keep_records=False)
    assert [orjson.loads(line)["custom_id"] for line in lean.lines] == ["x", "x~2"]
    assert lean.lines == kept.lines
    assert lean.metrics == kept.metrics  # the rename is counted in the writer report


def test_the_dofn_hands_the_writer_lines_as_items():
    settings = Settings()

    def outputs(lines_only):
        route = RouteConversations(NORMALIZE, settings, lines_only)
        route.setup()
        route.start_bundle()
        return list(route.process(Batch(3, 0, RAW)))

    lean, kept = outputs(True), outputs(False)
    main_lean, main_kept = lean[0], kept[0]
    assert main_lean.items == main_lean.lines == main_kept.lines
    assert main_kept.items == [orjson.loads(line) for line in main_kept.lines]
    # Drops, dead letters: the same, but for the scope each run of the DoFn stamps (never written).
    assert [o.value._replace(scope=0) for o in lean[1:]] == [o.value._replace(scope=0) for o in kept[1:]]
