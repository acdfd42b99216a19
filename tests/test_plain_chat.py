"""The plain-chat pass (``formats.plain_chat``) is right about all three things it says, and the
core's reading (``formats.plain_chat_read``) says the same without a pass.

Within a batch, after a plain chat, the job reads the next record with one pass over its
messages: the reader full detection gives (``tests/test_detect_fast.py``), whether the messages
go to the core as they are (``as_is``: the job then calls no reader) and whether coercion
discards anything (``keys_kept``: the job then skips the ledger's pass). Under the ``spec``
profile the core goes first, and when it read the messages whole that pass is skipped too.
Here each claim is held to what it replaces, on generated records: the reader's own read for
the core, the ledger's own pass, ``plain_chat`` itself, and a whole batch processed with and
without both shortcuts, byte for byte.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from _pytest.monkeypatch import MonkeyPatch
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
for path in (str(ROOT), str(ROOT / "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from test_detect_fast import PLAINISH  # noqa: E402
from test_detect_fast import RECORD as DETECT_RECORD  # noqa: E402
from test_openai_fast_path import MESSAGES, SETTINGS  # noqa: E402

from transforms import formats  # noqa: E402
from transforms.core.ledger import coercion_discards  # noqa: E402
from transforms.core.normalize import normalize_conversation, normalize_read  # noqa: E402
from transforms.formats import READERS, detect_reader, plain_chat  # noqa: E402
from transforms.record import record_steps  # noqa: E402
from transforms.record import records as run_step  # noqa: E402
from transforms.record.inputs import RawRecord  # noqa: E402
from transforms.record.records import normalize_batch  # noqa: E402

#: Pairing keys that are not what the core reads: the ledger counts them when not empty.
ODD_PAIRING = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["assistant", "user"]),
                "content": st.just("x"),
                "tool_calls": st.sampled_from(["c1", {"id": 1}, 5, [], None, {}]),
            }
        ),
        st.fixed_dictionaries(
            {"role": st.sampled_from(["tool", "user"]), "content": st.just("r"), "tool_call_id": st.just("c1")}
        ),
    ),
    min_size=1,
    max_size=3,
)
# Usual chats with at most one unusual thing each: a whole reading is likely, and every way of
# not being one is tried on its own.
USUAL_ID = st.sampled_from(["c1", "c2", "c3"])
USUAL_CALL = st.one_of(
    st.fixed_dictionaries(
        {"id": USUAL_ID, "type": st.just("function"), "function": st.just({"name": "f", "arguments": "{}"})}
    ),
    st.fixed_dictionaries({"tool_call_id": USUAL_ID, "name": st.just("f")}, optional={"args": st.just({"a": 1})}),
)
USUAL = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]), "content": st.sampled_from(["hi", None])}),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": st.sampled_from(["", "ok", None]),
            "tool_calls": st.lists(USUAL_CALL, max_size=2),
        }
    ),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": st.just("done")}),
    st.fixed_dictionaries({"role": st.just("tool"), "content": st.just("r"), "tool_call_id": USUAL_ID}),
)
ODD_CALLS = [
    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}", "input": "x"}},
    {"id": "c1", "type": "custom", "custom": {"name": "g", "input": "x"}},
    {"type": "function", "function": {"name": "f", "arguments": "{}"}},
    {"id": "c1", "type": "function", "function": {"name": "f"}, "extra": 1},
    {"id": "c1", "tool_call_id": "c2", "name": "f"},
    {"id": "c1", "function": "f"},
    {"id": None, "name": "f"},
    "junk",
]
ODD_MESSAGES = [
    *({"role": "assistant", "content": None, "tool_calls": [call]} for call in ODD_CALLS),
    {"role": "user", "name": "x"},
    {"role": "user", "content": "hi", "name": "x"},
    {"role": "assistant", "tool_calls": [{"id": "c1", "name": "f"}]},
    {"role": "assistant", "content": None, "tool_calls": None},
    {"role": "assistant", "content": "x", "tool_calls": "c1"},
    {"role": "assistant", "content": "x", "refusal": "no"},
    {"role": "tool", "tool_call_id": "c1"},
    {"role": "tool", "content": "r", "tool_call_ids": ["c1"]},
    {"role": "tool", "content": "r", "metadata": {"tool_call_id": "c1"}},
    {"role": "user", "content": [{"type": "text", "text": "a"}]},
    {"role": "user", "content": {"a": 1}},
    {"role": "user", "content": 3},
    {"role": "developer", "content": "d"},
    {"role": "function", "content": "r", "name": "f"},
    {"role": "observation", "content": "o"},
    {"from": "human", "value": "hi"},
    {"role": "user", "content": "hi", "from": "x"},
    "junk",
    None,
]
ODD = st.sampled_from(ODD_MESSAGES)
WHOLEISH = st.builds(
    lambda usual, odd, at: {"id": "r", "messages": usual[:at] + odd + usual[at:]},
    st.lists(USUAL, min_size=1, max_size=6),
    st.lists(ODD, max_size=1),
    st.integers(0, 6),
)
RECORDS = st.one_of(
    WHOLEISH,
    st.builds(lambda m: {"messages": m}, MESSAGES),
    st.builds(lambda m: {"messages": m}, ODD_PAIRING),
    st.builds(lambda m: {"id": "r", "messages": m}, PLAINISH),
    DETECT_RECORD,
)
#: A plain chat first, so that the batch's hint says "plain" when the record under test comes.
PRIMER = {"id": "p", "messages": [{"role": "user", "content": "hi"}]}


def _claims_hold(record) -> None:
    found = plain_chat(record)
    if found is None:
        return
    reader = READERS[found.reader]
    assert reader is detect_reader(record, "messages")
    if found.as_is:
        read = reader.read_for_core or reader.read
        conversation = read(record, "messages")
        assert len(conversation.messages) == len(record["messages"])
        assert all(a is b for a, b in zip(conversation.messages, record["messages"]))
        assert conversation.fields is record
        assert conversation.report is None and conversation.discarded is None
    if found.keys_kept:
        messages = (reader.read_for_core or reader.read)(record, "messages").messages
        assert coercion_discards(messages) == {}


@given(RECORDS)
def test_what_plain_chat_says_holds(record):
    _claims_hold(record)


def _reading_agrees(record) -> None:
    messages = formats._plain_top(record, "messages")
    if messages is None:
        return
    result, reading = normalize_read(messages)
    assert result == normalize_conversation(messages)
    said = formats.plain_chat_read(reading)
    if said is not None:
        assert plain_chat(record) == said


@given(RECORDS)
def test_a_whole_reading_says_what_plain_chat_says(record):
    _reading_agrees(record)


@pytest.mark.parametrize("odd", ODD_MESSAGES, ids=repr)
def test_each_unusual_message_is_judged_alike_by_the_reading_and_the_pass(odd):
    usual = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    record = {"id": "r", "messages": [*usual, odd]}
    assert formats.plain_chat_read(normalize_read(record["messages"])[1]) is None
    _reading_agrees(record)
    _reading_agrees({"id": "r", "messages": usual})  # (read whole without it)
    assert formats.plain_chat_read(normalize_read(usual)[1]) is not None


def _batch_bytes(records, settings) -> bytes:
    raws = [RawRecord("in.jsonl", i, orjson.dumps(r)) for i, r in enumerate(records)]
    result = normalize_batch(raws, settings, taken={})
    return orjson.dumps(
        [result.records, result.metrics, result.dead_letters, result.lines],
        option=orjson.OPT_PASSTHROUGH_SUBCLASS,
        default=repr,
    )


@given(st.lists(RECORDS, min_size=1, max_size=4))
def test_a_batch_with_the_pass_is_the_batch_without_it(records):
    batch = [PRIMER, *records]
    for settings in SETTINGS:
        fast = _batch_bytes(batch, settings)
        with MonkeyPatch.context() as patch:
            patch.setattr(record_steps, "plain_chat_after", lambda previous, record, field: None)
            patch.setattr(run_step, "plain_chat_messages", lambda previous, record, field: None)
            full = _batch_bytes(batch, settings)
        assert fast == full, settings


def test_the_bench_corpus_takes_the_shortcuts():
    # Not vacuous: the usual log is read in one pass, no reader called, no ledger pass, and
    # most of it read whole by the core alone.
    import corpus

    records_ = [orjson.loads(line) for line in corpus.jsonl_lines(300, seed=3)]
    found = [plain_chat(r) for r in records_]
    whole = [f for f in found if f is not None and f.as_is and f.keys_kept]
    assert len(whole) > 250
    assert "openai" in {f.reader for f in whole}
    assert any(f is not None and not f.keys_kept for f in found)  # stored-buffer rows (metadata)
    read = [formats.plain_chat_read(normalize_read(r["messages"])[1]) for r in records_]
    assert sum(r is not None for r in read) > 250
    assert any(r is None for r, f in zip(read, found) if f is not None and f.as_is)  # the pass decides


def test_a_plug_in_reader_turns_the_pass_off(monkeypatch):
    from transforms.formats.base import Reader

    plugin = Reader("plugin", lambda r, f: None, lambda r, f: True, priority=1)
    monkeypatch.setitem(READERS, "plugin", plugin)
    assert formats.plain_chat_after(READERS["flat"], PRIMER, "messages") is None


def test_the_job_keeps_the_reader_hint_from_batch_to_batch_of_a_file(monkeypatch):
    # Full detection runs for a file's first record only, not for each batch's first.
    from transforms.conversations import NORMALIZE, RouteConversations
    from transforms.record.inputs import Batch
    from transforms.record.record_settings import Settings

    calls = []
    real = record_steps.detect_reader
    monkeypatch.setattr(record_steps, "detect_reader", lambda *a: calls.append(a) or real(*a))
    route = RouteConversations(NORMALIZE, Settings(), lines_only=True)
    route.setup()
    route.start_bundle()
    chat = orjson.dumps({"id": "r", "messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]})
    for shard, start in ((0, 0), (0, 2), (1, 0)):
        list(route.process(Batch(shard, start, [RawRecord("in.jsonl", start + i, chat) for i in range(2)])))
    assert len(calls) == 2  # shard 0's first record, shard 1's first record
