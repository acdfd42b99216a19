"""Real client libraries driven against the loopback fakes (tests/fake_provider.py), one scenario
per process: ``python tests/client_exports.py SCENARIO`` with the fakes' addresses in
``FAKE_PROVIDER``, ``FAKE_COLLECTOR``, ``FAKE_LANGSMITH`` and an output file in ``EXPORT_OUT`` (for
the exports a client writes itself: LiteLLM's logging payloads, LangSmith's ``list_runs`` rows).

Each scenario drives the same two conversations (``CONVERSATIONS``): an agent loop with tool
calls and their results, then a second user turn; and a plain two-turn chat. A process of its own
per scenario, since the libraries keep global state (OpenTelemetry's providers, instrumentors,
LiteLLM's callbacks) and read their settings from the environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fake_provider import Reply

MODEL = "fake-model"
WEATHER = {"Paris": "rainy", "Rome": "sunny"}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@dataclass(frozen=True)
class Conversation:
    name: str
    system: str
    turns: tuple[str, ...]
    replies: tuple[Reply, ...]


CONVERSATIONS = (
    Conversation(
        "weather",
        "You answer weather questions.",
        ("Weather in Paris and Rome?", "Thanks!"),
        (
            Reply("", [("call_1", "get_weather", {"city": "Paris"})]),
            Reply("Checking Rome too.", [("call_2", "get_weather", {"city": "Rome"})]),
            Reply("Paris is rainy, Rome is sunny."),
            Reply("You're welcome."),
        ),
    ),
    Conversation("greeting", "", ("Say hi.", "Again."), (Reply("Hi!"), Reply("Hi again!"))),
)


def script() -> list[Reply]:
    return [reply for conversation in CONVERSATIONS for reply in conversation.replies]


def expected_messages(conversation: Conversation, args_as_text: bool) -> list[dict[str, Any]]:
    """The conversation as driven, in convnorm's flat shape (arguments as the client recorded
    them: JSON text for OpenAI's, an object for Anthropic's)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": conversation.system}] if conversation.system else []
    replies = iter(conversation.replies)
    for turn in conversation.turns:
        messages.append({"role": "user", "content": turn})
        while True:
            reply = next(replies)
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if reply.calls:
                message["tool_calls"] = [
                    {"tool_call_id": cid, "name": name, "args": json.dumps(args) if args_as_text else args}
                    for cid, name, args in reply.calls
                ]
            messages.append(message)
            if not reply.calls:
                break
            messages += [
                {"role": "tool", "content": WEATHER[args["city"]], "tool_call_id": cid} for cid, _, args in reply.calls
            ]
    return messages


# --------------------------------------------------------------------------------------------
# The application loops


