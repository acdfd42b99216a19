"""The bundled per-format samples (samples/formats): sizes, detection, defects, writers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import provider_shapes as shapes  # noqa: E402

from transforms.core.normalize import normalize_conversation  # noqa: E402
from transforms.core.validate import check_sendable  # noqa: E402
from transforms.formats import READERS, WRITERS, FormatError, WriteContext, detect_reader  # noqa: E402

SAMPLES = ROOT / "samples" / "formats"
FORMATS = ("openai", "openai-responses", "anthropic", "sharegpt", "gemini")
CHECKS = {
    "openai-finetune": shapes.openai_finetune_errors,
    "openai-batch": shapes.openai_batch_errors,
    "anthropic": shapes.anthropic_request_errors,
    "openai-responses": shapes.openai_responses_errors,
    "gemini": shapes.gemini_request_errors,
}  # sharegpt: checked with its refusals in test_formats_e2e
REFUSED = {
    ("rs-custom-tool", "anthropic"): "args_not_json",
    ("rs-custom-tool", "gemini"): "args_not_json",
    ("rs-custom-tool", "openai-finetune"): "unconvertible_tool",  # fine-tuning takes function tools only
    # Opens with the model's turn (a compressed history): Anthropic, Gemini and Converse want a user first.
    ("gm-compressed-history", "anthropic"): "leading_assistant",
    ("gm-compressed-history", "gemini"): "leading_assistant",
    ("gm-compressed-history", "bedrock-converse"): "leading_assistant",
}  # free-text custom tool input


def load(fmt: str) -> list:
    with (SAMPLES / f"{fmt}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.mark.parametrize("fmt", FORMATS)
def test_sample_file_is_small_realistic_and_has_defects(fmt):
    records = load(fmt)
    assert 5 <= len(records) <= 30
    ids = [r["id"] for r in records]
    assert len(set(ids)) == len(ids)
    repaired = 0
    for record in records:
        assert detect_reader(record, "messages").name == fmt, record["id"]
        result = normalize_conversation(READERS[fmt].read(record, "messages").messages)
        repaired += bool(result.dropped or result.healed)
    assert 0 < repaired < len(records)


@pytest.mark.parametrize("sink", sorted(CHECKS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_samples_write_provider_valid_records(fmt, sink):
    for record in load(fmt):
        conversation = READERS[fmt].read(record, "messages")
        normalized = dict(conversation.fields)
        normalized["messages"] = normalize_conversation(conversation.messages).messages
        context = WriteContext(record["id"], model="test-model")
        refused = REFUSED.get((record["id"], sink))
        if refused:
            with pytest.raises(FormatError) as err:
                WRITERS[sink].write(normalized, context)
            assert err.value.reason == refused
            continue
        assert CHECKS[sink](WRITERS[sink].write(normalized, context)) == [], record["id"]


def test_toolbench_records_are_the_longest_prefix_of_their_file():
    records = {r["id"]: r for r in load("openai")}
    copies = sorted((ROOT / "tests" / "data" / "corpora" / "ToolBench").rglob("*.json"))
    checked = 0
    for path in copies:
        generation = json.loads(path.read_text(encoding="utf-8"))["answer_generation"]
        if not generation.get("train_messages"):
            continue
        group = path.parent.name.split("_")[0]
        record = records[f"toolbench-{group}-{path.name.split('_')[0]}"]
        assert record["messages"] == max(generation["train_messages"], key=len)
        assert record["functions"] == generation["function"]
        checked += 1
    assert checked == 5
    assert sum(r["id"].startswith("toolbench-") for r in records.values()) == 13


@pytest.mark.parametrize("sink", ["openai-finetune", "openai-batch"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_openai_output_of_the_samples_validates_as_it_is(fmt, sink):
    # What `convnorm validate` does with the job's output: auto-detect, read, check as it is.
    for record in load(fmt):
        conversation = READERS[fmt].read(record, "messages")
        normalized = dict(conversation.fields)
        normalized["messages"] = normalize_conversation(conversation.messages).messages
        if REFUSED.get((record["id"], sink)):
            continue  # refused, and tested so above
        out = WRITERS[sink].write(normalized, WriteContext(record["id"], model="test-model"))
        reader = detect_reader(out, "messages")
        assert check_sendable(reader.read(out, "messages").messages) == [], record["id"]
