"""Call-log readers on real public samples (tests/data/calllogs/SOURCES.md) and hand-written
records of the documented shapes: the flat histories, outputs, tool results, groups and starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from transforms.calllogs.calls import Call, Skipped, ToolResult
from transforms.calllogs.joins import joined_alone
from transforms.calllogs.readers import CALL_LOG_READERS, detect_call_log
from transforms.formats import FormatError

DATA = Path(__file__).resolve().parent / "data" / "calllogs"


def load(path: str) -> Any:
    return json.loads((DATA / path).read_text(encoding="utf-8"))


def lines(path: str) -> list[Any]:
    return [json.loads(line) for line in (DATA / path).read_text(encoding="utf-8").splitlines() if line.strip()]


def read(record: Any, expected_reader: str) -> list[Any]:
    reader = detect_call_log(record)
    assert reader is not None and reader.name == expected_reader
    # The parts of no call and no tool result are counted apart (tests/test_calllogs_parts.py);
    # parts of a call read apart (fragments) are joined as when no other record holds any.
    return [item for item in joined_alone(reader.read(record)) if not isinstance(item, Skipped)]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def assistant(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def call(call_id: str, name: str, args: Any) -> dict[str, Any]:
    return {"tool_call_id": call_id, "name": name, "args": args}


def tool(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "content": text, "tool_call_id": call_id}


# --------------------------------------------------------------------------------------------
# Langfuse


def test_langfuse_microsoft_agent_trace_download():
    """Real Microsoft agent-framework trace (OTel GenAI parts in Langfuse): two GENERATIONs, the
    second sending only the tool result, and a TOOL observation whose call id is in metadata.
    The histories and outputs are those of Langfuse's own normalization (its chatml.json)."""
    pieces = read(load("langfuse/microsoft-agent-2025-12-17.trace.json"), "langfuse")
    first, second, result = pieces
    weather_call = call("call_CwaJHuXTm9dmHFQPlVbqyzJ0", "get_weather", '{"location":"Tokyo, Japan"}')
    assert first == Call(
        "langfuse",
        "8e419d3288419b5d944270505640e183",
        1765964257260000000,
        "2406e8343fd49c0e",
        [user("What's the weather in Tokyo?")],
        [assistant("", weather_call)],
        first.tools,
        "gpt-5-mini-2025-08-07",
    )
    assert first.tools is not None and first.tools[0]["function"]["name"] == "get_weather"
    envelope = (
        '{"type": "function_result", "call_id": "call_CwaJHuXTm9dmHFQPlVbqyzJ0", '
        '"result": "The weather in Tokyo, Japan is stormy with a high of 23\\u00b0C."}'
    )
    assert second.history == [tool("call_CwaJHuXTm9dmHFQPlVbqyzJ0", envelope)]
    assert second.output == [assistant("Current conditions in Tokyo, Japan: stormy, high around 23°C.")]
    assert second.start == 1765964260555000000
    assert result == ToolResult(
        "langfuse",
        "8e419d3288419b5d944270505640e183",
        1765964260551000000,
        "a2de97aac476c036",
        "call_CwaJHuXTm9dmHFQPlVbqyzJ0",
        "get_weather",
        "The weather in Tokyo, Japan is stormy with a high of 23°C.",
    )


def test_langfuse_openai_agents_trace_download():
    """Real OpenAI Agents SDK trace: Responses items as input, a whole Responses object as
    output (its instructions a leading system message), observations out of time order, and
    an AGENT observation that gives nothing."""
    later, earlier, result = read(load("langfuse/openai-agents-2025-09-30.trace.json"), "langfuse")
    weather = call("call_Kud0j0DxWSmLzv9W5m6qVqXn", "get_weather", '{"city":"Tokyo"}')
    assert earlier.start < result.start < later.start
    assert earlier.history == [system("You are a helpful agent."), user("What's the weather in Tokyo?")]
    assert earlier.output == [assistant("", weather)]
    assert later.history == [
        system("You are a helpful agent."),
        user("What's the weather in Tokyo?"),
        assistant("", weather),
        tool("call_Kud0j0DxWSmLzv9W5m6qVqXn", "The weather in Tokyo is sunny."),
    ]
    assert later.output == [
        assistant(
            "The weather in Tokyo is currently sunny. If you need more details like temperature or "
            "forecast for the upcoming days, just let me know!"
        )
    ]
    assert later.model == "gpt-4.1-2025-04-14"
    assert later.tools is not None and later.tools[0]["function"]["name"] == "get_weather"
    assert {later.group, earlier.group, result.group} == {"fee618f96dc31e0ca38b2f7b26eb8b29"}
    assert result.tool_call_id == "" and result.content == "The weather in Tokyo is sunny."


