"""Calls read in parts, joined by key across records and files (``transforms.calllogs.joins``).

- The LangSmith SDK sends a run's ``post`` in one ingestion payload and its ``patch`` (the
  outputs) in a later one: ``langsmith/sdk-py-split-payloads.jsonl`` is what the Python SDK sent
  a fake LangSmith (tests/data/calllogs/SOURCES.md): five conversations, every answer in a
  payload after its question's.
- OpenTelemetry's batch log exporter cuts one span's GenAI event records over two documents, and
  the span is in a traces document apart (``otlp-split/``, hand-written after openai-v2's legacy
  events): one conversation of two calls, the second answer alone in the second document.

Before the join, the LangSmith payloads gave every conversation without its answers and a
dead letter per patch (and an ``unknown_format`` payload of patches only); the OTel export gave
the last answer alone as the conversation and the rest as ``#branch1``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_outputs import assert_same_outputs  # noqa: E402

from pipeline.cli.main import main  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "calllogs"
PAYLOADS = DATA / "langsmith" / "sdk-py-split-payloads.jsonl"
OTLP_SPLIT = DATA / "otlp-split"

SYSTEM = {"role": "system", "content": "You are brief."}
#: What the fake LangSmith was sent: each thread's questions and answers (SOURCES.md).
DRIVEN = {
    "thread-a": [("What is 2+2?", "4."), ("And times 3?", "12.")],
    "thread-b": [("Name a red fruit.", "A strawberry.")],
    "thread-c": [("Hi!", "Hello! How can I help?"), ("How are you?", "Fine, thanks.")],
    "thread-d": [("Capital of France?", "Paris.")],
    "thread-e": [("Translate 'cat' to German.", "Katze."), ("And to French?", "Chat.")],
}
OTLP_CONVERSATION = [
    SYSTEM,
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "How many people live there?"},
    {"role": "assistant", "content": "About 2.1 million."},
]


def _driven(thread: str) -> list[dict[str, Any]]:
    messages = [SYSTEM]
    for question, answer in DRIVEN[thread]:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return messages


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("part-*")) for line in part.read_bytes().splitlines()]


def _run(inputs: list[Path | str], out: Path, *extra: str) -> dict:
    args = [a for path in inputs for a in ("--input", str(path))]
    assert main([*args, "--output", str(out), "--quiet", "--no-report", *extra]) in (0, 1)
    return json.loads((out / "summary.json").read_text())


def _conversations(out: Path) -> dict[str, list[dict]]:
    return {record["id"]: record["messages"] for record in _lines(out / "normalized")}


def _payloads() -> list[dict]:
    return [json.loads(line) for line in PAYLOADS.read_text().splitlines()]


def _write(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# --------------------------------------------------------------------------------------------
# LangSmith: posts and patches in different payloads


@pytest.mark.slow
def test_the_sdks_payloads_give_every_conversation_whole(tmp_path):
    payloads = _payloads()
    # The shape the SDK sent: patches after their posts, a payload of patches alone at the end.
    assert [sorted(p) for p in payloads] == [["post"]] + [["patch", "post"]] * 4 + [["patch"]]
    summary = _run([PAYLOADS], tmp_path / "out")
    assert summary["accounted"] and summary["dead_letters"] == 0
    assert _conversations(tmp_path / "out") == {thread: _driven(thread) for thread in DRIVEN}
    calls = summary["call_logs"]
    assert calls["calls_joined"] == 8 and calls["fragments"] == 16 and calls["conversations"] == 5
    drops = {d["id"]: d["assembly"] for d in _lines(tmp_path / "out" / "drops")}
    assert drops["thread-a"]["calls"][0]["position"] == 0  # each call at its post's place


@pytest.mark.slow
def test_each_payload_in_a_file_of_its_own_and_read_backwards_gives_the_same(tmp_path):
    """Posts and patches meet wherever they are read: other files, other shards, other order."""
    reference = tmp_path / "reference"
    _run([PAYLOADS], reference)
    spread = tmp_path / "spread"
    for n, payload in enumerate(reversed(_payloads())):
        _write(spread / f"{n:02d}.jsonl", [payload])
    out = tmp_path / "out"
    _run([spread / "*.jsonl"], out)
    assert _conversations(out) == _conversations(reference)


def test_patches_without_the_threads_metadata_join_their_posts_thread(tmp_path):
    """A patch need not repeat the post's ``extra`` (the JS SDK's has no ``id`` either, only
    ``dotted_order``): the post's thread is the conversation."""
    payloads = _payloads()
    for payload in payloads:
        for patch in payload.get("patch", ()):
            patch.pop("extra")
            del patch["id"]
    out = tmp_path / "out"
    summary = _run([_write(tmp_path / "in.jsonl", payloads)], out)
    assert summary["dead_letters"] == 0
    assert _conversations(out) == {thread: _driven(thread) for thread in DRIVEN}


