"""Call-log records as real setups write them: a record of many parts keeps the parts it can
read, parts that are no call are counted by kind (not dead letters), shapes that were read
wrong or not at all, and calls whose copies of one turn are spelled differently."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from transforms.calllogs.assemble import GroupState, assemble
from transforms.calllogs.calls import Call, Rejected, Skipped, ToolResult
from transforms.calllogs.joins import joined_alone
from transforms.calllogs.readers import CALL_LOG_READERS, detect_call_log
from transforms.record.record_settings import Settings
from transforms.record.record_steps import CallLogRead, read_call_log

CALLS = Settings(calls=True)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def read(record: Any, expected_reader: str) -> list[Any]:
    reader = detect_call_log(record)
    assert reader is not None and reader.name == expected_reader
    return reader.read(record)


def _generation(obs: str, second: int, history: list, output: Any) -> dict[str, Any]:
    return {
        "id": obs,
        "traceId": "tr-9",
        "parentObservationId": None,
        "type": "GENERATION",
        "startTime": f"2026-11-30T10:00:{second:02d}Z",
        "input": history,
        "output": output,
    }


#: A trace download whose second generation's output holds a part no reader knows (the
#: agent-framework's reasoning content, as Gemini answers it), beside a SPAN and an AGENT.
THINK = [user("Hi"), assistant("Hello."), user("Think about it")]
TRACE = {
    "trace": {"id": "tr-9", "name": "chat"},
    "observations": [
        {"id": "root", "traceId": "tr-9", "type": "AGENT", "startTime": "2026-11-30T10:00:00Z"},
        _generation("g1", 1, [user("Hi")], {"role": "assistant", "content": "Hello."}),
        _generation(
            "g2",
            2,
            THINK,
            [
                {
                    "role": "model",
                    "parts": [{"type": "text", "content": "Done."}, {"type": "text_reasoning", "text": "?"}],
                }
            ],
        ),
        _generation("g3", 3, [*THINK, assistant("Done."), user("Bye")], {"role": "assistant", "content": "Bye."}),
        {"id": "s1", "traceId": "tr-9", "type": "SPAN", "startTime": "2026-11-30T10:00:04Z"},
    ],
}


def test_one_unreadable_observation_is_refused_alone_and_the_trace_keeps_its_other_calls():
    """Was: the whole download refused (``unknown_block``), its good generations lost."""
    read_ = read_call_log(TRACE, CALLS)
    assert isinstance(read_, CallLogRead)
    calls = [p for p in read_.pieces if isinstance(p, Call)]
    assert [c.call_id for c in calls] == ["g1", "g3"]
    (refused,) = [p for p in read_.pieces if isinstance(p, Rejected)]
    assert (refused.group, refused.call_id, refused.reason) == ("tr-9", "g2", "unknown_block")
    assert refused.detail.startswith("langfuse: observation 2 (id g2): unknown_block: ")
    assert read_.skipped == {"agent": 1, "span": 1}


def test_a_part_refused_alone_is_redacted_like_any_piece():
    """--redact: the refused part's detail and raw text (its dead letter) hold no find."""
    from dataclasses import replace

    secret = "someone@example.com"
    bad = {**TRACE["observations"][2], "input": [user(f"Mail {secret}")]}
    trace = {**TRACE, "observations": [TRACE["observations"][1], bad]}
    read_ = read_call_log(trace, replace(CALLS, redact=("emails",)))
    assert isinstance(read_, CallLogRead)
    (refused,) = [p for p in read_.pieces if isinstance(p, Rejected)]
    assert secret not in refused.raw and secret not in refused.detail and "g2" in refused.detail


def test_a_record_of_one_part_or_of_parts_all_unreadable_is_still_refused_whole():
    """A blob-storage row is one observation: refused as a record, as before; a download whose
    every observation is unreadable is one dead letter too (nothing of it was read)."""
    from transforms.record.record_steps import RecordRefused

    bad = TRACE["observations"][2]
    with pytest.raises(RecordRefused) as one:
        read_call_log({**bad, "parentObservationId": ""}, CALLS)
    assert one.value.reason.value == "format_error"
    with pytest.raises(RecordRefused) as every:
        read_call_log({"trace": {"id": "tr-9"}, "observations": [bad, {**bad, "id": "g4"}]}, CALLS)
    assert "observation 0 (id g2)" in every.value.detail and "1 more" in every.value.detail