def test_langfuse_blob_export_rows():
    rows = lines("langfuse/blob-export-rows.jsonl")
    second, tool_row, first, span, camel = (read(row, "langfuse") for row in rows)
    paris = call("call_1", "get_weather", '{"city":"Paris"}')
    assert first == [
        Call(
            "langfuse",
            "s-1",
            1796032800000000000,
            "obs-1",
            [user("Weather in Paris?")],
            [assistant("", paris)],
            [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
            "gpt-4o",
        )
    ]
    assert second[0].history == [user("Weather in Paris?"), assistant("", paris), tool("call_1", "rainy")]
    assert second[0].output == [assistant("Rainy.")]
    assert second[0].start == 1796032802500000000  # 2026-11-30 10:00:02.5 UTC
    assert tool_row == [
        ToolResult("langfuse", "s-1", 1796032802000000000, "obs-tool", "call_1", "get_weather", "rainy")
    ]
    assert span == []
    # The camelCase API row, a Gemini request and response as objects, grouped by its trace.
    assert camel[0].group == "tr-2" and camel[0].history == [user("Hi")] and camel[0].output == [assistant("Hello!")]


# --------------------------------------------------------------------------------------------
# OTLP and span rows


def test_otlp_vertexai_spans_real_attributes():
    """python-contrib's Vertex AI spans (attributes as its tests assert them) in OTLP JSON, one
    document per line, with a non-LLM span beside them; intValue as a string and a number."""
    second_doc, first_doc = lines("otlp/vertexai-tool-events.jsonl")
    (second,) = read(second_doc, "otlp")
    (first,) = read(first_doc, "otlp")
    delhi = call("get_current_weather_0", "get_current_weather", {"location": "New Delhi"})
    sf = call("get_current_weather_1", "get_current_weather", {"location": "San Francisco"})
    question = user("Get weather details in New Delhi and San Francisco?")
    assert first.history == [question]
    assert first.output == [assistant("", delhi, sf)]  # role "model" is the assistant
    assert second.history == [
        question,
        assistant("", delhi, sf),
        tool("get_current_weather_0", '{"content":"{\\"temperature\\": 35, \\"unit\\": \\"C\\"}"}'),
        tool("get_current_weather_1", '{"content":"{\\"temperature\\": 25, \\"unit\\": \\"C\\"}"}'),
    ]
    assert second.output == [
        assistant("The current temperature in New Delhi is 35°C, and in San Francisco, it is 25°C.")
    ]
    assert (first.start, second.start) == (1757346066000000000, 1757346068000000000)
    assert first.group == second.group == "5b8efff798038103d269b633813fc60c"
    assert first.model == "gemini-2.5-pro"


def _as_otlp(attributes: dict[str, Any]) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        if isinstance(v, list):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"stringValue": v}

    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "startTimeUnixNano": "1760000000000000000",
        "attributes": [{"key": k, "value": value(v)} for k, v in attributes.items()],
    }
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [span]}]}]}


PARIS_HISTORY = [
    user("Weather in Paris?"),
    assistant("Absolutely! Let me check the weather for you.", call("1234", "get_weather", {"location": "Paris"})),
    tool("1234", "rainy, 57°F"),
]
PARIS_OUTPUT = [assistant("The weather in Paris is currently rainy with a temperature of 57°F.")]