def test_a_patch_whose_post_was_never_read_is_a_counted_dead_letter(tmp_path):
    """The first payload (two posts) is missing: their patches meet nothing. Each is a dead
    letter with its reason; the other conversations are whole."""
    payloads = _payloads()[1:]
    out = tmp_path / "out"
    summary = _run([_write(tmp_path / "in.jsonl", payloads)], out)
    assert summary["accounted"]
    letters = _lines(out / "dead_letter")
    assert len(letters) == 2 and summary["dead_letters_by_reason"]["format_error"] == 2
    assert all("no post of this run was read" in letter["detail"] for letter in letters)
    assert {letter["position"] for letter in letters} == {0}  # the payload that held them
    assert _conversations(out) == {thread: _driven(thread) for thread in DRIVEN if thread != "thread-a"}


def test_a_post_with_no_patch_anywhere_is_read_as_before(tmp_path):
    """Without the patches, each call has its question and no answer (as the post says)."""
    posts = [{"post": p["post"]} for p in _payloads() if "post" in p]
    out = tmp_path / "out"
    summary = _run([_write(tmp_path / "in.jsonl", posts)], out)
    assert summary["dead_letters"] == 0
    assert _conversations(out)["thread-b"] == [SYSTEM, {"role": "user", "content": "Name a red fruit."}]


# --------------------------------------------------------------------------------------------
# OTel: one span's events over two log documents, the span in a third


def test_events_split_over_documents_and_their_span_make_one_call(tmp_path):
    out = tmp_path / "out"
    summary = _run([OTLP_SPLIT / "*.jsonl"], out, "--sink", "openai-finetune")
    assert summary["accounted"] and summary["dead_letters"] == 0
    records = _lines(out / "normalized")
    assert len(records) == 1, "no #branch1 of the answer alone"
    (record,) = records
    assert [(m["role"], m["content"]) for m in record["messages"]] == [
        (m["role"], m["content"]) for m in OTLP_CONVERSATION
    ]
    assert summary["call_logs"]["calls_joined"] == 2


@pytest.mark.slow
def test_the_split_export_in_any_file_order_gives_the_same(tmp_path):
    reference = tmp_path / "reference"
    _run([OTLP_SPLIT / "*.jsonl"], reference)
    moved = tmp_path / "moved"
    moved.mkdir()
    for n, path in enumerate(sorted(OTLP_SPLIT.glob("*.jsonl"), reverse=True)):
        shutil.copy(path, moved / f"{n}-{path.name}")
    out = tmp_path / "out"
    _run([moved / "*.jsonl"], out)
    assert _lines(out / "normalized") == _lines(reference / "normalized")


