"""Call-log detection: each sample to its reader, in priority order; no record of the existing
conversation formats taken for a call log; CALL_LOG_KEYS covering every detection; malformed
call-log records refused with a reason, never read as empty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from transforms.calllogs.calls import CALL_LOG_KEYS
from transforms.calllogs.readers import CALL_LOG_READERS, detect_call_log
from transforms.formats import FormatError

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CALLLOGS = DATA / "calllogs"

#: Every call-log sample, by the reader that must detect it.
SAMPLES = {
    "langfuse": [
        "langfuse/microsoft-agent-2025-12-17.trace.json",
        "langfuse/openai-agents-2025-09-30.trace.json",
        "langfuse/pydantic-ai-2025-06-06.trace.json",
        "langfuse/blob-export-rows.jsonl",
    ],
    "otlp": [
        "otlp/vertexai-tool-events.jsonl",
        "otlp/handwritten.jsonl",
        "otlp/semconv-examples.jsonl",
        "otlp/log-events.jsonl",
    ],
    "span-rows": ["otlp/span-rows.jsonl"],
    "langsmith": [
        "langsmith/langsmith_js_wrap_openai_default.json",
        "langsmith/langsmith_js_wrap_openai_stream.json",
        "langsmith/langchain-runs.jsonl",
    ],
    "litellm": ["litellm/standard_logging_payload.json", "litellm/more-payloads.jsonl"],
    "helicone": ["helicone/export-rows.jsonl"],
    "openpipe": ["openpipe/export.jsonl"],
}


def records(path: Path) -> list[Any]:
    """The records of a JSON or JSONL file; lines that are not JSON (the samples hold some on
    purpose) are left out."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return [json.loads(text)]
    found = []
    for line in text.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def all_samples() -> list[tuple[str, Any]]:
    return [(name, record) for name, paths in SAMPLES.items() for path in paths for record in records(CALLLOGS / path)]


def conversation_records() -> list[Any]:
    """Every record of the existing formats in the repository: samples, format fixtures, the
    spec's vectors (and their message lists), the ToolBench corpus."""
    paths = [*ROOT.glob("samples/*.jsonl"), *ROOT.glob("samples/formats/*.jsonl"), *DATA.glob("formats/*.jsonl")]
    paths += [DATA / "spec" / "vectors.jsonl"]
    found: list[Any] = []
    for path in sorted(paths):
        for record in records(path):
            found.append(record)
            for key in ("messages", "input", "conversations", "contents"):
                if isinstance(record, dict) and isinstance(record.get(key), list):
                    found.extend(m for m in record[key] if isinstance(m, dict))
    for path in sorted((DATA / "corpora").rglob("*.json*")):
        text = path.read_text(encoding="utf-8")
        try:
            found.extend(records(path) if path.suffix == ".jsonl" else [json.loads(text)])
        except ValueError:
            continue
    return found