@pytest.mark.parametrize(
    "fixture",
    [
        "otel_genai_client_span_tool_calls",  # current GenAI attributes
        "otel_genai_deprecated_client_span_tool_calls",  # 1.26 gen_ai.prompt / gen_ai.completion
        "openinference_client_span_tool_calls",  # the same call in OpenInference
    ],
)
@pytest.mark.parametrize("container", ["otlp", "span-rows"])
def test_openinference_genai_fixture_pairs(fixture, container):
    """OpenInference's converter fixtures: one call in three spellings, read to one history."""
    attributes = load(f"openinference-genai/{fixture}.json")
    if container == "otlp":
        record = _as_otlp(attributes)
    else:
        record = {
            "context": {"trace_id": "t", "span_id": "s"},
            "start_time": "2025-10-09T08:53:20Z",
            "attributes": attributes,
        }
    (piece,) = read(record, container)
    expected = PARIS_HISTORY
    if fixture.startswith("openinference"):  # OpenInference keeps arguments as the JSON string
        expected = [
            *PARIS_HISTORY[:1],
            {**PARIS_HISTORY[1], "tool_calls": [call("1234", "get_weather", '{"location":"Paris"}')]},
            PARIS_HISTORY[2],
        ]
    assert piece.history == expected
    assert piece.output == PARIS_OUTPUT
    assert piece.model == "gpt-4-0613"
    assert piece.start == 1760000000000000000


def _responses_span(output_value: str) -> dict[str, Any]:
    """An LLM span as openinference-instrumentation-openai-agents writes a Responses call: one
    input and output message per item, so an assistant message and its function calls are two."""
    return {
        "context": {"trace_id": "t", "span_id": "s"},
        "start_time": "2025-10-09T08:53:20Z",
        "attributes": {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Weather in Paris?",
            "llm.input_messages.1.message.role": "assistant",
            "llm.input_messages.1.message.content": "Let me check.",
            "llm.input_messages.2.message.role": "assistant",
            "llm.input_messages.2.message.tool_calls.0.tool_call.id": "c1",
            "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "get_weather",
            "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": '{"city":"Paris"}',
            "llm.input_messages.3.message.role": "tool",
            "llm.input_messages.3.message.tool_call_id": "c1",
            "llm.input_messages.3.message.content": "rainy",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "And Rome?",
            "llm.output_messages.1.message.role": "assistant",
            "llm.output_messages.1.message.tool_calls.0.tool_call.id": "c2",
            "llm.output_messages.1.message.tool_calls.0.tool_call.function.name": "get_weather",
            "llm.output_messages.1.message.tool_calls.0.tool_call.function.arguments": '{"city":"Rome"}',
            "output.value": output_value,
        },
    }


def test_openinference_responses_items_fold_into_one_turn_as_the_responses_reader_folds_them():
    """A Responses call's message item and the function_call items after it are one assistant
    turn (transforms.formats.openai_responses); OpenInference records them as two messages."""
    (piece,) = read(_responses_span('{"id": "resp_1", "object": "response", "output": []}'), "span-rows")
    paris, rome = call("c1", "get_weather", '{"city":"Paris"}'), call("c2", "get_weather", '{"city":"Rome"}')
    assert piece.history == [user("Weather in Paris?"), assistant("Let me check.", paris), tool("c1", "rainy")]
    assert piece.output == [assistant("And Rome?", rome)]
    # A chat completion's output messages are its choices: the first is the output, nothing folds.
    (chat,) = read(_responses_span('{"id": "chatcmpl-1", "object": "chat.completion"}'), "span-rows")
    assert chat.output == [assistant("And Rome?")]
    assert chat.history[1:3] == [assistant("Let me check."), assistant("", paris)]


def test_genai_execute_tool_span_fixture():
    (result,) = read(_as_otlp(load("openinference-genai/otel_genai_tool_execution_span.json")), "otlp")
    assert result.tool_call_id == "1234" and result.name == "get_weather"
    assert result.content.startswith('{"status": "success", "report": "The weather in New York')


