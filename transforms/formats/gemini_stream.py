"""Gemini streamed call arguments assembled into the calls they continue (no Beam import).

With ``toolConfig.functionCallingConfig.streamFunctionCallArguments`` (Vertex AI), one call
arrives in fragments: a ``functionCall`` with ``willContinue: true`` (its name and id, no
``args``), then ``functionCall``s holding ``partialArgs`` (``[{jsonPath, stringValue |
numberValue | boolValue | nullValue, willContinue?}]``), the last with ``willContinue`` false
or absent. A logged chat history keeps one ``model`` Content per streamed chunk
(google-genai's ``Chat.send_message_stream`` records every chunk), so the fragments may sit in
consecutive Contents as well as in one.

``assemble(contents)`` folds each run of fragments into ONE ``functionCall {id?, name, args}``
part (its ``thoughtSignature``, which rides on a fragment, kept on it), before the reader
reads the contents: each ``PartialArg`` sets the value at its ``jsonPath`` (``$.a.b[0]``,
``$['a']``), a ``stringValue`` continuing the string of a path whose previous fragment had
``willContinue: true``; an empty ``functionCall {}`` ends the call. Contents that continue
an open call are merged into the Content that opened it. What cannot be assembled (a fragment
without a call to continue, a call left open, text inside a call, a path or value it cannot
read, a call without a name) is a ``FormatError`` (``unassemblable_call``): the record is a
dead letter, never a call without a name or arguments.
"""

from __future__ import annotations

import re
from typing import Any

from transforms.formats.base import FormatError

_CALL_KEYS = ("functionCall", "function_call")
_PARTIAL = ("partialArgs", "partial_args")
_CONTINUE = ("willContinue", "will_continue")
_PATH = ("jsonPath", "json_path")
_VALUES = (
    ("stringValue", "string_value"),
    ("numberValue", "number_value"),
    ("boolValue", "bool_value"),
    ("nullValue", "null_value"),
)
_SIGNATURE = ("thoughtSignature", "thought_signature")
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


