"""A call's history is read and hashed once per group: the shortcuts that make call-log rows
cheap give what the full path gives (plain chats read by the flat reader without asking every
reader, a Langfuse history read as its group's previous one and more, a chain hashed from the
previous call's, a group's state shuffled without its indexes)."""

from __future__ import annotations

import hashlib
import json
import pickle

from hypothesis import given
from hypothesis import strategies as st

from transforms.calllogs import langfuse
from transforms.calllogs.assemble import GroupState, assemble, chain_of, comparable, message_digest
from transforms.calllogs.calls import Call
from transforms.calllogs.embedded import plain_chat, read_history, role_and_text_only, strict_flat
from transforms.formats import READERS
from transforms.formats.base import detect_reader
from transforms.formats.flat import FLAT_READER

ROLES = st.sampled_from(["system", "user", "assistant", "tool", "model", "bot", "USER", "CHATBOT", " ", "human"])
TEXT = st.text(max_size=30) | st.sampled_from(["", "[]", "{}", '[{"name": "f"}]', "data: x", "null"])
PLAIN = st.lists(st.fixed_dictionaries({"role": ROLES, "content": TEXT}), max_size=6)


def _full_chain(messages: list) -> list[bytes]:
    """The chain as ``comparable`` and ``message_digest`` define it, message by message."""
    chain, previous = [], b""
    for message in comparable(messages):
        previous = hashlib.blake2b(previous + message_digest(message), digest_size=16).digest()
        chain.append(previous)
    return chain


@given(PLAIN)
def test_every_reader_but_the_flat_one_refuses_a_plain_chat(messages):
    # What lets read_history skip detection: with the built-in readers, detection answers flat.
    assert READERS.keys() <= {"sharegpt", "bedrock-converse", "anthropic", "gemini"} | {
        "openai-responses",
        "cohere-v1",
        "openai",
        "flat",
        "braintrust",
        "openpipe-dataset",
    }
    # Each reader's own detection refuses it, one by one (not only the first to answer).
    assert [name for name, reader in READERS.items() if name != "flat" and reader.detect(messages, "messages")] == []
    assert plain_chat(messages)
    assert detect_reader(messages) is FLAT_READER


def test_a_role_a_reader_looks_for_is_not_a_plain_chat():
    for role in ("function", "developer", "function_call", "observation"):
        messages = [{"role": role, "content": "x"}]
        assert not plain_chat(messages)
        assert detect_reader(messages) is not FLAT_READER
    assert not plain_chat([{"role": "user", "content": [{"type": "text", "text": "x"}]}])
    assert not plain_chat([{"role": "user", "content": "x", "name": "n"}])


@given(PLAIN)
def test_strict_flat_of_a_plain_chat_is_its_messages(messages):
    shortcut = role_and_text_only(messages)
    ledger: dict = {}
    full = strict_flat(messages, ledger)
    assert ledger == {}
    if not any(m["role"] == "tool" or not m["role"].strip() for m in messages):
        assert shortcut == full == read_history(messages, "input").messages
    else:
        assert shortcut is None


def _row(trace: str, n: int, history: list, output: dict, separator: str = ", ") -> dict:
    return {
        "id": f"{trace}-obs-{n}",
        "trace_id": trace,
        "type": "GENERATION",
        "parent_observation_id": "",
        "start_time": f"2024-01-01 00:00:{n:02d}.000000",
        "input": json.dumps(history, ensure_ascii=False, separators=(separator, ": ")),
        "output": json.dumps(output, ensure_ascii=False),
    }


def _read_fresh(row: dict) -> list:
    langfuse._recent.histories.clear()
    return langfuse.read_langfuse(row)


HISTORIES = [
    [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}],
    [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
    # A call entry after a plain prefix: the full path.
    [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "f"}}]},
    ],
    # Koog's listed calls in a content: not plain, read as calls.
    [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "[]"}],
]


def test_a_langfuse_history_read_after_its_groups_previous_one_is_read_as_alone():
    rows = []
    for n, history in enumerate([*HISTORIES, HISTORIES[1]]):
        rows.append(_row("t1", n, history, {"role": "assistant", "content": f"answer {n}"}))
        # Another group between: each group keeps its own last history.
        rows.append(_row("t2", n, history[:1], {"role": "assistant", "content": "other"}))
    # Texts that only look like a continuation: a trailing comma, another separator.
    rows.append(_row("t1", 20, HISTORIES[0], {"role": "assistant", "content": "x"}, separator=","))
    # Right after the history it would continue: "[a, b,]" is no JSON, though "[]" is.
    rows.append(rows[0])
    rows.append(dict(rows[0], id="broken", input=rows[0]["input"][:-1] + ",]"))
    langfuse._recent.histories.clear()
    in_order = [langfuse.read_langfuse(row) for row in rows]
    assert in_order == [_read_fresh(row) for row in rows]
    # The continuation was taken (the same message objects as the previous call's).
    langfuse._recent.histories.clear()
    first, second = (langfuse.read_langfuse(row)[0] for row in rows[:3:2])
    assert second.history[0] is first.history[0]


@given(st.lists(PLAIN, min_size=1, max_size=5), st.lists(st.integers(0, 4), max_size=8))
def test_a_chain_hashed_from_the_previous_calls_is_the_full_one(histories, order):
    state = GroupState()
    grown: list = []
    for n, history in enumerate(histories):
        grown = [*grown, *history]  # the same message objects, and more
        output = [{"role": "assistant", "content": f"o{n}"}]
        state.add("f", n, Call("test", "g", n, f"c{n}", grown, output))
    for n in order:
        messages = [*histories[n % len(histories)], {"role": "user", "content": "again"}]
        state.add("f", 100 + n, Call("test", "g", 100 + n, f"d{n}", messages, []))
    for sequence in state.sequences:
        assert sequence.chain == _full_chain(sequence.messages) == chain_of(sequence.messages)


def test_a_group_state_shuffled_assembles_the_same_conversations():
    state = GroupState()
    grown: list = []
    for n, history in enumerate(HISTORIES):
        grown = history
        state.add("f", n, Call("test", "g", n, f"c{n}", grown, [{"role": "assistant", "content": "x"}]))
    again = pickle.loads(pickle.dumps(state))
    assert (again.prefixes, again.ends) == (state.prefixes, state.ends)
    assert [s.chain for s in again.sequences] == [s.chain for s in state.sequences]
    assert assemble("test", "g", again) == assemble("test", "g", state)