def test_otlp_handwritten_documents():
    current, indexed, events, oi = (read(doc, "otlp") for doc in lines("otlp/handwritten.jsonl"))
    # Current conventions: the misspelt system instructions key, uri/blob/file placeholders, a
    # result written "result" with a padded id under role user, structured output (first choice,
    # its reasoning in the ledger), an execute_tool span, an HTTP span and a content-less chat span.
    chat, result = current
    assert chat.history == [
        system("Be brief."),
        user("Weather in Paris?\n[image]\n[audio]\n[file]"),
        assistant("", call("call_1", "get_weather", {"city": "Paris"})),
        tool("call_1", "rainy, 57°F"),
        user("And tomorrow?"),
    ]
    assert chat.output == [assistant("Rainy today, sunny tomorrow.")]
    assert chat.discarded == {"reasoning": [1, 28]}
    assert chat.group == result.group == "conv-42"
    assert chat.tools == [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    assert result.tool_call_id == "call_1" and result.content == "rainy, 57°F"
    # Indexed attributes (OpenLLMetry), numeric order (.10 after .2), snake_case OTLP keys.
    (legacy,) = indexed
    assert legacy.history == [
        user("Weather in San Francisco?"),
        assistant("", call("1", "get_current_weather", '{"location": "San Francisco"}')),
        tool("1", "The weather in San Francisco is 70 degrees and sunny."),
        user("Thanks!"),
    ]
    assert legacy.output == [assistant("You're welcome!")]
    assert legacy.group == "tl-session"
    assert legacy.tools is not None and legacy.tools[0]["function"]["description"] == "Weather of a city"
    # Span events: 1.26 prompt/completion events, then per-message events and a choice.
    old, per_message = events
    assert (old.history, old.output) == ([system("Be brief."), user("Hi")], [assistant("Hello!")])
    assert per_message.history == [
        system("Be brief."),
        user("Weather?"),
        assistant("", call("call_9", "get_weather", "{}")),
        tool("call_9", "sunny"),
    ]
    assert per_message.output == [assistant("Sunny.")]
    assert old.group == "33333333333333333333333333333333"  # no conversation id: the trace
    # OpenInference spans in OTLP: the LLM span, its TOOL span; the AGENT span gives nothing.
    llm, oi_tool = oi
    assert llm.group == oi_tool.group == "oi-session"
    assert llm.output == [assistant("", call("call_1", "get_weather", '{"city":"Paris"}'))]
    assert oi_tool.content == "rainy" and oi_tool.tool_call_id == ""


def test_span_rows():
    """Example B of the survey, then rows in Phoenix's span JSON layout (the kind beside the
    attributes): a TOOL span whose ``tool.id`` is the call's id, an AGENT span (no piece)."""
    row, tool_row, agent_row = lines("otlp/span-rows.jsonl")
    (result,) = read(tool_row, "span-rows")
    assert result == ToolResult("span-rows", "sess-rows", 1796032801000000000, "eee2", "call_1", "get_weather", "rainy")
    assert read(agent_row, "span-rows") == []
    (piece,) = read(row, "span-rows")
    assert piece.history == [
        user("Weather in Paris?"),
        assistant("", call("call_1", "get_weather", '{"city":"Paris"}')),
        tool("call_1", "rainy"),
    ]
    assert piece.output == [assistant("Rainy.")]
    assert piece.start == 1796032800123456789  # nanoseconds kept
    assert (piece.group, piece.call_id) == ("5b8e", "eee1")  # ids as OTLP JSON spells them


# --------------------------------------------------------------------------------------------
# LangSmith


def test_langsmith_recorded_ingestion_payload():
    """The SDK's recorded wrap_openai payload: post and patch merged (the patch has no id and
    matches by dotted_order), epoch-millisecond start."""
    (piece,) = read(load("langsmith/langsmith_js_wrap_openai_default.json"), "langsmith")
    assert piece == Call(
        "langsmith",
        "dc34609e-3eeb-459d-bc2a-6fedb01d2e6e",
        1728803137170000000,
        "dc34609e-3eeb-459d-bc2a-6fedb01d2e6e",
        [user("howdy")],
        [assistant("Howdy! How can I assist you today?")],
        None,
        "gpt-4o-mini",
    )


def test_langsmith_langchain_runs():
    llm, tool_run, first, chain = (read(run, "langsmith") for run in lines("langsmith/langchain-runs.jsonl"))
    paris = call("call_1", "get_weather", {"city": "Paris"})
    assert llm[0].history == [
        system("Be brief."),
        user("Weather in Paris?"),
        assistant("", paris),
        tool("call_1", "rainy"),
    ]
    assert llm[0].output == [assistant("Rainy.")]
    assert llm[0].group == "thread-42" and llm[0].model == "gpt-4o"
    assert llm[0].start == 1796032802000001000
    assert llm[0].tools is not None and llm[0].tools[0]["function"]["name"] == "get_weather"
    assert tool_run == [
        ToolResult("langsmith", "thread-42", 1796032801500000000, "run-tool", "call_1", "get_weather", "rainy")
    ]
    # LangChain message dicts, and an Anthropic AIMessage whose tool_use block repeats its call.
    assert first[0].history == [system("Be brief."), user("Weather in Paris?")]
    assert first[0].output == [assistant("Let me check.", paris)]
    assert chain == []


# --------------------------------------------------------------------------------------------
# Proxies


def test_litellm_standard_logging_payload():
    (piece,) = read(load("litellm/standard_logging_payload.json"), "litellm")
    assert piece == Call(
        "litellm",
        "chatcmpl-2299b6a2-82a3-465a-b47c-04e685a2227f",
        1737710446847371000,  # "2025-01-24 09:20:46.847371", read as UTC
        "chatcmpl-2299b6a2-82a3-465a-b47c-04e685a2227f",
        [user("Hello, world!")],
        [assistant("hi")],
        None,
        "gpt-4o",
    )


def test_litellm_other_payloads():
    spend_log, embedding, anthropic = (read(row, "litellm") for row in lines("litellm/more-payloads.jsonl"))
    assert spend_log == []  # prompts not stored
    assert embedding == []  # no chat call
    assert anthropic[0].group == "conv-3"
    assert anthropic[0].output == [assistant("", call("toolu_1", "get_weather", '{"city":"Paris"}'))]
    assert anthropic[0].tools == [{"type": "function", "function": {"name": "get_weather"}}]


def test_helicone_export_rows():
    rows = [read(row, "helicone") for row in lines("helicone/export-rows.jsonl")]
    (second,), (first,), (claude,), (gemini,), (responses,) = rows
    paris = call("call_1", "get_weather", '{"city":"Paris"}')
    assert first.history == [system("Be brief."), user("Weather in Paris?")]  # bodies as JSON strings
    assert first.output == [assistant("", paris)]
    assert first.start == 1796029200000000000  # 10:00+01:00 is 09:00 UTC
    assert second.history == [
        system("Be brief."),
        user("Weather in Paris?"),
        assistant("", paris),
        tool("call_1", "rainy"),
    ]
    assert second.output == [assistant("Rainy.")]
    assert first.group == second.group == "sess-9"
    assert second.tools is not None and second.tools[0]["function"]["name"] == "get_weather"
    assert (claude.group, claude.output, claude.discarded) == ("req-3", [assistant("Hello!")], {"thinking": [1, 11]})
    assert gemini.output == [assistant("Hello from Gemini.")]
    assert responses.history == [system("Be brief."), user("Hi")] and responses.output == [assistant("Hello!")]


def test_openpipe_export():
    (plain,), (tagged,) = (read(row, "openpipe") for row in lines("openpipe/export.jsonl"))
    assert plain.history == [system("Classify the sentiment."), user("I love it")]
    assert plain.output == [assistant("positive")]
    assert plain.group == plain.call_id and plain.group.startswith("openpipe-") and plain.start == 0
    assert tagged.group == "chat-7"
    # The digest is the request's, deterministic: the same line read again, the same ids.
    assert read(lines("openpipe/export.jsonl")[0], "openpipe")[0] == plain


def test_every_reader_has_a_sample_here():
    tested = {"langfuse", "otlp", "span-rows", "langsmith", "litellm", "helicone", "openpipe"}
    assert set(CALL_LOG_READERS) == tested


def test_langfuse_pydantic_ai_events_and_the_same_span_as_a_row():
    """Real pydantic-ai 2025-06 trace: GenAI *events* as the input (a JSON list with
    ``event.name``) and a ``gen_ai.choice`` as the output, grouped by the trace's sessionId. The
    OTel attributes Langfuse kept in ``metadata`` (the ``events`` attribute) read as a span row
    give the same call."""
    record = load("langfuse/pydantic-ai-2025-06-06.trace.json")
    (generation,) = read(record, "langfuse")  # the SPAN observation gives nothing
    answer = generation.output[0]["content"]
    assert answer.startswith("Langfuse is a tool designed for observability")
    expected_history = [
        system("You are a helpful assistant that answers questions clearly and concisely."),
        user("What is Langfuse?"),
    ]
    assert generation.history == expected_history
    assert generation.output == [assistant(answer)]
    assert (generation.group, generation.model) == ("session_abc", "gpt-4o")
    metadata = json.loads(record["observations"][0]["metadata"])
    row = {"context": {"trace_id": "25f4", "span_id": "5cb3"}, "start_time": "2025-06-06T14:40:28.562Z", **metadata}
    (span,) = read(row, "span-rows")
    assert (span.history, span.output) == (expected_history, [assistant(answer)])
    assert span.start == generation.start == 1749220828562000000
    assert span.model == "gpt-4o-2024-08-06"  # the response's model, which the span records


def test_otlp_semconv_documented_examples():
    """The GenAI conventions' own worked examples: a tool call over two spans (the execute_tool
    span records no result: nothing), system instructions beside a system message, reasoning."""
    tool_calls, others = (read(doc, "otlp") for doc in lines("otlp/semconv-examples.jsonl"))
    second, first = tool_calls
    paris = call("call_VSPygqKTWdrhaFErNvMV18Yl", "get_weather", {"location": "Paris"})
    assert first.history == [user("Weather in Paris?")]
    assert first.output == [assistant("", paris)]
    assert (
        first.tools is not None and first.tools[0]["function"]["description"] == "Get the weather in a given location"
    )
    assert second.history == [
        user("Weather in Paris?"),
        assistant("", paris),
        tool(paris["tool_call_id"], "rainy, 57°F"),
    ]
    assert second.output == [assistant("The weather in Paris is currently rainy with a temperature of 57°F.")]
    assert second.tools is None  # the definitions are on the first span only
    assert first.group == second.group == "0af7651916cd43dd8448eb211c80319c"
    instructions, reasoning = others
    assert instructions.history == [
        system("You must never tell jokes"),
        system("You are a helpful bot"),
        user("Tell me a joke about OpenTelemetry"),
    ]
    assert reasoning.output == [
        assistant(
            " Why did the developer bring OpenTelemetry to the party? Because it always knows how to trace the fun!"
        )
    ]
    assert reasoning.discarded is not None and reasoning.discarded["reasoning"][0] == 1
    assert (reasoning.group, reasoning.call_id) == ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")


def _generation(**fields: Any) -> dict[str, Any]:
    row = {
        "id": "g1",
        "traceId": "t1",
        "parentObservationId": None,
        "type": "GENERATION",
        "startTime": "2025-08-22T10:00:00Z",
    }
    return {**row, **fields}


def test_langfuse_sdk_shapes():
    """Shapes of the real framework traces (values shortened): the LangChain callback handler
    (tool definitions listed as ``tool`` messages, calls in ``additional_kwargs``), the Vercel AI
    SDK (``{prompt}`` and ``toolCalls``), google-adk (a google-genai request with its system
    instruction in ``config``, an ``LlmResponse``), google-genai (``contents`` as one text), and
    a generation that recorded nothing (BeeAI)."""
    definition = {"type": "function", "function": {"name": "Web-Search", "parameters": {"type": "object"}}}
    langchain = _generation(
        input=json.dumps([user("Search the web."), {"role": "tool", "content": definition}]),
        output=json.dumps(
            {
                "role": "assistant",
                "content": "",
                "additional_kwargs": {
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "Web-Search", "arguments": "{}"}}
                    ]
                },
            }
        ),
    )
    (piece,) = read(langchain, "langfuse")
    assert piece.history == [user("Search the web.")]
    assert piece.output == [assistant("", call("call_1", "Web-Search", "{}"))]
    assert piece.tools == [definition]
    vercel = _generation(
        input='{"prompt":"Weather in San Francisco?"}',
        output='[{"toolCallId":"call_D","toolName":"getWeather","input":"{\\"location\\":\\"San Francisco\\"}"}]',
    )
    (piece,) = read(vercel, "langfuse")
    assert piece.history == [user("Weather in San Francisco?")]
    assert piece.output == [assistant("", call("call_D", "getWeather", '{"location":"San Francisco"}'))]
    adk = _generation(
        input=json.dumps(
            {
                "model": "gemini-2.0-flash",
                "config": {
                    "system_instruction": "Greet.",
                    "tools": [{"function_declarations": [{"name": "say_hello"}]}],
                },
                "contents": [{"parts": [{"text": "hi"}], "role": "user"}],
            }
        ),
        output='{"content":{"parts":[{"text":"Hello!"}],"role":"model"},"finish_reason":"STOP"}',
    )
    (piece,) = read(adk, "langfuse")
    assert piece.history == [system("Greet."), user("hi")]
    assert piece.output == [assistant("Hello!")]
    assert piece.tools is not None and piece.tools[0]["function"]["name"] == "say_hello"
    genai_sdk = _generation(input='{"model": "gemini-2.5-flash", "contents": "What is Langfuse?"}', output="An answer.")
    (piece,) = read(genai_sdk, "langfuse")
    assert (piece.history, piece.output) == ([user("What is Langfuse?")], [assistant("An answer.")])
    assert read(_generation(input=None, output=None), "langfuse") == []


