"""Bodies the provider accepts: a user turn first, no trailing whitespace in a prefill, Gemini
parameters without ``$ref`` / ``$defs``, Gemini's own tools kept (tests/data/replay/bodies.jsonl).

The written bodies are validated with the providers' own SDK types where they are installed
(tests/sdk_checks.py); ``convnorm validate`` reports what the writers refuse.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sdk_checks

from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record
from transforms.record.validate_step import check_record

RECORDS = {
    r["id"]: r for r in map(json.loads, (Path(__file__).parent / "data/replay/bodies.jsonl").read_text().splitlines())
}


def run(record, sink: str, **settings):
    raw = RawRecord("bodies.jsonl", 0, json.dumps(record).encode())
    return process_record(raw, Settings(sink=sink, **settings))


@pytest.mark.parametrize("record_id", ["an-greeting-first", "an-emptied-user-first"])
@pytest.mark.parametrize("sink", ["anthropic", "gemini", "bedrock-converse"])
def test_a_conversation_that_opens_with_the_assistant_is_refused_where_a_user_must_come_first(record_id, sink):
    outcome = run(RECORDS[record_id], sink, model="m", max_tokens=100)
    assert outcome.dead_letter is not None
    assert outcome.dead_letter["reason"] == "unwritable"
    assert outcome.dead_letter["detail"].startswith(f"{sink}: leading_assistant: ")


@pytest.mark.parametrize("sink", ["openai-finetune", "openai-batch", "openai-responses", "flat"])
def test_openai_sinks_take_an_assistant_first(sink):
    assert run(RECORDS["an-greeting-first"], sink, model="m").dead_letter is None


def test_validate_reports_a_leading_assistant_in_a_user_first_providers_body():
    body = {"system": "Be brief.", **RECORDS["an-greeting-first"]}  # a top-level system: Anthropic's
    report = check_record(RawRecord("b.jsonl", 0, json.dumps(body).encode()), Settings()).record
    assert report["violations"] == {"leading_assistant": 1}
    # The same conversation as an OpenAI chat is sendable as it is.
    chat = {"messages": [{"role": m["role"], "content": m["content"]} for m in body["messages"]]}
    assert check_record(RawRecord("c.jsonl", 0, json.dumps(chat).encode()), Settings()).record["violations"] == {}
    # Forced, the rule follows the reader.
    forced = check_record(RawRecord("b.jsonl", 0, json.dumps(body).encode()), Settings(input_format="anthropic"))
    assert forced.record["violations"] == {"leading_assistant": 1}


@pytest.mark.parametrize("sink", ["anthropic", "bedrock-converse"])
def test_a_final_assistant_text_ending_in_whitespace_is_trimmed_counted(sink):
    outcome = run(RECORDS["an-prefill-whitespace"], sink, model="m", max_tokens=100)
    assert outcome.dead_letter is None
    last = outcome.record["messages"][-1]
    assert last["role"] == "assistant"
    assert last["content"][-1] in ({"type": "text", "text": "Here is a haiku:"}, {"text": "Here is a haiku:"})
    assert outcome.metrics["writer_report"] == {"final_whitespace_trimmed": 1}


def test_whitespace_inside_earlier_turns_is_left_alone():
    record = {
        "messages": [
            {"role": "user", "content": "hi "},
            {"role": "assistant", "content": "yes \n"},
            {"role": "user", "content": "ok"},
        ]
    }
    outcome = run(record, "anthropic", model="m", max_tokens=100)
    assert outcome.record["messages"][1]["content"] == [{"type": "text", "text": "yes \n"}]
    assert "writer_report" not in outcome.metrics


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_anthropic_bodies_validate_with_the_sdk_types():
    sdk_checks.needs("anthropic")
    outcome = run(RECORDS["an-prefill-whitespace"], "anthropic", model="m", max_tokens=100)
    assert sdk_checks.anthropic_errors(outcome.record) == []


def test_gemini_parameters_have_their_refs_inlined():
    outcome = run(RECORDS["gm-pydantic-refs"], "gemini")
    assert outcome.dead_letter is None, outcome.dead_letter
    tools = outcome.record["tools"]
    parameters = tools[0]["functionDeclarations"][0]["parameters"]
    assert parameters == {
        "properties": {
            "pet": {
                "properties": {
                    "name": {"title": "Name", "type": "string"},
                    "kind": {"enum": ["dog"], "title": "Kind", "type": "string"},
                    "age": {"type": "integer", "nullable": True, "title": "Age"},
                },
                "required": ["name", "kind"],
                "title": "Pet",
                "type": "object",
                "description": "The pet.",
            }
        },
        "required": ["pet"],
        "title": "Owner",
        "type": "object",
    }
    assert outcome.metrics["writer_report"] == {
        "discarded_tool_fields": {"parameters.$schema": 1},
        "mapped_tool_fields": {"$ref": 1, "const": 1, "type_null": 1},
    }
    # Gemini's own code execution tool comes back as it was.
    assert tools[1:] == [{"codeExecution": {}}]


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_gemini_body_with_inlined_refs_validates_with_the_sdk_types():
    sdk_checks.needs("google.genai")
    outcome = run(RECORDS["gm-pydantic-refs"], "gemini")
    assert sdk_checks.gemini_errors(outcome.record) == []
    # The check itself refuses the schema as it came.
    raw = dict(outcome.record, tools=RECORDS["gm-pydantic-refs"]["tools"])
    assert any("$ref" in e or "$defs" in e for e in sdk_checks.gemini_errors(raw))


def test_a_recursive_ref_is_refused_naming_the_tool():
    outcome = run(RECORDS["gm-recursive-ref"], "gemini")
    assert outcome.dead_letter["detail"].startswith("gemini: unconvertible_tool: tool 'make_tree'")
    assert "recursive" in outcome.dead_letter["detail"]


def test_a_schema_gemini_already_takes_is_written_as_it_is():
    record = json.loads(json.dumps(RECORDS["gm-pydantic-refs"]))
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    record["tools"] = [{"functionDeclarations": [{"name": "register_owner", "parameters": schema}]}]
    outcome = run(record, "gemini")
    assert outcome.record["tools"] == record["tools"]
    assert "writer_report" not in outcome.metrics
