"""A deterministic generator of realistic logged conversations, defects included.

Used by the benchmarks and to build the bundled sample. Each conversation has 4-40 messages:
a system prompt, user turns, assistant turns with one or more provider-shaped tool calls and
their results, and final answers. About a third carry one defect of the kinds MEM-5 repairs:
an unanswered call (crashed loop), an orphan result, a result before its call, a reused id,
a mid-list system prompt, object content, junk entries, a falsy id, a duplicated result.

Usage::

    python bench/corpus.py 1000 > corpus.jsonl
    python bench/corpus.py --sample --output samples/conversations.jsonl   # the bundled sample
    python bench/corpus.py --help
"""

from __future__ import annotations

import random
import sys

import orjson

TOOLS = ("search", "get_weather", "lookup_order", "run_sql", "read_file", "send_email")
WORDS = (
    "the order shipped yesterday and should arrive soon please check the tracking page "
    "weather forecast shows light rain in the afternoon with temperatures near fifteen "
    "degrees query returned three rows matching the customer id the file contains a "
    "configuration block for the staging cluster"
).split()

DEFECTS = (
    "unanswered_call",
    "orphan_result",
    "leading_result",
    "reused_id",
    "mid_system",
    "object_content",
    "junk_entry",
    "falsy_id",
    "duplicate_result",
    "metadata_row",
)


def _text(rng: random.Random, low: int = 4, high: int = 30) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _search_call(call_id) -> dict:
    return {"id": call_id, "function": {"name": "search", "arguments": "{}"}}


def _tool_turn(rng: random.Random, ids: list[str], next_id) -> list[dict]:
    calls = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        call_id = next_id()
        ids.append(call_id)
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": rng.choice(TOOLS),
                    "arguments": orjson.dumps({"q": _text(rng, 1, 5), "limit": rng.randint(1, 50)}).decode(),
                },
            }
        )
    turn = [{"role": "assistant", "content": None, "tool_calls": calls}]
    for call in calls:
        turn.append({"role": "tool", "tool_call_id": call["id"], "content": _text(rng, 10, 60)})
    return turn


def conversation(rng: random.Random, index: int, defect: str | None = None) -> dict:
    """One conversation record ``{"id", "messages", "tools", "metadata"}``."""
    counter = iter(range(1, 1000))

    def next_id() -> str:
        return f"call_{index}_{next(counter)}"

    ids: list[str] = []
    messages: list = [{"role": "system", "content": "You are a helpful agent. " + _text(rng, 5, 15)}]
    target = rng.randint(4, 40)
    while len(messages) < target:
        messages.append({"role": "user", "content": _text(rng)})
        for _ in range(rng.choice((0, 1, 1, 2))):
            messages.extend(_tool_turn(rng, ids, next_id))
        messages.append({"role": "assistant", "content": _text(rng)})
    messages = messages[: max(target, 4)]
    # A conversation cut mid-turn leaves calls unanswered, as a crashed loop does.

    if defect == "unanswered_call":
        messages.append({"role": "assistant", "content": "", "tool_calls": [_search_call(next_id())]})
    elif defect == "orphan_result":
        stale = {"role": "tool", "tool_call_id": "call_gone", "content": "stale"}
        messages.insert(rng.randint(1, len(messages)), stale)
    elif defect == "leading_result" and ids:
        messages.insert(1, {"role": "tool", "tool_call_id": ids[0], "content": "early"})
    elif defect == "reused_id" and ids:
        messages.append({"role": "user", "content": _text(rng)})
        messages.append({"role": "assistant", "content": None, "tool_calls": [_search_call(ids[0])]})
        messages.append({"role": "tool", "tool_call_id": ids[0], "content": _text(rng)})
    elif defect == "mid_system":
        messages.insert(rng.randint(1, len(messages)), {"role": "system", "content": "Be brief."})
    elif defect == "object_content":
        messages.append({"role": "user", "content": [{"type": "text", "text": _text(rng)}, {"n": rng.randint(1, 9)}]})
    elif defect == "junk_entry":
        messages.insert(rng.randint(0, len(messages)), rng.choice(("junk", 42, None, {"content": "no role"})))
    elif defect == "falsy_id":
        messages.append({"role": "assistant", "content": "", "tool_calls": [_search_call("0")]})
        messages.append({"role": "tool", "tool_call_id": "0", "content": "r"})
    elif defect == "duplicate_result" and ids:
        messages.append({"role": "tool", "tool_call_id": ids[-1], "content": "again"})
    elif defect == "metadata_row":
        call_id = next_id()
        stored_call = {"tool_call_id": call_id, "name": "t", "args": {"x": 1}}
        messages.append({"role": "assistant", "content": "", "metadata": {"tool_calls": [stored_call]}, "timestamp": 1})
        messages.append({"role": "tool", "content": "Applied.", "metadata": {"tool_call_id": call_id}, "timestamp": 1})
    return {
        "id": f"conv-{index:07d}",
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": t, "parameters": {"type": "object"}}} for t in TOOLS[:3]],
        "metadata": {"source": "bench", "turns": len(messages)},
    }