def test_otlp_log_events():
    """GenAI events as OTLP log records (python-contrib's openai-v2 without the latest
    conventions: the events its tool-call test asserts): the records of one span make one call;
    an inference-details record is a call of its own; other log records give nothing."""
    details, first, second = read(lines("otlp/log-events.jsonl")[0], "otlp")
    seattle = call("call_seattle", "get_current_weather", '{"location": "Seattle, WA"}')
    sf = call("call_sf", "get_current_weather", '{"location": "San Francisco, CA"}')
    question = [system("You're a helpful assistant."), user("What's the weather in Seattle and San Francisco today?")]
    assert first.history == question and first.output == [assistant("", seattle, sf)]
    assert second.history == [
        *question,
        assistant("", seattle, sf),
        tool("call_seattle", "50 degrees and raining"),
        tool("call_sf", "70 degrees and sunny"),
    ]
    assert second.output == [assistant("Seattle: 50 degrees and raining; San Francisco: 70 degrees and sunny.")]
    assert (first.call_id, first.start, second.start) == ("f000000000000001", 1764500000000000000, 1764500002000000000)
    assert first.group == second.group == "55555555555555555555555555555555"
    assert (details.group, details.history, details.output) == ("conv-logs", [user("Hi")], [assistant("Hello!")])


