"""The per-record stage table (CPU time per record, or instructions), used by ``bench_pipeline.py``
and ``guard.py``.

Each stage is timed alone on inputs prepared outside the timing (lines, parsed records, read
conversations), as CPU time (``time.process_time``: other load on the machine does not count),
repeated ``reps`` times with the stages interleaved, the median kept; or counted in
instructions by callgrind (``stage_instructions``: the same figures on a busy machine as on an
idle one). The stages follow the job's path: ``parse`` (64-bit guard + orjson), ``read``
(detection and the reader, as ``normalize_batch`` does them: the previous record's reader
first; after a plain chat the core goes first and a chat it read whole needs no other pass:
``read_core`` is the two as the job runs them, ``read`` what it costs beyond the core alone),
``core`` (the MEM-5 core on what the readers give) and ``loop``, the whole path as the job runs
it: ``normalize_batch`` over batches of lines, then the bytes a JSONL file writer writes. What
``loop`` spends beyond parse, read and core is the rest: id, ledger, assembly, writer,
serialization, the batch.
"""

from __future__ import annotations

import gc
import glob
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: The job's batches: ``--batch-size`` records or ``--batch-bytes`` raw bytes, whichever first
#: (the defaults; ~50 records of the project's ~5 KB). A batch's records stay alive until its
#: files are written: the batch is the loop's working set, part of what a record costs.
BATCH = 256


def job_batches(items: list, sizes: list[int]) -> list[list]:
    """``items`` cut as the job's shard reader cuts its records (``inputs.batch_is_full``)."""
    from transforms.record.inputs import DEFAULT_BATCH_BYTES, batch_is_full

    batches, batch, size = [], [], 0
    for item, item_size in zip(items, sizes):
        batch.append(item)
        size += item_size
        if batch_is_full(len(batch), size, BATCH, DEFAULT_BATCH_BYTES):
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    return batches


def _cpu(func, items) -> float:
    gc.collect()
    start = time.process_time()
    func(items)
    return time.process_time() - start


def roundtrip(lines):
    loads, dumps = orjson.loads, orjson.dumps
    for line in lines:
        dumps(loads(line))


#: The two corpora of the stage table, in order.
CORPORA = ("project (OpenAI-shaped)", "flat")


def corpora(records: int, seed: int = 7) -> dict[str, list[bytes]]:
    """The project's corpus (OpenAI-shaped calls, defects) and the same conversations flat."""
    import corpus

    lines = corpus.jsonl_lines(records, seed)
    return dict(zip(CORPORA, (lines, [orjson.dumps(_flat(orjson.loads(line))) for line in lines])))


def _flat(record: dict) -> dict:
    # The flat shape: calls as {tool_call_id, name, args}, "" for a call-only turn's content.
    for message in record.get("messages", ()):
        if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    call = {
                        "tool_call_id": call.get("id"),
                        "name": function.get("name"),
                        "args": function.get("arguments"),
                    }
                calls.append(call)
            message["tool_calls"] = calls
            if message.get("content") is None:
                message["content"] = ""
    return record


def stage_plan(lines: list[bytes]) -> dict:
    """``{stage: (func, items)}``: each stage of the per-record path as a function over inputs
    prepared here, outside any measurement (lines, parsed records, read conversations)."""
    from transforms.core.jsontext import parse_json
    from transforms.record.inputs import RawRecord
    from transforms.record.record_settings import Settings
    from transforms.record.record_steps import ReaderHint, read_conversation
    from transforms.record.records import _read_and_normalize, normalize_batch
    from transforms.repairs.profiles import normalize_with_profile

    settings = Settings()
    field = settings.messages_field
    records = [parse_json(line) for line in lines]
    sizes = [len(line) for line in lines]
    chunks = job_batches(records, sizes)

    def read_all(items):
        # As the job reads: the previous record's reader first, one hint for the file.
        read = []
        hint = ReaderHint()
        for chunk in items:
            read.extend(read_conversation(record, settings, hint, for_core=True) for record in chunk)
        return read

    def read_and_core(items):
        # What the job does: after a plain chat, the core first, and no read when it read whole;
        # one hint for the file's batches.
        hint = ReaderHint()
        for chunk in items:
            for record in chunk:
                _read_and_normalize(record, settings, hint)

    conversations = read_all(chunks)
    batches = job_batches([RawRecord("bench", i, line) for i, line in enumerate(lines)], sizes)

    def parse(items):
        for line in items:
            parse_json(line)

    def core(items):
        for conversation in items:
            normalize_with_profile(conversation.messages, "spec")

    def core_raw(items):
        for record in items:
            normalize_with_profile(record.get(field, []) if isinstance(record, dict) else record, "spec")

    def loop(items):
        sink = io.BytesIO()
        hint = ReaderHint()  # as the job's DoFn: one for the file (the corpus is one file)
        for batch in items:
            result = normalize_batch(batch, settings, taken={}, keep_records=False, hint=hint)
            # The job's JSONL writer writes the lines the guard serialized (Batch.lines).
            sink.write(b"".join(line + b"\n" for line in result.lines))

    return {
        "roundtrip": (roundtrip, lines),
        "parse": (parse, lines),
        "read_core": (read_and_core, chunks),
        "core": (core, conversations),
        "core_raw": (core_raw, records),
        "loop": (loop, batches),
    }


def with_rest(table: dict) -> dict:
    """``table`` with ``read`` (reading and normalizing as the job does, less the core alone on
    what the readers give) and ``rest`` (what the loop spends beyond parse, read and core)."""
    return {
        **table,
        "read": table["read_core"] - table["core"],
        "rest": table["loop"] - table["parse"] - table["read_core"],
    }