def _run(rows: list[Any], tmp_path: Path, *extra: str) -> Path:
    from pipeline.cli.main import main

    source = tmp_path / "calls.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out), "--quiet", "--no-report", *extra]) in (0, 1)
    return out


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("part-*")) for line in part.read_text().splitlines()]


@pytest.mark.slow
def test_a_run_dead_letters_the_observation_and_writes_the_trace_conversation(tmp_path):
    out = _run([TRACE], tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"]
    (letter,) = _lines(out / "dead_letter")
    assert (letter["reason"], letter["position"]) == ("format_error", 0)
    assert "observation 2 (id g2)" in letter["detail"]
    assert json.loads(letter["raw"])["id"] == "g2"  # the observation itself
    (conversation,) = _lines(out / "normalized")
    assert conversation["messages"][-2:] == [user("Bye"), assistant("Bye.")]
    assert summary["call_logs"]["parts_refused"] == 1
    assert summary["call_logs"]["skipped_by_kind"] == {"agent": 1, "span": 1}


# --------------------------------------------------------------------------------------------
# Noise: parts that are no call, counted by kind


def _row(span: str, kind: str | None, attributes: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": span,
        "context": {"trace_id": "0xAB12", "span_id": f"0x{span}"},
        "start_time": "2026-11-30T10:00:00+00:00",
        "attributes": attributes,
    }
    if kind is not None:
        row["span_kind"] = kind
    return row


NOISE = [
    _row("c1", None, {"http.request.method": "GET", "url.full": "https://example.invalid/"}),
    _row("c2", None, {"db.system.name": "postgresql", "db.query.text": "SELECT 1"}),
    _row("c3", "CHAIN", {"input.value": "Hi"}),
    _row("c4", "AGENT", {"input.value": "Hi"}),
    _row("c5", "TOOL", {"tool.name": "weather"}),
    _row("c6", None, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}),
    _row(
        "c7",
        "LLM",
        {
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Hi",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Hello.",
        },
    ),
]


def test_spans_of_no_call_are_skipped_by_kind_not_refused():
    kinds = [item.kind for row in NOISE[:-1] for item in read(row, "span-rows") if isinstance(item, Skipped)]
    assert kinds == ["http", "db", "chain", "agent", "tool_without_result", "invoke_agent"]
    assert read_call_log(NOISE[0], CALLS) == CallLogRead([], {"http": 1})


def test_an_otlp_log_record_of_no_genai_event_is_skipped():
    """An application's own log line beside the GenAI events: was, a logs document of such
    lines was a ``no_llm_calls`` dead letter, and one beside events was dropped uncounted."""
    line = {"timeUnixNano": "1796032800000000000", "body": {"stringValue": "cache warm"}}
    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": [line]}]}]}
    assert read_call_log(document, CALLS) == CallLogRead([], {"log_record": 1})


@pytest.mark.slow
def test_a_mixed_directory_of_spans_counts_its_noise_and_writes_no_dead_letter(tmp_path):
    """Was: 6 of these 7 rows dead letters (``no_llm_calls``), past the 1% warning."""
    out = _run(NOISE, tmp_path, "--warn-dead-letters", "1%")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] and summary["dead_letters"] == 0
    assert summary["call_logs"]["records"] == 7 and summary["call_logs"]["calls"] == 1
    assert summary["call_logs"]["skipped_by_kind"] == {
        "agent": 1,
        "chain": 1,
        "db": 1,
        "http": 1,
        "invoke_agent": 1,
        "tool_without_result": 1,
    }
    (conversation,) = _lines(out / "normalized")
    assert conversation["id"] == "ab12"
    assert conversation["messages"] == [user("Hi"), assistant("Hello.")]


def test_the_summary_table_and_the_report_show_the_skipped_kinds():
    from pipeline.finished.report_opt_in import _call_logs_section
    from transforms.totals.summary_table import call_log_rows

    calls = {
        "records": 7,
        "calls": 1,
        "tool_results": 0,
        "conversations": 2,
        "prefixes_collapsed": 0,
        "branches": 0,
        "tool_results_filled": 0,
        "parts_refused": 1,
        "skipped_by_kind": {"chain": 1, "http": 4},
    }
    rows = dict(call_log_rows({"call_logs": calls}))
    assert rows["  parts skipped (no call, no tool result)"] == "http 4, chain 1"
    assert rows["  parts refused alone (dead letters)"] == 1
    html = _call_logs_section(calls)
    assert 'data-key="call_logs.skipped_by_kind.http">4<' in html and "{" not in html