def conversations(count: int, seed: int = 7, defect_rate: float = 0.35):
    """Yield ``count`` conversation records, deterministically for a given seed."""
    rng = random.Random(seed)
    for index in range(count):
        defect = rng.choice(DEFECTS) if rng.random() < defect_rate else None
        yield conversation(rng, index, defect)


def jsonl_lines(count: int, seed: int = 7) -> list[bytes]:
    return [orjson.dumps(c) for c in conversations(count, seed)]


#: Lines no reader can turn into a conversation, or that are not records at all; the
#: bundled sample mixes them in so its first run shows the dead-letter output at work.
MALFORMED_LINES = (
    b'{"id": "broken-json", "messages": [{"role": "user", "content": "hi"}',
    b"this line is not JSON",
    b'"a bare string"',
    b"42",
    b'{"id": "no-messages", "conversation": []}',
    b'{"id": "messages-not-a-list", "messages": {"role": "user", "content": "hi"}}',
    b"",
    b'[{"role": "user", "content": "a bare message list is a record too"}, {"role": "assistant", "content": "ok"}]',
)


def _shorten(value):
    # Keep the bundled sample small: long generated texts add bytes, not coverage.
    if isinstance(value, str) and len(value) > 80:
        return value[:80]
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    return value


def sample_lines(count: int = 300, seed: int = 2026) -> list[bytes]:
    """The bundled sample: ``count`` conversations, most of them defective, and malformed lines."""
    lines = [orjson.dumps(_shorten(c)) for c in conversations(count, seed, defect_rate=0.6)]
    step = max(1, len(lines) // (len(MALFORMED_LINES) + 1))
    for i, bad in enumerate(MALFORMED_LINES):
        lines.insert((i + 1) * step + i, bad)
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="bench/corpus.py",
        description="Write generated conversations as JSONL (deterministic: the same arguments give the "
        "same bytes). About a third of the conversations carry a defect MEM-5 repairs.",
        epilog="examples:\n  python bench/corpus.py 1000 > corpus.jsonl\n"
        "  python bench/corpus.py --sample --output samples/conversations.jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "count", nargs="?", type=int, default=1000, metavar="COUNT", help="conversations to generate (default: 1000)"
    )
    parser.add_argument(
        "--sample",
        action="store_true",
        help="write the bundled sample instead (300 conversations, mostly defective, and "
        "malformed lines); COUNT is ignored",
    )
    parser.add_argument(
        "--output",
        metavar="OUTPUT",
        default="-",
        help="file to write (default: standard output, which must not be a terminal)",
    )
    args = parser.parse_args(argv)
    if args.count < 0:
        parser.error("COUNT must be at least 0")
    if args.output == "-" and sys.stdout.isatty():
        parser.error("refusing to write JSONL to a terminal: redirect it (> corpus.jsonl) or pass --output FILE")
    lines = sample_lines() if args.sample else jsonl_lines(args.count)
    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
    try:
        for line in lines:
            out.write(line + b"\n")
    finally:
        if out is not sys.stdout.buffer:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
