"""Agent trajectories that name a result's call in a ``tool_call_ids`` list (SWE-agent).

Shape from the project's FORMATS.md §9 (SWE-agent ``.traj``: ``history[]`` messages, tool
messages with ``tool_call_ids: [id]`` and extra keys ``message_type``, ``thought``, ``action``,
``agent``, ``is_demo``); the records are hand-written.
"""

from __future__ import annotations

import json

from transforms.core.normalize import INTERRUPTED_RESULT, normalize_conversation
from transforms.formats import READERS, detect_reader
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record
from transforms.totals import summary as summaries


def call(call_id: str, name: str = "bash", command: str = "ls") -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"command": command})},
    }


def trajectory(results: list) -> dict:
    return {
        "id": "swe-1",
        "history": [
            {
                "role": "system",
                "content": "You are a software agent.",
                "agent": "main",
                "message_type": "system_prompt",
            },
            {"role": "user", "content": "Fix the failing test.", "agent": "main", "message_type": "observation"},
            {
                "role": "assistant",
                "content": "Let me look around.",
                "thought": "Let me look around.",
                "action": "ls",
                "agent": "main",
                "message_type": "action",
                "tool_calls": [call("call_1"), call("call_2", command="pwd")],
            },
            *results,
            {"role": "assistant", "content": "Done.", "agent": "main", "message_type": "action"},
        ],
    }


def tool(ids, content: str) -> dict:
    return {"role": "tool", "content": content, "tool_call_ids": ids, "agent": "main", "message_type": "observation"}


def test_one_element_lists_give_the_id_and_nothing_is_healed():
    record = trajectory([tool(["call_1"], "a.py b.py"), tool(["call_2"], "/repo")])
    assert detect_reader(record, "history").name == "openai"
    conversation = READERS["openai"].read(record, "history")
    result = normalize_conversation(conversation.messages)
    assert [(m["tool_call_id"], m["content"]) for m in result.messages if m["role"] == "tool"] == [
        ("call_1", "a.py b.py"),
        ("call_2", "/repo"),
    ]
    # Before: both results were orphans and both calls got synthetic "interrupted" results.
    assert (result.dropped, result.healed) == (0, 0)
    assert INTERRUPTED_RESULT not in [m["content"] for m in result.messages]
    assert conversation.report is None


def test_a_longer_list_gives_one_result_per_id_and_is_counted():
    record = trajectory([tool(["call_1", "call_2"], "a.py b.py\n/repo")])
    conversation = READERS["openai"].read(record, "history")
    result = normalize_conversation(conversation.messages)
    assert [(m["tool_call_id"], m["content"]) for m in result.messages if m["role"] == "tool"] == [
        ("call_1", "a.py b.py\n/repo"),
        ("call_2", "a.py b.py\n/repo"),
    ]
    assert (result.dropped, result.healed) == (0, 0)
    assert conversation.report == {"tool_call_ids_split": 1}


def test_tool_call_id_wins_and_an_empty_list_names_nothing():
    record = trajectory([{**tool(["call_9"], "x"), "tool_call_id": "call_1"}, tool([], "y")])
    messages = READERS["openai"].read(record, "history").messages
    results = [m for m in messages if m.get("role") == "tool"]
    assert [m.get("tool_call_id") for m in results] == ["call_1", None]
    assert all("tool_call_ids" not in m for m in results)


def test_the_split_count_reaches_drops_and_the_summary():
    record = trajectory([tool(["call_1", "call_2"], "both")])
    raw = RawRecord("t.jsonl", 0, json.dumps(record).encode())
    outcome = process_record(raw, Settings(messages_field="history"))
    assert outcome.dead_letter is None
    assert outcome.metrics["reader_report"] == {"tool_call_ids_split": 1}
    doc = summaries.finalize(summaries.partial(1, [outcome.metrics, outcome.metrics]))
    assert doc["reader_report"] == {"tool_call_ids_split": 2}
    assert "reader tool_call_ids_split" in summaries.format_table(doc)
