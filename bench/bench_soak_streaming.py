"""Soak: ``convnorm --streaming`` on Prism for half an hour, killed once, restarted.

A report, not a test: it prints figures and PASS/FAIL per check and exits 0 either way (except
when it cannot run at all: no Prism binary, run ``.ci/build-prism`` first).

    python bench/bench_soak_streaming.py              # 30 minutes (about 35 with the checks)
    python bench/bench_soak_streaming.py --minutes 4  # a smoke run

What it does, on an empty landing directory:

- files land all along at random intervals (exponential, mean ``--mean-gap`` seconds), each a
  random number of realistic conversations (1 to ``--max-records``, defects and a few
  malformed lines included: ``bench/corpus.py``), one in five gzipped, landed by rename;
- convnorm runs with ``--poll-interval --poll`` and ``--window --window``; halfway through it
  gets SIGKILL (no drain, whatever is in flight), files go on landing while it is down for
  ``--down`` seconds, then it is started again into the same output directory;
- at the end the landing stops, the run gets SIGTERM once every landed file is processed
  (or ``--settle`` seconds passed) and must drain and exit 0.

Checks: every landed file has exactly one outputs directory, holding exactly its records
(normalized + dead letters = lines, no (source, position) twice); ``summary.json`` equals a
batch run (FnApiRunner) over every landed file, field by field; the window summaries add up
to it; no temporary file is left. Memory: RSS of convnorm and of Prism sampled every 5 s; in
each run, after a warm-up, the mean of the last third must be within 5% (or 16 MiB) of the
first third's (flat). Also printed: latency from landing to outputs (median, p95), records/s,
CPU, the restart's time to catch up, and the load average.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from corpus import MALFORMED_LINES, jsonl_lines  # noqa: E402
from proctree import cpu_and_rss  # noqa: E402

MIB = 1 << 20


class Lander(threading.Thread):
    """Lands files at random intervals until told to stop; remembers what it landed."""

    def __init__(self, landing: Path, rng: random.Random, mean_gap: float, max_records: int) -> None:
        super().__init__(daemon=True)
        self.landing = landing
        self.rng = rng
        self.mean_gap = mean_gap
        self.max_records = max_records
        self.stop_event = threading.Event()
        self.landed: dict[str, tuple[int, float]] = {}  # path -> (records, time landed)

    def run(self) -> None:
        index = 0
        while not self.stop_event.wait(min(self.rng.expovariate(1 / self.mean_gap), 6 * self.mean_gap)):
            count = self.rng.randint(1, self.max_records)
            lines = jsonl_lines(count, seed=10_000 + index)
            if self.rng.random() < 0.2:  # a malformed line now and then: a dead letter
                lines[self.rng.randrange(count)] = self.rng.choice([m for m in MALFORMED_LINES if m])
            data = b"".join(line + b"\n" for line in lines)
            name = f"soak-{index:05d}.jsonl"
            if self.rng.random() < 0.2:
                data, name = gzip.compress(data, mtime=0), name + ".gz"
            temp = self.landing / f".{name}.partial"
            temp.write_bytes(data)
            os.rename(temp, self.landing / name)
            self.landed[str(self.landing / name)] = (count, time.monotonic())
            index += 1


class Sampler(threading.Thread):
    """RSS and CPU of a process tree every ``every`` seconds."""

    def __init__(self, pid: int, every: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.every = every
        self.samples: list[tuple[float, float, int, dict[str, int]]] = []  # (time, cpu, rss, rss by name)
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.every):
            cpu, rss, _, by_name = cpu_and_rss(self.pid)
            if rss:
                self.samples.append((time.monotonic(), cpu, rss, by_name))


def _start(args, landing: Path, out: Path, log: Path) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-m",
        "pipeline",
        "--streaming",
        "--runner=PrismRunner",
        f"--prism_location={args.prism}",
        f"--input={landing}/*.jsonl",
        f"--input={landing}/*.jsonl.gz",
        f"--output={out}",
        f"--window={args.window}",
        f"--poll-interval={args.poll}",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with log.open("ab") as handle:
        return subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT, env=env)


def _wait_started(proc: subprocess.Popen, log: Path, since: int) -> None:
    while "convnorm: watching" not in log.read_text(errors="replace")[since:]:
        if proc.poll() is not None:
            raise SystemExit(f"convnorm exited at start:\n{log.read_text()}")
        time.sleep(0.2)


def _outputs(out: Path) -> dict[str, list[tuple[Path, dict]]]:
    found: dict[str, list[tuple[Path, dict]]] = {}
    for path in out.glob("*T*Z-*T*Z/*/source.json"):  # window directories, not a run's temporary one
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        found.setdefault(doc["source"], []).append((path.parent, doc))
    return found


def _memory_verdict(samples: list, warmup_s: float, name: str | None) -> tuple[float, float, bool]:
    """(first third MiB, last third MiB, flat) of one run's RSS after ``warmup_s``."""
    if not samples:
        return 0.0, 0.0, False
    start = samples[0][0] + warmup_s
    kept = [s for s in samples if s[0] >= start] or samples
    values = [(s[3].get(name, 0) if name else s[2]) / MIB for s in kept]
    third = max(1, len(values) // 3)
    first, last = statistics.mean(values[:third]), statistics.mean(values[-third:])
    return first, last, last - first <= max(0.05 * first, 16)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


def _check_records(out: Path, landed: dict[str, tuple[int, float]]) -> list[str]:
    """Every landed file once, with exactly its records; no (source, position) twice."""
    problems = []
    found = _outputs(out)
    for path, (count, _) in sorted(landed.items()):
        versions = found.get(path, [])
        if len(versions) != 1:
            problems.append(f"{path}: {len(versions)} outputs directories")
            continue
        directory, doc = versions[0]
        positions = []
        for kind in ("drops", "dead_letter"):
            with (directory / f"{kind}.jsonl").open("rb") as handle:
                positions += [json.loads(line)["position"] for line in handle]
        normalized = sum(1 for _ in (directory / "normalized.jsonl").open("rb"))
        drops = sum(1 for _ in (directory / "drops.jsonl").open("rb"))
        letters = len(positions) - drops
        if doc["totals"]["records_in"] != count or normalized + letters != count or len(set(positions)) != count:
            problems.append(
                f"{path}: {count} records landed; records_in {doc['totals']['records_in']}, "
                f"{normalized} normalized + {letters} dead letters, {len(set(positions))} distinct positions"
            )
    extra = sorted(set(found) - set(landed))
    if extra:
        problems.append(f"outputs of files never landed: {extra[:3]}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the soak (landing time)")
    parser.add_argument("--mean-gap", type=float, default=3.0, help="mean seconds between two files")
    parser.add_argument("--max-records", type=int, default=800, help="most conversations in one file")
    parser.add_argument("--down", type=float, default=20.0, help="seconds convnorm stays down after the kill")
    parser.add_argument("--poll", default="1s", help="--poll-interval")
    parser.add_argument("--window", default="60s", help="--window")
    parser.add_argument("--settle", type=float, default=300.0, help="most seconds to wait for the backlog at the end")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--prism", default=os.environ.get("CONVNORM_PRISM", str(ROOT / "build/prism/prism")))
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    if not os.access(args.prism, os.X_OK):
        raise SystemExit(f"no Prism binary at {args.prism}: run .ci/build-prism first")

    work = Path(tempfile.mkdtemp(prefix="convnorm-soak-"))
    landing, out, log = work / "landing", work / "out", work / "convnorm.log"
    landing.mkdir()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; work dir {work}", flush=True)
    rng = random.Random(args.seed)
    total_s = args.minutes * 60
    started = time.monotonic()

    proc = _start(args, landing, out, log)
    _wait_started(proc, log, 0)
    lander = Lander(landing, rng, args.mean_gap, args.max_records)
    lander.start()
    sampler = Sampler(proc.pid)
    sampler.start()

    kill_at = started + total_s / 2 + rng.uniform(-30, 30)
    while time.monotonic() < kill_at:
        time.sleep(1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = time.monotonic()
    sampler.stop_event.set()
    first_run = sampler.samples
    done_at_kill = len(_outputs(out))
    print(f"killed at {killed - started:.0f} s: {done_at_kill} file(s) done, {len(lander.landed)} landed", flush=True)
    time.sleep(args.down)

    since = len(log.read_text(errors="replace"))
    proc = _start(args, landing, out, log)
    restarted = time.monotonic()
    _wait_started(proc, log, since)
    sampler = Sampler(proc.pid)
    sampler.start()
    backlog = set(lander.landed)
    caught_up = None
    while time.monotonic() < started + total_s:
        if caught_up is None and backlog <= set(_outputs(out)):
            caught_up = time.monotonic() - restarted
        time.sleep(1)
    lander.stop_event.set()
    lander.join()
    landed = dict(lander.landed)
    deadline = time.monotonic() + args.settle
    while time.monotonic() < deadline and not set(landed) <= set(_outputs(out)):
        time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    try:
        status = proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        status = proc.wait()
    sampler.stop_event.set()
    second_run = sampler.samples
    load_end = os.getloadavg()

    # Latency: landing -> outputs visible, from the directories' times.
    found = _outputs(out)
    latencies = []
    wall_offset = time.time() - time.monotonic()
    for path, (_, landed_at) in landed.items():
        if path in found:
            visible = (found[path][0][0] / "source.json").stat().st_mtime - wall_offset
            # Files whose outputs came in the run they landed in (not those the restart read).
            if visible < killed or landed_at > restarted + 30:
                latencies.append(visible - landed_at)

    records = sum(count for count, _ in landed.values())
    problems = _check_records(out, landed)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    batch = work / "batch"
    batch_started = time.monotonic()
    files = sorted(landed)
    batch_status = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            *(f"--input={f}" for f in files),
            f"--output={batch}",
            "--quiet",
            "--no-report",
        ],
        cwd=ROOT,
        capture_output=True,
    ).returncode
    batch_s = time.monotonic() - batch_started
    reference = json.loads((batch / "summary.json").read_text()) if (batch / "summary.json").exists() else None
    same = summary == reference
    windows = list(out.glob("*/summary.json"))
    window_sum = sum(json.loads(p.read_text())["records_in"] for p in windows)
    leftovers = [str(p) for p in out.rglob("*") if p.name.startswith(".") or "_convnorm_temp-" in p.name]

    print(f"\nsoak of {args.minutes:g} min, poll {args.poll}, windows {args.window}, seed {args.seed}")
    print(
        f"landed: {len(landed)} files, {records:,} records (mean gap {args.mean_gap:g} s, 1-{args.max_records} "
        f"records a file); killed at {killed - started:.0f} s with {done_at_kill} files done; down {args.down:g} s; "
        f"the restart caught up with the backlog in {caught_up if caught_up is None else round(caught_up, 1)} s"
    )
    print(
        f"latency landing -> outputs (files landed while running): median {statistics.median(latencies):.2f} s, "
        f"p95 {_percentile(latencies, 0.95):.2f} s, max {max(latencies):.2f} s"
    )
    run_s = (killed - started) + (time.monotonic() - restarted)
    cpu = (first_run[-1][1] if first_run else 0) + (second_run[-1][1] if second_run else 0)
    print(
        f"throughput: {records / run_s:,.0f} records/s averaged over {run_s:.0f} s of running; CPU of convnorm + "
        f"Prism {100 * cpu / run_s:.1f}% of one core; batch over the same files: {batch_s:.0f} s"
    )
    for label, samples in (("run 1 (until the kill)", first_run), ("run 2 (after the restart)", second_run)):
        for name, shown in ((None, "tree"), ("python", "convnorm"), ("prism", "Prism")):
            first, last, flat = _memory_verdict(samples, 120, name)
            print(
                f"memory {label}, {shown}: {first:.0f} MiB (first third) -> {last:.0f} MiB (last third): "
                f"{'PASS' if flat else 'FAIL'} flat"
            )
    print(f"every record once: {'PASS' if not problems else 'FAIL'}" + "".join(f"\n  {p}" for p in problems[:10]))
    print(
        f"totals: summary.json records_in {summary.get('records_in')} of {records:,} landed, accounted "
        f"{summary.get('accounted')}; equal to the batch run's summary.json in every field: "
        f"{'PASS' if same and batch_status == 0 else 'FAIL'}"
    )
    print(
        f"window summaries: {len(windows)}, records_in summed {window_sum:,}: "
        f"{'PASS' if window_sum == records else 'FAIL'}"
    )
    print(
        f"drain: exit status {status}; temporary files left: {len(leftovers)}: "
        f"{'PASS' if status == 0 and not leftovers else 'FAIL'}"
    )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in load_end)}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
