"""The OpenAI reader's fast path for the core gives the job's full-path output, byte for byte.

``read_openai_for_core`` (the job's read, ``Reader.read_for_core``) passes plain messages on
unconverted: provider-shaped calls with their ids, a call-only turn's null content. Every
record here goes through ``process_record`` twice, once as the job runs it and once with the
reader's full conversion, and the two outcomes must serialize to the same bytes: the output
line, the metrics (drops, healed, ``messages_in``/``out``, the ledger of discarded fields, the
reader report, violations with ``check``) and any dead letter. Generated records mix plain and
unusual messages; each unusual shape also has a hand-written case.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
for path in (str(ROOT), str(ROOT / "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from transforms.formats import READERS, openai  # noqa: E402
from transforms.record.records import RawRecord, Settings, normalize_batch, process_record  # noqa: E402

SETTINGS = [
    Settings(),
    Settings(profile="lossless", check=True),
    Settings(sink="openai-finetune"),
    Settings(sink="openai-batch", model="m", id_field="custom_id"),
]

# -- generated messages: plain ones (the fast path passes them on) and unusual ones ----------

TEXT = st.sampled_from(["", "hi", " ", "ok then"])
ID = st.sampled_from(["c1", "c2", "c3", " c1 ", "0", "", None, 7, True])
PART = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
    st.fixed_dictionaries({"type": st.sampled_from(["image_url", "input_audio", "file"])}),
    st.fixed_dictionaries({"type": st.just("refusal"), "refusal": TEXT}),
    st.fixed_dictionaries({"type": st.sampled_from(["reasoning", "thinking"]), "text": TEXT}),
)
CONTENT = st.one_of(
    st.none(),
    TEXT,
    st.integers(-2, 2),
    st.just({"a": 1}),
    st.just([1, "x"]),  # the core casts these
    st.lists(PART, min_size=1, max_size=3),  # a part list: converted
)
FUNCTION = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["f", "g", None, 5]),
        "arguments": st.sampled_from(["{}", '{"a":1}', None]),
        "input": st.sampled_from(["free text", None]),
    },  # input: a custom call's spelling
)
CALL = st.one_of(
    st.fixed_dictionaries(
        {"id": ID, "type": st.just("function"), "function": FUNCTION},
        optional={"name": st.just("h"), "arguments": st.just("{}"), "tool_call_id": ID},
    ),
    st.fixed_dictionaries(
        {
            "id": ID,
            "type": st.just("custom"),
            "custom": st.fixed_dictionaries({}, optional={"name": st.just("g"), "input": TEXT}),
        }
    ),
    st.fixed_dictionaries({"tool_call_id": ID}, optional={"name": st.just("f"), "args": st.just({"a": 1})}),
    st.sampled_from(["junk", None, 3]),
)
EXTRA = {
    "reasoning_content": TEXT,
    "name": st.sampled_from(["f", "g"]),
    "weight": st.sampled_from([0, 1]),
    "metadata": st.one_of(
        st.just({"tool_call_id": "c1"}),
        st.just({"source": "x"}),
        st.just({"tool_calls": [{"id": "c2", "type": "function", "function": {"name": "f"}}]}),
    ),
}
PLAIN = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user"]), "content": st.one_of(st.none(), TEXT)}, optional=EXTRA
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant")},
        optional={"content": st.one_of(st.none(), TEXT), "tool_calls": st.lists(CALL, max_size=3), **EXTRA},
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "content": TEXT}, optional={"tool_call_id": ID, **EXTRA}),
)
UNUSUAL = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(
                ["system", "user", "assistant", "tool", "developer", "function", "observation", "", None, 3]
            ),
            "content": CONTENT,
        },
        optional={
            "refusal": st.one_of(st.none(), TEXT, st.just(["x"])),
            "function_call": st.one_of(
                st.fixed_dictionaries({}, optional={"name": st.just("f"), "arguments": st.just("{}")}), st.just("x")
            ),
            "tool_calls": st.one_of(st.lists(CALL, max_size=3), st.none(), st.just({})),
            "tool_call_id": ID,
            "tool_call_ids": st.one_of(st.lists(st.sampled_from(["c1", "c2", "c3"]), max_size=3), st.just("c1")),
            **EXTRA,
        },
    ),
    st.sampled_from([None, 1, "text", ["x"], {"content": "no role"}]),
)
# Shapes the fast path must convert, each made likely (the catch-all above rarely hits them).
REFUSAL = st.fixed_dictionaries(
    {
        "role": st.just("assistant"),
        "content": st.one_of(st.none(), TEXT, st.lists(PART, min_size=1, max_size=2)),
        "refusal": st.one_of(st.none(), TEXT, st.just(["x"])),
    },
    optional={"tool_calls": st.lists(CALL, max_size=2)},
)
LEGACY = st.fixed_dictionaries(
    {
        "role": st.just("assistant"),
        "content": st.one_of(st.none(), TEXT),
        "function_call": st.one_of(
            st.fixed_dictionaries({}, optional={"name": st.sampled_from(["f", "g"]), "arguments": st.just("{}")}),
            st.just("x"),
        ),
    },
    optional={"tool_calls": st.lists(CALL, max_size=2)},
)
ID_LESS_CALL = st.fixed_dictionaries({"type": st.just("function"), "function": FUNCTION})
RESULT = st.fixed_dictionaries(
    {"role": st.sampled_from(["tool", "tool", "function"]), "content": TEXT},
    optional={
        "name": st.sampled_from(["f", "g", "h"]),
        "tool_call_id": ID,
        "tool_call_ids": st.one_of(st.lists(st.sampled_from(["c1", "c2", "call_1"]), max_size=3), st.just("c1")),
        "metadata": st.just({"tool_call_id": "c2"}),
    },
)
CALL_BLOCK = st.builds(
    lambda turn, results: [turn, *results],
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": st.one_of(st.none(), TEXT),
            "tool_calls": st.lists(st.one_of(ID_LESS_CALL, CALL), min_size=1, max_size=3),
        },
        optional={"function_call": st.just({"name": "g"})},
    ),
    st.lists(st.one_of(RESULT, PLAIN), max_size=4),
)
SEGMENT = st.one_of(
    st.lists(PLAIN, min_size=1, max_size=3),
    st.lists(UNUSUAL, min_size=1, max_size=2),
    st.lists(st.one_of(REFUSAL, LEGACY, RESULT), min_size=1, max_size=2),
    CALL_BLOCK,
)
MESSAGES = st.builds(lambda segments: [m for segment in segments for m in segment], st.lists(SEGMENT, max_size=5))
RECORD = st.one_of(
    st.fixed_dictionaries({"messages": MESSAGES}, optional={"id": st.sampled_from(["r1", "", None])}),
    MESSAGES,
    st.builds(lambda m: {"custom_id": "b1", "method": "POST", "body": {"model": "m", "messages": m}}, MESSAGES),
)


def full_read(func, *args):
    """``func(*args)`` with the OpenAI reader's full conversion (no ``read_for_core``)."""
    reader = READERS["openai"]
    READERS["openai"] = dataclasses.replace(reader, read_for_core=None)
    try:
        return func(*args)
    finally:
        READERS["openai"] = reader


