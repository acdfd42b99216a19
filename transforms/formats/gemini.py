"""Google Gemini ``generateContent`` request bodies: a reader and a writer.

``{"contents": [Content], "systemInstruction"?: Content, "tools"?: [Tool], ...}`` (the REST
body; ``contents`` may also sit at the message field, which
is read first when the record holds both: the other is carried), or a bare list of ``Content``. A
``Content`` is ``{"role"?: "user" | "model", "parts": [Part]}``. REST JSON is camelCase, but
the API also accepts (and logs hold) snake_case: both spellings are read everywhere
(``functionCall`` / ``function_call``, ``systemInstruction`` / ``system_instruction`` ...).

- Roles: ``model`` → assistant; ``user`` (or no role: the API's default) → user; ``function``
  (the older spelling of a turn of function responses) → user. Any other role is kept.
- ``text`` parts are joined; a part flagged ``thought: true`` is the model's reasoning and is
  dropped (no flat equivalent), its text counted in the ledger under ``thought``.
  ``inlineData`` / ``fileData`` give ``[image]`` for an ``image/*`` MIME type, else ``[file]``.
  Server-side parts keep their text in place, in the shared rendering
  (``transforms.formats._rendered``): ``executableCode`` / ``codeExecutionResult`` (the code
  execution tool, named ``code_execution``) and ``toolCall`` / ``toolResponse`` (server-side
  tool calls the client passes back unexecuted, named by their ``toolType``); they are not
  client calls, and MEM-5 pairs none of them. Any other part kind is an ``unknown_block``
  dead letter. ``thoughtSignature`` beside a part is not content and is not kept.
- ``functionCall {id?, name, args}`` parts of a model turn become that assistant message's
  calls, ``args`` kept verbatim (an object).
- Each ``functionResponse {id?, name, response}`` part becomes its own tool message, in part
  order, before the rest of its turn (text beside responses becomes a message of the turn's
  role after them). ``response`` is a JSON object; Google's rule: its ``output`` key is the
  output and its ``error`` key the error, else the whole object is the output. So a response
  of only ``{"output": x}`` gives the text of ``x``; of only ``{"error": x}``, ``[error] `` and
  the text of ``x`` (the flat shape's error flag); any other response its compact JSON.

Call ids: a call's ``id`` when it has one. Gemini usually sends none; then the call gets a
position-derived id like every reader (``call_<content index>``, ``call_<content index>_<n>``
for the n-th of several in a turn, ``_<k>`` added if taken). A response with an ``id`` answers
that id. A response without one is paired by position with the calls of the model turn just
before its turn (Gemini's rule: the response turn comes right after the call turn): it answers
the first still-unanswered call of the same ``name``, else the first still-unanswered call. A
turn that has no responses ends the pairing; a response left with nothing to answer keeps no id
(an orphan the core drops and counts).

Fields: every field but ``contents`` and the system instruction is carried. ``tools`` becomes a
list the writers read: each ``functionDeclarations`` entry as a bare function schema ``{name,
description?, parameters?}`` (``parametersJsonSchema`` standing in for a missing
``parameters``), other tool kinds (``googleSearch``, ``codeExecution`` ...) kept as they are
(writers refuse them, having no equivalent).

Writer (``gemini``): a ``generateContent`` body ``{systemInstruction?, contents, tools?}``;
see ``write_gemini``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transforms.core.ledger import note, note_unread_keys
from transforms.core.normalize import content_text
from transforms.formats import media, reasoning
from transforms.formats._common import (
    ERROR_PREFIX,
    JOIN,
    SYSTEM_ROLES,
    IdAllocator,
    add_turn,
    bare_list_conversation,
    check_results_adjacent,
    check_user_first,
    joined_system,
    normalized_messages,
    record_fields,
    take_pending,
    unsupported_role,
)
from transforms.formats._rendered import (
    NO_ORIGINALS,
    SERVER_CALL,
    SERVER_RESULT,
    Originals,
    render,
    unknown_block,
    without,
)
from transforms.formats._tools import bare_function_schema, check_tool_name, tools_for
from transforms.formats.anthropic import tool_input
from transforms.formats.base import (
    Conversation,
    FormatError,
    Reader,
    WriteContext,
    Writer,
    count_written,
    register_reader,
    register_writer,
)
from transforms.formats.gemini_schema import gemini_parameters
from transforms.formats.gemini_stream import assemble, has_streamed_calls
from transforms.formats.schema import JSON, STRING

# Part keys, camelCase first (REST), then the snake_case the API also accepts.
_CALL = ("functionCall", "function_call")
_RESPONSE = ("functionResponse", "function_response")
_MEDIA = ("inlineData", "inline_data", "fileData", "file_data")
_SYSTEM = ("systemInstruction", "system_instruction")
_DECLARATIONS = ("functionDeclarations", "function_declarations")
#: Server-side parts: the code execution tool's code and result, and the server-side tool calls
#: and responses the client passes back without running them. Label and name of their
#: rendering (``transforms.formats._rendered``); the name of a toolCall / toolResponse is its
#: ``toolType``.
_SERVER_PARTS = {
    "executableCode": (SERVER_CALL, "code_execution"),
    "executable_code": (SERVER_CALL, "code_execution"),
    "codeExecutionResult": (SERVER_RESULT, "code_execution"),
    "code_execution_result": (SERVER_RESULT, "code_execution"),
    "toolCall": (SERVER_CALL, None),
    "tool_call": (SERVER_CALL, None),
    "toolResponse": (SERVER_RESULT, None),
    "tool_response": (SERVER_RESULT, None),
}
_TOOL_TYPE = ("toolType", "tool_type")
_SIGNATURE = ("thoughtSignature", "thought_signature")
#: Keys that make a part a Gemini part (content signals for detection).
_PART_KEYS = frozenset(("text",) + _CALL + _RESPONSE + _MEDIA + tuple(_SERVER_PARTS))
#: Part keys that are metadata, not content.
_PART_METADATA = frozenset(
    (
        "thought",
        "thoughtSignature",
        "thought_signature",
        "videoMetadata",
        "video_metadata",
        "partMetadata",
        "part_metadata",
        "mediaResolution",
        "media_resolution",
    )
)
_ROLES = {"model": "assistant", "user": "user", "function": "user"}


def _get(obj: dict[str, Any], names: tuple[Any, ...]) -> Any:
    for name in names:
        if name in obj:
            return obj[name]
    return None


def _media_text(media: Any) -> str:
    mime = _get(media, ("mimeType", "mime_type")) if isinstance(media, dict) else None
    return "[image]" if isinstance(mime, str) and mime.startswith("image/") else "[file]"


def server_part(part: dict[str, Any]) -> str | None:
    """The rendering of a server-side part (``_SERVER_PARTS``), else ``None``."""
    for key, value in part.items():
        if key in _SERVER_PARTS and isinstance(value, dict):
            label, name = _SERVER_PARTS[key]
            if name is None:
                return render(label, _get(value, _TOOL_TYPE), without(value, *_TOOL_TYPE))
            return render(label, name, value)
    return None


def _part_text(part: dict[str, Any], discarded: dict[str, Any] | None = None) -> str | None:
    """The text a non-call, non-response part contributes, or ``None``; a thought part goes to
    the ledger ``discarded`` (its text: the signature beside it is opaque); a part of a kind
    the reader does not know is refused (``unknown_block``)."""
    if part.get("thought") is True:
        # The model's reasoning summary: no flat equivalent.
        if discarded is not None:
            note(discarded, "thought", part.get("text"))
        return None
    if "text" in part:
        return content_text(part["text"])
    media = _get(part, _MEDIA)
    if media is not None:
        return _media_text(media)
    rendered = server_part(part)
    if rendered is not None:
        return rendered
    kinds = [k for k in part if k not in _PART_METADATA]
    if kinds:
        raise unknown_block(kinds[0], "gemini")
    return None


def _response_text(response: Any) -> str:
    if isinstance(response, dict) and set(response) == {"output"}:
        return content_text(response["output"])
    if isinstance(response, dict) and set(response) == {"error"}:
        return ERROR_PREFIX + content_text(response["error"])
    return content_text(response)


def system_text(instruction: Any, discarded: dict[str, Any] | None = None) -> str:
    """The text of a ``systemInstruction``: a Content, a bare part list, or a string."""
    if isinstance(instruction, str):
        return instruction
    parts = instruction.get("parts") if isinstance(instruction, dict) else instruction
    if not isinstance(parts, list):
        return content_text(instruction) if instruction is not None else ""
    texts = (_part_text(p, discarded) if isinstance(p, dict) else content_text(p) for p in parts)
    return JOIN.join(t for t in texts if t)


def _call_ids(contents: list[Any]) -> set[str]:
    taken = set()
    for content in contents:
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            inner = _get(part, _CALL + _RESPONSE) if isinstance(part, dict) else None
            if isinstance(inner, dict) and isinstance(inner.get("id"), str) and inner["id"]:
                taken.add(inner["id"])
    return taken


#: The keys of a Content the reader reads; any other goes to the ledger.
_CONTENT_READ = frozenset(("role", "parts"))


def gemini_to_flat(contents: list[Any], system: Any = None, discarded: dict[str, Any] | None = None) -> list[Any]:
    out = []
    text = system_text(system, discarded) if system is not None else ""
    if text:
        out.append({"role": "system", "content": text})
    ids = IdAllocator(_call_ids(contents))
    pending: list[tuple[str, Any]] = []  # (id, name) of the last model turn's unanswered calls
    for index, content in enumerate(contents):
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            out.append(content)  # the core drops it, counted
            pending = []
            continue
        if discarded is not None:
            note_unread_keys(content, _CONTENT_READ, discarded)
        message, results = _read_content(content, index, ids, pending, discarded)
        out.extend(results)
        calls = message.get("tool_calls")
        # A turn that only carried responses has nothing left to say.
        if calls or message["content"].strip() or not results:
            out.append(message)
        if calls:
            pending = [(c["tool_call_id"], c["name"]) for c in calls]
        elif not results:
            pending = []
    return out


def _read_content(
    content: dict[str, Any], index: int, ids: IdAllocator, pending: list[Any], discarded: dict[str, Any] | None
) -> tuple[Any, ...]:
    """The flat message of the Content at ``index``, and the tool messages of its responses
    (which answer calls off ``pending``)."""
    role = content.get("role") or "user"
    role = _ROLES.get(role, role) if isinstance(role, str) else role
    parts = content["parts"]
    read = _read_parts(parts, role == "assistant", index, ids, pending, discarded)
    message = {"role": role, "content": JOIN.join(read.texts)}
    if read.calls:
        message["tool_calls"] = read.calls
    media.carry(message, media.gemini_items(parts))
    kept = read.reasoning_kept()
    if kept:
        message[reasoning.FIELD] = reasoning.carried(reasoning.GEMINI, **kept)
    return message, read.results


@dataclass
class _PartsRead:
    """What the parts of one Content hold, sorted by kind."""

    texts: list[Any] = field(default_factory=list)
    calls: list[Any] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)  # tool messages, of the functionResponse parts
    thoughts: list[Any] = field(default_factory=list)  # the model's thought parts, carried as they were
    trailing: list[Any] = field(default_factory=list)  # parts that hold only a thoughtSignature
    call_signatures: dict[str, Any] = field(default_factory=dict)
    text_signature: Any = None

    def reasoning_kept(self) -> dict[str, Any]:
        """The thoughts and signatures to carry around the core, by their names in the carrier."""
        kept: dict[str, Any] = {}
        if self.thoughts:
            kept["thoughts"] = self.thoughts
        if self.trailing:
            kept["signature_parts"] = self.trailing
        if self.call_signatures:
            kept["call_signatures"] = self.call_signatures
        if self.text_signature is not None:
            kept["text_signature"] = self.text_signature
        return kept


def _read_parts(
    parts: list[Any], model: bool, index: int, ids: IdAllocator, pending: list[Any], discarded: dict[str, Any] | None
) -> _PartsRead:
    """Each part of a Content read as what it is: text, a call, a response, a thought, a
    signature (only a model's turn carries thoughts and signatures)."""
    several = sum(1 for p in parts if isinstance(p, dict) and isinstance(_get(p, _CALL), dict)) > 1
    read = _PartsRead()
    for part in parts:
        if not isinstance(part, dict):
            read.texts.append(content_text(part))
            continue
        call = _get(part, _CALL)
        response = _get(part, _RESPONSE)
        signature = _get(part, _SIGNATURE) if model else None
        if isinstance(call, dict):
            read.calls.append(_flat_call(call, ids, index, len(read.calls) if several else None))
            if signature is not None:
                read.call_signatures[read.calls[-1]["tool_call_id"]] = signature
        elif isinstance(response, dict):
            read.results.append(_result(response, pending))
        elif model and part.get("thought") is True:
            read.thoughts.append(part)
        elif model and signature is not None and len(part) == 1:
            read.trailing.append(part)  # a part of its own holding only a signature: back after the turn's parts
        else:
            part_text = _part_text(part, discarded)
            if part_text:
                read.texts.append(part_text)
            if signature is not None and server_part(part) is None:
                if read.text_signature is not None and discarded is not None:
                    note(discarded, "thoughtSignature", read.text_signature)  # the last one is the one returned
                read.text_signature = signature
    return read


def _flat_call(call: dict[str, Any], ids: IdAllocator, index: int, sub: int | None) -> dict[str, Any]:
    """A ``functionCall`` as a flat call: its own id, else one derived from its position."""
    call_id = call.get("id")
    if not (isinstance(call_id, str) and call_id):
        call_id = ids.new(index, sub)
    flat = {"tool_call_id": call_id, "name": call.get("name")}
    if call.get("args") is not None:
        flat["args"] = call["args"]
    return flat


def _result(response: dict[str, Any], pending: list[Any]) -> dict[str, Any]:
    """The tool message of one functionResponse; takes the call it answers off ``pending``."""
    call_id = response.get("id")
    name = response.get("name")
    if isinstance(call_id, str) and call_id:
        pending[:] = [p for p in pending if p[0] != call_id]
    else:
        call_id = take_pending(pending, name)
    return {"role": "tool", "content": _response_text(response.get("response")), "tool_call_id": call_id}


def gemini_tools(tools: Any) -> Any:
    """Gemini ``tools`` as the list the writers read: function declarations as bare schemas."""
    if not isinstance(tools, list):
        return tools
    out = []
    for tool in tools:
        declarations = _get(tool, _DECLARATIONS) if isinstance(tool, dict) else None
        if not isinstance(declarations, list):
            out.append(tool)
            continue
        for declaration in declarations:
            if isinstance(declaration, dict) and "parameters" not in declaration:
                schema = _get(declaration, ("parametersJsonSchema", "parameters_json_schema"))
                if schema is not None:
                    declaration = {
                        k: v
                        for k, v in declaration.items()
                        if k not in ("parametersJsonSchema", "parameters_json_schema")
                    }
                    declaration["parameters"] = schema
            out.append(declaration)
        rest = {k: v for k, v in tool.items() if k not in _DECLARATIONS}
        if rest:
            out.append(rest)  # another tool kind in the same Tool object
    return out


def _contents_key(record: dict[str, Any], messages_field: str) -> str | None:
    # The message field first: the output is written there, so a list of its own beside
    # 'contents' would be overwritten; read it, and 'contents' is carried.
    for key in (messages_field, "contents"):
        if isinstance(record.get(key), list):
            return key
    return None


def read_gemini(record: Any, messages_field: str) -> Conversation:
    report: dict[str, Any] = {}

    def assembled_to_flat(contents: list[Any], discarded: dict[str, Any]) -> list[Any]:
        return gemini_to_flat(_assembled(contents, report), discarded=discarded)

    bare = bare_list_conversation(record, assembled_to_flat)
    if bare is not None:
        return bare._replace(report=report or None)
    discarded: dict[str, Any] = {}
    key = _contents_key(record, messages_field)
    if key is None:
        raise FormatError("missing_contents", f"no list at 'contents' or {messages_field!r}")
    system = _get(record, _SYSTEM)
    # The message field, if that is where the contents were, stays for the job to replace.
    consumed = _SYSTEM + (("contents",) if key == "contents" else ())
    fields = record_fields(record, consumed)
    if "tools" in fields:
        fields["tools"] = gemini_tools(fields["tools"])
    flat = gemini_to_flat(_assembled(record[key], report), system, discarded)
    return Conversation(flat, fields, report or None, discarded or None)


def _assembled(contents: Any, report: dict[str, Any]) -> Any:
    """The contents with streamed call fragments assembled (``gemini_stream``), counted in the
    reader report as ``streamed_call_fragments_assembled``."""
    if not isinstance(contents, list) or not has_streamed_calls(contents):
        return contents
    assembled, folded = assemble(contents)
    if folded:
        report["streamed_call_fragments_assembled"] = folded
    return assembled


def _gemini_content(entry: Any) -> bool:
    """A Content: a ``parts`` list holding a Gemini part (keyed by kind, not by ``type``)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("parts"), list):
        return False
    # Any role: a Content whose role Gemini does not know (``assistant``, ``bot``) is still a
    # Content, read with its role kept, as a forced --format gemini reads it; a writer that
    # cannot take the role refuses it naming --map-role (auto and forced agree).
    if not isinstance(entry.get("role", "user"), str):
        return False
    return any(isinstance(p, dict) and "type" not in p and not p.keys().isdisjoint(_PART_KEYS) for p in entry["parts"])


def detect_gemini(record: Any, messages_field: str) -> bool:
    if isinstance(record, list):
        return any(_gemini_content(e) for e in record)
    if not isinstance(record, dict):
        return False
    key = _contents_key(record, messages_field)
    return key is not None and any(_gemini_content(e) for e in record[key])


GEMINI_READER = register_reader(
    Reader(
        "gemini",
        read_gemini,
        detect_gemini,
        priority=35,
        description="Google Gemini generateContent bodies (contents / parts, functionCall / functionResponse)",
    )
)


# --------------------------------------------------------------------------------------------
# Writer


def _function_response(message: dict[str, Any]) -> dict[str, Any]:
    text = message["content"]
    if text.startswith(ERROR_PREFIX):
        response = {"error": text[len(ERROR_PREFIX) :]}
    else:
        response = {"output": text}
    return {"functionResponse": {"id": message["tool_call_id"], "name": message["_name"], "response": response}}


def _renderings(source: Any, messages_field: str) -> Originals:
    """The server-side parts of a Gemini source record, by the rendering the reader made."""
    if isinstance(source, dict):
        key = _contents_key(source, messages_field)
        contents = source[key] if key is not None else None
    else:
        contents = source
    found = []
    for content in contents if isinstance(contents, list) else ():
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            rendered = server_part(part) if isinstance(part, dict) else None
            if rendered is not None:
                found.append((rendered, part))
    return Originals(found) if found else NO_ORIGINALS


def _text_parts(text: str, originals: Originals) -> list[dict[str, Any]]:
    """Text as parts: the source's server-side parts back in place, the rest ``text`` parts
    (blank text makes no part)."""
    if not originals:
        return [{"text": text}] if text.strip() else []
    parts = []
    for kind, value in originals.split(text):
        if kind == "block":
            parts.append(value)
        elif value.strip():
            parts.append({"text": value})
    return parts


def write_gemini(record: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
    """A ``generateContent`` request body (REST camelCase) from a normalized flat record.

    - System (and ``developer``) messages → ``systemInstruction`` (joined with a newline,
      blank ones left out).
    - User → a ``user`` content of a ``text`` part; assistant → a ``model`` content: its text
      part, then one ``functionCall {id, name, args}`` part per call (``args`` an object: a
      JSON string is parsed, none or blank is ``{}``, anything else is a FormatError,
      ``args_not_json`` / ``args_not_an_object``).
    - The block of tool messages after a call turn → ONE ``user`` content of
      ``functionResponse {id, name, response}`` parts, in block order (Gemini: the response
      turn right after the call turn, one response per call); ``response`` is ``{"output":
      text}``, or ``{"error": text}`` for a result marked ``[error] ``.
    - Adjacent contents of one role are merged (parts concatenated), so text a user wrote
      after the results joins the response turn, after its responses; blank text makes no
      part, and a content left without parts is left out.
    - Ids are written on calls and responses (the API's optional ``id`` fields), so that a
      body read back pairs exactly as written.
    - The server-side parts of a Gemini source record (``WriteContext.source``) are written
      back as they were, byte for byte (thought signature included), where their rendering
      stands in the text.
    - ``tools`` (``--tools-field``) → ``[{"functionDeclarations": [{name, description?,
      parameters?}]}]``; other keys of a definition are counted under ``discarded_tool_fields``;
      free-text custom tools are ``unconvertible_tool``.

    Only the format's keys are written (no ``model``: it is part of the request URL).
    """
    messages = normalized_messages(record, ctx.messages_field)
    check_results_adjacent(messages)
    originals = _renderings(ctx.source, ctx.messages_field)
    names = {c["tool_call_id"]: c["name"] for m in messages for c in m.get("tool_calls") or ()}
    system = joined_system(messages)
    contents: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role in SYSTEM_ROLES:
            continue
        text = media.with_media(message, lambda piece: _text_parts(piece, originals), media.gemini_part)
        if role == "user":
            parts, turn = text, "user"
        elif role == "assistant":
            calls = [
                {
                    "functionCall": {
                        "id": c["tool_call_id"],
                        "name": check_tool_name(c["name"], "Gemini"),
                        "args": tool_input(c.get("args")),
                    }
                }
                for c in message.get("tool_calls") or ()
            ]
            carried = reasoning.of(message, reasoning.GEMINI)
            if carried is not None:
                text, calls = _with_signatures(carried, text, calls, ctx)
            parts, turn = text + calls, "model"
        elif role == "tool":
            parts, turn = [_function_response({**message, "_name": names[message["tool_call_id"]]})], "user"
        else:
            raise unsupported_role(role, "Gemini")
        add_turn(contents, turn, parts, "parts")
    if not contents:
        raise FormatError("empty_conversation", "no user or model content to write")
    check_user_first(contents, "Gemini")
    out: dict[str, Any] = {}
    if system:
        out["systemInstruction"] = {"parts": [{"text": system}]}
    out["contents"] = contents
    tools = tools_for(record, ctx)
    if tools:
        out["tools"] = _gemini_tools(tools, ctx)
    return out


#: Gemini's own tool kinds besides function declarations (google-genai ``types.Tool``), in both
#: spellings: a record holding one came from Gemini, and goes back as it was.
BUILT_IN_TOOLS = frozenset(
    (
        "codeExecution",
        "code_execution",
        "googleSearch",
        "google_search",
        "googleSearchRetrieval",
        "google_search_retrieval",
        "urlContext",
        "url_context",
        "googleMaps",
        "google_maps",
        "fileSearch",
        "file_search",
        "enterpriseWebSearch",
        "enterprise_web_search",
        "computerUse",
        "computer_use",
        "retrieval",
    )
)


def _gemini_tools(tools: list[Any], ctx: WriteContext) -> list[Any]:
    """``[{"functionDeclarations": [...]}]`` of the function tools (their parameters as Gemini's
    Schema: ``gemini_schema``), then Gemini's own tools (``{"codeExecution": {}}`` ...) as they were."""
    built_in = [t for t in tools if isinstance(t, dict) and t and t.keys() <= BUILT_IN_TOOLS]
    declarations = []
    for tool in tools:
        if any(tool is t for t in built_in):
            continue
        declaration = bare_function_schema(tool, ctx, "Gemini")
        if "parameters" in declaration:
            declaration["parameters"] = gemini_parameters(declaration["parameters"], declaration["name"], ctx)
        declarations.append(declaration)
    return ([{"functionDeclarations": declarations}] if declarations else []) + built_in


def _with_signatures(
    carried: dict[str, Any], text: list[Any], calls: list[Any], ctx: WriteContext
) -> tuple[list[Any], list[Any]]:
    """A model turn's parts with its carried reasoning back: the thought parts first, as they
    were; each ``thoughtSignature`` on the part it came with (a call's on that call, the text's
    on the last text part). A signature with no such part left is counted
    (``thought_signatures_unplaced``): Gemini wants it on the exact part."""
    thoughts = list(carried.get("thoughts") or ())
    signatures = carried.get("call_signatures") or {}
    placed = 0
    out_calls = []
    for part in calls:
        signature = signatures.get(part["functionCall"]["id"])
        if signature is not None:
            part = {**part, "thoughtSignature": signature}
            placed += 1
        out_calls.append(part)
    unplaced = len(signatures) - placed
    text_signature = carried.get("text_signature")
    if text_signature is not None:
        last = max((k for k, p in enumerate(text) if "text" in p), default=None)
        if last is None:
            unplaced += 1
        else:
            text = [*text[:last], {**text[last], "thoughtSignature": text_signature}, *text[last + 1 :]]
    if unplaced:
        count_written(ctx, "thought_signatures_unplaced", unplaced)
    return thoughts + text, out_calls + list(carried.get("signature_parts") or ())


GEMINI_WRITER = register_writer(
    Writer(
        "gemini",
        write_gemini,
        description="Google Gemini generateContent request body",
        reasoning=(reasoning.GEMINI,),
        media=media.carrier(media.gemini_part, ("user", "assistant")),
        schema={"systemInstruction": JSON, "contents": [{"role": STRING, "parts": [JSON]}], "tools": [JSON]},
    )
)