@pytest.mark.slow
def test_two_processes_join_the_same(tmp_path):
    inputs = [PAYLOADS, OTLP_SPLIT / "*.jsonl"]
    one, two = tmp_path / "one", tmp_path / "two"
    _run(inputs, one)
    _run(inputs, two, "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    assert_same_outputs(two, one, "two processes joining fragments")


# --------------------------------------------------------------------------------------------
# The landing-directory stream: the parts land in different windows


def _stream_windows(tmp_path: Path, landed: list[tuple[str, str, bytes]]) -> tuple[Path, dict[str, dict]]:
    """Each ``(window, name, data)`` landed, a window closed once its files landed, in order;
    the outputs and each window's emitted conversations (id -> (record, drops))."""
    from streaming_runs import jsonl
    from test_streaming_calls import _close, _land, _landed, _plan

    from pipeline.io import processed_files as processed
    from pipeline.streaming.clean import clean_landed_file

    out = tmp_path / "out"
    plan = _plan(out)
    made: dict[str, dict] = {}
    windows: dict[str, list[tuple[str, bytes]]] = {}
    for window, name, data in landed:
        windows.setdefault(window, []).append((name, data))
    for window, files in windows.items():
        for name, data in files:
            assert clean_landed_file(_landed(_land(tmp_path / "landing", name, data)), window, plan)
        done, summary = _close(out, window, plan)
        assert done == "done" and summary["accounted"], window
        directory = out / window / processed.ASSEMBLED_DIR
        pairs = zip(jsonl(directory / "normalized.jsonl"), jsonl(directory / "drops.jsonl"))
        made[window] = {record["id"]: (record, drop) for record, drop in pairs}
    assert processed.final_summary(str(out), plan.settings)["accounted"]
    return out, made


@pytest.mark.slow
def test_on_the_stream_a_patch_in_a_later_window_reemits_its_conversation_whole(tmp_path):
    """The posts of thread-a land in one window, their patches in the next (with thread-b's
    post): the second window emits thread-a again, whole, pane 1, as a batch run of both files."""
    from streaming_runs import jsonl
    from test_streaming_calls import W1, W2, _batch, _batch_assembled

    lines = PAYLOADS.read_bytes().splitlines(keepends=True)
    out, made = _stream_windows(tmp_path, [(W1, "first.jsonl", lines[0]), (W2, "second.jsonl", lines[1])])
    first, second = made[W1], made[W2]
    assert first["thread-a"][0]["messages"] == _driven("thread-a")[:-1]  # the posts alone: no last answer
    assert second["thread-a"][0]["messages"] == _driven("thread-a")
    assert second["thread-a"][1]["assembly"]["pane"] == 1
    batch = _batch(tmp_path / "batch", [tmp_path / "landing" / "first.jsonl", tmp_path / "landing" / "second.jsonl"])
    reference = {r["id"]: r for r in jsonl(_batch_assembled(batch, "normalized"))}
    assert second["thread-a"][0] == reference["thread-a"]


@pytest.mark.slow
def test_on_the_stream_events_of_one_span_in_two_windows_make_one_call(tmp_path):
    from test_streaming_calls import W1, W2

    out, made = _stream_windows(
        tmp_path,
        [
            (W1, "logs-1.jsonl", (OTLP_SPLIT / "logs-1.jsonl").read_bytes()),
            (W2, "logs-2.jsonl", (OTLP_SPLIT / "logs-2.jsonl").read_bytes()),
            (W2, "spans.jsonl", (OTLP_SPLIT / "spans.jsonl").read_bytes()),
        ],
    )
    (record, drops) = made[W2]["4b6f2c1d9e8a7b3c5d0e1f2a3b4c5d6e"]
    assert [(m["role"], m["content"]) for m in record["messages"]] == [
        (m["role"], m["content"]) for m in OTLP_CONVERSATION
    ]
    assert len(made[W2]) == 1 and drops["assembly"]["pane"] == 1


@pytest.mark.slow
def test_explain_rebuilds_a_conversation_from_its_posts_and_their_patches(tmp_path, capsys):
    """A call's entry lists the other records its parts came from (``parts``), so ``explain``
    reads the patches too and shows the conversation the run wrote."""
    out = tmp_path / "out"
    _run([PAYLOADS], out)
    drops = {d["id"]: d for d in _lines(out / "drops")}
    calls = drops["thread-c"]["assembly"]["calls"]
    lines = PAYLOADS.read_bytes().splitlines(keepends=True)
    offsets = [sum(len(line) for line in lines[:n]) for n in range(len(lines))]  # positions are bytes
    assert [c["position"] for c in calls] == [offsets[2]] * 2  # the posts' payload ...
    assert [[p["position"] for p in c["parts"]] for c in calls] == [[offsets[3]]] * 2  # ... their patches'
    assert main(["explain", str(out), "--id", "thread-c"]) == 0
    shown = capsys.readouterr().out
    assert "Fine, thanks." in shown and "assembled from 2 " in shown


@pytest.mark.slow
def test_the_library_composite_joins_posts_and_patches_before_its_groups():
    """``NormalizeConversationBatches`` in a user's own bounded pipeline: the same joins."""
    import dataclasses

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from transforms.conversations import BatchRawRecords, NormalizeConversationBatches, Unbatch
    from transforms.record.inputs import RawRecord
    from transforms.record.record_settings import Settings

    raws = [RawRecord("q", n, line) for n, line in enumerate(PAYLOADS.read_bytes().splitlines())]
    with TestPipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        out = (
            p
            | beam.Create(raws)
            | BatchRawRecords(max_batch_size=2)
            | NormalizeConversationBatches(dataclasses.replace(Settings(), calls=True))
        )
        got = out.records | Unbatch() | beam.Map(lambda r: (r["id"], json.dumps(r["messages"], sort_keys=True)))
        expected = [(t, json.dumps(_driven(t), sort_keys=True)) for t in DRIVEN]
        assert_that(got, equal_to(expected))


@pytest.mark.slow
def test_under_redact_the_parts_still_meet_and_no_find_is_written(tmp_path):
    """--redact: each part (a post, a patch) is redacted as it is read, the run id by its
    placeholder on both sides, so they still meet; the email of a question and of an answer is
    in no byte written."""
    secret, answer_secret = "someone@example.com", "other@example.org"
    text = PAYLOADS.read_text().replace("Name a red fruit.", f"Name a red fruit, {secret}.")
    text = text.replace("A strawberry.", f"A strawberry, {answer_secret}.")
    out = tmp_path / "out"
    summary = _run(
        [_write(tmp_path / "in.jsonl", [json.loads(line) for line in text.splitlines()])], out, "--redact", "emails"
    )
    assert summary["dead_letters"] == 0 and summary["call_logs"]["calls_joined"] == 8
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert secret.encode() not in written and answer_secret.encode() not in written
    thread = _conversations(out)["thread-b"]
    assert [m["role"] for m in thread] == ["system", "user", "assistant"]
    assert "strawberry" in thread[-1]["content"] and "@" not in thread[-1]["content"]