def _bytes(outcome) -> bytes:
    return orjson.dumps(
        [outcome.record, outcome.metrics, outcome.dead_letter, outcome.line],
        option=orjson.OPT_PASSTHROUGH_SUBCLASS,
        default=repr,
    )


def assert_same_outcome(record) -> None:
    line = orjson.dumps(record)
    for settings_ in SETTINGS:
        raw = RawRecord("in.jsonl", 0, line)
        fast = process_record(raw, settings_)
        full = full_read(process_record, raw, settings_)
        assert _bytes(fast) == _bytes(full), settings_


@given(record=RECORD)
def test_fast_path_output_is_the_full_paths(record):
    assert_same_outcome(record)


def test_generated_records_take_the_fast_path():
    # Not vacuous: most generated messages are plain and passed on unconverted, some are not.
    passed = converted = 0
    for message in _sample_messages():
        flat = openai.openai_to_flat([message], {}, {}, keep_plain=True)
        if flat and flat[0] is message:
            passed += 1
        elif isinstance(message, dict):
            converted += 1
    assert passed > 10 and converted > 5


def _sample_messages() -> list:
    return [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": None},
        {"role": "assistant", "content": None, "tool_calls": [CALL_C1]},
        {"role": "assistant", "tool_calls": [CALL_C1, {"tool_call_id": "c2", "name": "g"}]},
        {"role": "assistant", "content": "x", "reasoning_content": "because"},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "tool", "content": "r"},
        {"role": "user", "content": 3},
        {"role": "user", "content": [1, 2]},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "assistant", "content": "", "tool_calls": None, "metadata": {"tool_calls": [CALL_C1]}},
        {"role": "observation", "content": "x"},
        *UNUSUAL_MESSAGES.values(),
    ]


