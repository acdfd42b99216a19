"""The detection shortcut (``formats.detect_reader_after``) always agrees with full detection.

Generated records mix every signal the detectors look at (ShareGPT ``from``/``value`` and
roles, Anthropic blocks and ``system``, Gemini ``parts``/``contents``, Responses ``input``,
OpenAI-isms, Batch lines, foreign entries, junk); for each, every possible previous reader is
tried. The samples and the benchmark corpus are checked record by record too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from transforms.formats import READERS, detect_reader, detect_reader_after, plain_chat_reader  # noqa: E402

PREVIOUS = [None, *READERS.values()]

TEXT = st.sampled_from(["", "hi", " ", '{"name": "f", "arguments": {}}'])
BLOCK = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "text",
                "tool_use",
                "tool_result",
                "thinking",
                "image",
                "input_text",
                "reasoning",
                "tool_call",
                "refusal",
                "image_url",
                "x",
            ]
        )
    },
    optional={"text": TEXT, "value": TEXT, "source": st.just({}), "id": st.just("t1"), "input": st.just({})},
)
CONTENT = st.one_of(st.none(), TEXT, st.integers(0, 2), st.lists(BLOCK, max_size=2), st.just({"a": 1}))
CALL = st.one_of(
    st.fixed_dictionaries(
        {
            "id": st.sampled_from(["c1", "c2", None]),
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": st.just("f")}, optional={"arguments": TEXT}),
        }
    ),
    st.fixed_dictionaries(
        {
            "id": st.just("c3"),
            "type": st.just("custom"),
            "custom": st.fixed_dictionaries({"name": st.just("g"), "input": TEXT}),
        }
    ),
    st.fixed_dictionaries({"tool_call_id": st.sampled_from(["c1", "c4"]), "name": st.just("f")}),
    st.just("junk"),
)
ROLE = st.sampled_from(
    [
        "system",
        "user",
        "assistant",
        "tool",
        "developer",
        "function",
        "function_call",
        "observation",
        "model",
        "human",
        "gpt",
        "",
        None,
        3,
    ]
)
PART = st.sampled_from([{"text": "hi"}, {"functionCall": {"name": "f", "args": {}}}, {"type": "text"}, "x"])
OPTIONAL_KEYS = {
    "content": CONTENT,
    "tool_calls": st.one_of(st.lists(CALL, max_size=3), st.just({}), st.none()),
    "tool_call_id": st.sampled_from(["c1", "c9", None, ""]),
    "tool_call_ids": st.one_of(st.lists(st.sampled_from(["c1", "c2"]), max_size=2), st.just("c1")),
    "function_call": st.one_of(st.fixed_dictionaries({"name": st.just("f")}), st.just("x")),
    "refusal": st.one_of(st.none(), TEXT),
    "name": st.just("f"),
    "from": st.sampled_from(["human", "gpt", "function_call", "observation"]),
    "value": TEXT,
    "parts": st.one_of(st.lists(PART, max_size=2), st.just("p")),
    "text": TEXT,
    "metadata": st.one_of(st.just({"tool_call_id": "c1"}), st.just({"tool_calls": []}), st.just({})),
    "type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning"]),
    "call_id": st.just("c1"),
    "output": TEXT,
    "weight": st.just(0),
}
MESSAGE = st.one_of(
    st.fixed_dictionaries({"role": ROLE}, optional=OPTIONAL_KEYS),
    st.fixed_dictionaries({}, optional=OPTIONAL_KEYS),
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system"]), "content": TEXT},
        optional={"tool_calls": st.lists(CALL, max_size=2), "tool_call_id": st.just("c1")},
    ),
    st.sampled_from([None, 1, "junk", [], True]),
)
MESSAGES = st.lists(MESSAGE, max_size=6)
TOP = {
    "id": st.sampled_from(["r1", 7, None]),
    "system": st.one_of(st.none(), TEXT, st.lists(BLOCK, max_size=1), st.just(3)),
    "conversations": st.one_of(MESSAGES, st.just("x")),
    "contents": st.one_of(MESSAGES, st.just({})),
    "input": st.one_of(MESSAGES, TEXT),
    "instructions": TEXT,
    "custom_id": st.just("b1"),
    "tools": st.just([]),
    "systemInstruction": st.just({"parts": [{"text": "s"}]}),
}


def _record(messages_key_value, top, bare, batch):
    if bare:
        return messages_key_value
    if batch:
        return {"custom_id": "b1", "body": {"messages": messages_key_value, **top}}
    return {**top, "messages": messages_key_value}


RECORD = st.one_of(
    st.builds(
        _record,
        st.one_of(MESSAGES, st.just("x"), st.just({})),
        st.fixed_dictionaries({}, optional=TOP),
        st.booleans(),
        st.booleans(),
    ),
    st.fixed_dictionaries({}, optional=TOP),
    st.sampled_from([None, 3, "s", []]),
)


#: Mostly plain chats, some with one OpenAI-ism or one entry that is not plain.
PLAINISH = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "tool", "system"]), "content": TEXT},
            optional={"tool_calls": st.lists(CALL, max_size=2), "tool_call_id": st.just("c1"), "name": st.just("f")},
        ),
        st.fixed_dictionaries(
            {"role": st.sampled_from(["developer", "function", "assistant", "tool"])},
            optional={
                k: OPTIONAL_KEYS[k] for k in ("content", "function_call", "refusal", "tool_call_ids", "tool_calls")
            },
        ),
        MESSAGE,
    ),
    max_size=8,
)


def _agrees(record, field="messages"):
    full = detect_reader(record, field)
    for previous in PREVIOUS:
        assert detect_reader_after(previous, record, field) is full, (previous, record)


@given(RECORD)
def test_the_shortcut_gives_what_full_detection_gives(record):
    _agrees(record)


@given(MESSAGES, st.fixed_dictionaries({}, optional=TOP))
def test_plain_chat_reader_is_right_whenever_it_answers(messages, top):
    record = {**top, "messages": messages}
    found = plain_chat_reader(record)
    if found is not None:
        assert detect_reader(record, "messages").name == found


@given(PLAINISH, st.fixed_dictionaries({}, optional={"id": TOP["id"], "tools": TOP["tools"], "system": TOP["system"]}))
def test_plain_chat_reader_is_right_on_mostly_plain_chats(messages, top):
    record = {**top, "messages": messages}
    found = plain_chat_reader(record)
    if found is not None:
        assert detect_reader(record, "messages").name == found


@given(RECORD, st.sampled_from(["conversations", "contents", "input", "turns"]))
def test_the_shortcut_agrees_under_another_message_field(record, field):
    _agrees(record, field)


def _sample_records():
    paths = [
        ROOT / "samples" / "conversations.jsonl",
        *sorted((ROOT / "samples" / "formats").glob("*.jsonl")),
        *sorted((ROOT / "tests" / "data" / "formats").glob("*.jsonl")),
    ]
    found = []
    for path in paths:
        for line in path.read_bytes().splitlines():
            try:
                found.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return found


def test_the_shortcut_agrees_on_every_sample_record():
    records = _sample_records()
    assert len(records) > 300
    for record in records:
        _agrees(record)


def test_the_shortcut_agrees_on_the_benchmark_corpus_and_takes_it():
    sys.path.insert(0, str(ROOT / "bench"))
    import corpus

    taken = 0
    for line in corpus.jsonl_lines(400, seed=3):
        record = orjson.loads(line)
        _agrees(record)
        taken += plain_chat_reader(record) is not None
    assert taken > 350  # the shortcut is taken for the usual chat, not just correct


def test_a_plugin_reader_turns_the_shortcut_off(monkeypatch):
    from transforms.formats.base import Reader

    record = {"messages": [{"role": "user", "content": "hi"}]}
    plugin = Reader("plugin", lambda r, f: None, lambda r, f: True, priority=1)
    monkeypatch.setitem(READERS, "plugin", plugin)
    assert detect_reader_after(READERS["flat"], record, "messages") is plugin


# --------------------------------------------------------------------------------------------
# The OpenAI reader gathers the ids already taken only when it must make one.

COLLIDING_CALL = st.fixed_dictionaries(
    {"type": st.just("function"), "function": st.fixed_dictionaries({"name": st.sampled_from(["f", "g"])})},
    optional={"id": st.sampled_from(["call_1", "call_2_0", "call_1_1", None, "c1"])},
)
OPENAI_MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.one_of(st.none(), TEXT)},
        optional={
            "tool_calls": st.lists(COLLIDING_CALL, max_size=3),
            "function_call": st.fixed_dictionaries({"name": st.just("f")}),
            "refusal": TEXT,
        },
    ),
    st.fixed_dictionaries(
        {"role": st.sampled_from(["tool", "function"]), "content": TEXT},
        optional={
            "tool_call_id": st.sampled_from(["call_1", "call_3", "c1"]),
            "name": st.sampled_from(["f", "g"]),
            "tool_call_ids": st.lists(st.sampled_from(["call_1", "x"]), max_size=2),
        },
    ),
    PLAINISH.map(lambda m: m[0] if m else "junk"),
)


@given(st.lists(OPENAI_MESSAGE, max_size=8))
def test_lazy_ids_give_what_gathering_them_first_gives(messages):
    import copy

    from transforms.formats import openai
    from transforms.formats._common import IdAllocator, ids_in_messages

    class Eager:
        def __init__(self, messages):
            self._allocator = IdAllocator(ids_in_messages(messages))

        def new(self, index, sub=None):
            return self._allocator.new(index, sub)

    from transforms.formats import FormatError

    def read() -> tuple:
        try:
            return (openai.openai_to_flat(messages, report := {}, discarded := {}), report, discarded)
        except FormatError as error:  # a part type the reader does not know
            return ("refused", error.reason)

    before = copy.deepcopy(messages)
    lazy = read()
    assert messages == before  # the reader does not touch its input
    lazy_ids = openai._LazyIds
    try:
        openai._LazyIds = Eager
        eager = read()
    finally:
        openai._LazyIds = lazy_ids
    assert orjson.dumps(lazy) == orjson.dumps(eager)
