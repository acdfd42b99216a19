"""Benchmark: the speed of the MEM-5 normalization core (``normalize_conversation``) alone.

A report, not a test: it prints a table and PASS/FAIL per target, and exits 0 either way.

    python bench/bench_core.py            # full run: 20,000 conversations, 1,000,000 messages
    python bench/bench_core.py --quick    # smoke run: 2,000 conversations, 400,000 messages

Targets:

* throughput — conversations/s of ``normalize_conversation`` over the message lists of a
  generated corpus (``bench/corpus.py``: realistic conversations of 4-40 messages, about a
  third with a defect of one of the kinds MEM-5 repairs), set against conversations/s of an
  orjson ``loads`` + ``dumps`` round trip of the same corpus's JSONL lines, in the same run on
  the same machine. The ratio core time / orjson time must be <= 3.0: normalizing a
  conversation may cost at most three JSON round trips of it.
* one big conversation — normalizing ONE conversation of 1,000,000 messages (generated
  conversations' messages concatenated) must take < 10 s.
* linearity — the same for a quarter of that size (the first 250,000 of the same messages):
  the time ratio full / quarter is 4.0 when the work is linear; the target lets the cost per
  message grow by at most 1.5x (ratio <= 6.0). Both sizes must be past the knee near 100,000
  messages: below it a list and its output stay in the CPU caches and the collector's full
  collections have not started, so the cost per message is lower there (about 1.5 us against
  3 us on the reference machine) and a smaller quarter would flag the caches, not the code.

Method: every figure is the best of ``--reps`` repetitions (default 5; 3 for the big lists),
with ``gc.collect()`` before each timing; the garbage collector stays enabled, as in a real
job, and results are discarded as produced (a streaming job keeps none). The corpus is parsed
once, outside the timings; the core is timed on the parsed message lists, orjson on the raw
lines. Each big list is built and timed in a fresh child process (``--_one``): the cyclic
collector's full collections depend on everything alive in the heap, so timing 250k messages
in a process that also holds the 1M list would dodge collections that a 250k-message job pays,
and the linearity figure would measure the heap, not the function. The table prints each best
wall time beside the CPU time of that same run: on a shared machine a gap between the two is
time spent waiting for a core. ``--quick`` scales the big-list target linearly to its size.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(ROOT), str(HERE)):  # runnable as `python bench/bench_core.py` from anywhere
    if path not in sys.path:
        sys.path.insert(0, path)

import corpus  # noqa: E402
import orjson  # noqa: E402

from transforms.core.normalize import REASONS, normalize_conversation  # noqa: E402

TARGET_RATIO = 3.0  # core time / orjson round-trip time, same corpus
TARGET_BIG_SECONDS = 10.0  # one conversation of 1,000,000 messages
BIG_REFERENCE = 1_000_000
TARGET_LINEARITY = 1.5  # allowed growth of the per-message cost from 1/4 size to full size


def best_of(reps: int, func, *args) -> tuple[float, float]:
    """The best wall time of ``reps`` calls (a full collection before each), and its CPU time."""
    best = (float("inf"), float("inf"))
    for _ in range(reps):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        func(*args)
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    gc.collect()
    return best


def run_core(conversations: list) -> None:
    normalize = normalize_conversation
    for messages in conversations:
        normalize(messages)


def run_orjson(lines: list) -> None:
    loads, dumps = orjson.loads, orjson.dumps
    for line in lines:
        dumps(loads(line))


def big_conversation(size: int, seed: int) -> list:
    """One list of ``size`` messages: generated conversations' messages, concatenated.

    One generator, so call ids stay unique across the concatenated conversations (ids carry
    the conversation index) while the injected defects stay in. For a given seed a smaller
    list is a prefix of a larger one.
    """
    messages: list = []
    for record in corpus.conversations(10**9, seed):
        messages.extend(record["messages"])
        if len(messages) >= size:
            break
    del messages[size:]
    return messages


def one_big(size: int, seed: int, reps: int) -> dict:
    """Child mode: build one big conversation, time its normalization, report as a dict."""
    messages = big_conversation(size, seed)
    wall, cpu = best_of(reps, normalize_conversation, messages)
    result = normalize_conversation(messages)
    return {
        "size": size,
        "wall": wall,
        "cpu": cpu,
        "out": len(result.messages),
        "dropped": result.dropped,
        "drops": result.drops,
        "healed": result.healed,
    }


def measure_big(size: int, seed: int, reps: int) -> dict:
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--_one",
        str(size),
        "--seed",
        str(seed),
        "--reps",
        str(reps),
    ]
    completed = subprocess.run(argv, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"child for {size:,} messages failed:\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def tally(conversations: list) -> tuple[int, int, Counter]:
    dropped = healed = 0
    drops: Counter = Counter()
    for messages in conversations:
        result = normalize_conversation(messages)
        dropped += result.dropped
        healed += result.healed
        drops.update(result.drops)
    return dropped, healed, drops


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--records", type=int, default=None, help="corpus size (default 20000; 2000 quick)")
    parser.add_argument(
        "--big", type=int, default=None, help="messages in the big conversation (default 1000000; 400000 quick)"
    )
    parser.add_argument(
        "--reps", type=int, default=None, help="repetitions per figure (default 5, big lists 3; 3 quick)"
    )
    parser.add_argument("--seed", type=int, default=7, help="corpus seed")
    parser.add_argument("--_one", type=int, default=None, help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args(argv)

    if args._one is not None:
        print(json.dumps(one_big(args._one, args.seed, args.reps or 3)))
        return 0

    records = args.records or (2_000 if args.quick else 20_000)
    big_size = args.big or (400_000 if args.quick else BIG_REFERENCE)
    reps = args.reps or (3 if args.quick else 5)
    big_reps = min(reps, 3)
    quarter = big_size // 4
    big_seed = args.seed + 1
    started = time.perf_counter()

    print(
        f"convnorm core benchmark{' (quick)' if args.quick else ''}: Python {platform.python_version()}, "
        f"orjson {orjson.__version__}, {platform.machine()}, {os.cpu_count()} CPU(s)"
    )
    print(f"generating {records:,} conversations (seed {args.seed}) ...", flush=True)
    lines = corpus.jsonl_lines(records, args.seed)
    conversations = [orjson.loads(line)["messages"] for line in lines]
    message_count = sum(len(m) for m in conversations)
    corpus_bytes = sum(len(line) for line in lines)

    print("timing the corpus ...", flush=True)
    core_s, core_cpu = best_of(reps, run_core, conversations)
    orjson_s, orjson_cpu = best_of(reps, run_orjson, lines)
    dropped, healed, drops = tally(conversations)
    del conversations, lines
    gc.collect()

    print(f"timing one conversation of {quarter:,} and of {big_size:,} messages (a child process each) ...", flush=True)
    small = measure_big(quarter, big_seed, big_reps)
    big = measure_big(big_size, big_seed, big_reps)

    core_rate = records / core_s
    orjson_rate = records / orjson_s
    ratio = core_s / orjson_s
    big_target = TARGET_BIG_SECONDS * big_size / BIG_REFERENCE
    linear_ratio = big["wall"] / small["wall"]
    growth = (big["wall"] / big_size) / (small["wall"] / quarter)
    linear_target = (big_size / quarter) * TARGET_LINEARITY

    rows = [
        (
            "normalize_conversation",
            f"{core_rate:,.0f} conv/s",
            f"{core_s:.3f} s",
            f"{core_cpu:.3f} s",
            f"{message_count / core_s / 1e6:.2f} M msg/s",
            "",
            "",
        ),
        (
            "orjson loads+dumps",
            f"{orjson_rate:,.0f} conv/s",
            f"{orjson_s:.3f} s",
            f"{orjson_cpu:.3f} s",
            f"{corpus_bytes / orjson_s / 2**20:,.0f} MiB/s",
            "",
            "",
        ),
        (
            "ratio core / orjson",
            f"{ratio:.2f}",
            "",
            "",
            f"cpu ratio {core_cpu / orjson_cpu:.2f}",
            f"<= {TARGET_RATIO}",
            verdict(ratio <= TARGET_RATIO),
        ),
        (
            f"1 conversation, {big_size:,} msgs",
            f"{big['wall']:.2f} s",
            f"{big['wall']:.3f} s",
            f"{big['cpu']:.3f} s",
            f"{big_size / big['wall'] / 1e6:.2f} M msg/s",
            f"< {big_target:g} s",
            verdict(big["wall"] < big_target),
        ),
        (
            f"1 conversation, {quarter:,} msgs",
            f"{small['wall']:.2f} s",
            f"{small['wall']:.3f} s",
            f"{small['cpu']:.3f} s",
            f"{quarter / small['wall'] / 1e6:.2f} M msg/s",
            "",
            "",
        ),
        (
            f"linearity {quarter // 1000}k -> {big_size // 1000}k",
            f"{linear_ratio:.2f}",
            "",
            "",
            f"x{growth:.2f} per msg",
            f"<= {linear_target:g}",
            verdict(linear_ratio <= linear_target),
        ),
    ]
    header = ("measure", "value", "best wall", "its cpu", "detail", "target", "verdict")
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]

    print()
    print(
        f"corpus: {records:,} conversations, {message_count:,} messages, {corpus_bytes / 2**20:.1f} MiB JSONL; "
        f"best of {reps} (big lists: best of {big_reps}, each in its own process)"
    )
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    print()
    by_reason = ", ".join(f"{r} {drops[r]:,}" for r in REASONS if drops[r])
    print(f"corpus repairs: dropped {dropped:,} ({by_reason}); healed {healed:,}")
    big_reasons = ", ".join(f"{r} {n:,}" for r, n in big["drops"].items())
    print(
        f"big list repairs: {big['out']:,} messages out; dropped {big['dropped']:,} ({big_reasons}); "
        f"healed {big['healed']:,}"
    )
    busy = min(core_cpu / core_s, orjson_cpu / orjson_s, big["cpu"] / big["wall"], small["cpu"] / small["wall"])
    if busy < 0.9:
        print(
            f"note: CPU time was as low as {busy:.0%} of wall time: the machine was busy, and the "
            "wall-clock figures include waiting for a core"
        )
    failed = [
        name
        for name, ok in (
            ("ratio", ratio <= TARGET_RATIO),
            ("big", big["wall"] < big_target),
            ("linearity", linear_ratio <= linear_target),
        )
        if not ok
    ]
    print(
        f"\noverall: {'PASS' if not failed else 'FAIL (' + ', '.join(failed) + ')'}; "
        f"total bench time {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
