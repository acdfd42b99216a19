"""Gemini streamed call arguments (``partialArgs``, ``willContinue``) assembled into the call they
continue; what cannot be assembled is a dead letter, never a call without a name
(transforms.formats.gemini_stream; fixtures: tests/data/replay/streamed-calls.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transforms.formats import READERS, FormatError
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record

RECORDS = {
    r["id"]: r
    for r in map(json.loads, (Path(__file__).parent / "data/replay/streamed-calls.jsonl").read_text().splitlines())
}


def test_chunked_history_becomes_one_call_with_its_arguments():
    conversation = READERS["gemini"].read(RECORDS["gm-sdk-history-chunks"], "messages")
    calls = [c for m in conversation.messages for c in m.get("tool_calls", ())]
    assert calls == [
        {
            "tool_call_id": "call_1",
            "name": "get_current_weather",
            "args": {"location": "Boston, MA", "unit": "celsius", "country": None},
        }
    ]
    assert [m["role"] for m in conversation.messages] == ["user", "assistant", "tool", "assistant"]
    assert conversation.report == {"streamed_call_fragments_assembled": 2}


def test_a_string_continued_across_fragments_is_joined_and_the_signature_kept():
    conversation = READERS["gemini"].read(RECORDS["gm-split-string-one-content"], "messages")
    assistant = conversation.messages[1]
    assert assistant["tool_calls"] == [{"tool_call_id": "fn-1", "name": "read_file", "args": {"path": "src/main.rs"}}]
    assert assistant["provider_reasoning"]["call_signatures"] == {"fn-1": "c2lnLWZu"}


def test_the_assembled_call_replays_to_gemini_with_its_signature():
    outcome = process_record(
        RawRecord("s.jsonl", 0, json.dumps(RECORDS["gm-split-string-one-content"]).encode()), Settings(sink="gemini")
    )
    model = outcome.record["contents"][1]
    assert model == {
        "role": "model",
        "parts": [
            {
                "functionCall": {"id": "fn-1", "name": "read_file", "args": {"path": "src/main.rs"}},
                "thoughtSignature": "c2lnLWZu",
            }
        ],
    }
    assert outcome.metrics["reader_report"] == {"streamed_call_fragments_assembled": 1}


@pytest.mark.parametrize(
    "record_id,why",
    [
        ("gm-open-at-the-end", "still open"),
        ("gm-nameless-fragment", "no name"),
        ("gm-wildcard-path", "beyond the names and indexes"),
    ],
)
def test_what_cannot_be_assembled_is_a_dead_letter(record_id, why):
    with pytest.raises(FormatError) as err:
        READERS["gemini"].read(RECORDS[record_id], "messages")
    assert err.value.reason == "unassemblable_call" and why in str(err.value)
    outcome = process_record(RawRecord("s.jsonl", 0, json.dumps(RECORDS[record_id]).encode()), Settings(sink="flat"))
    assert outcome.dead_letter["reason"] == "format_error"
    assert outcome.dead_letter["detail"].startswith("gemini: unassemblable_call: ")


def test_contents_without_fragments_are_read_as_before():
    record = {"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]}]}
    conversation = READERS["gemini"].read(record, "messages")
    assert conversation.report is None
    assert conversation.messages[0]["tool_calls"] == [{"tool_call_id": "call_0", "name": "f", "args": {"a": 1}}]
