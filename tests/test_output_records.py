"""The output record shapes (transforms/record/output_records.py) are the keys the steps really write."""

from __future__ import annotations

import json

import pytest

from transforms.record.inputs import Parsed, RawRecord
from transforms.record.output_records import DeadLetter, DropMetrics, ViolationReport
from transforms.record.record_settings import Settings, TokenSettings
from transforms.record.records import process_record
from transforms.record.validate_step import check_record

DEFECTIVE = {
    "id": "c1",
    "messages": [
        {"role": "tool", "tool_call_id": "x", "content": "orphan"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}], "weight": 1},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "hmm",
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
    ],
}


def _keys(typed) -> tuple[set, set]:
    return set(typed.__required_keys__), set(typed.__required_keys__ | typed.__optional_keys__)


def _raw(record) -> RawRecord:
    return RawRecord("in.jsonl", 0, json.dumps(record).encode())


def test_drop_metrics_hold_every_required_key_and_only_declared_ones():
    required, declared = _keys(DropMetrics)
    outcome = process_record(_raw(DEFECTIVE), Settings(profile="lossless", check=True))
    assert outcome.dead_letter is None
    assert required <= set(outcome.metrics) <= declared
    assert {"discarded", "violations"} <= set(outcome.metrics)  # optional ones this record has


def test_dead_letters_have_the_required_keys_and_only_declared_ones():
    required, declared = _keys(DeadLetter)
    outcome = process_record(_raw("not a record"), Settings())
    assert set(outcome.dead_letter) == required
    # A conversation assembled from call logs that the sink refuses: its dead letter has the calls.
    assembled = RawRecord(
        "calls.jsonl", 0, Parsed({"id": "g", "messages": [{"role": "assistant"}]}, None, {"calls": []})
    )
    refused = process_record(assembled, Settings(sink="anthropic"))
    assert set(refused.dead_letter) == required | {"assembly"}
    pytest.importorskip("bpe_openai", reason="the tokens extra is not installed")
    too_long = process_record(_raw(DEFECTIVE), Settings(tokens=TokenSettings("o200k_base", 1, drop_over_limit=True)))
    assert set(too_long.dead_letter) | {"assembly"} == declared  # an over_token_limit dead letter has its tokens


def test_drop_metrics_with_tokens_hold_only_declared_keys():
    pytest.importorskip("bpe_openai", reason="the tokens extra is not installed")
    _, declared = _keys(DropMetrics)
    lonely = {"id": "q", "messages": [{"role": "user", "content": "anyone?"}]}
    outcome = process_record(_raw(lonely), Settings(tokens=TokenSettings("o200k_base", 1)))
    assert {"tokens", "over_token_limit", "no_assistant_message"} <= set(outcome.metrics) <= declared


def test_violation_reports_have_exactly_the_declared_keys():
    required, declared = _keys(ViolationReport)
    outcome = check_record(_raw(DEFECTIVE), Settings())
    assert set(outcome.record) == required == declared
    assert outcome.record["details"] and set(outcome.record["details"][0]) == {
        "kind",
        "index",
        "tool_call_id",
        "detail",
    }