# --------------------------------------------------------------------------------------------
# Shapes read wrong or not at all


GENAI = {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]),
    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]}]),
}


def test_a_genai_row_with_an_opentelemetry_span_kind_is_read_as_genai():
    """The console exporter writes OpenTelemetry's own kind (``CLIENT``) beside the attributes;
    was: taken for an OpenInference kind, and the span gave nothing."""
    row = {"context": {"trace_id": "0x5B8E", "span_id": "0xEEE1"}, "span_kind": "SpanKind.CLIENT", "attributes": GENAI}
    (piece,) = read(row, "span-rows")
    assert isinstance(piece, Call)
    assert piece.history == [user("Hi")] and piece.output == [assistant("Hello.")]
    (again,) = read({**row, "span_kind": "CLIENT"}, "span-rows")
    assert again == piece
    # An OpenInference kind beside attributes that are all GenAI's is a label, not the convention.
    (labelled,) = read({**row, "span_kind": "LLM"}, "span-rows")
    assert labelled == piece
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.result": "rainy"}
    (result,) = read({**row, "span_kind": "TOOL", "attributes": tool}, "span-rows")
    assert isinstance(result, ToolResult) and result.content == "rainy"


def test_one_span_has_one_id_whichever_exporter_wrote_it():
    """Span rows write ``0x``-prefixed ids, OTLP JSON plain lower-case hex: was two groups."""
    row = {"context": {"trace_id": "0x5B8E", "span_id": "0xEEE1"}, "attributes": GENAI}
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "5b8e",
                                "spanId": "eee1",
                                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in GENAI.items()],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    (from_row,) = read(row, "span-rows")
    (from_otlp,) = read(document, "otlp")
    assert (from_row.group, from_row.call_id) == (from_otlp.group, from_otlp.call_id) == ("5b8e", "eee1")


def test_the_langfuse_sdks_own_span_attributes_are_read():
    """The Langfuse SDK exports its observations as OTLP spans with ``langfuse.observation.*``
    attributes (langfuse/langfuse ``web/src/features/otel/server/attributes.ts``); was: nothing."""
    history = [{"role": "system", "content": "Be brief."}, user("Hi")]
    generation = {
        "langfuse.observation.type": "generation",
        "langfuse.observation.input": json.dumps(history),
        "langfuse.observation.output": json.dumps({"role": "assistant", "content": "Hello."}),
        "langfuse.observation.model.name": "gpt-4o-mini",
        "langfuse.session.id": "chat-7",
    }
    span = {
        "traceId": "ab",
        "spanId": "cd",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in generation.items()],
    }
    tool = {
        "traceId": "ab",
        "spanId": "ce",
        "attributes": [
            {"key": "langfuse.observation.type", "value": {"stringValue": "tool"}},
            {"key": "langfuse.observation.output", "value": {"stringValue": "rainy"}},
            {"key": "gen_ai.tool.call.id", "value": {"stringValue": "call_1"}},
            {"key": "session.id", "value": {"stringValue": "chat-7"}},
        ],
    }
    plain = {
        "traceId": "ab",
        "spanId": "cf",
        "attributes": [{"key": "langfuse.observation.type", "value": {"stringValue": "span"}}],
    }
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [span, tool, plain]}]}]}
    call, result, skipped = read(document, "otlp")
    assert call == Call("otlp", "chat-7", 0, "cd", history, [assistant("Hello.")], None, "gpt-4o-mini")
    assert result == ToolResult("otlp", "chat-7", 0, "ce", "call_1", "", "rainy")
    assert skipped == Skipped("span")


def test_a_langsmith_run_whose_extra_is_json_text_keeps_its_thread_and_model():
    """A Parquet bulk export stores ``extra`` as JSON text; was: grouped by trace, no model."""
    run = {
        "id": "run-2",
        "trace_id": "run-1",
        "run_type": "llm",
        "start_time": "2026-11-30T10:00:00Z",
        "inputs": {"messages": [{"role": "user", "content": "Hi"}]},
        "outputs": {"choices": [{"message": {"role": "assistant", "content": "Hello."}}]},
        "extra": json.dumps({"metadata": {"thread_id": "thread-4"}, "invocation_params": {"model": "gpt-4o"}}),
    }
    (call,) = read(run, "langsmith")
    assert (call.group, call.model) == ("thread-4", "gpt-4o")


