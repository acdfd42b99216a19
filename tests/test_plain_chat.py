"""The plain-chat pass (``formats.plain_chat``) is right about all three things it says.

Within a batch, after a plain chat, the job reads the next record with one pass over its
messages: the reader full detection gives (``tests/test_detect_fast.py``), whether the messages
go to the core as they are (``as_is``: the job then calls no reader) and whether coercion
discards anything (``keys_kept``: the job then skips the ledger's pass). Here each claim is held
to what it replaces, on generated records: the reader's own read for the core, the ledger's
own pass, and a whole batch processed with and without the pass, byte for byte.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
from _pytest.monkeypatch import MonkeyPatch
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
for path in (str(ROOT), str(ROOT / "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from test_detect_fast import PLAINISH, PROPERTIES  # noqa: E402
from test_detect_fast import RECORD as DETECT_RECORD  # noqa: E402
from test_openai_fast_path import MESSAGES, SETTINGS  # noqa: E402

from transforms import formats, record_steps  # noqa: E402
from transforms.formats import READERS, detect_reader, plain_chat  # noqa: E402
from transforms.inputs import RawRecord  # noqa: E402
from transforms.ledger import coercion_discards  # noqa: E402
from transforms.records import normalize_batch  # noqa: E402

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
RECORDS = st.one_of(
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


@PROPERTIES
@given(RECORDS)
def test_what_plain_chat_says_holds(record):
    _claims_hold(record)


def _batch_bytes(records, settings) -> bytes:
    raws = [RawRecord("in.jsonl", i, orjson.dumps(r)) for i, r in enumerate(records)]
    result = normalize_batch(raws, settings, taken={})
    return orjson.dumps(
        [result.records, result.metrics, result.dead_letters, result.lines],
        option=orjson.OPT_PASSTHROUGH_SUBCLASS,
        default=repr,
    )


@PROPERTIES
@given(st.lists(RECORDS, min_size=1, max_size=4))
def test_a_batch_with_the_pass_is_the_batch_without_it(records):
    batch = [PRIMER, *records]
    for settings in SETTINGS:
        fast = _batch_bytes(batch, settings)
        with MonkeyPatch.context() as patch:
            patch.setattr(record_steps, "plain_chat_after", lambda previous, record, field: None)
            full = _batch_bytes(batch, settings)
        assert fast == full, settings


def test_the_bench_corpus_takes_the_pass_whole():
    # Not vacuous: the usual log is read in one pass, no reader called, no ledger pass.
    import corpus

    found = [plain_chat(orjson.loads(line)) for line in corpus.jsonl_lines(300, seed=3)]
    whole = [f for f in found if f is not None and f.as_is and f.keys_kept]
    assert len(whole) > 250
    assert "openai" in {f.reader for f in whole}
    assert any(f is not None and not f.keys_kept for f in found)  # stored-buffer rows (metadata)


def test_a_plug_in_reader_turns_the_pass_off(monkeypatch):
    from transforms.formats.base import Reader

    plugin = Reader("plugin", lambda r, f: None, lambda r, f: True, priority=1)
    monkeypatch.setitem(READERS, "plugin", plugin)
    assert formats.plain_chat_after(READERS["flat"], PRIMER, "messages") is None
