"""The design card's DoFn, NormalizeConversation, used as a user would: in their own pipeline,
after ReadFromText, with .with_outputs(...); the same records as convnorm's own run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from pipeline.cli.main import main
from transforms.conversations import CheckConversation, NormalizeConversation
from transforms.core.jsontext import dumps_line
from transforms.record.record_settings import Settings
from transforms.totals.counters import NAMESPACE

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _without_place(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in ("source", "position")}


@pytest.fixture(scope="module")
def convnorm_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("convnorm") / "out"
    assert (
        main(["--input", str(SAMPLE), "--output", str(out), "--sink", "openai-finetune", "--quiet", "--no-report"]) == 0
    )
    return out


def doc_example() -> str:
    """The example of docs/operations.md ("NormalizeConversation in your own pipeline")."""
    text = (ROOT / "docs" / "operations.md").read_text()
    found = re.search(r"<!-- example: normalize-conversation[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert found, "docs/operations.md lost its NormalizeConversation example"
    return found.group(1)


@pytest.mark.slow
def test_the_documented_pipeline_gives_what_convnorm_writes(tmp_path, convnorm_run):
    # The docs' example, run as a user runs it: a script in a directory holding the sample.
    (tmp_path / "samples").mkdir()
    shutil.copy(SAMPLE, tmp_path / "samples" / "conversations.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", doc_example()], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]

    def lines(prefix: str) -> list[str]:
        return sorted(
            line for f in sorted((tmp_path / "clean").glob(prefix + "-*")) for line in f.read_text().splitlines()
        )

    def files(kind: str) -> list[str]:
        return sorted(line for f in sorted((convnorm_run / kind).glob("part-*")) for line in f.read_text().splitlines())

    # The records as convnorm writes them (order aside: ReadFromText does not keep it).
    ours = [json.loads(line) for line in lines("records")]
    assert len(ours) == 301
    assert sorted(dumps_line(r).decode() for r in ours) == files("normalized")
    # Drop metrics as convnorm's, but for the place in the file, which ReadFromText does not give.
    ours = [json.loads(line) for line in lines("drops")]
    theirs = [json.loads(line) for line in files("drops")]
    assert {item["position"] for item in ours} == {NormalizeConversation.UNKNOWN_POSITION}
    assert {item["source"] for item in ours} == {""}
    assert sorted(map(json.dumps, map(_without_place, ours))) == sorted(map(json.dumps, map(_without_place, theirs)))
    # A parser's detail may name another column: ReadFromText hands the line without its newline.
    ours = [json.loads(line) for line in lines("dead_letter")]
    theirs = [json.loads(line) for line in files("dead_letter")]
    assert len(ours) == 6
    assert sorted((d["reason"], d["raw"]) for d in ours) == sorted((d["reason"], d["raw"]) for d in theirs)


@pytest.mark.slow
def test_file_names_dicts_blank_lines_and_counters():
    good = {"id": "g", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    orphan = {"id": "o", "messages": [{"role": "tool", "content": "x", "tool_call_id": "nope"}]}
    p = beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"]))
    elements = [("logs/a.jsonl", json.dumps(good)), orphan, "   ", b"{oops"]
    out = (
        p
        | beam.Create(elements, reshuffle=False)
        | beam.ParDo(NormalizeConversation(source="stream")).with_outputs(
            NormalizeConversation.DROPS, NormalizeConversation.DEAD_LETTER, main="records"
        )
    )
    assert_that(out.records | "Ids" >> beam.Map(lambda r: r["id"]), equal_to(["g", "o"]), label="records")
    assert_that(
        out[NormalizeConversation.DROPS] | "Drops" >> beam.Map(lambda m: (m["id"], m["source"], m["dropped"])),
        equal_to([("g", "logs/a.jsonl", 0), ("o", "stream", 1)]),
        label="drops",
    )
    assert_that(
        out[NormalizeConversation.DEAD_LETTER] | "Letters" >> beam.Map(lambda d: (d["source"], d["reason"])),
        equal_to([("stream", "invalid_json")]),
        label="dead letters",
    )
    result = p.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    }
    assert counters["records_in"] == 3 and counters["records_out"] == 2 and counters["dead_letters"] == 1
    assert counters["blank_lines"] == 1 and counters["dropped"] == 1


def test_bad_settings_fail_where_the_pipeline_is_built():
    with pytest.raises(ValueError, match="unknown sink 'nope'"):
        NormalizeConversation(sink="nope")
    with pytest.raises(ValueError, match="unknown profile"):
        NormalizeConversation(Settings(profile="nope"))
    with pytest.raises(TypeError):
        NormalizeConversation(Settings(), sink="flat")
    assert NormalizeConversation(sink="openai-batch", model="m").step.main_output == "normalized"


def test_check_conversation_reports_violations_of_a_single_record():
    fn = CheckConversation()
    fn.setup()
    fn.start_bundle()
    orphan = {"id": "o", "messages": [{"role": "tool", "content": "x", "tool_call_id": "nope"}]}
    (report,) = list(fn.process(json.dumps(orphan)))
    assert report["id"] == "o" and report["violations"]
    (letter,) = list(fn.process("{oops"))
    assert letter.tag == CheckConversation.DEAD_LETTER and letter.value["reason"] == "invalid_json"