DATA = Path(__file__).resolve().parent / "data" / "calllogs"

#: Koog's Langfuse span adapter writes each call of a turn as an entry of its own whose content
#: is the calls' JSON (koog ``LangfuseSpanAdapter`` and ``EventBodyFields.ToolCalls``): role
#: ``assistant`` in a completion, ``tool`` in the next prompt, each followed by its result
#: (which names no call), as the real trace below shows.
HELLO = json.dumps(
    [{"function": {"name": "HelloTool", "arguments": '{"name": "Bob"}'}, "id": "call_h", "type": "function"}]
)
BYE = json.dumps(
    [{"function": {"name": "ByeTool", "arguments": '{"name": "Bob"}'}, "id": "call_b", "type": "function"}]
)


def _koog(span: str, second: int, prompt: list[tuple[str, str]], completion: list[tuple[str, str]]) -> dict:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    for n, (role, content) in enumerate(prompt):
        attributes[f"gen_ai.prompt.{n}.role"], attributes[f"gen_ai.prompt.{n}.content"] = role, content
    for n, (role, content) in enumerate(completion):
        attributes[f"gen_ai.completion.{n}.role"], attributes[f"gen_ai.completion.{n}.content"] = role, content
    return {
        "context": {"trace_id": "0xk1", "span_id": span},
        "start_time": f"2026-11-30T10:00:{second:02d}+00:00",
        "attributes": attributes,
    }


def _one_conversation(pieces: list) -> dict:
    state = GroupState()
    for n, piece in enumerate(pieces):
        state.add("f", n, piece)
    (made,) = assemble("t", "g", state)
    return made.record


def test_koog_tool_calls_are_calls_and_its_turns_chain():
    """Koog's indexed attributes: was, the calls' JSON as assistant text (and tool text), and
    the two calls did not collapse."""
    asked = [("user", "Greet Bob.")]
    first = _koog("s1", 1, asked, [("assistant", HELLO), ("assistant", BYE)])
    second = _koog(
        "s2",
        2,
        [*asked, ("tool", HELLO), ("tool", "Hello Bob!"), ("tool", BYE), ("tool", "Bye Bob!")],
        [("assistant", "Hello and bye, Bob.")],
    )
    (one,) = read(first, "span-rows")
    hello = {"tool_call_id": "call_h", "name": "HelloTool", "args": '{"name": "Bob"}'}
    bye = {"tool_call_id": "call_b", "name": "ByeTool", "args": '{"name": "Bob"}'}
    assert one.output == [assistant("", hello)]  # the first entry: the next request goes on from it
    (two,) = read(second, "span-rows")
    assert _one_conversation([one, two])["messages"] == [
        user("Greet Bob."),
        assistant("", hello),
        {"role": "tool", "content": "Hello Bob!", "tool_call_id": "call_h"},
        assistant("", bye),
        {"role": "tool", "content": "Bye Bob!", "tool_call_id": "call_b"},
        assistant("Hello and bye, Bob."),
    ]


def test_a_real_koog_trace_download_is_one_conversation_with_its_calls():
    """Langfuse's own Koog trace (tests/data/calllogs/SOURCES.md): was, two conversations, the
    calls as tool text."""
    read_ = read_call_log(json.loads((DATA / "langfuse" / "koog-2025-08-26.trace.json").read_text()), CALLS)
    assert isinstance(read_, CallLogRead) and read_.skipped == {"agent": 2, "span": 7}
    messages = _one_conversation(read_.pieces)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [c["name"] for m in messages for c in m.get("tool_calls", ())] == ["HelloTool", "ByeTool"]
    assert messages[3]["tool_call_id"] == messages[2]["tool_calls"][0]["tool_call_id"]
    assert messages[-1] == assistant("Hello my darling Bob! And, bye my dear Bob!")


def test_a_real_claude_agent_trace_keeps_what_it_can_read():
    """Langfuse's own claude-agent trace: three generations recorded only ``{"content": "role"}``
    as input. Was: the whole download refused, its readable generation and tool results lost."""
    read_ = read_call_log(json.loads((DATA / "langfuse" / "claude-agent-2025-12-22.trace.json").read_text()), CALLS)
    assert isinstance(read_, CallLogRead) and read_.skipped == {"span": 1}
    kinds = [type(p).__name__ for p in read_.pieces]
    assert kinds == ["Rejected", "Rejected", "Rejected", "ToolResult", "Call", "ToolResult"]
    assert {p.reason for p in read_.pieces if isinstance(p, Rejected)} == {"unknown_messages"}
    (call,) = [p for p in read_.pieces if isinstance(p, Call)]
    assert call.history == [user("What's the weather like in Berlin and New York?")]


