"""Benchmark: batches by count against batches by bytes, on the job's per-shard path.

A report, not a test: it prints CPU time per record and exits 0.

    python bench/bench_batches.py            # 4,000 records per corpus, 5 interleaved rounds
    python bench/bench_batches.py --records 10000 --rounds 7

What is timed is the work of the job's fused stage for one shard, without the runner: read
the shard (``pipeline.io.read_shard.iter_batches``, the real reader), ``normalize_batch`` per batch,
and the JSONL writer's join of each batch's lines, plus a fixed cost per batch standing for
Beam's per-element work (``--per-batch-us``, default 60 µs: three outputs and the writer's
element on FnApiRunner; the job's Beam share in bench_pipeline.py is the measured whole).
CPU time (``process_time``), the median of interleaved rounds, per record.

Corpora (``bench/corpus.py``, OpenAI-shaped calls with defects):

- ``project``: the project's conversations, ~5 KB each;
- ``small``: the same cut to their first 4 messages, ~0.7 KB;
- ``large``: every 8 consecutive conversations joined into one, ~40 KB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

#: (label, records per batch, raw bytes per batch)
CONFIGS = (
    ("count 64", 64, 1 << 62),
    ("count 256", 256, 1 << 62),
    ("count 1024", 1024, 1 << 62),
    ("64 KiB", 1 << 20, 64 << 10),
    ("256 KiB", 1 << 20, 256 << 10),
    ("1 MiB", 1 << 20, 1 << 20),
    ("256 rec / 256 KiB", 256, 256 << 10),
    ("1024 rec / 256 KiB", 1024, 256 << 10),
)


def corpora(records: int, seed: int) -> dict[str, list[bytes]]:
    import orjson
    from corpus import conversations

    project = list(conversations(records, seed))
    small = [{**r, "messages": r["messages"][:4]} for r in project]
    large = []
    for k in range(0, len(project) - 7, 8):
        joined = dict(project[k])
        joined["messages"] = [m for r in project[k : k + 8] for m in r["messages"]]
        large.append(joined)
    return {
        name: [orjson.dumps(r) for r in rows]
        for name, rows in (("project", project), ("small", small), ("large", large))
    }


def run_once(shard, batch_size: int, batch_bytes: int, per_batch_us: float) -> tuple[float, int]:
    from pipeline.io.read_shard import iter_batches
    from transforms.record.records import Settings, normalize_batch

    settings = Settings()
    stats = {"records": 0, "blank_lines": 0}
    batches = 0
    spin = per_batch_us / 1e6
    start = time.process_time()
    for batch in iter_batches(shard, batch_size, stats, batch_bytes=batch_bytes):
        result = normalize_batch(batch.items, settings, taken={})
        b"\n".join(result.lines)
        batches += 1
        if spin:
            until = time.process_time() + spin
            while time.process_time() < until:
                pass
    return time.process_time() - start, batches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--per-batch-us", type=float, default=60.0)
    args = parser.parse_args(argv)
    from pipeline.io.shard import Shard

    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(
        f"batches by count and by bytes: {args.records:,} records per corpus, {args.rounds} rounds, "
        f"+{args.per_batch_us:g} µs per batch for Beam; load average {load}"
    )
    with tempfile.TemporaryDirectory(prefix="convnorm-batches-") as work:
        for name, lines in corpora(args.records, args.seed).items():
            path = os.path.join(work, f"{name}.jsonl")
            Path(path).write_bytes(b"".join(line + b"\n" for line in lines))
            shard = Shard(0, path, ".jsonl", 0, None)
            times: dict[str, list[float]] = {label: [] for label, _, _ in CONFIGS}
            counts: dict[str, int] = {}
            run_once(shard, 256, 1 << 62, 0)  # warm up caches and imports
            for _ in range(args.rounds):
                for label, size, nbytes in CONFIGS:
                    cpu, counts[label] = run_once(shard, size, nbytes, args.per_batch_us)
                    times[label].append(cpu)
            per = {label: statistics.median(t) / len(lines) * 1e6 for label, t in times.items()}
            base = per["count 256"]
            print(f"\n{name}: {len(lines):,} records, {sum(map(len, lines)) / len(lines):,.0f} B each")
            for label, _, _ in CONFIGS:
                print(
                    f"  {label:<20} {per[label]:8.1f} µs/record  x{per[label] / base:.3f} of count 256  "
                    f"({len(lines) / counts[label]:,.0f} records/batch)"
                )
    print(f"\nload average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
