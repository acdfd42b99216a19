"""Where a record keeps its tool definitions, and the names its calls use (no Beam import).

``--tools-field`` is a dotted path (``tools``, ``kwargs.tools``, ``request.tools``): logging
libraries keep a request's tool list beside the messages under their own keys. Not a format:
it registers nothing.
"""

from __future__ import annotations

import re
from typing import Any

from transforms.formats._common import record_tools
from transforms.formats.base import FormatError, WriteContext, count_written

#: Each provider's rule for a tool name: OpenAI function names, Anthropic tool names and Bedrock
#: ``ToolSpecification.name`` are ``[a-zA-Z0-9_-]``, 1 to 64 characters; the Gemini API also
#: allows dots and colons (Vertex AI further wants a letter or an underscore first).
TOOL_NAME_RULES = {
    "OpenAI": re.compile(r"^[a-zA-Z0-9_-]{1,64}$"),
    "Anthropic": re.compile(r"^[a-zA-Z0-9_-]{1,64}$"),
    "Bedrock Converse": re.compile(r"^[a-zA-Z0-9_-]{1,64}$"),
    "Gemini": re.compile(r"^[a-zA-Z0-9_.:-]{1,64}$"),
}


def check_tool_name(name: Any, provider: str) -> str:
    """``name`` when the provider accepts it as a tool name, else ``FormatError("invalid_tool_name")``."""
    rule = TOOL_NAME_RULES[provider]
    if not isinstance(name, str) or not rule.match(name):
        raise FormatError("invalid_tool_name", f"tool name {name!r} breaks {provider}'s rule {rule.pattern}")
    return name


def value_at(record: Any, path: str) -> Any:
    """The value at a dotted path of nested objects, or ``None`` when any step is missing."""
    value = record
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def tools_for(record: dict[str, Any], ctx: WriteContext) -> list[Any] | None:
    """The record's tool definitions: at ``--tools-field``, else ``tools`` / legacy ``functions``.

    A JSON-string list is parsed and a blank one means none, wherever it is (``record_tools``);
    a chat tool without its ``type`` gets ``type: "function"``.
    """
    found = value_at(record, ctx.tools_field) if ctx.tools_field != "tools" else None
    tools = record_tools({"tools": found}) if found is not None else record_tools(record)
    return [_typed(tool) for tool in tools] if tools is not None else None


def _typed(tool: Any) -> Any:
    """A chat tool logged without its ``type`` (``{"function": {...}}``, as Mistral and xAI logs
    hold them) with ``type: "function"``: all it lacks, nothing lost."""
    if isinstance(tool, dict) and "type" not in tool and "name" not in tool and isinstance(tool.get("function"), dict):
        return {"type": "function", **tool}
    return tool


def called_tools(messages: list[Any]) -> list[str]:
    """The names of the tools a normalized conversation calls, in order of first call."""
    names: dict[str, None] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call.get("name"), str):
                names.setdefault(call["name"])
    return list(names)


def tool_name(tool: Any) -> Any:
    """The name of a tool definition in any known shape (chat tools keep it in ``function``)."""
    if not isinstance(tool, dict):
        return None
    for inner in (tool.get("function"), tool.get("custom")):
        if isinstance(inner, dict) and "name" in inner:
            return inner["name"]
    return tool.get("name")


def bare_function_schema(tool: Any, ctx: WriteContext, target: str) -> dict[str, Any]:
    """A tool definition as a bare function schema ``{name, description?, parameters?}`` (LLaMA-Factory's
    ``tools``, Gemini's function declarations); other keys are counted under ``discarded_tool_fields``."""
    name = tool_name(tool)
    if not isinstance(tool, dict) or not isinstance(name, str):
        what = f"with keys {sorted(map(str, tool))}" if isinstance(tool, dict) else f"{tool!r:.60}"
        raise FormatError("unconvertible_tool", f"tool definition {what} cannot be written as a {target} tool")
    kind = tool.get("type")
    if kind == "function" and isinstance(tool.get("function"), dict):
        function = tool["function"]
    elif "input_schema" in tool and kind in (None, "custom"):
        function = {"name": name, "description": tool.get("description"), "parameters": tool["input_schema"]}
        function = {k: v for k, v in function.items() if v is not None}
    elif kind in (None, "function"):
        function = {k: v for k, v in tool.items() if k != "type"}
    else:
        raise FormatError("unconvertible_tool", f"tool {name!r} ({kind}) has no {target} equivalent")
    out = {}
    for key, value in function.items():
        if key in ("name", "description", "parameters"):
            out[key] = value
        else:
            count_written(ctx, "discarded_tool_fields", key=key)
    return out