def test_microsoft_extensions_ai_reasoning_parts_are_reasoning():
    """The .NET agent framework writes a Gemini model's thoughts as a
    ``Microsoft.Extensions.AI.TextReasoningContent`` part (Langfuse's
    csharp-agent-with-gemini-2026-03-09 trace). Was: the generation refused (``unknown_block``)."""
    part = {"type": "Microsoft.Extensions.AI.TextReasoningContent", "content": {"text": "hmm", "protectedData": "x"}}
    output = [{"role": "assistant", "parts": [{"type": "text", "content": "Done."}, part]}]
    trace = {"trace": {"id": "tr-r"}, "observations": [_generation("g1", 1, [user("Hi")], output)]}
    (call,) = read_call_log(trace, CALLS).pieces
    assert isinstance(call, Call) and call.output == [assistant("Done.")]
    assert call.discarded is not None and "reasoning" in call.discarded


# --------------------------------------------------------------------------------------------
# One turn spelled two ways


def _call(start: int, history: list, output: list) -> Call:
    return Call("t", "g", start, f"c{start}", history, output)


def _assembled(*calls: Call) -> list:
    state = GroupState()
    for n, piece in enumerate(calls):
        state.add("f", n, piece)
    made = assemble("t", "g", state)
    assert isinstance(made, list)
    return made


def test_arguments_as_text_and_as_an_object_are_one_turn():
    """LangSmith ``wrap_anthropic``: the output's arguments are JSON text, the next request's
    copy an object. Was: two conversations, the first with an invented interrupted result."""
    asked = [user("Weather in Paris?")]
    out = assistant("", {"tool_call_id": "toolu_1", "name": "weather", "args": '{"city": "Paris"}'})
    copy = assistant("", {"tool_call_id": "toolu_1", "name": "weather", "args": {"city": "Paris"}})
    result = {"role": "tool", "content": "rainy", "tool_call_id": "toolu_1"}
    (made,) = _assembled(_call(1, asked, [out]), _call(2, [*asked, copy, result], [assistant("Rainy.")]))
    assert made.record["messages"] == [*asked, copy, result, assistant("Rainy.")]
    assert made.assembly["collapsed"] == 1


def test_ids_an_exporter_invented_are_matched_by_place_name_and_arguments():
    """Google ADK: ``call_0`` in the output, ``call_1`` in the next request's copy (and its
    result). Was: two conversations."""
    asked = [user("Weather in Paris?")]
    out = assistant("", {"tool_call_id": "call_0", "name": "weather", "args": {"city": "Paris"}})
    copy = assistant("", {"tool_call_id": "call_1", "name": "weather", "args": {"city": "Paris"}})
    result = {"role": "tool", "content": "rainy", "tool_call_id": "call_1"}
    (made,) = _assembled(_call(1, asked, [out]), _call(2, [*asked, copy, result], [assistant("Rainy.")]))
    assert made.record["messages"] == [*asked, copy, result, assistant("Rainy.")]
    # Another call, or other arguments, is another turn: still a branch.
    other = assistant("", {"tool_call_id": "call_1", "name": "weather", "args": {"city": "Rome"}})
    assert len(_assembled(_call(1, asked, [out]), _call(2, [*asked, other, result], [assistant("Sunny.")]))) == 2


def test_results_without_ids_answer_calls_in_order():
    asked = [user("Weather in Paris and Rome?")]
    calls = [
        {"tool_call_id": "a", "name": "weather", "args": {"city": "Paris"}},
        {"tool_call_id": "b", "name": "weather", "args": {"city": "Rome"}},
    ]
    out = assistant("", *calls)
    copy = assistant("", *({**c, "tool_call_id": ""} for c in calls))
    results = [{"role": "tool", "content": t, "tool_call_id": ""} for t in ("rainy", "sunny")]
    (made,) = _assembled(_call(1, asked, [out]), _call(2, [*asked, copy, *results], [assistant("Both.")]))
    assert made.assembly["collapsed"] == 1


