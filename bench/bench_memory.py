"""Benchmark: peak memory of reading one huge record, with and without --max-record-bytes.

A report, not a test: it prints a table and exits 0.

    python bench/bench_memory.py                 # a 40 MiB line of tiny messages, limit 4 MiB
    python bench/bench_memory.py --line-mb 300   # a 300 MB line (needs ~8 GB for the baseline)

The input is one JSONL file: a small record, one line of ``--line-mb`` MiB holding tiny
messages (the worst case for Python objects per byte), then another small record; the same
bytes also gzip- and zstd-compressed. Each variant runs in a fresh child process and reports
its peak resident memory (``VmHWM``):

* baseline — plain Python: ``readline`` + ``orjson.loads`` of every line (what reading without
  a limit costs: the line, then its parsed objects);
* reader — convnorm's reader and record path (``iter_batches`` + ``normalize_batch``) with
  ``--max-record-bytes`` = ``--limit-mb``, over the plain, gzip and zstd files: the huge line
  must become one ``record_too_large`` dead letter, and both small records must be read.

The target: the reader's peak stays within a small multiple of the limit plus the
interpreter and the decoders' buffers (``the interpreter's own footprint + 3 x limit +
32 MiB``; zstd's window and one piece of its output account for most of the 32 MiB),
whatever the line's size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: Peak resident memory of this process image in KiB. Not ru_maxrss: Linux carries that over
#: from the parent across fork and exec, so a child would report the parent's peak.
_HWM = """
def _hwm():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
"""

_BASELINE = (
    _HWM
    + """
import sys, orjson
n = 0
with open(sys.argv[1], "rb") as handle:
    for line in handle:
        if line.strip():
            orjson.loads(line)
            n += 1
print(n, _hwm())
"""
)

_READER = (
    _HWM
    + """
import sys
sys.path.insert(0, sys.argv[3])
from pipeline.io.planning import plan_shards
from pipeline.io.read_shard import iter_batches
from transforms.record.records import normalize_batch
from transforms.record.record_settings import Settings
reasons, normalized = [], 0
for shard in plan_shards([sys.argv[1]]):
    stats = {"records": 0, "blank_lines": 0}
    for batch in iter_batches(shard, 256, stats, max_record_bytes=int(sys.argv[2])):
        result = normalize_batch(batch.items, Settings())
        normalized += len(result.records)
        reasons += [d["reason"] for d in result.dead_letters]
print(normalized, ",".join(reasons) or "none", _hwm())
"""
)

_IDLE = (
    _HWM
    + """
import sys
sys.path.insert(0, sys.argv[1])
import pipeline.io.planning, pipeline.io.read_shard, transforms.record.records
print(_hwm())
"""
)


def _small(i: int) -> bytes:
    return json.dumps({"id": f"small{i}", "messages": [{"role": "user", "content": "hi"}]}).encode() + b"\n"


def _write_inputs(directory: Path, line_mb: int) -> dict[str, Path]:
    message = b'{"role":"user","content":"x"},'
    count = (line_mb << 20) // len(message)
    huge = b'{"id":"huge","messages":[' + message * count + b'{"role":"user","content":"end"}]}\n'
    body = _small(0) + huge + _small(1)
    paths = {"plain": directory / "in.jsonl", "gzip": directory / "in.jsonl.gz", "zstd": directory / "in.jsonl.zst"}
    paths["plain"].write_bytes(body)
    paths["gzip"].write_bytes(gzip.compress(body, compresslevel=1))
    import zstandard

    paths["zstd"].write_bytes(zstandard.ZstdCompressor().compress(body))
    return paths


def _run(code: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    if out.returncode:
        return ["failed: " + (out.stderr.strip().splitlines() or ["?"])[-1]]
    return out.stdout.split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--line-mb", type=int, default=40)
    parser.add_argument("--limit-mb", type=int, default=4)
    parser.add_argument("--skip-baseline", action="store_true", help="when the baseline would not fit in memory")
    args = parser.parse_args()
    limit = args.limit_mb << 20
    with tempfile.TemporaryDirectory(prefix="convnorm-bench-memory-") as tmp:
        paths = _write_inputs(Path(tmp), args.line_mb)
        idle_mib = int(_run(_IDLE, str(ROOT))[0]) / 1024
        print(
            f"one line of {args.line_mb} MiB (tiny messages) between two small records; "
            f"--max-record-bytes {args.limit_mb} MiB; interpreter with convnorm imported: {idle_mib:.0f} MiB"
        )
        print(f"{'variant':<22}{'peak MiB':>10}  outcome")
        if not args.skip_baseline:
            result = _run(_BASELINE, str(paths["plain"]))
            if len(result) == 2:
                print(f"{'baseline (no limit)':<22}{int(result[1]) / 1024:>10.0f}  {result[0]} lines parsed")
            else:
                print(f"{'baseline (no limit)':<22}{'':>10}  {' '.join(result)}")
        target = idle_mib + 3 * args.limit_mb + 32
        for kind, path in paths.items():
            result = _run(_READER, str(path), str(limit), str(ROOT))
            if len(result) != 3:
                print(f"{'reader ' + kind:<22}{'':>10}  {' '.join(result)}")
                continue
            peak = int(result[2]) / 1024
            verdict = ""
            if args.line_mb > args.limit_mb:  # the huge line must be read past, not held
                ok = result[0] == "2" and result[1] == "record_too_large" and peak <= target
                verdict = f"{'PASS' if ok else 'FAIL'} (target <= {target:.0f} MiB)"
            print(f"{'reader ' + kind:<22}{peak:>10.0f}  {result[0]} normalized, dead letters: {result[1]}  {verdict}")
    print("(peak resident memory per child process; figures are noisy on a shared machine)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
