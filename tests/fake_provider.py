"""Loopback fakes for the client-library tests (tests/test_calllogs_clients.py): an LLM provider
that answers OpenAI chat completions, OpenAI Responses and Anthropic messages from a script, in
whole or streamed (server-sent events), with tool calls; an OTLP/HTTP collector that writes what
it receives as OTLP JSON, one document per export request, as a collector's file exporter does;
and a LangSmith API that records the SDK's ingestion payloads and answers ``list_runs``.

Every server listens on 127.0.0.1 on a port the system picks, in a thread of the test process.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CREATED = 1_796_000_000


@dataclass
class Reply:
    """One scripted assistant turn: its text and its tool calls ``(id, name, arguments)``."""

    text: str = ""
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


class _Server:
    """A ThreadingHTTPServer on loopback whose requests go to ``handle(method, path, body, headers)``."""

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, content_type, chunks = owner.handle(self.command, self.path, body, self.headers)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                if content_type == "text/event-stream":
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for chunk in chunks:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    data = b"".join(chunks)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.lock = threading.Lock()

    def handle(self, method: str, path: str, body: bytes, headers: Any) -> tuple[int, str, list[bytes]]:
        raise NotImplementedError

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def _json(status: int, value: Any) -> tuple[int, str, list[bytes]]:
    return status, "application/json", [json.dumps(value).encode()]


def _sse(events: Iterator[tuple[str | None, Any]]) -> tuple[int, str, list[bytes]]:
    chunks = []
    for name, data in events:
        line = data if isinstance(data, str) else json.dumps(data)
        chunks.append((f"event: {name}\n" if name else "").encode() + f"data: {line}\n\n".encode())
    return 200, "text/event-stream", chunks


class FakeProvider(_Server):
    """Answers each model request with the script's next reply, in the shape its path asks for."""

    def __init__(self, script: list[Reply]) -> None:
        super().__init__()
        self.script = list(script)
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def handle(self, method: str, path: str, body: bytes, headers: Any) -> tuple[int, str, list[bytes]]:
        request = json.loads(body or b"{}")
        with self.lock:
            self.requests.append((path, request))
            if not self.script:
                return _json(500, {"error": {"message": f"the script has no reply left for {path}"}})
            reply = self.script.pop(0)
            number = len(self.requests)
        model = request.get("model", "fake-model")
        stream = bool(request.get("stream"))
        if path.endswith("/chat/completions"):
            return _sse(_chat_chunks(reply, model, number)) if stream else _json(200, _chat(reply, model, number))
        if path.endswith("/messages"):
            return (
                _sse(_anthropic_events(reply, model, number))
                if stream
                else _json(200, _anthropic(reply, model, number))
            )
        if path.endswith("/responses"):
            response = {**_response(reply, model, number), "instructions": request.get("instructions")}
            if stream:
                return _sse(iter([("response.completed", {"type": "response.completed", "response": response})]))
            return _json(200, response)
        return _json(404, {"error": {"message": f"no such path {path}"}})


_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _chat(reply: Reply, model: str, number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, name, args in reply.calls
        ]
    finish = "tool_calls" if reply.calls else "stop"
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": _USAGE,
    }