@pytest.mark.parametrize(
    ("snapshot", "expected"),
    [
        ("gpt4o-stream-response", [assistant("Hello! How can I assist you today?")]),
        (
            "anthropic-stream-response",
            [
                assistant(
                    "I'll help you calculate that using the calculate function.",
                    call("toolu_019z4x8aagZbz8K455pmuVqk", "calculate", {"expression": "50+50"}),
                )
            ],
        ),
    ],
)
def test_helicone_streamed_response_bodies(snapshot, expected):
    """Real streams as Helicone's gateway relays them (its cost tests' snapshots), as the
    response_body of an export row: assembled into the response they stream."""
    stream = (DATA / "helicone" / f"{snapshot}.snapshot").read_text(encoding="utf-8")
    row = {"request_id": "r", "request_body": {"model": "m", "messages": [user("hi")]}, "response_body": stream}
    (piece,) = read(row, "helicone")
    assert piece.output == expected


def test_streams_of_other_kinds_are_refused():
    from transforms.calllogs import streams

    assert streams.assembled('data: {"candidates": []}\n\ndata: [DONE]') is None
    with pytest.raises(FormatError) as raised:
        streams.assembled("data: {not json\n\n")
    assert raised.value.reason == "bad_stream"
    broken = 'data: {"type":"message_start","message":{}}\n\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}\n\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"a"}}'
    with pytest.raises(FormatError) as raised:
        streams.assembled(broken)
    assert raised.value.reason == "bad_stream"
    responses = (
        'event: response.completed\ndata: {"type":"response.completed","response":{"object":"response","output":[]}}'
    )
    assert streams.assembled(responses) == {"object": "response", "output": []}


def test_langsmith_recorded_stream_payload():
    """A streamed wrap_openai call: the output is the merged chunk, its finish_reason an object."""
    (piece,) = read(load("langsmith/langsmith_js_wrap_openai_stream.json"), "langsmith")
    assert (piece.history, piece.output) == ([user("howdy")], [assistant("Howdy! How can I assist you today?")])
    assert piece.start == 1728803135809000000