def stage_table(lines: list[bytes], reps: int = 5) -> dict:
    """CPU µs per record of each stage (median of ``reps``), and the whole per-record loop."""
    plan = stage_plan(lines)
    samples: dict[str, list[float]] = {name: [] for name in plan}
    # The prepared inputs stay alive for the whole table: out of the collector's sight, as the
    # job's DoFn freezes what is alive at setup, or every full collection in the loop would
    # re-scan them and charge it to the loop.
    gc.freeze()
    try:
        for _ in range(reps):
            for name, (func, items) in plan.items():
                samples[name].append(_cpu(func, items))
    finally:
        gc.unfreeze()
    n = len(lines)
    return {name: statistics.median(values) / n * 1e6 for name, values in samples.items()}


# --------------------------------------------------------------------------------------------
# Instruction counts (valgrind's callgrind): the same stages, independent of other load


def have_callgrind() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def _mark(name: str) -> None:
    # Ask the valgrind running this process to dump its counts since the last dump, as NAME.
    subprocess.run(["callgrind_control", f"--dump={name}", str(os.getpid())], check=True, stdout=subprocess.DEVNULL)


def _instructions_child(records: int, seed: int) -> None:
    """Under callgrind: each corpus's stages once, a dump after each (``corpus/stage``)."""
    plans = [stage_plan(lines) for lines in corpora(records, seed).values()]
    gc.freeze()  # as stage_table
    gc.disable()  # a collection would land in whichever stage allocated last: not the stage's cost
    _mark("setup")
    for index, plan in enumerate(plans):
        _mark(f"{index}/marker")  # the cost of a dump request itself, subtracted below
        for name, (func, items) in plan.items():
            func(items)
            _mark(f"{index}/{name}")


def _dumped(path: str) -> tuple[str, int]:
    name, total = "", 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("desc: Trigger: dump "):
                name = line[len("desc: Trigger: dump ") :].strip()
            elif line.startswith("totals:"):
                total = int(line.split()[1])
    return name, total


def stage_instructions(records: int, seed: int = 7) -> dict[str, dict[str, float]]:
    """Instructions per record of each stage, per corpus (``{corpus: {stage: n}}``), counted by
    callgrind in a child process: exact, and the same on a busy machine as on an idle one."""
    with tempfile.TemporaryDirectory(prefix="convnorm-callgrind-") as work:
        out = os.path.join(work, "callgrind.out")
        env = dict(os.environ, PYTHONHASHSEED="0")
        code = (
            f"import sys; sys.path[:0] = {[str(ROOT), str(HERE)]!r}; import stages; "
            f"stages._instructions_child({records}, {seed})"
        )
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", code],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        counts = dict(_dumped(path) for path in glob.glob(out + ".*"))
    labels = list(CORPORA)
    table: dict[str, dict[str, float]] = {}
    for key, total in counts.items():
        index, _, name = key.partition("/")
        if name and name != "marker":
            table.setdefault(labels[int(index)], {})[name] = (total - counts[f"{index}/marker"]) / records
    return table


#: The per-record speed targets, as ratios.
TARGET_LOOP = 3.5  # per-record loop / round trip, OpenAI-shaped and flat records
TARGET_CORE_RAW = 1.8  # the core alone on raw OpenAI dicts / round trip
TARGET_JOB_LOOP = 1.1  # the job on one worker / the per-record loop (CPU)
TARGET_JOB_ROUNDTRIP = 4.0  # the job on one worker / round trip

#: The rows of the stage table: (stage, label).
ROWS = (
    ("parse", "read line + exact-reading check + orjson.loads"),
    ("read", "detection + reader (beyond the core)"),
    ("core", "MEM-5 core"),
    ("rest", "id, ledger, assemble, writer, serialization, batch"),
)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_stage_table(label: str, table: dict, job_us: float | None = None, loop_us: float | None = None) -> None:
    """The stage table and target ratios; ``job_us`` / ``loop_us``: CPU µs per record of the
    whole job and of the plain-loop subprocess (bench_pipeline), when measured."""
    table = with_rest(table)
    rows = [(name, table[stage]) for stage, name in ROWS]
    total = job_us if job_us is not None else table["loop"]
    if job_us is not None and loop_us is not None:
        rows.append(("Beam (job - plain loop subprocess)", job_us - loop_us))
    rt = table["roundtrip"]
    print(
        f"\nstage table, {label} (CPU us per record, median; round trips; share of "
        f"{'job' if job_us is not None else 'per-record loop'} CPU):"
    )
    for name, us in rows:
        print(f"  {name:<55} {us:7.1f}  {us / rt:5.2f}  {us / total:5.0%}")
    print(f"  {'orjson round trip (loads + dumps), the unit':<55} {rt:7.1f}")
    ratio = table["loop"] / rt
    print(f"  per-record loop / round trip      {ratio:5.2f}  (<= {TARGET_LOOP})  {_verdict(ratio <= TARGET_LOOP)}")
    ratio = table["core_raw"] / rt
    verdict = _verdict(ratio <= TARGET_CORE_RAW)
    print(f"  core on raw dicts / round trip    {ratio:5.2f}  (<= {TARGET_CORE_RAW})  {verdict}")
    if job_us is not None:
        ratio = job_us / table["loop"]
        print(
            f"  job (1 worker) / per-record loop  {ratio:5.2f}  (<= {TARGET_JOB_LOOP})  "
            f"{_verdict(ratio <= TARGET_JOB_LOOP)}   [job: subprocess CPU; loop: in-process median]"
        )
        ratio = job_us / rt
        print(
            f"  job (1 worker) / round trip       {ratio:5.2f}  (<= {TARGET_JOB_ROUNDTRIP})  "
            f"{_verdict(ratio <= TARGET_JOB_ROUNDTRIP)}   [CPU]"
        )