def _get(obj: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in obj:
            return obj[name]
    return None


def _call(part: Any) -> dict[str, Any] | None:
    call = _get(part, _CALL_KEYS) if isinstance(part, dict) else None
    return call if isinstance(call, dict) else None


def _streamed(call: dict[str, Any]) -> bool:
    return _get(call, _CONTINUE) is not None or _get(call, _PARTIAL) is not None


def has_streamed_calls(contents: list[Any]) -> bool:
    """Whether any part is a streamed call fragment (the cheap test: most records have none)."""
    for content in contents:
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            call = _call(part)
            if call is not None and _streamed(call):
                return True
    return False


def _refuse(why: str) -> FormatError:
    return FormatError("unassemblable_call", f"streamed call arguments (partialArgs): {why}")


class _Open:
    """A call being assembled: its name, id, arguments, signature, and the paths whose string continues."""

    __slots__ = ("name", "id", "args", "signature", "continuing")

    def __init__(self, call: dict[str, Any], signature: Any) -> None:
        self.name = call.get("name")
        self.id = call.get("id")
        self.args: dict[str, Any] = dict(call["args"]) if isinstance(call.get("args"), dict) else {}
        self.signature = signature
        self.continuing: set[str] = set()

    def add(self, call: dict[str, Any], signature: Any) -> None:
        for key, mine in (("name", self.name), ("id", self.id)):
            theirs = call.get(key)
            if theirs is not None and mine is not None and theirs != mine:
                raise _refuse(f"a fragment of call {mine!r} names {key} {theirs!r}")
        self.name = self.name if self.name is not None else call.get("name")
        self.id = self.id if self.id is not None else call.get("id")
        if signature is not None:
            self.signature = signature
        if isinstance(call.get("args"), dict):
            self.args.update(call["args"])
        partial = _get(call, _PARTIAL)
        if partial is None:
            return
        if not isinstance(partial, list):
            raise _refuse(f"partialArgs is {type(partial).__name__}, not a list")
        for arg in partial:
            self._apply(arg)

    def _apply(self, arg: Any) -> None:
        path = _get(arg, _PATH) if isinstance(arg, dict) else None
        if not isinstance(path, str):
            raise _refuse(f"a partial argument without a jsonPath: {arg!r:.80}")
        present = [(names[0], arg[name]) for names in _VALUES for name in names if name in arg]
        if len(present) > 1:
            raise _refuse(f"a partial argument at {path} holds {len(present)} values")
        more = _get(arg, _CONTINUE) is True
        if not present:
            # A path alone ends the string streamed there (or says nothing more).
            self.continuing.discard(path)
            return
        kind, value = present[0]
        if kind == "nullValue":
            value = None
        elif kind == "stringValue" and path in self.continuing:
            current = _lookup(self.args, path)
            value = (current if isinstance(current, str) else "") + str(value)
        if kind == "stringValue" and not isinstance(value, str):
            raise _refuse(f"stringValue at {path} is {type(value).__name__}")
        _assign(self.args, path, value)
        if more and kind == "stringValue":
            self.continuing.add(path)
        else:
            self.continuing.discard(path)

    def part(self) -> dict[str, Any]:
        if not isinstance(self.name, str) or not self.name:
            raise _refuse("the assembled call has no name")
        call: dict[str, Any] = {}
        if self.id is not None:
            call["id"] = self.id
        call["name"] = self.name
        call["args"] = self.args
        part: dict[str, Any] = {"functionCall": call}
        if self.signature is not None:
            part["thoughtSignature"] = self.signature
        return part


def _segments(path: str) -> list[Any]:
    if not path.startswith("$"):
        raise _refuse(f"jsonPath {path!r} does not start with '$'")
    rest, position = path[1:], 0
    out: list[Any] = []
    while position < len(rest):
        match = _SEGMENT.match(rest, position)
        if match is None:
            raise _refuse(f"jsonPath {path!r} is beyond the names and indexes this reader assembles")
        name, index, single, double = match.groups()
        if index is not None:
            out.append(int(index))
        else:
            out.append(name if name is not None else (single if single is not None else double))
        position = match.end()
    if not out:
        raise _refuse(f"jsonPath {path!r} names no argument")
    return out


def _lookup(args: dict[str, Any], path: str) -> Any:
    value: Any = args
    for segment in _segments(path):
        if isinstance(segment, int):
            if not isinstance(value, list) or segment >= len(value):
                return None
            value = value[segment]
        else:
            if not isinstance(value, dict):
                return None
            value = value.get(segment)
    return value


def _assign(args: dict[str, Any], path: str, value: Any) -> None:
    segments = _segments(path)
    node: Any = args
    for segment, following in zip(segments, segments[1:]):
        empty: Any = [] if isinstance(following, int) else {}
        node = _step(node, segment, empty, path)
    last = segments[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last > len(node):
            raise _refuse(f"jsonPath {path!r} skips an index")
        if last == len(node):
            node.append(value)
        else:
            node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise _refuse(f"jsonPath {path!r} goes through a value that is not an object")


def _step(node: Any, segment: Any, empty: Any, path: str) -> Any:
    if isinstance(segment, int):
        if not isinstance(node, list) or segment > len(node):
            raise _refuse(f"jsonPath {path!r} goes through a value that is not a list, or skips an index")
        if segment == len(node):
            node.append(empty)
        return node[segment]
    if not isinstance(node, dict):
        raise _refuse(f"jsonPath {path!r} goes through a value that is not an object")
    return node.setdefault(segment, empty)


def assemble(contents: list[Any]) -> tuple[list[Any], int]:
    """``(contents, fragments)``: the contents with every streamed call assembled (module
    docstring), and how many fragments were folded into the calls they continue."""
    out: list[Any] = []
    open_call: _Open | None = None
    parts: list[Any] = []  # the parts of the Content being built
    folded = 0
    for content in contents:
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            if open_call is not None:
                raise _refuse("a call is still open where its Content's run ends")
            out.append(content)
            continue
        continuing = open_call is not None and content.get("role") == "model"
        if not continuing:
            if open_call is not None:
                raise _refuse(f"call {open_call.name!r} is still open (willContinue) where its turn ends")
            parts = []
            out.append({**content, "parts": parts})
        for part in content["parts"]:
            call = _call(part)
            signature = _get(part, _SIGNATURE) if isinstance(part, dict) else None
            if open_call is not None:
                if call is None:
                    raise _refuse(f"call {open_call.name!r} is still open (willContinue) at a part of another kind")
                open_call.add(call, signature)  # an empty functionCall {} ends it
                folded += 1
                if not call or _get(call, _CONTINUE) is not True:
                    parts.append(open_call.part())
                    open_call = None
                continue
            if call is not None and _streamed(call):
                started = _Open({k: v for k, v in call.items() if k != "args"}, signature)
                started.add({k: v for k, v in call.items() if k not in ("name", "id")}, None)
                if _get(call, _CONTINUE) is True:
                    open_call = started
                else:
                    parts.append(started.part())  # one fragment holding the whole call
                continue
            parts.append(part)
    if open_call is not None:
        raise _refuse(f"call {open_call.name!r} is still open (willContinue) at the end of the record")
    return out, folded