def _chat_chunks(reply: Reply, model: str, number: int) -> Iterator[tuple[str | None, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": CREATED, "model": model}
        return None, {**base, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    # The text in two pieces, the arguments in two: a client must join them.
    half = len(reply.text) // 2
    for piece in (reply.text[:half], reply.text[half:]):
        if piece:
            yield chunk({"content": piece})
    for index, (cid, name, args) in enumerate(reply.calls):
        text = json.dumps(args)
        head = {"index": index, "id": cid, "type": "function", "function": {"name": name, "arguments": text[:5]}}
        yield chunk({"tool_calls": [head]})
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": text[5:]}}]})
    yield chunk({}, "tool_calls" if reply.calls else "stop")
    base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": CREATED, "model": model}
    yield None, {**base, "choices": [], "usage": _USAGE}
    yield None, "[DONE]"


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    blocks += [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in reply.calls]
    return blocks


def _anthropic(reply: Reply, model: str, number: int) -> dict[str, Any]:
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(reply),
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _anthropic_events(reply: Reply, model: str, number: int) -> Iterator[tuple[str | None, Any]]:
    start = {**_anthropic(reply, model, number), "content": [], "stop_reason": None}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(_anthropic_blocks(reply)):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    stop = {"stop_reason": "tool_use" if reply.calls else "end_turn", "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


def _response(reply: Reply, model: str, number: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.text:
        text = {"type": "output_text", "text": reply.text, "annotations": []}
        output.append(
            {"type": "message", "id": f"msg_{number}", "status": "completed", "role": "assistant", "content": [text]}
        )
    for cid, name, args in reply.calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{cid}",
                "call_id": cid,
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        )
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _hex_ids(value: Any) -> Any:
    """OTLP JSON spells trace and span ids in hex, where protobuf's JSON mapping gives base64."""
    import base64

    if isinstance(value, dict):
        return {
            key: base64.b64decode(item).hex()
            if key in ("traceId", "spanId", "parentSpanId") and item
            else _hex_ids(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    return value


class FakeCollector(_Server):
    """An OTLP/HTTP receiver: each export request (``/v1/traces``, ``/v1/logs``, under any prefix,
    protobuf or JSON) becomes one OTLP JSON document, kept in arrival order."""

    def __init__(self) -> None:
        super().__init__()
        self.documents: list[dict[str, Any]] = []

    def handle(self, method: str, path: str, body: bytes, headers: Any) -> tuple[int, str, list[bytes]]:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        if path.endswith("/v1/traces"):
            message: Any = ExportTraceServiceRequest()
        elif path.endswith("/v1/logs"):
            message = ExportLogsServiceRequest()
        else:
            return _json(404, {})
        if "json" in (headers.get("Content-Type") or ""):
            document = json.loads(body)
        else:
            if headers.get("Content-Encoding") == "gzip":
                import gzip

                body = gzip.decompress(body)
            message.ParseFromString(body)
            document = _hex_ids(MessageToDict(message))
        with self.lock:
            self.documents.append(document)
        return 200, "application/x-protobuf", [b""]


# What a LangSmith server's /info says of batches (the SDK's defaults), but JSON batches.
_BATCH_INGEST = {
    "use_multipart_endpoint": False,
    "scale_up_qsize_trigger": 1000,
    "scale_up_nthreads_limit": 16,
    "scale_down_nempty_trigger": 4,
    "size_limit": 100,
    "size_limit_bytes": 20_971_520,
}


class FakeLangSmith(_Server):
    """The LangSmith API as the SDK uses it for tracing: ``/info`` says to send JSON batches
    (``/runs/batch``), each batch body is kept as it came (an ingestion payload), and the runs
    they make (posts completed by their patches) answer ``/runs/query`` (``list_runs``)."""

    def __init__(self) -> None:
        super().__init__()
        self.payloads: list[dict[str, Any]] = []
        self.runs: dict[str, dict[str, Any]] = {}

    def handle(self, method: str, path: str, body: bytes, headers: Any) -> tuple[int, str, list[bytes]]:
        path = path.split("?")[0]
        if path.endswith("/info"):
            return _json(200, {"version": "0.0.0", "batch_ingest_config": _BATCH_INGEST})
        if path.endswith("/runs/batch"):
            payload = json.loads(body)
            with self.lock:
                self.payloads.append(payload)
                for run in payload.get("post") or []:
                    self.runs[run["id"]] = dict(run)
                for run in payload.get("patch") or []:
                    self.runs.setdefault(run["id"], {}).update(run)
            return _json(200, {})
        if path.endswith("/runs/query"):
            with self.lock:
                runs = sorted(self.runs.values(), key=lambda run: run.get("dotted_order", ""))
            return _json(200, {"runs": runs, "cursors": {"next": None}})
        if path.endswith("/runs") and method == "POST":
            run = json.loads(body)
            with self.lock:
                self.payloads.append({"post": [run]})
                self.runs[run["id"]] = dict(run)
            return _json(200, {})
        if "/runs/" in path and method == "PATCH":
            run = json.loads(body)
            run_id = path.rsplit("/", 1)[1]
            with self.lock:
                self.payloads.append({"patch": [{**run, "id": run_id}]})
                self.runs.setdefault(run_id, {}).update(run)
            return _json(200, {})
        return _json(404, {"detail": f"no such path {path}"})