def openai_chat(
    create: Callable[..., Any],
    conversation: Conversation,
    stream: bool = False,
    each_turn: Callable[[], Any] = contextlib.nullcontext,
    **extra: Any,
) -> list[dict[str, Any]]:
    """An agent loop on OpenAI chat completions through ``create`` (the SDK's, or LiteLLM's);
    each user turn inside ``each_turn()``."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": conversation.system}] if conversation.system else []
    for turn in conversation.turns:
        messages.append({"role": "user", "content": turn})
        with each_turn():
            _answer_turn(create, messages, stream, extra)
    return messages


def _answer_turn(
    create: Callable[..., Any], messages: list[dict[str, Any]], stream: bool, extra: dict[str, Any]
) -> None:
    while True:
        text, calls = _chat_answer(
            create(model=MODEL, messages=list(messages), tools=[TOOL], stream=stream, **extra), stream
        )
        assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            assistant["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in calls
            ]
        messages.append(assistant)
        if not calls:
            break
        for cid, _, args in calls:
            messages.append({"role": "tool", "tool_call_id": cid, "content": WEATHER[json.loads(args)["city"]]})


def _chat_answer(response: Any, stream: bool) -> tuple[str, list[tuple[str, str, str]]]:
    if not stream:
        message = response.choices[0].message
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        return message.content or "", calls
    text, calls = "", {}  # type: ignore[var-annotated]
    for chunk in response:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for piece in delta.tool_calls or []:
            entry = calls.setdefault(piece.index, ["", "", ""])
            entry[0] = piece.id or entry[0]
            entry[1] = (piece.function.name if piece.function else None) or entry[1]
            entry[2] += (piece.function.arguments if piece.function else None) or ""
    return text, [tuple(calls[index]) for index in sorted(calls)]  # type: ignore[misc]


def anthropic_messages(client: Any, conversation: Conversation) -> None:
    """The same agent loop on Anthropic's messages API."""
    tool = {
        "name": "get_weather",
        "description": TOOL["function"]["description"],
        "input_schema": TOOL["function"]["parameters"],
    }
    messages: list[dict[str, Any]] = []
    system = {"system": conversation.system} if conversation.system else {}
    for turn in conversation.turns:
        messages.append({"role": "user", "content": turn})
        while True:
            request = {"model": MODEL, "max_tokens": 100, "messages": list(messages), "tools": [tool], **system}
            blocks = [block.model_dump(exclude_none=True) for block in client.messages.create(**request).content]
            messages.append({"role": "assistant", "content": blocks})
            uses = [block for block in blocks if block["type"] == "tool_use"]
            if not uses:
                break
            results = [
                {"type": "tool_result", "tool_use_id": b["id"], "content": WEATHER[b["input"]["city"]]} for b in uses
            ]
            messages.append({"role": "user", "content": results})


# --------------------------------------------------------------------------------------------
# OpenTelemetry (openai-v2, OpenInference, the OpenAI Agents SDK through OpenInference)


def _otel() -> tuple[Any, Any, Callable[[], None]]:
    from opentelemetry import _logs, trace
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    collector = os.environ["FAKE_COLLECTOR"]
    resource = Resource.create({"service.name": "client-exports"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{collector}/v1/traces")))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{collector}/v1/logs")))
    trace.set_tracer_provider(tracer_provider)
    _logs.set_logger_provider(logger_provider)

    def shutdown() -> None:
        tracer_provider.shutdown()
        logger_provider.shutdown()

    return tracer_provider, logger_provider, shutdown


def _openai_client(asynchronous: bool = False) -> Any:
    import openai

    kind = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return kind(base_url=os.environ["FAKE_PROVIDER"] + "/v1", api_key="sk-fake", max_retries=0)


def _parent_span(enabled: bool) -> Callable[[Conversation], Any]:
    from opentelemetry import trace

    tracer = trace.get_tracer("client-exports")
    return lambda conversation: (
        tracer.start_as_current_span(f"chat {conversation.name}") if enabled else contextlib.nullcontext()
    )


def otel_openai_v2(parent: bool, stream: bool = False, turn_traces: bool = False) -> None:
    import opentelemetry.instrumentation.openai_v2 as openai_v2
    from opentelemetry import trace

    if "OTEL_SEMCONV_STABILITY_OPT_IN" not in os.environ:
        # The legacy conventions (events as log records) are the library's documented default,
        # but util-genai >= 1.0 answers "experimental" always: its own switch, put back.
        openai_v2.is_experimental_mode = lambda: False
    OpenAIInstrumentor = openai_v2.OpenAIInstrumentor
    tracer_provider, logger_provider, shutdown = _otel()
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    client = _openai_client()
    around = _parent_span(parent)
    tracer = trace.get_tracer("client-exports")
    for conversation in CONVERSATIONS:
        extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if stream else {}
        if turn_traces:
            # A chat application's request handler: each user turn a trace of its own, the
            # conversation's id on the application's span (the LLM spans do not carry it).
            attributes = {"gen_ai.conversation.id": conversation.name, "session.id": conversation.name}
            extra["each_turn"] = lambda named=attributes: tracer.start_as_current_span("handle turn", attributes=named)
        with around(conversation):
            openai_chat(client.chat.completions.create, conversation, stream, **extra)
    shutdown()


