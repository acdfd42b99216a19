"""The job end to end from every reader to every writer on the bundled format samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pytest
from provider_shapes import (
    anthropic_request_errors,
    bedrock_request_errors,
    gemini_request_errors,
    openai_batch_errors,
    openai_finetune_errors,
    openai_responses_errors,
    sharegpt_training_errors,
)

from pipeline.cli.main import main
from transforms.formats import READERS, WRITERS, detect_reader
from transforms.formats.trl import TRL_SINKS

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "formats"
SAMPLE_FILES = {name: SAMPLES / f"{name}.jsonl" for name in READERS if name != "flat"}

SHAPE_CHECKS = {
    "openai-finetune": openai_finetune_errors,
    "openai-batch": openai_batch_errors,
    "anthropic": anthropic_request_errors,
    "sharegpt": sharegpt_training_errors,
    "openai-responses": openai_responses_errors,
    "gemini": gemini_request_errors,
    "bedrock-converse": bedrock_request_errors,
}


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _outputs(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for p in sorted((out / name).glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def test_every_provider_reader_has_a_sample():
    assert set(SAMPLE_FILES) == {
        "braintrust",
        "openpipe-dataset",
        "openai",
        "openai-responses",
        "anthropic",
        "sharegpt",
        "gemini",
        "bedrock-converse",
        "cohere-v1",
    }
    for path in SAMPLE_FILES.values():
        assert path.exists(), path


@pytest.mark.parametrize("reader", sorted(SAMPLE_FILES))
def test_auto_detection_picks_each_samples_own_reader(reader):
    for record in _records(SAMPLE_FILES[reader]):
        assert detect_reader(record).name == reader, record.get("id")


class WriterRun(NamedTuple):
    out: Path
    status: int


@pytest.fixture(scope="module")
def writer_run(tmp_path_factory):
    """``writer_run(writer)``: the job on every format sample with that sink, run once per
    writer for the tests below (each asserts on the same run's outputs)."""
    runs: dict[str, WriterRun] = {}

    def run(writer: str) -> WriterRun:
        if writer not in runs:
            out = tmp_path_factory.mktemp("writers") / writer
            argv = [
                "--input",
                str(SAMPLES / "*.jsonl"),
                "--output",
                str(out),
                "--sink",
                writer,
                "--model",
                "test-model",
                "--max-tokens",
                "512",
            ]
            runs[writer] = WriterRun(out, main(argv))
        return runs[writer]

    return run


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_all_readers_to_writer(writer, writer_run):
    out, status = writer_run(writer)
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())
    expected = sum(len(_records(p)) for p in SAMPLE_FILES.values())
    assert summary["records_in"] == expected
    assert summary["accounted"]
    letters = _outputs(out, "dead_letter")
    if writer in ("anthropic", "gemini", "bedrock-converse", "hf"):
        # The Responses sample holds a custom tool call with free-text input: Anthropic's
        # tool_use input must be an object, so that record cannot be written and says why
        # (hf: a free-text custom tool has no JSON-schema form).
        found = [(d["reason"], d["detail"].split(":")[1].strip()) for d in letters]
        sources = [d["source"] for d in letters]
        # Converse, Anthropic and Gemini want a user message first: the samples that open with
        # the assistant cannot be sent, and say why.
        leading = [k for k, f in enumerate(found) if f == ("unwritable", "leading_assistant")]
        assert len(leading) == (0 if writer == "hf" else 1)
        found = [f for k, f in enumerate(found) if k not in leading]
        sources = [s for k, s in enumerate(sources) if k not in leading]
        assert found == [("unwritable", "unconvertible_tool" if writer == "hf" else "args_not_json")]
        assert sources[0].endswith("openai-responses.jsonl")
    elif writer == "sharegpt":
        # LLaMA-Factory drops conversations that break its turn order (one ending on a real
        # result or on user text): the training default trims what follows the last assistant
        # message (--trailing trim). Still refused: a conversation that opens on the model's
        # call (Gemini's compressed history), and a free-text custom tool.
        reasons = sorted(d["detail"].split(":")[1].strip() for d in letters)
        assert reasons == ["turn_order", "unconvertible_tool"]
        assert all(d["reason"] == "unwritable" for d in letters)
    elif writer in TRL_SINKS:
        # The TRL sinks write what a conversation's labels make: only the label samples hold
        # any (a Braintrust row's expected answer, an OpenPipe entry's rejected message). A
        # prompt set takes every conversation with a prompt and function tools only.
        reasons: dict[str, int] = {}
        for d in letters:
            reason = d["detail"].split(": ")[1]
            reasons[reason] = reasons.get(reason, 0) + 1
        assert (
            reasons
            == {
                "trl-dpo": {"no_pair": expected - 4, "same_continuation": 2},
                "trl-kto": {"no_label": expected - 2},
                "trl-prompts": {"empty_prompt": 1, "unconvertible_tool": 1},
            }[writer]
        )
    elif writer == "openai-finetune":
        # Fine-tuning lines take function tools only: the Responses sample's custom tool says so.
        assert [(d["reason"], d["detail"].split(":")[1].strip()) for d in letters] == [
            ("unwritable", "unconvertible_tool")
        ]
    else:
        assert letters == []
    lines = _outputs(out, "normalized")
    assert len(lines) == expected - len(letters)
    check = SHAPE_CHECKS.get(writer)
    for line in lines:
        if check is not None:
            assert check(line) == [], line
    if writer == "anthropic":
        assert all(isinstance(line["max_tokens"], int) and line["model"] == "test-model" for line in lines)
        assert 512 in {line["max_tokens"] for line in lines}
    if writer == "openai-batch":
        assert {line["body"]["model"] for line in lines} == {"test-model"}
        drops = _outputs(out, "drops")
        assert [line["custom_id"] for line in lines] == [m["id"] for m in drops]


