"""Auto-detection: each fixture is detected as its own format, ambiguous records give the same
conversation whichever reader takes them, and records no reader accepts are refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import normalize_conversation  # noqa: E402
from transforms.formats import READERS, detect_reader  # noqa: E402

DATA = Path(__file__).parent / "data"
FORMATS = ("openai", "openai-responses", "anthropic", "sharegpt", "gemini", "bedrock-converse")


def load(path: Path) -> list:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def normalized(reader: str, record) -> list:
    return normalize_conversation(READERS[reader].read(record, "messages").messages).messages


FIXTURES = [(fmt, r) for fmt in FORMATS for r in load(DATA / "formats" / f"{fmt}.jsonl")]
FIXTURE_IDS = [f"{fmt}-{r.get('id') if isinstance(r, dict) else n}" for n, (fmt, r) in enumerate(FIXTURES)]


@pytest.mark.parametrize("fmt,record", FIXTURES, ids=FIXTURE_IDS)
def test_each_fixture_is_detected_as_its_format(fmt, record):
    detected = detect_reader(record, "messages").name
    if fmt == "openai" and isinstance(record, list):
        # A plain conversation has nothing OpenAI-specific: the flat reader takes it, with the
        # same result (see the ambiguity tests below).
        assert detected == "flat"
        assert normalized("flat", record) == normalized("openai", record)
    else:
        assert detected == fmt


def test_priorities_put_specific_formats_first_and_flat_last():
    order = [r.name for r in sorted(READERS.values(), key=lambda r: (r.priority, r.name))]
    assert order == [
        "braintrust",
        "openpipe-dataset",
        "sharegpt",
        "bedrock-converse",
        "anthropic",
        "gemini",
        "openai-responses",
        "cohere-v1",
        "openai",
        "flat",
    ]


@pytest.mark.parametrize(
    "record,expected",
    [
        ({"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]},
            "anthropic",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]}]},
            "anthropic",
        ),
        ({"input": [{"role": "user", "content": "hi"}]}, "openai-responses"),
        ({"input": "hi", "instructions": "Be brief."}, "openai-responses"),
        ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}], "openai-responses"),
        ({"conversations": [{"from": "human", "value": "hi"}]}, "sharegpt"),
        ([{"from": "human", "value": "hi"}], "sharegpt"),
        ({"messages": [{"role": "observation", "content": "{}"}]}, "sharegpt"),
        ({"messages": [{"role": "developer", "content": "x"}]}, "openai"),
        ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, "openai"),
        (
            {"messages": [{"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}]},
            "openai",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                    }
                ]
            },
            "openai",
        ),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}, "openai"),
        # An OpenAI Batch API input line, whatever its messages hold.
        (
            {
                "custom_id": "r1",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            },
            "openai",
        ),
        ({"custom_id": "r1", "body": {"messages": []}}, "openai"),
        ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, "gemini"),
        ({"contents": [{"parts": [{"functionResponse": {"name": "f", "response": {}}}]}]}, "gemini"),
        ([{"role": "model", "parts": [{"function_call": {"name": "f", "args": {}}}]}], "gemini"),
        ({"messages": [{"role": "model", "parts": [{"text": "hi"}]}]}, "gemini"),
        # Typed parts (another SDK's UI messages) are not Gemini parts.
        ({"messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}], "content": "hi"}]}, "flat"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "flat"),
        ([{"role": "user", "content": "hi"}], "flat"),
        ({"messages": []}, "flat"),
    ],
)
def test_detection_signals(record, expected):
    assert detect_reader(record, "messages").name == expected


@pytest.mark.parametrize(
    "record",
    [
        "text",
        3,
        None,
        {"id": 1},
        {"messages": "hi"},
        {"conversations": "x"},
        # Batch lines for other endpoints, or without a message list: nothing to read.
        {"custom_id": "r1", "url": "/v1/responses", "body": {"input": "hi"}},
        {"custom_id": "r1", "body": {"messages": "hi"}},
        {"body": {"messages": []}},
    ],
)
def test_records_no_reader_accepts(record):
    assert detect_reader(record, "messages") is None


def test_the_message_field_option_is_honoured():
    record = {"turns": [{"role": "developer", "content": "x"}]}
    assert detect_reader(record, "turns").name == "openai"
    assert detect_reader(record, "messages") is None


def test_text_block_conversations_read_the_same_as_openai_or_anthropic():
    # Text blocks are shared by both providers: both readers agree on them.
    record = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "c"}]},
        ]
    }
    assert normalized("openai", record) == normalized("anthropic", record)


# --------------------------------------------------------------------------------------------
# Plain records: no reader-specific signal, so flat takes them; openai would agree


def _plain_inputs():
    vectors = load(DATA / "spec" / "vectors.jsonl")
    return [v["input"] for v in vectors]


@pytest.mark.parametrize("messages", _plain_inputs())
def test_spec_vectors_give_the_same_result_under_flat_and_openai(messages):
    assert detect_reader(messages, "messages").name in ("flat", "openai")
    assert normalize_conversation(READERS["openai"].read(messages, "messages").messages) == normalize_conversation(
        READERS["flat"].read(messages, "messages").messages
    )


ID = st.one_of(st.sampled_from(["c1", "c2", " c1 ", "", "0", "00"]), st.integers(-1, 3), st.none(), st.booleans())
FLAT_CALL = st.one_of(
    st.fixed_dictionaries(
        {"tool_call_id": ID, "name": st.sampled_from(["f", "g"])},
        optional={"args": st.sampled_from(["{}", "x"]), "id": ID},
    ),
    st.fixed_dictionaries({"id": ID, "name": st.just("f")}),
    st.just("junk"),
)
# An empty list is an empty part list, which the openai reader reads as "": not plain.
CONTENT = st.one_of(
    st.none(), st.sampled_from(["", "hi", " "]), st.integers(), st.lists(st.integers(), min_size=1, max_size=2)
)
ENTRY = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "user", "assistant", "tool", "System", " ", "moderator"]),
            "content": CONTENT,
        }
    ),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": CONTENT,
            "tool_calls": st.one_of(st.lists(FLAT_CALL, max_size=3), st.just({})),
        }
    ),
    st.fixed_dictionaries(
        {"role": st.just("tool"), "content": CONTENT}, optional={"tool_call_id": ID, "name": st.just("f")}
    ),
    st.fixed_dictionaries(
        {"role": st.just("tool"), "content": CONTENT, "metadata": st.fixed_dictionaries({"tool_call_id": ID})}
    ),
    st.fixed_dictionaries({"content": CONTENT}),
    st.sampled_from([None, 1, "text"]),
)


@given(st.lists(ENTRY, max_size=8))
def test_plain_records_give_the_same_result_under_flat_and_openai(messages):
    assert detect_reader(messages, "messages").name == "flat"
    assert normalize_conversation(READERS["openai"].read(messages, "messages").messages) == normalize_conversation(
        READERS["flat"].read(messages, "messages").messages
    )