CALL_C1 = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}

#: One message per shape the fast path must convert, with the conversation it sits in.
UNUSUAL_MESSAGES = {
    "content parts": {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]},
    "reasoning part": {
        "role": "assistant",
        "content": [{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "a"}],
    },
    "refusal as content": {"role": "assistant", "content": None, "refusal": "I can't"},
    "refusal beside content": {"role": "assistant", "content": "no", "refusal": "I can't"},
    "null refusal": {"role": "assistant", "content": "x", "refusal": None},
    "legacy function_call": {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
    "junk function_call": {"role": "assistant", "content": "x", "function_call": "f"},
    "call without id": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
    },
    "custom call": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "k1", "type": "custom", "custom": {"name": "g", "input": "text"}}],
    },
    "function with input": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "k2", "type": "function", "function": {"name": "g", "input": "t"}}],
    },
    "developer": {"role": "developer", "content": "be brief"},
    "function result": {"role": "function", "name": "f", "content": "42"},
    "tool_call_ids": {"role": "tool", "content": "r", "tool_call_ids": ["call_1", "c2"]},
    "empty tool_call_ids": {"role": "tool", "content": "r", "tool_call_ids": []},
}


@pytest.mark.parametrize("shape", sorted(UNUSUAL_MESSAGES))
def test_each_unusual_shape_is_converted_and_gives_the_full_output(shape):
    message = UNUSUAL_MESSAGES[shape]
    assert not openai._is_plain(message, message.get("role"), [])
    conversation = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [CALL_C1]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r"},
        message,
        {"role": "tool", "content": "positional", "name": "f"},
        {"role": "assistant", "content": "done"},
    ]
    flat = openai.openai_to_flat(conversation, {}, {}, keep_plain=True)
    assert flat[4] is not message and flat[0] is conversation[0] and flat[2] is conversation[2]
    for record in ({"id": "r", "messages": conversation}, conversation):
        assert_same_outcome(record)


def test_positional_result_after_a_made_id_is_converted():
    # A result without an id is paired with the earlier call the reader gave an id: not plain.
    conversation = [
        {"role": "user", "content": "q"},
        UNUSUAL_MESSAGES["call without id"],
        {"role": "tool", "content": "r", "name": "f"},
        {"role": "user", "content": "again"},
        {"role": "tool", "content": "orphan"},  # a new turn ended the pending run: plain again
    ]
    flat = openai.openai_to_flat(conversation, {}, {}, keep_plain=True)
    assert flat[2] is not conversation[2] and flat[2]["tool_call_id"] == "call_1"
    assert flat[4] is conversation[4]
    assert_same_outcome({"messages": conversation})


def test_plain_provider_calls_are_passed_on_and_normalize_alike():
    conversation = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [CALL_C1]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r"},
        {"role": "assistant", "content": "a", "reasoning_content": "r"},
    ]
    flat = openai.openai_to_flat(conversation, {}, {}, keep_plain=True)
    assert all(f is m for f, m in zip(flat, conversation))
    assert_same_outcome({"messages": conversation})


def test_bench_corpus_batches_are_the_same():
    import corpus

    lines = corpus.jsonl_lines(300, 11)
    batch = [RawRecord("c.jsonl", i, line) for i, line in enumerate(lines)]
    for settings_ in SETTINGS[:2]:
        fast = normalize_batch(batch, settings_, taken={})
        full = full_read(normalize_batch, batch, settings_, process_record, {})
        assert fast.lines == full.lines
        assert orjson.dumps([fast.records, fast.metrics, fast.dead_letters]) == orjson.dumps(
            [full.records, full.metrics, full.dead_letters]
        )