@pytest.mark.parametrize("reader", sorted(SAMPLE_FILES))
def test_explicit_format_reads_its_sample(reader, tmp_path):
    out = tmp_path / reader
    assert main(["--input", str(SAMPLE_FILES[reader]), "--output", str(out), "--format", reader]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_out"] == len(_records(SAMPLE_FILES[reader]))
    assert summary["dead_letters"] == 0


# The TRL sinks' records are no conversation (prompt and continuations apart): tests/test_trl_sinks.py
# checks them with TRL's own code.
@pytest.mark.parametrize("writer", sorted(set(WRITERS) - set(TRL_SINKS)))
def test_every_writers_output_passes_convnorm_validate(writer, writer_run, tmp_path):
    # The job's own output, checked as it is by `convnorm validate` (auto-detected reader).
    out, status = writer_run(writer)
    assert status == 0
    report = tmp_path / "report"
    checked = str(out / "normalized" / "*.jsonl")
    if writer == "hf":
        # Its fixed schema spells an absent key as null, which the strict flat check calls
        # not flat: the records without their nulls are checked (the values as written).
        lines = [json.dumps(_without_nulls(line)) for line in _outputs(out, "normalized")]
        (tmp_path / "hf.jsonl").write_text("\n".join(lines) + "\n")
        checked = str(tmp_path / "hf.jsonl")
    status = main(["validate", "--input", checked, "--output", str(report)])
    validation = json.loads((report / "validation.json").read_text())
    assert validation["conversations_checked"] == len(_outputs(out, "normalized"))
    if writer in ("sharegpt", "openai-finetune", "hf"):
        # A training record may end on a call (its target): the results after the last
        # assistant message are trimmed (--trailing trim; MEM-5's synthetic "interrupted"
        # results among them), and a replay check calls that call unanswered.
        ends_on_calls = [line for line in _outputs(out, "normalized") if _ends_on_calls(line)]
        assert validation["conversations_with_violations"] == len(ends_on_calls) > 0
        assert {k for k, n in validation["violations"].items() if n} == {"unanswered_call"}
    else:
        assert status == 0 and validation["sendable"]


def _ends_on_calls(line: dict) -> bool:
    """A training line whose last turn is a call (ShareGPT's function_call, OpenAI's tool_calls)."""
    if "conversations" in line:  # (hf and openai-finetune: messages)
        return line["conversations"][-1]["from"] == "function_call"
    return bool(line["messages"][-1].get("tool_calls"))


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
