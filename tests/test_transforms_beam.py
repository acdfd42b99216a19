"""The Beam layer on FnApiRunner: outputs routed by tag, counters and distributions readable."""

from __future__ import annotations

import json

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipeline.graph.conversation_batches import NormalizeConversationBatches
from pipeline.io.planning import plan_shards
from transforms.conversations import Unbatch
from transforms.record.inputs import Batch, RawRecord
from transforms.record.record_settings import Settings
from transforms.totals.counters import NAMESPACE

GOOD = {
    "id": "g",
    "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "s"}]},
    ],
}
ORPHAN = {
    "id": "o",
    "messages": [
        {"role": "tool", "content": "x", "tool_call_id": "nope"},
        "junk",
        {"role": "user", "content": "hi"},
    ],
}


def _options():
    return PipelineOptions(["--runner=FnApiRunner"])


def _batch(shard, *payloads):
    items = [
        RawRecord(f"s{shard}.jsonl", i, p if isinstance(p, bytes) else json.dumps(p).encode())
        for i, p in enumerate(payloads)
    ]
    return Batch(shard, 0, items)


def test_three_outputs_by_tag():
    with BeamTestPipeline(options=_options()) as p:
        batches = p | beam.Create([_batch(0, GOOD, b"{oops"), _batch(1, ORPHAN)])
        out = batches | NormalizeConversationBatches(Settings())
        records = out.records | "R" >> Unbatch()
        drops = out.drops | "D" >> Unbatch()
        dead = out.dead_letters | "L" >> Unbatch()
        assert_that(
            records | beam.Map(lambda r: (r["id"], len(r["messages"]))), equal_to([("g", 3), ("o", 1)]), label="records"
        )
        assert_that(
            drops | beam.Map(lambda m: (m["id"], m["dropped"], m["healed"], tuple(m["drops"].items()))),
            equal_to([("g", 0, 1, ()), ("o", 2, 0, (("not_an_object", 1), ("orphan_result", 1)))]),
            label="drops",
        )
        assert_that(
            dead | beam.Map(lambda d: (d["source"], d["position"], d["reason"])),
            equal_to([("s0.jsonl", 1, "invalid_json")]),
            label="dead",
        )


def test_batches_keep_their_shard_and_start():
    with BeamTestPipeline(options=_options()) as p:
        out = (
            p
            | beam.Create([Batch(7, 40, [RawRecord("f", 40, b'{"messages": []}')])])
            | NormalizeConversationBatches(Settings())
        )
        assert_that(out.records | beam.Map(lambda b: (b.shard, b.start, len(b.items))), equal_to([(7, 40, 1)]))


def _counters(result):
    found = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    return {c.key.metric.name: c.committed for c in found["counters"]}, {
        d.key.metric.name: d.committed for d in found["distributions"]
    }


def test_counters_and_distributions_on_fnapirunner():
    p = beam.Pipeline(options=_options())
    batches = p | beam.Create([_batch(0, GOOD, b"{oops", ORPHAN), _batch(1, [1, 2])])
    batches | NormalizeConversationBatches(Settings())
    result = p.run()
    result.wait_until_finish()
    counters, distributions = _counters(result)
    assert counters["records_in"] == 4
    assert counters["records_out"] == 3
    assert counters["dead_letters"] == 1
    assert counters["dead_letter_invalid_json"] == 1
    assert counters["dropped"] == 4  # ORPHAN: 2; bare list of two integers: 2
    assert counters["dropped_not_an_object"] == 3
    assert counters["dropped_orphan_result"] == 1
    assert counters["healed"] == 1
    assert counters["messages_in"] == 2 + 3 + 2
    assert counters["messages_out"] == 3 + 1 + 0
    messages = distributions["messages_per_conversation"]
    assert (messages.count, messages.sum, messages.min, messages.max) == (3, 7, 2, 3)
    drops = distributions["drops_per_conversation"]
    assert (drops.count, drops.sum, drops.max) == (3, 4, 2)


def _process_shards(tmp_path, step, settings):
    """The job's graph (``ProcessShards``) on the file of GOOD, bad JSON, a blank line, ORPHAN
    and a number: the PCollection of its summary document."""
    from pipeline.graph.per_shard import ProcessShards
    from pipeline.graph.shard_step import ShardWork

    lines = [json.dumps(GOOD), "not json", "", json.dumps(ORPHAN), "7"]
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    shards = plan_shards([str(tmp_path / "in.jsonl")])
    temp = tmp_path / "temp"
    return lambda p: (
        p
        | step.label
        >> ProcessShards(shards, ShardWork(step, settings, batch_size=2), str(temp), str(temp / "summary.json"))
    )