@pytest.mark.parametrize(("reader", "record"), all_samples(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_sample_is_detected_by_its_reader(reader, record):
    found = detect_call_log(record)
    assert found is not None and found.name == reader


def test_no_conversation_record_is_a_call_log():
    found = conversation_records()
    assert len(found) > 100
    detected = [(r, detect_call_log(r).name) for r in found if detect_call_log(r) is not None]  # type: ignore[union-attr]
    assert detected == []


def test_call_log_keys_cover_every_detection():
    """A record with none of CALL_LOG_KEYS is never a call log (the plain-chat shortcut may skip
    the detectors): every detected sample holds one, and each reader refuses a sample with its
    marker keys taken away."""
    for _reader, record in all_samples():
        assert not CALL_LOG_KEYS.isdisjoint(record)
        stripped = {k: v for k, v in record.items() if k not in CALL_LOG_KEYS}
        assert detect_call_log(stripped) is None


def test_a_litellm_payload_is_not_a_plain_chat():
    """It has a top-level messages list: the plain-chat keys must exclude it."""
    (payload,) = records(CALLLOGS / "litellm/standard_logging_payload.json")
    assert "messages" in payload and "call_type" in CALL_LOG_KEYS


def test_detection_order_is_by_priority():
    priorities = sorted((r.priority, r.name) for r in CALL_LOG_READERS.values())
    assert [name for _, name in priorities] == [
        "otlp",
        "span-rows",
        "phoenix-annotations",  # labels (transforms.calllogs.labels)
        "langfuse",
        "langfuse-scores",
        "langsmith",
        "langsmith-feedback",
        "helicone",
        "openpipe",
        "litellm",
    ]
    # A record with two readers' markers goes to the first: an OTLP document that happens to
    # carry a call_type key is still OTLP.
    doc = {"resourceSpans": [], "call_type": "completion", "messages": []}
    assert detect_call_log(doc).name == "otlp"  # type: ignore[union-attr]


def test_detection_of_non_objects():
    assert detect_call_log([{"role": "user", "content": "hi"}]) is None
    assert detect_call_log("text") is None
    assert detect_call_log({"messages": [{"role": "user", "content": "hi"}]}) is None


def otlp_span(attributes: dict[str, Any], **span: Any) -> dict[str, Any]:
    """An OTLP document of one span with string ``attributes`` (a value given as a dict is an
    OTLP value as it is)."""
    values = [{"key": k, "value": v if isinstance(v, dict) else {"stringValue": v}} for k, v in attributes.items()]
    one = {"traceId": "t", "spanId": "s", "attributes": values, **span}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [one]}]}]}


def observation(**fields: Any) -> dict[str, Any]:
    row = {"id": "o", "trace_id": "t", "parent_observation_id": "", "type": "GENERATION"}
    return {**row, "start_time": "2026-11-30 10:00:00", **fields}


HI = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
ALIEN = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AlienMessage"], "kwargs": {}}
HOLOGRAM = '[{"role":"user","parts":[{"type":"text","content":"a"},{"type":"hologram"}]}]'
MALFORMED = [
    ("otlp", {"resourceSpans": ["not an object"]}, "bad_otlp"),
    ("otlp", otlp_span({"gen_ai.operation.name": "chat"}, startTimeUnixNano="soon"), "bad_timestamp"),
    ("otlp", otlp_span({"gen_ai.usage.input_tokens": {"intValue": "many"}}), "bad_attribute"),
    ("otlp", otlp_span({"gen_ai.input.messages": HOLOGRAM}), "unknown_block"),
    ("langfuse", {"trace": {}, "observations": "many"}, "bad_observations"),
    ("langfuse", observation(input='{"prompt_text": "hi"}', output=""), "unknown_messages"),
    ("langfuse", observation(start_time="yesterday", input="hi", output="hello"), "bad_timestamp"),
    (
        "langsmith",
        {"id": "r", "trace_id": "t", "run_type": "llm", "inputs": {"messages": [[ALIEN]]}},
        "unknown_message_class",
    ),
    (
        "helicone",
        {"request_id": "r", "request_body": HI, "response_body": "data: {}\n\ndata: [DONE]\n"},
        "streamed_response",
    ),
    ("helicone", {"request_id": "r", "request_body": HI, "response_body": {"unexpected": True}}, "unknown_output"),
    (
        "litellm",
        {"id": "x", "call_type": "completion", **HI, "response": {}, "startTime": "2025-13-40 00:00"},
        "bad_timestamp",
    ),
]


@pytest.mark.parametrize(("reader", "record", "reason"), MALFORMED, ids=[f"{r}-{why}" for r, _, why in MALFORMED])
def test_malformed_records_are_refused_with_a_reason(reader, record, reason):
    found = detect_call_log(record)
    assert found is not None and found.name == reader
    with pytest.raises(FormatError) as raised:
        found.read(record)
    assert raised.value.reason == reason
    assert str(raised.value)  # a sentence for a person


def test_forced_reader_refuses_another_shape():
    """A reader named with --format gets a record that is not its shape: refused, not empty."""
    for name, record in [
        ("otlp", {"messages": []}),
        ("span-rows", {"attributes": []}),
        ("langfuse", {"id": "x"}),
        ("helicone", {"request_id": "r"}),
        ("openpipe", {"input": "text"}),
        ("litellm", "text"),
    ]:
        with pytest.raises(FormatError):
            CALL_LOG_READERS[name].read(record)