def openinference_responses(parent: bool = True) -> None:
    """The Responses API with ``previous_response_id``: each request sends only the new items;
    without a parent span each call is a trace of its own."""
    from openinference.instrumentation.openai import OpenAIInstrumentor

    tracer_provider, _, shutdown = _otel()
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)
    client = _openai_client()
    tool = {"type": "function", **TOOL["function"]}
    for conversation in CONVERSATIONS:
        previous = None
        with _parent_span(parent)(conversation):
            for turn in conversation.turns:
                new_items: list[dict[str, Any]] = [{"role": "user", "content": turn}]
                while True:
                    more = {"previous_response_id": previous} if previous else {}
                    if conversation.system:
                        more["instructions"] = conversation.system
                    response = client.responses.create(model=MODEL, input=new_items, tools=[tool], **more)
                    previous = response.id
                    calls = [item for item in response.output if item.type == "function_call"]
                    if not calls:
                        break
                    new_items = [
                        {
                            "type": "function_call_output",
                            "call_id": c.call_id,
                            "output": WEATHER[json.loads(c.arguments)["city"]],
                        }
                        for c in calls
                    ]
    shutdown()


def openinference_openai(parent: bool, session: bool) -> None:
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    tracer_provider, _, shutdown = _otel()
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)
    client = _openai_client()
    around = _parent_span(parent)
    for conversation in CONVERSATIONS:
        with around(conversation), using_session(conversation.name) if session else contextlib.nullcontext():
            openai_chat(client.chat.completions.create, conversation)
    shutdown()


def openai_agents(chat_completions: bool) -> None:
    import asyncio

    import agents
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    tracer_provider, _, shutdown = _otel()
    OpenAIAgentsInstrumentor().instrument(tracer_provider=tracer_provider)
    client = _openai_client(asynchronous=True)
    agents.set_default_openai_client(client, use_for_tracing=False)
    if chat_completions:
        agents.set_default_openai_api("chat_completions")

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return WEATHER[city]

    async def run() -> None:
        for conversation in CONVERSATIONS:
            agent = agents.Agent(
                name="assistant", instructions=conversation.system or None, tools=[get_weather], model=MODEL
            )
            items: list[Any] = []
            with agents.trace(f"chat {conversation.name}", group_id=conversation.name):
                for turn in conversation.turns:
                    result = await agents.Runner.run(agent, [*items, {"role": "user", "content": turn}])
                    items = result.to_input_list()

    asyncio.run(run())
    shutdown()


# --------------------------------------------------------------------------------------------
# LangSmith


def _langsmith_rows() -> None:
    """What the SDK traced, then the runs ``list_runs`` gives back, one JSON row each."""
    import langsmith
    from langsmith.run_trees import get_cached_client

    get_cached_client().flush()
    client = langsmith.Client()
    runs = list(client.list_runs(project_id="00000000-0000-0000-0000-000000000000"))
    with open(os.environ["EXPORT_OUT"], "w", encoding="utf-8") as out:
        for run in runs:
            out.write(run.json() + "\n")


def langsmith_wrap_openai(stream: bool, thread: bool) -> None:
    from langsmith import traceable
    from langsmith.wrappers import wrap_openai

    client = wrap_openai(_openai_client())
    for conversation in CONVERSATIONS:
        metadata = {"session_id": conversation.name} if thread else {}
        if thread:
            # A thread: each call a trace of its own, the conversation named in its metadata.
            openai_chat(client.chat.completions.create, conversation, stream, langsmith_extra={"metadata": metadata})
        else:
            traceable(name=f"chat {conversation.name}")(openai_chat)(
                client.chat.completions.create, conversation, stream
            )
    _langsmith_rows()