def test_the_graph_reads_files_and_its_summary_accounts_for_every_record(tmp_path):
    from transforms.conversations import NORMALIZE

    process = _process_shards(tmp_path, NORMALIZE, Settings())
    with BeamTestPipeline(options=_options()) as p:
        summary = process(p)
        assert_that(
            summary
            | beam.Map(
                lambda s: (
                    s["records_in"],
                    s["records_out"],
                    s["dead_letters"],
                    s["blank_lines"],
                    s["accounted"],
                    s["dropped"],
                )
            ),
            equal_to([(4, 2, 2, 1, True, 2)]),
        )


def test_validate_is_the_same_graph_and_accounts_for_every_record(tmp_path):
    from transforms.conversations import CHECK

    process = _process_shards(tmp_path, CHECK, Settings())
    with BeamTestPipeline(options=_options()) as p:
        summary = process(p)
        assert_that(
            summary
            | beam.Map(
                lambda s: (
                    s["records_in"],
                    s["conversations_checked"],
                    s["dead_letters"],
                    s["conversations_with_violations"],
                    s["accounted"],
                    s["sendable"],
                )
            ),
            equal_to([(4, 2, 2, 2, True, False)]),
        )  # GOOD: unanswered call; ORPHAN


@pytest.mark.parametrize("profile", ["spec", "lossless"])
def test_profile_reaches_the_dofn(profile):
    reused = {
        "id": "r",
        "messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "a"}]},
            {"role": "tool", "content": "one", "tool_call_id": "c1"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "b"}]},
            {"role": "tool", "content": "two", "tool_call_id": "c1"},
        ],
    }
    with BeamTestPipeline(options=_options()) as p:
        out = p | beam.Create([_batch(0, reused)]) | NormalizeConversationBatches(Settings(profile=profile))
        kept = (
            out.records | Unbatch() | beam.Map(lambda r: [m["content"] for m in r["messages"] if m["role"] == "tool"])
        )
        assert_that(kept, equal_to([["one", "two"]] if profile == "lossless" else [["one"]]))


def test_unbounded_input_through_batch_raw_records():
    """The normalizing composite on a stream (TestStream needs the bundle-based direct runner)."""
    from apache_beam.testing.test_stream import TestStream

    from transforms.conversations import BatchRawRecords

    stream = (
        TestStream()
        .add_elements([RawRecord("queue", 0, json.dumps(GOOD).encode()), RawRecord("queue", 1, b"bad")])
        .advance_watermark_to(10)
        .add_elements([RawRecord("queue", 2, json.dumps(ORPHAN).encode())])
        .advance_watermark_to_infinity()
    )
    options = PipelineOptions(["--runner=BundleBasedDirectRunner", "--streaming"])
    with BeamTestPipeline(options=options) as p:
        out = p | stream | BatchRawRecords(max_batch_size=8) | NormalizeConversationBatches(Settings())
        assert_that(out.records | "R" >> Unbatch() | beam.Map(lambda r: r["id"]), equal_to(["g", "o"]), label="records")
        assert_that(
            out.drops | "D" >> Unbatch() | beam.Map(lambda m: (m["id"], m["dropped"])),
            equal_to([("g", 0), ("o", 2)]),
            label="drops",
        )
        assert_that(
            out.dead_letters | "L" >> Unbatch() | beam.Map(lambda d: (d["position"], d["reason"])),
            equal_to([(1, "invalid_json")]),
            label="dead",
        )


def test_every_counter_the_jobs_report_is_listed_in_counter_names(tmp_path):
    # COUNTER_NAMES is the documented list (docs/operations.md): a counter a DoFn reports but
    # the list leaves out (shards_read, the validate counters once) is undocumented.
    from transforms.conversations import CHECK, NORMALIZE
    from transforms.totals.counters import COUNTER_NAMES

    p = beam.Pipeline(options=_options())
    _process_shards(tmp_path / "run", NORMALIZE, Settings(check=True))(p)
    _process_shards(tmp_path / "check", CHECK, Settings())(p)
    result = p.run()
    result.wait_until_finish()
    counters, _ = _counters(result)
    assert {
        "records_in",
        "shards_read",
        "blank_lines",
        "conversations_checked",
        "conversations_with_violations",
    } <= set(counters)
    assert set(counters) <= {name for name, _ in COUNTER_NAMES}


def test_composites_declare_batches_and_refuse_other_elements_when_built():
    # Beam checks the declared type hints while the graph is built (the default type check):
    # a composite applied to something that is not batches fails there, not in a worker.
    from apache_beam.typehints.decorators import TypeCheckError

    from pipeline.graph.conversation_batches import CheckConversationBatches

    p = beam.Pipeline(options=_options())
    batches = p | "Batches" >> beam.Create([_batch(0, GOOD)])
    out = batches | NormalizeConversationBatches(Settings())
    assert out.records.element_type is Batch
    dicts = p | "Dicts" >> beam.Create([{"id": "x"}])
    for label, transform in (
        ("N", NormalizeConversationBatches(Settings())),
        ("C", CheckConversationBatches(Settings())),
        ("U", Unbatch()),
    ):
        with pytest.raises(TypeCheckError, match="Batch"):
            dicts | label >> transform
