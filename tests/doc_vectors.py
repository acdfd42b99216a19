"""The worked-vector table of docs/mem5.md, generated from tests/data/spec/vectors.jsonl.

``python tests/doc_vectors.py`` prints it; tests/test_docs.py checks the page holds it as is.
"""

from __future__ import annotations

import json
from pathlib import Path

VECTORS = Path(__file__).resolve().parent / "data" / "spec" / "vectors.jsonl"


def _id(value) -> str:
    # Bare when usable; quoted (JSON) when the id is one MEM-5 refuses, so "0" reads as a string.
    return value if isinstance(value, str) and value.strip() and value.strip() != "0" else json.dumps(value)


def _entry(entry) -> str:
    if not isinstance(entry, dict):
        return "`" + json.dumps(entry) + "`"
    role = entry.get("role")
    if not isinstance(role, str) or not role.strip():
        return "(no role)"
    metadata = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
    if role == "tool":
        call_id = entry.get("tool_call_id", metadata.get("tool_call_id"))
        return f"tool({_id(call_id)})"
    calls = entry.get("tool_calls", metadata.get("tool_calls"))
    if role == "assistant" and isinstance(calls, list) and calls:
        ids = [c.get("tool_call_id", c.get("id")) if isinstance(c, dict) else c for c in calls]
        return "assistant[" + ",".join(_id(i) for i in ids) + "]"
    return role


def _messages(messages) -> str:
    return " ".join(_entry(e) for e in messages) if messages else "—"


def vector_table() -> str:
    rows = [
        "| vector | what it pins down | input | output | dropped (by reason) | healed |",
        "|---|---|---|---|---|---|",
    ]
    for line in VECTORS.read_text().splitlines():
        if not line.strip():
            continue
        v = json.loads(line)
        drops = ", ".join(f"{reason} {n}" for reason, n in v["drops"].items())
        dropped = f"{v['dropped']} ({drops})" if drops else str(v["dropped"])
        rows.append(
            f"| `{v['name']}` | {v['clause']} | {_messages(v['input'])} | {_messages(v['expected'])} "
            f"| {dropped} | {v['healed']} |"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(vector_table(), end="")