def langsmith_traceable_llm() -> None:
    import httpx
    from langsmith import traceable

    @traceable(run_type="llm", name="chat")
    def create(**request: Any) -> dict[str, Any]:
        response = httpx.post(os.environ["FAKE_PROVIDER"] + "/v1/chat/completions", json=request, timeout=30)
        return response.json()

    class Answer:
        def __init__(self, body: dict[str, Any]) -> None:
            import openai.types.chat

            self.choices = openai.types.chat.ChatCompletion.model_validate(body).choices

    for conversation in CONVERSATIONS:
        traceable(name=f"chat {conversation.name}")(openai_chat)(lambda **r: Answer(create(**r)), conversation)
    _langsmith_rows()


def langsmith_wrap_anthropic() -> None:
    import anthropic
    from langsmith import traceable
    from langsmith.wrappers import wrap_anthropic

    client = wrap_anthropic(anthropic.Anthropic(base_url=os.environ["FAKE_PROVIDER"], api_key="sk-fake", max_retries=0))
    for conversation in CONVERSATIONS:
        traceable(name=f"chat {conversation.name}")(anthropic_messages)(client, conversation)
    _langsmith_rows()


# --------------------------------------------------------------------------------------------
# Langfuse


def langfuse_openai(session: bool, stream: bool) -> None:
    from langfuse import get_client, propagate_attributes
    from langfuse.openai import OpenAI

    client = OpenAI(base_url=os.environ["FAKE_PROVIDER"] + "/v1", api_key="sk-fake", max_retries=0)
    langfuse = get_client()
    for conversation in CONVERSATIONS:
        with langfuse.start_as_current_observation(name=f"chat {conversation.name}"):
            with propagate_attributes(session_id=conversation.name) if session else contextlib.nullcontext():
                openai_chat(client.chat.completions.create, conversation, stream)
    langfuse.shutdown()


# --------------------------------------------------------------------------------------------
# LiteLLM


def litellm_callback(session: bool, stream: bool, provider: str) -> None:
    import litellm
    from litellm.integrations.custom_logger import CustomLogger

    payloads: list[dict[str, Any]] = []

    class Recorder(CustomLogger):
        def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            payloads.append(kwargs["standard_logging_object"])

    litellm.callbacks = [Recorder()]
    base = os.environ["FAKE_PROVIDER"]
    calls = 0
    for conversation in CONVERSATIONS:
        extra: dict[str, Any] = {"api_key": "sk-fake"}
        if session:
            extra["litellm_session_id"] = conversation.name
        if provider == "anthropic":
            extra.update(model=f"anthropic/{MODEL}", api_base=base, max_tokens=100)
        else:
            extra.update(model=f"openai/{MODEL}", api_base=base + "/v1")

        def answer(model: str, settings: dict[str, Any] = extra, **request: Any) -> Any:
            nonlocal calls
            calls += 1
            response = litellm.completion(**{**request, **settings})
            # A stream read to its end, as an application does.
            return list(response) if request.get("stream") else response

        openai_chat(answer, conversation, stream)
    deadline = time.monotonic() + 30
    while len(payloads) < calls and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(os.environ["EXPORT_OUT"], "w", encoding="utf-8") as out:
        for payload in payloads:
            out.write(json.dumps(payload, default=str) + "\n")


