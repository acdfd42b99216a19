"""Benchmark: a compressed file of blank lines, read by convnorm against decompressing it.

A report, not a test: it prints CPU times and ratios and exits 0 (1 if a count is wrong).

    python bench/bench_blank_lines.py              # 200 MiB of newlines as gzip -1 (915 KB), ~30 s
    python bench/bench_blank_lines.py --mib 50 --rounds 5 --readline-mib 0

A gzip of newlines is a small file that expands to a huge number of blank lines; read one line
at a time through the record path, 200 MiB of them took minutes of CPU. convnorm counts a run
of blank lines in bulk (``pipeline.io.text_containers``), so the reader should cost about what the
decompression does. Timed, CPU time (``process_time``), the median of interleaved rounds:

- ``gzip``: ``gzip.GzipFile.read`` in 1 MiB pieces to the end (the decompression alone);
- ``convnorm``: the job's reader, ``pipeline.io.read_shard.iter_batches`` on the file, its
  ``blank_lines`` count checked against the lines written;
- ``readline``: ``GzipFile.readline`` until the end, nothing else: the floor of any reader
  that takes one line at a time (the record path costs more per line on top of it), on the
  first ``--readline-mib`` MiB only (default 10: the whole file takes ~40 s a round).

Each is shown as CPU seconds per MiB of newlines and as a multiple of gzip's.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def decompress(path: str) -> float:
    start = time.process_time()
    with gzip.open(path, "rb") as handle:
        while handle.read(1 << 20):
            pass
    return time.process_time() - start


def convnorm_reader(path: str, lines: int) -> float:
    from pipeline.io.planning import plan_shards
    from pipeline.io.read_shard import iter_batches

    stats = {"records": 0, "blank_lines": 0}
    start = time.process_time()
    for _batch in iter_batches(plan_shards([path])[0], 256, stats):
        pass
    elapsed = time.process_time() - start
    if stats != {"records": 0, "blank_lines": lines}:
        raise SystemExit(f"wrong count: {stats}, expected {lines:,} blank lines")
    return elapsed


def line_by_line(path: str) -> float:
    start = time.process_time()
    with gzip.open(path, "rb") as handle:
        readline = handle.readline
        while readline():
            pass
    return time.process_time() - start


def _write_newlines(path: str, mib: int) -> None:
    with gzip.open(path, "wb", compresslevel=1) as out:  # gzip -1: 200 MiB -> 915 KB
        piece = b"\n" * (1 << 20)
        for _ in range(mib):
            out.write(piece)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=200, help="MiB of newlines (default 200)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--readline-mib", type=int, default=10, help="MiB for the line-by-line floor (0: leave it out)")
    args = parser.parse_args(argv)
    lines = args.mib << 20
    with tempfile.TemporaryDirectory(prefix="convnorm-blank-") as work:
        path, small = os.path.join(work, "newlines.jsonl.gz"), os.path.join(work, "first.jsonl.gz")
        _write_newlines(path, args.mib)
        _write_newlines(small, args.readline_mib)
        print(
            f"{args.mib} MiB of newlines ({lines:,} blank lines) as gzip, {os.path.getsize(path):,} bytes; "
            f"{args.rounds} rounds; load average {_load()}"
        )
        convnorm_reader(path, lines)  # warm up imports and caches
        per_mib: dict[str, list[float]] = {"gzip": [], "convnorm": [], "readline": []}
        for _ in range(args.rounds):
            per_mib["gzip"].append(decompress(path) / args.mib)
            per_mib["convnorm"].append(convnorm_reader(path, lines) / args.mib)
            if args.readline_mib:
                per_mib["readline"].append(line_by_line(small) / args.readline_mib)
    base = statistics.median(per_mib["gzip"])
    for name, times in per_mib.items():
        if times:
            cpu = statistics.median(times)
            print(f"  {name:<9} {cpu * 1e3:8.2f} ms CPU per MiB   x{cpu / base:6.2f} of gzip")
    print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
