"""The per-record stage table of issue 11 (CPU time per record), used by ``bench_pipeline.py``.

Each stage is timed alone on inputs prepared outside the timing (lines, parsed records, read
conversations), as CPU time (``time.process_time``: other load on the machine does not count),
repeated ``reps`` times with the stages interleaved, the median kept. ``per_record_loop`` is
the whole path as the job runs it: ``process_batch`` over batches of lines, then the bytes a
JSONL file writer writes.
"""

from __future__ import annotations

import gc
import io
import statistics
import time

import orjson

BATCH = 256


def _cpu(func, items) -> float:
    gc.collect()
    start = time.process_time()
    func(items)
    return time.process_time() - start


def roundtrip(lines):
    loads, dumps = orjson.loads, orjson.dumps
    for line in lines:
        dumps(loads(line))


def corpora(records: int, seed: int = 7) -> dict[str, list[bytes]]:
    """The project's corpus (OpenAI-shaped calls, defects) and the same conversations flat."""
    import corpus

    lines = corpus.jsonl_lines(records, seed)
    return {"project (OpenAI-shaped)": lines, "flat": [orjson.dumps(_flat(orjson.loads(line))) for line in lines]}


def _flat(record: dict) -> dict:
    # The flat shape: calls as {tool_call_id, name, args}, "" for a call-only turn's content.
    for message in record.get("messages", ()):
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    call = {"tool_call_id": call.get("id"), "name": function.get("name"),
                            "args": function.get("arguments")}
                calls.append(call)
            message["tool_calls"] = calls
            if message.get("content") is None:
                message["content"] = ""
    return record


def stage_table(lines: list[bytes], reps: int = 5) -> dict:
    """CPU µs per record of each stage (median of ``reps``), and the whole per-record loop."""
    from transforms.formats import detect_reader
    from transforms.profiles import normalize_with_profile
    from transforms.records import RawRecord, Settings, parse_json, process_batch

    settings = Settings()
    field = settings.messages_field
    records = [parse_json(line) for line in lines]
    readers = [detect_reader(r, field) for r in records]
    conversations = [reader.read(r, field) for reader, r in zip(readers, records)]
    batches = [[RawRecord("bench", i, line) for i, line in enumerate(lines[s:s + BATCH], s)]
               for s in range(0, len(lines), BATCH)]

    def parse(items):
        for line in items:
            parse_json(line)

    def detect(items):
        for record in items:
            detect_reader(record, field)

    def convert(items):
        for reader, record in items:
            reader.read(record, field)

    def core(items):
        for conversation in items:
            normalize_with_profile(conversation.messages, "spec")

    def loop(items):
        sink = io.BytesIO()
        for batch in items:
            result = process_batch(batch, settings, taken={})
            sink.write(b"".join(orjson.dumps(r) + b"\n" for r in result.records))

    plan = {
        "roundtrip": (roundtrip, lines),
        "parse": (parse, lines),
        "detect": (detect, records),
        "convert": (convert, list(zip(readers, records))),
        "core": (core, conversations),
        "loop": (loop, batches),
    }
    samples: dict[str, list[float]] = {name: [] for name in plan}
    for _ in range(reps):
        for name, (func, items) in plan.items():
            samples[name].append(_cpu(func, items))
    n = len(lines)
    return {name: statistics.median(values) / n * 1e6 for name, values in samples.items()}


if __name__ == "__main__":  # quick look: python bench/stages.py [records]
    import sys
    from pathlib import Path

    sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]
    for label, lines in corpora(int(sys.argv[1]) if len(sys.argv) > 1 else 3000).items():
        table = stage_table(lines)
        rest = table["loop"] - table["parse"] - table["detect"] - table["convert"] - table["core"]
        print(label, {k: round(v, 1) for k, v in table.items()}, "rest", round(rest, 1),
              "loop/roundtrip", round(table["loop"] / table["roundtrip"], 2))