def test_a_real_google_adk_trace_is_one_conversation():
    """Langfuse's own Google ADK trace: the calls carry no id, so the reader numbers them, and
    the output's and the next request's copies get different numbers. Was: two conversations,
    the first a branch ending on a call with no result."""
    read_ = read_call_log(json.loads((DATA / "langfuse" / "google-adk-2025-08-28.trace.json").read_text()), CALLS)
    assert isinstance(read_, CallLogRead)
    state = GroupState()
    for n, piece in enumerate(read_.pieces):
        state.add("f", n, piece)
    (made,) = assemble("langfuse", read_.pieces[0].group, state)
    assert made.assembly["collapsed"] == 1
    assert [m["role"] for m in made.record["messages"]] == ["system", "user", "assistant", "tool", "assistant"]


@pytest.mark.slow
def test_a_run_writes_no_invented_result_for_a_turn_spelled_two_ways(tmp_path):
    def row(obs: str, second: int, history: list, output: dict) -> dict:
        return {
            "id": obs,
            "trace_id": "tr-a",
            "type": "GENERATION",
            "parent_observation_id": "",
            "start_time": f"2026-11-30 10:00:{second:02d}.000000",
            "input": json.dumps(history),
            "output": json.dumps(output),
        }

    asked = [user("Weather in Paris?")]
    out = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
    }
    copy = {**out, "tool_calls": [{**out["tool_calls"][0], "id": "call_1"}]}
    result = {"role": "tool", "content": "rainy", "tool_call_id": "call_1"}
    rows = [row("o1", 1, asked, out), row("o2", 2, [*asked, copy, result], {"role": "assistant", "content": "Rainy."})]
    run = _run(rows, tmp_path)
    (conversation,) = _lines(run / "normalized")
    assert "interrupted" not in json.dumps(conversation)
    assert conversation["messages"][-1] == assistant("Rainy.")


def test_a_span_of_an_otlp_document_is_refused_alone_and_kept_on_disk_exactly():
    """An OTLP document's span whose attribute cannot be read: refused alone, its siblings read;
    the streaming driver keeps the refusal in calls.jsonl and rebuilds it exactly."""
    from pipeline.streaming.piece_lines import piece_line, piece_of_line

    good = {
        "traceId": "ab",
        "spanId": "01",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in GENAI.items()],
    }
    bad = {
        "traceId": "ab",
        "spanId": "02",
        "startTimeUnixNano": "1796032800000000000",
        "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "many"}}],
    }
    read_ = read_call_log({"resourceSpans": [{"scopeSpans": [{"spans": [good, bad]}]}]}, CALLS)
    assert isinstance(read_, CallLogRead)
    call, refused = read_.pieces
    assert isinstance(call, Call) and refused == Rejected(
        "otlp",
        "ab",
        1796032800000000000,
        "02",
        "bad_attribute",
        "otlp: span 1 (id 02): bad_attribute: intValue 'many' is not an integer",
        json.dumps(bad, separators=(",", ":")),
    )
    assert piece_of_line(piece_line("f.jsonl", 3, refused)) == ("f.jsonl", 3, refused)


def test_a_run_of_a_langsmith_payload_is_refused_alone():
    def run(run_id: str, kind: str) -> dict[str, Any]:
        message = {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "messages", kind],
            "kwargs": {"content": "Hi"},
        }
        return {
            "id": run_id,
            "trace_id": "t-1",
            "run_type": "llm",
            "start_time": "2026-11-30T10:00:00Z",
            "inputs": {"messages": [[message]]},
            "outputs": {"generations": [[{"text": "Hello."}]]},
        }

    read_ = read_call_log({"post": [run("r1", "HumanMessage"), run("r2", "OddMessage")]}, CALLS)
    assert isinstance(read_, CallLogRead)
    # The posts have no end: each waits for a patch (a fragment), but the one that cannot be
    # read is refused at once.
    call, refused = joined_alone(read_.pieces)
    assert isinstance(call, Call) and call.history == [user("Hi")]
    assert isinstance(refused, Rejected) and (refused.call_id, refused.reason) == ("r2", "unknown_message_class")
    assert refused.detail.startswith("langsmith: run 1 (id r2): unknown_message_class: ")


def test_every_reader_is_still_registered():
    assert {"otlp", "span-rows", "langfuse", "langsmith", "helicone", "openpipe", "litellm"} <= set(CALL_LOG_READERS)
