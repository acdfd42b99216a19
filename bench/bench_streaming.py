"""Benchmark: ``convnorm --streaming`` on Prism — latency, sustained rate, idle cost.

A report, not a test: it prints figures and PASS/FAIL per target and exits 0 either way
(except when it cannot run at all, e.g. no Prism binary: run ``.ci/build-prism`` first).

    python bench/bench_streaming.py            # full: ~5 minutes (3 minutes of it idle)
    python bench/bench_streaming.py --quick    # smoke: ~1 minute

One ``convnorm --streaming`` process (and the Prism process it starts) runs throughout, on an
empty landing directory, in three phases:

1. Latency: ``--files`` files of ``--records`` conversations land one at a time, ``--gap``
   seconds apart (written under a dot-name, then renamed: the landing convention); for each,
   the seconds from the rename to its ``source.json`` being visible (its outputs are renamed
   into place together, source.json with them). Median and p95. The watcher polls every
   ``--poll`` seconds and waits for a file to keep its size over two polls, so about 1-2
   polls of the figure are the settle rule, not processing.
2. Sustained rate: ``--burst`` files land at once; records/s from the first rename to the
   last file's output. The plain-Python baseline in the same run is one loop doing the same
   per-record work (``process_record`` + ``dumps_line``) over the same records in this
   process; the ratio is baseline time / streaming time (how much of a plain loop's speed the
   streaming job keeps, polling and all).
3. Idle: nothing lands for ``--idle`` seconds; CPU (user + system, percent of one core) and
   summed RSS of the process tree (convnorm + Prism), sampled every 5 s from /proc, after 30 s
   for the burst's buffers to be released. Memory must be flat: PASS when the last third's
   mean is at most 5% (or 10 MiB) above the first third's (falling memory passes).

Then SIGTERM: the run must drain and exit 0 with ``summary.json`` accounting for every record.
Figures measured on a shared, loaded machine are noisy; the header prints the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from corpus import jsonl_lines  # noqa: E402
from proctree import cpu_and_rss  # noqa: E402

from pipeline.io.processed_files import source_id  # noqa: E402


def _land(landing: Path, name: str, data: bytes) -> float:
    temp = landing / f".{name}.partial"
    temp.write_bytes(data)
    os.rename(temp, landing / name)
    return time.monotonic()


def _visible(out: Path, path: Path) -> bool:
    return any(out.glob(f"*/{source_id(str(path))}/source.json"))


def _wait_visible(out: Path, paths: list[Path], proc: subprocess.Popen, timeout: float) -> dict[Path, float]:
    seen: dict[Path, float] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(paths):
        for path in paths:
            if path not in seen and _visible(out, path):
                seen[path] = time.monotonic()
        if proc.poll() is not None:
            raise SystemExit(f"convnorm exited with {proc.returncode} during the benchmark")
        if time.monotonic() > deadline:
            raise SystemExit(f"outputs of {len(paths) - len(seen)} file(s) not visible within {timeout} s")
        time.sleep(0.02)
    return seen


def _plain_baseline(lines: list[bytes]) -> float:
    """Seconds for the plain loop over the same records (the job's per-record work)."""
    from transforms.core.jsontext import dumps_line
    from transforms.record.inputs import RawRecord
    from transforms.record.record_settings import Settings
    from transforms.record.records import process_record

    settings = Settings()
    start = time.perf_counter()
    for position, line in enumerate(lines):
        outcome = process_record(RawRecord("baseline", position, line), settings)
        if outcome.dead_letter is None:
            dumps_line(outcome.record)
            dumps_line(outcome.metrics)
        else:
            dumps_line(outcome.dead_letter)
    return time.perf_counter() - start


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer files, 30 s idle")
    parser.add_argument("--files", type=int, default=20, help="files landed one at a time (latency)")
    parser.add_argument("--records", type=int, default=200, help="conversations per latency file")
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between latency files")
    parser.add_argument("--burst", type=int, default=10, help="files landed at once (rate)")
    parser.add_argument("--burst-records", type=int, default=2000, help="conversations per burst file")
    parser.add_argument("--idle", type=float, default=180.0, help="seconds of idle measurement")
    parser.add_argument("--poll", default="1s", help="the watcher's --poll-interval")
    parser.add_argument("--prism", default=os.environ.get("CONVNORM_PRISM", str(ROOT / "build/prism/prism")))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    if args.quick:
        args.files, args.records, args.burst, args.burst_records, args.idle = 6, 100, 4, 500, 30.0
    if not os.access(args.prism, os.X_OK):
        raise SystemExit(f"no Prism binary at {args.prism}: run .ci/build-prism first")

    work = Path(tempfile.mkdtemp(prefix="convnorm-bench-streaming-"))
    landing, out, log = work / "landing", work / "out", work / "convnorm.log"
    landing.mkdir()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; work dir {work}")
    latency_files = [jsonl_lines(args.records, seed=100 + i) for i in range(args.files)]
    burst_files = [jsonl_lines(args.burst_records, seed=500 + i) for i in range(args.burst)]
    total_records = sum(map(len, latency_files)) + sum(map(len, burst_files))

    argv = [
        sys.executable,
        "-m",
        "pipeline",
        "--streaming",
        "--runner=PrismRunner",
        f"--prism_location={args.prism}",
        f"--input={landing}/*.jsonl",
        f"--output={out}",
        "--window=60s",
        f"--poll-interval={args.poll}",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with log.open("wb") as handle:
        proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    try:
        while "watching" not in log.read_text():
            if proc.poll() is not None:
                raise SystemExit(f"convnorm exited at start:\n{log.read_text()}")
            time.sleep(0.1)
        # A first file warms the pipeline up (Prism starting its worker): not measured.
        warm = landing / "warmup.jsonl"
        _land(landing, warm.name, b"".join(line + b"\n" for line in jsonl_lines(10, seed=1)))
        _wait_visible(out, [warm], proc, 120)
        total_records += 10

        latencies = []
        for i, lines in enumerate(latency_files):
            path = landing / f"latency-{i:03d}.jsonl"
            landed = _land(landing, path.name, b"".join(line + b"\n" for line in lines))
            latencies.append(_wait_visible(out, [path], proc, 120)[path] - landed)
            time.sleep(max(0.0, args.gap - (time.monotonic() - landed)))

        burst_paths = [landing / f"burst-{i:03d}.jsonl" for i in range(args.burst)]
        first = None
        for path, lines in zip(burst_paths, burst_files):
            landed = _land(landing, path.name, b"".join(line + b"\n" for line in lines))
            first = first or landed
        seen = _wait_visible(out, burst_paths, proc, 600)
        burst_seconds = max(seen.values()) - first
        burst_count = sum(map(len, burst_files))
        baseline_seconds = _plain_baseline([line for lines in burst_files for line in lines])

        time.sleep(30)  # let the burst's last bundles, window work and buffers settle
        samples = []
        start = time.monotonic()
        while time.monotonic() - start < args.idle:
            samples.append((time.monotonic(), *cpu_and_rss(proc.pid)[:3]))
            time.sleep(5)
        samples.append((time.monotonic(), *cpu_and_rss(proc.pid)[:3]))

        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    elapsed = samples[-1][0] - samples[0][0]
    idle_cpu = 100 * (samples[-1][1] - samples[0][1]) / elapsed
    per_process = ", ".join(
        f"{name} {100 * (samples[-1][3].get(name, 0) - samples[0][3].get(name, 0)) / elapsed:.1f}%"
        for name in sorted(samples[-1][3])
    )
    third = max(1, len(samples) // 3)
    rss_first = statistics.mean(s[2] for s in samples[:third])
    rss_last = statistics.mean(s[2] for s in samples[-third:])
    flat = rss_last - rss_first <= max(0.05 * rss_first, 10 << 20)
    mib = 1 << 20

    print(
        f"\nlatency, landing -> outputs visible ({len(latencies)} files of {args.records} records, poll {args.poll}):"
    )
    print(
        f"  median {statistics.median(latencies):.2f} s   p95 {_percentile(latencies, 0.95):.2f} s   "
        f"max {max(latencies):.2f} s"
    )
    print(
        f"sustained: {burst_count} records in {args.burst} files landed at once: {burst_seconds:.2f} s, "
        f"{burst_count / burst_seconds:,.0f} records/s"
    )
    print(
        f"  plain-Python loop, same records, same work: {baseline_seconds:.2f} s, "
        f"{burst_count / baseline_seconds:,.0f} records/s; streaming/plain time ratio "
        f"{burst_seconds / baseline_seconds:.2f}"
    )
    print(
        f"idle for {elapsed:.0f} s: CPU {idle_cpu:.1f}% of one core ({per_process}); "
        f"RSS {rss_first / mib:.0f} MiB (first third) -> {rss_last / mib:.0f} MiB (last third): "
        f"{'PASS' if flat else 'FAIL'} flat memory"
    )
    accounted = summary.get("accounted") and summary.get("records_in") == total_records
    print(
        f"drain: exit status {status}; summary.json records_in {summary.get('records_in')} of {total_records} "
        f"landed, accounted {summary.get('accounted')}: {'PASS' if status == 0 and accounted else 'FAIL'}"
    )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
