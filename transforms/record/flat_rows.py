"""Normalized flat records as Parquet rows and back (no Beam import; pyarrow only for the schema).

A row has three columns:

- ``id``: the record id as text (a non-text id, an integer say, is also kept typed in
  ``fields``, so that reading back gives it with its type);
- ``messages``: a list of ``{role, content, tool_calls, tool_call_id}`` structs, a call being
  ``{tool_call_id, name, args, args_kind}``. ``args`` holds a call's arguments exactly: when
  they were a string (OpenAI's JSON string, or free text) ``args`` is that string and
  ``args_kind`` is ``"string"``; when they were a JSON value (an object, as Anthropic and Gemini
  give them) ``args`` is its compact JSON text and ``args_kind`` is ``"json"``; without
  arguments both are null. Columns a message does not have are null;
- ``fields``: the record's other fields as one JSON text (their types vary per record).

``flat_record(row)`` is the inverse: a row as pyarrow's ``Table.to_pylist()`` or Hugging Face
``datasets`` give it becomes the flat record again, equal to the JSON Lines output's record.
"""

from __future__ import annotations

from typing import Any

from transforms.core.jsontext import dumps_line, int_text, parse_json

#: ``args_kind`` values.
ARGS_STRING = "string"
ARGS_JSON = "json"


def parquet_schema(pa: Any) -> Any:
    """The Arrow schema of the rows (``pa`` is the pyarrow module, imported by the caller)."""
    call = pa.struct(
        [("tool_call_id", pa.string()), ("name", pa.string()), ("args", pa.string()), ("args_kind", pa.string())]
    )
    message = pa.struct(
        [("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)), ("tool_call_id", pa.string())]
    )
    return pa.schema([("id", pa.string()), ("messages", pa.list_(message)), ("fields", pa.string())])


def _call_row(call: dict[str, Any]) -> dict[str, Any]:
    row = {"tool_call_id": call["tool_call_id"], "name": call["name"], "args": None, "args_kind": None}
    if "args" in call:
        args = call["args"]
        if isinstance(args, str):
            row["args"], row["args_kind"] = args, ARGS_STRING
        else:
            row["args"], row["args_kind"] = dumps_line(args).decode(), ARGS_JSON
    return row


def flat_row(record: dict[str, Any], id_field: str = "id", messages_field: str = "messages") -> dict[str, Any]:
    """One normalized flat record as a row of ``parquet_schema``."""
    messages = []
    for m in record.get(messages_field, []):
        messages.append(
            {
                "role": m["role"],
                "content": m["content"],
                "tool_calls": [_call_row(c) for c in m["tool_calls"]] if "tool_calls" in m else None,
                "tool_call_id": m.get("tool_call_id"),
            }
        )
    rid = record.get(id_field)
    typed_id = rid is not None and not isinstance(rid, str)
    fields = {k: v for k, v in record.items() if k != messages_field and (k != id_field or typed_id)}
    return {"id": _id_text(rid), "messages": messages, "fields": dumps_line(fields).decode()}


def _id_text(rid: Any) -> str | None:
    """The id column's text: an integer's digits at any size (``str()`` stops at 4,300 digits,
    which failed the whole Parquet job), any other value's ``str()`` (its JSON text when
    ``str()`` refuses, as for a big integer inside a list)."""
    if rid is None:
        return None
    if isinstance(rid, int) and not isinstance(rid, bool):
        return int_text(rid)
    try:
        return str(rid)
    except ValueError:
        return dumps_line(rid).decode()


def _call(row: dict[str, Any]) -> dict[str, Any]:
    call = {"tool_call_id": row["tool_call_id"], "name": row["name"]}
    kind = row.get("args_kind")
    if kind == ARGS_STRING:
        call["args"] = row["args"]
    elif kind == ARGS_JSON:
        call["args"] = parse_json(row["args"])
    return call


def flat_record(row: dict[str, Any], id_field: str = "id", messages_field: str = "messages") -> dict[str, Any]:
    """A row read back (pyarrow ``to_pylist``, Hugging Face ``datasets``) as the flat record."""
    record: dict[str, Any] = {} if row.get("id") is None else {id_field: row["id"]}
    record.update(parse_json(row["fields"]) if row.get("fields") else {})
    messages = []
    for m in row.get("messages") or ():
        message = {"role": m["role"], "content": m["content"]}
        if m.get("tool_calls") is not None:
            message["tool_calls"] = [_call(c) for c in m["tool_calls"]]
        if m.get("tool_call_id") is not None:
            message["tool_call_id"] = m["tool_call_id"]
        messages.append(message)
    record[messages_field] = messages
    return record
