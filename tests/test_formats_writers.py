"""Writers: every fixture and ToolBench chain, normalized, written and checked against the
provider shapes of ``provider_shapes``; then each writer's decisions one by one.

Writers receive normalized records (``transforms.core.normalize.normalize_conversation`` output
beside the carried fields), so every case here normalizes first, as the job does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import provider_shapes as shapes  # noqa: E402

from transforms.core.normalize import INTERRUPTED_RESULT, normalize_conversation  # noqa: E402
from transforms.formats import READERS, WRITERS, FormatError, WriteContext, Writer  # noqa: E402

DATA = Path(__file__).parent / "data"
FORMATS = ("openai", "openai-responses", "anthropic", "sharegpt", "gemini", "bedrock-converse")
CHECKS = {
    "openai-finetune": shapes.openai_finetune_errors,
    "openai-batch": shapes.openai_batch_errors,
    "anthropic": shapes.anthropic_request_errors,
    "openai-responses": shapes.openai_responses_errors,
    "gemini": shapes.gemini_request_errors,
    "bedrock-converse": shapes.bedrock_request_errors,
}
# Fixtures a writer must refuse, and why: the target format cannot hold them.
REFUSED = {
    ("oa-custom-tool", "anthropic"): "args_not_json",  # free-text input is no JSON object
    ("rs-custom-tool-image", "anthropic"): "args_not_json",
    ("oa-custom-tool", "gemini"): "args_not_json",
    ("rs-custom-tool-image", "gemini"): "args_not_json",
    ("rs-string-input", "openai-finetune"): "no_assistant_message",
    # Fine-tuning lines take function tools only.
    ("oa-custom-tool", "openai-finetune"): "unconvertible_tool",
    ("oa-custom-tool", "bedrock-converse"): "args_not_json",
    ("rs-custom-tool-image", "bedrock-converse"): "args_not_json",
    # A Bedrock system tool (nova_grounding) has no definition in any other format.
    **{
        ("bc-server-tool", sink): "unconvertible_tool"
        for sink in ("openai-finetune", "openai-batch", "anthropic", "openai-responses", "gemini")
    },
}


def load(fmt: str) -> list:
    with (DATA / "formats" / f"{fmt}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def normalized_record(fmt: str, record, field: str = "messages") -> dict:
    """What the job hands a writer: the carried fields with the normalized messages."""
    conversation = READERS[fmt].read(record, field)
    out = dict(conversation.fields)
    out[field] = normalize_conversation(conversation.messages).messages
    return out


def write(sink: str, record: dict, rid: str = "r1", model: str | None = "test-model", field: str = "messages"):
    return WRITERS[sink].write(record, WriteContext(rid, messages_field=field, model=model))


def flat_record(messages: list, **fields) -> dict:
    return {"id": "r1", "messages": normalize_conversation(messages).messages, **fields}


ALL = [(fmt, r) for fmt in FORMATS for r in load(fmt)]
ALL_IDS = [f"{fmt}-{r.get('id') if isinstance(r, dict) else n}" for n, (fmt, r) in enumerate(ALL)]


@pytest.mark.parametrize("sink", sorted(CHECKS))
@pytest.mark.parametrize("fmt,record", ALL, ids=ALL_IDS)
def test_every_fixture_writes_a_provider_valid_record(fmt, record, sink):
    rid = record.get("id", "bare") if isinstance(record, dict) else "bare"
    normalized = normalized_record(fmt, record)
    refused = REFUSED.get((rid, sink))
    if refused:
        with pytest.raises(FormatError) as err:
            write(sink, normalized, rid)
        assert err.value.reason == refused
        return
    assert CHECKS[sink](write(sink, normalized, rid)) == []


def _toolbench_chains():
    for path in sorted((DATA / "corpora" / "ToolBench").rglob("*.json")):
        generation = json.loads(path.read_text(encoding="utf-8"))["answer_generation"]
        if generation.get("train_messages"):
            yield (
                path.stem,
                {"id": path.stem, "messages": generation["train_messages"][-1], "functions": generation["function"]},
            )


TOOLBENCH = list(_toolbench_chains())


@pytest.mark.parametrize("sink", sorted(CHECKS))
@pytest.mark.parametrize("rid,record", TOOLBENCH, ids=[r for r, _ in TOOLBENCH])
def test_toolbench_chains_write_provider_valid_records(rid, record, sink):
    out = write(sink, normalized_record("openai", record), rid)
    assert CHECKS[sink](out) == []
    if sink == "bedrock-converse":
        tools = [t["toolSpec"] for t in out["toolConfig"]["tools"]]
    else:
        tools = out["body"]["tools"] if sink == "openai-batch" else out["tools"]
    if sink == "gemini":
        tools = tools[0]["functionDeclarations"]  # one Tool holding every declaration
    # Legacy `functions` become tools in the target's own shape; for Anthropic, a called tool
    # that `functions` lacks (ToolBench's pseudo-tool `Finish`) gets a derived definition.
    declared = {f["name"] for f in record["functions"]}
    called = {c["function_call"]["name"] for c in record["messages"] if c.get("function_call")}
    derived = called - declared if sink in ("anthropic", "bedrock-converse") else set()
    assert len(tools) == len(record["functions"]) + len(derived)
    assert {t["name"] for t in tools[len(record["functions"]) :]} == derived


# --------------------------------------------------------------------------------------------
# What each writer needs from the command line (Writer.uses; the job warns when it is missing)


def test_writers_declare_the_options_they_fall_back_to():
    assert {name: writer.uses for name, writer in WRITERS.items()} == {
        "flat": (),
        "openai-finetune": (),
        "openai-batch": ("model",),
        "anthropic": ("model", "max_tokens"),
        "sharegpt": (),
        "openai-responses": ("model",),
        "gemini": (),
        "bedrock-converse": ("model",),
        "hf": (),
        "trl-dpo": (),
        "trl-kto": (),
        "trl-prompts": (),
    }
    with pytest.raises(ValueError, match="unknown WriteContext field"):
        Writer("x", lambda record, ctx: record, uses=("temperature",))


OPTION_VALUES = {"model": ("model-a", "model-b"), "max_tokens": (11, 22)}


@pytest.mark.parametrize("sink", sorted(WRITERS))
def test_uses_is_exactly_what_changes_a_writers_output(sink):
    # On records that lack their own model and max_tokens: changing an option the writer does
    # not declare never changes its output, and each one it declares changes some output.
    base = {name: values[0] for name, values in OPTION_VALUES.items()}
    changed = set()
    for fmt, record in ALL:
        rid = record.get("id", "bare") if isinstance(record, dict) else "bare"
        normalized = {k: v for k, v in normalized_record(fmt, record).items() if k not in ("model", "max_tokens")}
        try:
            reference = WRITERS[sink].write(normalized, WriteContext(rid, **base))
        except FormatError:
            continue
        for name, values in OPTION_VALUES.items():
            other = WRITERS[sink].write(normalized, WriteContext(rid, **{**base, name: values[1]}))
            if other != reference:
                changed.add(name)
    assert changed == set(WRITERS[sink].uses)


def test_flat_writer_is_the_identity():
    record = normalized_record("openai", load("openai")[0])
    assert write("flat", record) is record


# --------------------------------------------------------------------------------------------
# openai-finetune / openai-batch

CALL_TURN = [
    {"role": "user", "content": "q"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"tool_call_id": "c1", "name": "f", "args": {"b": [1, "é"], "a": None}},
            {"tool_call_id": "c2", "name": "g", "args": '{"raw": true}'},
            {"tool_call_id": "c3", "name": "h"},
        ],
    },
    {"role": "tool", "content": "1", "tool_call_id": "c1"},
    {"role": "tool", "content": "2", "tool_call_id": "c2"},
    {"role": "tool", "content": "3", "tool_call_id": "c3"},
    {"role": "assistant", "content": "done"},
]


def test_openai_arguments_and_call_only_content():
    out = write("openai-finetune", flat_record(CALL_TURN))
    assistant = out["messages"][1]
    assert assistant["content"] is None
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [
        '{"b":[1,"é"],"a":null}',  # an object: compact JSON, key order and non-ASCII kept
        '{"raw": true}',  # a string: as it is
        "{}",  # no arguments
    ]
    assert assistant["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": '{"b":[1,"é"],"a":null}'},
    }
    assert out["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "1"}
    assert shapes.openai_finetune_errors(out) == []


def test_openai_finetune_line_keys_and_carried_tools():
    record = flat_record(
        CALL_TURN, tools=[{"type": "function", "function": {"name": "f"}}], parallel_tool_calls=False, metadata={"x": 1}
    )
    out = write("openai-finetune", record)
    assert list(out) == ["messages", "tools", "parallel_tool_calls"]
    assert out["tools"] == record["tools"] and out["parallel_tool_calls"] is False


def test_openai_tool_schemas_convert_to_the_chat_shape():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    bare = {"name": "w", "description": "d", "parameters": schema}
    cases = [
        ({"functions": [bare]}, [{"type": "function", "function": bare}]),
        ({"tools": json.dumps([bare])}, [{"type": "function", "function": bare}]),
        (
            {"tools": [{"type": "function", "name": "w", "description": "d", "parameters": schema, "strict": True}]},
            [{"type": "function", "function": {"name": "w", "description": "d", "parameters": schema, "strict": True}}],
        ),
        (
            {"tools": [{"name": "w", "description": "d", "input_schema": schema}]},
            [{"type": "function", "function": {"name": "w", "description": "d", "parameters": schema}}],
        ),
        (
            {"tools": [{"type": "custom", "name": "py", "description": "runs code"}]},
            [{"type": "custom", "custom": {"name": "py", "description": "runs code"}}],
        ),
        ({"tools": ""}, None),
        ({"tools": []}, None),
    ]
    for fields, expected in cases:
        # openai-batch: a fine-tuning line refuses custom tools (test_openai_custom_tool_calls_...).
        out = write("openai-batch", flat_record(CALL_TURN, **fields))["body"]
        assert out.get("tools") == expected, fields


@pytest.mark.parametrize(
    "tools,reason",
    [
        ([{"name": "w", "input_schema": {}, "cache_control": {"type": "ephemeral"}}], "unconvertible_tool"),
        ([{"type": "web_search_20250305", "name": "web_search"}], "unconvertible_tool"),
        ("not json", "tools_not_a_list"),
        ({"name": "w"}, "tools_not_a_list"),
    ],
)
def test_openai_tools_that_cannot_convert(tools, reason):
    with pytest.raises(FormatError) as err:
        write("openai-finetune", flat_record(CALL_TURN, tools=tools))
    assert err.value.reason == reason


def test_openai_custom_tool_calls_are_written_back_as_custom():
    record = normalized_record(
        "openai", next(r for r in load("openai") if isinstance(r, dict) and r["id"] == "oa-custom-tool")
    )
    call = write("openai-batch", record)["body"]["messages"][1]["tool_calls"][0]
    assert call == {"id": "call_cx1", "type": "custom", "custom": {"name": "python", "input": "print(2**100)"}}
    # A fine-tuning line takes function tools only: refused, saying which tool.
    with pytest.raises(FormatError) as err:
        write("openai-finetune", record)
    assert err.value.reason == "unconvertible_tool" and "'python'" in str(err.value)


def test_openai_roles_and_empty_conversations():
    with pytest.raises(FormatError) as err:
        write(
            "openai-finetune",
            flat_record([{"role": "moderator", "content": "x"}, {"role": "assistant", "content": "y"}]),
        )
    assert err.value.reason == "unsupported_role"
    out = write("openai-batch", flat_record([{"role": "developer", "content": "x"}, {"role": "user", "content": "y"}]))
    assert out["body"]["messages"][0] == {"role": "developer", "content": "x"}
    for sink in ("openai-finetune", "openai-batch", "anthropic"):
        with pytest.raises(FormatError) as err:
            write(sink, flat_record([]))
        assert err.value.reason == "empty_conversation"


def test_openai_batch_line():
    record = flat_record(
        CALL_TURN, tools=[{"type": "function", "function": {"name": "f"}}], parallel_tool_calls=True, model="gpt-4o"
    )
    out = write("openai-batch", record, rid="conv-42", model="gpt-4.1-mini")
    assert list(out) == ["custom_id", "method", "url", "body"]
    assert out["custom_id"] == "conv-42" and out["method"] == "POST" and out["url"] == "/v1/chat/completions"
    assert list(out["body"]) == ["model", "messages", "tools", "parallel_tool_calls"]
    assert out["body"]["model"] == "gpt-4.1-mini"
    assert out["body"]["messages"] == write("openai-finetune", record)["messages"]
    assert shapes.openai_batch_errors(out) == []
    # Without --model the record's own model is used; without either, the line cannot be written.
    assert write("openai-batch", record, model=None)["body"]["model"] == "gpt-4o"
    with pytest.raises(FormatError) as err:
        write("openai-batch", flat_record(CALL_TURN), model=None)
    assert err.value.reason == "missing_model"
    # parallel_tool_calls only goes with tools (the API refuses it alone).
    assert "parallel_tool_calls" not in write("openai-batch", flat_record(CALL_TURN, parallel_tool_calls=True))["body"]


@pytest.mark.parametrize("sink", sorted(CHECKS))
@pytest.mark.parametrize(
    "messages",
    [
        # A result before its call, not leading: MEM-5 leaves it in place (the literal case).
        [
            {"role": "user", "content": "q"},
            {"role": "tool", "content": "r", "tool_call_id": "c1"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
        ],
        # A result after a later turn: answered "anywhere in the list" for MEM-5.
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
            {"role": "user", "content": "still there?"},
            {"role": "tool", "content": "r", "tool_call_id": "c1"},
        ],
        # Blank messages and lifted ones break the block too: the check is on the list as normalized.
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
            {"role": "developer", "content": "d"},
            {"role": "tool", "content": "r", "tool_call_id": "c1"},
        ],
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
            {"role": "user", "content": " "},
            {"role": "tool", "content": "r", "tool_call_id": "c1"},
        ],
        # One result of two in the block, the other after the next turn.
        [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"tool_call_id": "c1", "name": "f"}, {"tool_call_id": "c2", "name": "f"}],
            },
            {"role": "tool", "content": "1", "tool_call_id": "c1"},
            {"role": "assistant", "content": "so far"},
            {"role": "tool", "content": "2", "tool_call_id": "c2"},
        ],
    ],
    ids=["before", "after", "developer-between", "blank-between", "one-of-two"],
)
def test_writers_refuse_a_result_outside_its_calls_block(messages, sink):
    record = flat_record(messages)
    assert record["messages"] == messages, "MEM-5 keeps the result where it is"
    with pytest.raises(FormatError) as err:
        write(sink, record)
    assert err.value.reason == "result_not_adjacent"
    assert "c1" in str(err.value) or "c2" in str(err.value)
    assert str(err.value).endswith("--profile lossless re-attaches displaced results")


def test_results_in_a_block_are_written_in_block_order():
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"tool_call_id": "c1", "name": "f"}, {"tool_call_id": "c2", "name": "f"}],
        },
        {"role": "tool", "content": "2", "tool_call_id": "c2"},
        {"role": "tool", "content": "1", "tool_call_id": "c1"},
        {"role": "user", "content": "thanks"},
    ]
    record = flat_record(messages)
    for sink in ("openai-finetune", "openai-batch"):
        out = write(sink, record)
        chat = out["body"]["messages"] if sink == "openai-batch" else out["messages"]
        assert [m.get("tool_call_id") for m in chat] == [None, None, "c2", "c1", None]
        assert CHECKS[sink](out) == []
    out = write("anthropic", record)
    # The block becomes one user message: its results in block order, then the user's text.
    assert out["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c2", "content": "2"},
            {"type": "tool_result", "tool_use_id": "c1", "content": "1"},
            {"type": "text", "text": "thanks"},
        ],
    }
    assert CHECKS["anthropic"](out) == []


def test_writers_refuse_records_that_were_not_normalized():
    # (A call left unanswered by the last message is a training example's target, which
    # openai-finetune writes: tests/test_training.py. Before another message, it is refused.)
    unanswered = {
        "messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
            {"role": "user", "content": "q"},
        ]
    }
    orphan = {"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "r", "tool_call_id": "zz"}]}
    redeclared = {
        "messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
            {"role": "tool", "content": "r", "tool_call_id": "c1"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
        ]
    }
    duplicate = {
        "messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f"}]},
            {"role": "tool", "content": "r", "tool_call_id": "c1"},
            {"role": "tool", "content": "r", "tool_call_id": "c1"},
        ]
    }
    cases = (
        (unanswered, "unanswered_call"),
        (orphan, "orphan_result"),
        (redeclared, "redeclared_call"),
        (duplicate, "duplicate_result"),
    )
    for sink in ("openai-finetune", "openai-batch", "anthropic"):
        for record, reason in cases:
            with pytest.raises(FormatError) as err:
                write(sink, record)
            assert err.value.reason == reason


# --------------------------------------------------------------------------------------------
# anthropic


def test_anthropic_request_body():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Oslo and Lima?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"tool_call_id": "toolu_1", "name": "w", "args": '{"city": "Oslo"}'},
                {"tool_call_id": "toolu_2", "name": "w", "args": {"city": "Lima"}},
            ],
        },
        {"role": "tool", "content": "4C", "tool_call_id": "toolu_1"},
        {"role": "tool", "content": "[error] timeout", "tool_call_id": "toolu_2"},
        {"role": "user", "content": "Thanks."},
        {"role": "user", "content": "   "},
        {"role": "user", "content": "And Rome?"},
        {"role": "assistant", "content": "Rome is 20C."},
    ]
    record = flat_record(
        messages,
        model="from-record",
        max_tokens=512,
        tools=[
            {"type": "function", "function": {"name": "w", "description": "weather", "parameters": {"type": "object"}}}
        ],
    )
    out = write("anthropic", record, model="claude-x")
    assert out == {
        "model": "claude-x",
        "max_tokens": 512,
        "system": "Be brief.\nUse tools.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo and Lima?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"city": "Oslo"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "w", "input": {"city": "Lima"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "4C"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "timeout", "is_error": True},
                    {"type": "text", "text": "Thanks."},
                    {"type": "text", "text": "And Rome?"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Rome is 20C."}]},
        ],
        "tools": [{"name": "w", "description": "weather", "input_schema": {"type": "object"}}],
    }
    assert shapes.anthropic_request_errors(out) == []
    assert write("anthropic", record, model=None)["model"] == "from-record"


def test_anthropic_merges_same_role_turns_and_drops_blank_ones():
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "c"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "t1", "name": "f"}]},
    ]
    out = write("anthropic", flat_record(messages))
    assert out["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "c"}, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": INTERRUPTED_RESULT}]},
    ]
    assert "system" not in out
    # The call names a tool the record does not define: a derived, permissive definition.
    assert out["tools"] == [{"name": "f", "input_schema": {"type": "object"}}]
    assert shapes.anthropic_request_errors(out) == []


@pytest.mark.parametrize(
    "args,reason",
    [
        ("[1, 2]", "args_not_an_object"),
        ("{'a': 1}", "args_not_json"),
        (["a"], "args_not_an_object"),
        (7, "args_not_an_object"),
    ],
)
def test_anthropic_arguments_must_be_an_object(args, reason):
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "t1", "name": "f", "args": args}]},
        {"role": "tool", "content": "r", "tool_call_id": "t1"},
    ]
    with pytest.raises(FormatError) as err:
        write("anthropic", flat_record(messages))
    assert err.value.reason == reason


def test_anthropic_blank_arguments_are_an_empty_object():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "t1", "name": "f", "args": " "}]},
        {"role": "tool", "content": "", "tool_call_id": "t1"},
    ]
    out = write("anthropic", flat_record(messages))
    assert out["messages"][1]["content"][0]["input"] == {}
    assert out["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "t1"}]


def test_anthropic_rewrites_ids_it_cannot_send():
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"tool_call_id": "functions.get:0", "name": "get"},
                {"tool_call_id": "functions_get_0", "name": "get"},
                {"tool_call_id": "functions get:0", "name": "get"},
            ],
        },
        {"role": "tool", "content": "a", "tool_call_id": "functions.get:0"},
        {"role": "tool", "content": "b", "tool_call_id": "functions_get_0"},
        {"role": "tool", "content": "c", "tool_call_id": "functions get:0"},
    ]
    out = write("anthropic", flat_record(messages))
    uses = [b["id"] for b in out["messages"][1]["content"]]
    results = [(b["tool_use_id"], b["content"]) for b in out["messages"][2]["content"]]
    assert uses == ["functions_get_0_1", "functions_get_0", "functions_get_0_2"]
    assert results == [("functions_get_0_1", "a"), ("functions_get_0", "b"), ("functions_get_0_2", "c")]
    assert shapes.anthropic_request_errors(out) == []


def test_anthropic_roles_and_tools_it_cannot_write():
    with pytest.raises(FormatError) as err:
        write("anthropic", flat_record([{"role": "user", "content": "a"}, {"role": "moderator", "content": "b"}]))
    assert err.value.reason == "unsupported_role"
    for tools in (
        [{"type": "function", "function": {"name": "f", "parameters": {}, "cache_control": {}}}],
        [{"type": "custom", "custom": {"name": "python"}}],
    ):
        with pytest.raises(FormatError) as err:
            write("anthropic", flat_record([{"role": "user", "content": "a"}], tools=tools))
        assert err.value.reason == "unconvertible_tool"
        assert "tool 'f'" in str(err.value) or "tool 'python'" in str(err.value)
    # Anthropic-native tools (server tools included) pass as they are; a missing schema is empty.
    native = [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"name": "f", "input_schema": {"type": "object"}},
    ]
    assert write("anthropic", flat_record([{"role": "user", "content": "a"}], tools=native))["tools"] == native
    out = write("anthropic", flat_record([{"role": "user", "content": "a"}], functions=[{"name": "f"}]))
    assert out["tools"] == [{"name": "f", "input_schema": {"type": "object", "properties": {}}}]


def test_anthropic_developer_is_lifted_and_no_turn_left_is_an_error():
    out = write("anthropic", flat_record([{"role": "user", "content": "a"}, {"role": "developer", "content": "d"}]))
    # Content is always a block list (one schema for every record).
    assert out["system"] == "d" and out["messages"] == [{"role": "user", "content": [{"type": "text", "text": "a"}]}]
    with pytest.raises(FormatError) as err:
        write("anthropic", flat_record([{"role": "system", "content": "only a system prompt"}]))
    assert err.value.reason == "empty_conversation"


def test_writers_read_the_configured_message_field():
    record = {"id": "r1", "turns": normalize_conversation(CALL_TURN).messages}
    for sink in CHECKS:
        assert CHECKS[sink](write(sink, record, field="turns")) == []