SCENARIOS: dict[str, Callable[[], None]] = {
    "otel-v2-legacy-parent": lambda: otel_openai_v2(parent=True),
    "otel-v2-legacy-parent-stream": lambda: otel_openai_v2(parent=True, stream=True),
    "otel-v2-legacy-no-parent": lambda: otel_openai_v2(parent=False),
    "otel-v2-span-only-parent": lambda: otel_openai_v2(parent=True),
    "otel-v2-span-only-no-parent": lambda: otel_openai_v2(parent=False),
    "otel-v2-span-and-event-parent": lambda: otel_openai_v2(parent=True),
    "otel-v2-span-and-event-no-parent": lambda: otel_openai_v2(parent=False),
    "otel-v2-event-only-parent": lambda: otel_openai_v2(parent=True),
    "otel-v2-span-only-parent-stream": lambda: otel_openai_v2(parent=True, stream=True),
    "otel-v2-span-only-turn-traces": lambda: otel_openai_v2(parent=False, turn_traces=True),
    "otel-v2-legacy-turn-traces": lambda: otel_openai_v2(parent=False, turn_traces=True),
    "openinference-responses-previous-id": openinference_responses,
    "openinference-responses-previous-id-no-parent": lambda: openinference_responses(parent=False),
    "openinference-parent": lambda: openinference_openai(parent=True, session=False),
    "openinference-session": lambda: openinference_openai(parent=False, session=True),
    "agents-responses": lambda: openai_agents(chat_completions=False),
    "agents-chat": lambda: openai_agents(chat_completions=True),
    "langsmith-wrap-openai": lambda: langsmith_wrap_openai(stream=False, thread=False),
    "langsmith-wrap-openai-stream": lambda: langsmith_wrap_openai(stream=True, thread=False),
    "langsmith-wrap-openai-thread": lambda: langsmith_wrap_openai(stream=False, thread=True),
    "langsmith-traceable": langsmith_traceable_llm,
    # Not streamed: langsmith 0.15.1's wrap_anthropic does not trace messages.stream(), and its
    # reducer of create(stream=True) fails on anthropic 2.17 (accumulate_event's json_bufs).
    "langsmith-wrap-anthropic": langsmith_wrap_anthropic,
    "langfuse-trace": lambda: langfuse_openai(session=False, stream=False),
    "langfuse-session": lambda: langfuse_openai(session=True, stream=False),
    "langfuse-session-stream": lambda: langfuse_openai(session=True, stream=True),
    "litellm-session": lambda: litellm_callback(session=True, stream=False, provider="openai"),
    "litellm-session-stream": lambda: litellm_callback(session=True, stream=True, provider="openai"),
    "litellm-no-session": lambda: litellm_callback(session=False, stream=False, provider="openai"),
    "litellm-anthropic-session": lambda: litellm_callback(session=True, stream=False, provider="anthropic"),
    "litellm-anthropic-session-stream": lambda: litellm_callback(session=True, stream=True, provider="anthropic"),
}

#: The environment each OTel openai-v2 mode is set up with (read by the library at start).
OTEL_V2_MODES = {
    "legacy": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    "span-only": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
    },
    "span-and-event": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_and_event",
    },
    "event-only": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only",
    },
}


def scenario_environment(name: str) -> dict[str, str]:
    """The settings a scenario's process runs with: none of them reaches beyond loopback."""
    env = {
        "OTEL_SDK_DISABLED": "false",
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "LANGSMITH_TRACING": "true" if name.startswith("langsmith") else "false",
        "LANGSMITH_API_KEY": "ls-fake",
        "LANGSMITH_PROJECT": "client-exports",
        "LANGFUSE_PUBLIC_KEY": "pk-lf-fake",
        "LANGFUSE_SECRET_KEY": "sk-lf-fake",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "OPENAI_AGENTS_DISABLE_TRACING": "0",
        "HF_HUB_OFFLINE": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    for mode, settings in OTEL_V2_MODES.items():
        if name.startswith(f"otel-v2-{mode}-"):
            env.update(settings)
    return env


def _loopback_only() -> list[Any]:
    """Refuses every connection beyond loopback (a library phoning home, an exporter's default
    endpoint), and keeps the addresses tried: the scenario fails if there is any."""
    import socket

    tried: list[Any] = []
    connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else None
        if host is not None and host not in ("127.0.0.1", "::1", "localhost"):
            tried.append(address)
            raise ConnectionRefusedError(f"not loopback: {address}")
        return connect(self, address)

    socket.socket.connect = guarded  # type: ignore[method-assign]
    return tried


if __name__ == "__main__":
    beyond = _loopback_only()
    SCENARIOS[sys.argv[1]]()
    if beyond:
        sys.exit(f"connections beyond loopback were tried: {beyond}")
