"""JSON Schema as Gemini's ``functionDeclarations[].parameters`` takes it (no Beam import).

``parameters`` is Gemini's ``Schema``, "a select subset of an OpenAPI 3.0 schema object": the
API refuses a keyword outside it (``Invalid JSON payload received. Unknown name "$schema"``),
and google-genai's ``types.Schema`` forbids extra keys. Tool definitions from other providers
are JSON Schema, often with ``$ref`` / ``$defs`` (Pydantic and MCP servers write them). So the
writer, for a schema that holds anything ``Schema`` lacks:

- inlines every local ``$ref`` (``#/$defs/<name>``, ``#/definitions/<name>``) with its
  definition, the sibling keys of the ``$ref`` kept over it, and leaves the definitions out (as
  the SDK itself does when it builds a ``Schema``), counted ``mapped_tool_fields.$ref``;
- leaves out ``$schema``, ``$id`` and ``$comment`` (they say nothing of the arguments), counted
  ``discarded_tool_fields.parameters.<key>``;
- writes a ``const`` string as a one-value ``enum`` and a ``type`` list of one type and
  ``"null"`` as that type with ``nullable: true`` (both exact), counted under
  ``mapped_tool_fields``;
- refuses a ``$ref`` it cannot inline (recursive, or not to a local definition) and a type
  list it cannot map: ``unconvertible_tool``, the error naming the tool and the reference.

Other keys pass as they are (``convnorm`` does not yet map ``oneOf``, ``allOf`` or
``exclusiveMinimum``, nor drop annotations such as ToolBench's ``example_value``). A schema
without any keyword above is written as it is (no copy, nothing counted).
"""

from __future__ import annotations

import re
from typing import Any

from transforms.formats.base import FormatError, WriteContext, count_written

#: Keywords about the schema document, not the arguments: left out, counted.
_DOCUMENT_KEYS = ("$schema", "$id", "$comment")
_DEFINITIONS = ("$defs", "definitions")
_LOCAL_REF = re.compile(r"^#/(\$defs|definitions)/([^/]+)$")


def gemini_parameters(schema: Any, tool: str, ctx: WriteContext) -> Any:
    """``schema`` as Gemini ``parameters`` (module docstring); ``FormatError`` where it cannot be."""
    if not isinstance(schema, dict) or _is_gemini(schema):
        return schema
    definitions: dict[str, Any] = {}
    for key in _DEFINITIONS:
        found = schema.get(key)
        if isinstance(found, dict):
            definitions.update(found)
    return _convert(schema, definitions, (), tool, ctx, root=True)


#: The JSON Schema keywords this module rewrites: a schema without them is written as it is.
_CONVERTED = frozenset(("$ref", "const", *_DOCUMENT_KEYS, *_DEFINITIONS))


def _is_gemini(node: Any) -> bool:
    """Whether a schema holds none of the keywords converted here (recursively, through every
    nested object and list: a ``$ref`` can sit anywhere)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not _CONVERTED.isdisjoint(item) or ("type" in item and isinstance(item["type"], list)):
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _refused(tool: str, why: str) -> FormatError:
    return FormatError(
        "unconvertible_tool", f"tool {tool!r}: its parameters {why}, which Gemini's Schema cannot inline"
    )


def _convert(
    node: Any, definitions: dict[str, Any], stack: tuple[str, ...], tool: str, ctx: WriteContext, root: bool = False
) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        match = _LOCAL_REF.match(ref) if isinstance(ref, str) else None
        if match is None or match.group(2) not in definitions:
            raise _refused(tool, f"refer to {ref!r} (not a local definition)")
        name = match.group(2)
        if name in stack:
            raise _refused(tool, f"are recursive ({' -> '.join((*stack, name))})")
        count_written(ctx, "mapped_tool_fields", key="$ref")
        target = _convert(definitions[name], definitions, (*stack, name), tool, ctx)
        siblings = _convert({k: v for k, v in node.items() if k != "$ref"}, definitions, stack, tool, ctx)
        return {**target, **siblings}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if root and key in _DEFINITIONS:
            continue  # inlined where referred to
        if key in _DOCUMENT_KEYS:
            count_written(ctx, "discarded_tool_fields", key=f"parameters.{key}")
            continue
        if key == "const" and isinstance(value, str) and "enum" not in node:
            out["enum"] = [value]
            count_written(ctx, "mapped_tool_fields", key="const")
        elif key == "type" and not isinstance(value, str):
            out.update(_nullable_type(value, tool, ctx))
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _convert(v, definitions, stack, tool, ctx) for name, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _convert(value, definitions, stack, tool, ctx)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [_convert(v, definitions, stack, tool, ctx) for v in value]
        else:
            out[key] = value
    return out


def _nullable_type(value: Any, tool: str, ctx: WriteContext) -> dict[str, Any]:
    """A JSON Schema type list ``[T, "null"]`` as ``{type: T, nullable: true}``."""
    if isinstance(value, list) and len(value) == 2 and "null" in value:
        kind = value[0] if value[1] == "null" else value[1]
        if isinstance(kind, str) and kind != "null":
            count_written(ctx, "mapped_tool_fields", key="type_null")
            return {"type": kind, "nullable": True}
    raise _refused(tool, f"have type {value!r}")
