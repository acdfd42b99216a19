"""Benchmark: what the dataset stages cost against a plain run, side by side in one run.

A report, not a test: it prints figures, ratios and PASS / MISS per target, and exits 0.

    python bench/bench_dataset.py                         # every part (~30 min on 2 busy cores)
    python bench/bench_dataset.py --records 20000 --big-records 0 --engine-records 0 --skip-dask
    python bench/bench_dataset.py --only big --big-records 1000000 --big-timeout 3600

One generated corpus (``bench/corpus.py``, seed 7; ``--corpus FILE``: that JSONL file), its
first N lines as one uncompressed JSONL file per size (the job cuts it into 64 MiB byte
ranges). Each run is ``python -m pipeline`` in its own subprocess, measured as in
``bench_pipeline.measure``: wall, CPU of the whole process tree (``wait4``), peak memory of the
tree (summed RSS polled from /proc). Parts:

- **dataset** (``--records``, 100,000): a plain run, ``--dedupe exact`` and ``--dedupe prefix
  --split eval=0.1 --split-by id``, interleaved ``--rounds`` times (the least CPU of each kept);
  targets: each <= 1.5x the plain run's CPU and <= 2x its peak memory;
- **engines** (``--engine-records``, 200,000): FnApiRunner in one process and in two
  (``--direct_num_workers=2 --direct_running_mode=multi_processing``), and (unless ``--skip-dask``)
  DaskRunner on convnorm's own local cluster of two workers; targets: two processes >= 1.6x one
  process's throughput (records per wall second) at <= 1.2x its CPU, DaskRunner <= 1.3x
  FnApiRunner's (one process) CPU; interleaved ``--rounds`` times, the fastest run of each kept
  (a busy machine slows some runs far more than others). The outputs of each are compared byte
  for byte;
- **big** (``--big-records``, 1,000,000): ``--dedupe prefix`` under ``ulimit -v 4000000`` (the
  job's address space capped at ~3.8 GiB), with a time box (``--big-timeout``); target: it finishes.

Every figure is printed beside the load average (1, 5, 15 minutes) before and after: on a busy
machine wall times move most, CPU times less, ratios measured in one run least.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_pipeline import _loadavg, measure, write_corpus  # noqa: E402

CPU_TARGET = 1.5
MEMORY_TARGET = 2.0
TWO_THROUGHPUT_TARGET = 1.6
TWO_CPU_TARGET = 1.2
DASK_CPU_TARGET = 1.3
#: ``ulimit -v`` of the big run, in KiB (as the shell takes it).
BIG_ULIMIT_KIB = 4_000_000


def _digest(directory: Path) -> str:
    """Every output's part files (names and bytes) and the summary, in name order."""
    sha = hashlib.sha256()
    for sub in sorted(p for p in directory.iterdir() if p.is_dir()):
        for path in sorted(sub.glob("part-*")):
            sha.update(f"{sub.name}/{path.name}".encode() + b"\0" + path.read_bytes())
    summary = directory / "summary.json"
    if summary.exists():
        sha.update(summary.read_bytes())
    return sha.hexdigest()[:12]


def _head(corpus: Path, records: int, out: Path) -> Path:
    """The corpus's first ``records`` lines, as one file (made once)."""
    if out.exists():
        return out
    with open(corpus, "rb") as source, open(out, "wb") as sink:
        for count, line in enumerate(source):
            if count >= records:
                break
            sink.write(line)
    return out


def _run(label: str, argv: list[str], work: Path, env: dict, timeout: float | None = None) -> dict:
    """``measure`` of one run (killed, process group and all, after ``timeout`` seconds)."""
    log = str(work / f"{label.replace(' ', '_').replace('/', '_')}.log")
    timer = None
    if timeout:
        # measure() starts the child; the timer kills it and every process under it.
        def kill() -> None:
            todo = _children_of(os.getpid())
            while todo:
                pid = todo.pop()
                todo += _children_of(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

        timer = threading.Timer(timeout, kill)
        timer.start()
    try:
        return measure(argv, log, env)
    finally:
        if timer is not None:
            timer.cancel()


def _children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def _row(label: str, run: dict, extra: str = "") -> None:
    if run["returncode"] != 0:
        print(f"   {label:<52} FAILED (exit {run['returncode']}; log {run['log']}) {extra}")
        return
    print(f"   {label:<52} {run['wall']:7.1f} {run['cpu']:7.1f} {run['peak_rss_mb']:9.0f} {extra}")


def _header() -> None:
    print(f"   {'variant':<52} {'wall s':>7} {'CPU s':>7} {'peak MiB':>9}")


def _verdict(value: float, target: float, most: bool = True) -> str:
    ok = value <= target if most else value >= target
    return f"{value:.2f}x ({'<=' if most else '>='} {target}x: {'PASS' if ok else 'MISS'})"


def dataset_part(args, corpus: Path, work: Path, env: dict) -> None:
    data = _head(corpus, args.records, work / f"records-{args.records}.jsonl")
    print(f"== dataset stages on {args.records:,} records ({data.stat().st_size / 2**20:.0f} MiB, one file)")
    print(f"   load average before: {_loadavg()}")
    base = [sys.executable, "-m", "pipeline", "--input", str(data), "--quiet", "--no-report", *args.flags]
    variants = [
        ("plain", []),
        ("--dedupe exact", ["--dedupe", "exact"]),
        (
            "--dedupe prefix --split eval=0.1 --split-by id",
            ["--dedupe", "prefix", "--split", "eval=0.1", "--split-by", "id"],
        ),
    ]
    best: dict[str, dict] = {}
    _header()
    for round_ in range(args.rounds):
        for label, flags in variants:
            out = work / f"out-{abs(hash(label)) % 10**6}"
            shutil.rmtree(out, ignore_errors=True)
            run = _run(label, [*base, "--output", str(out), *flags], work, env)
            _row(f"{label} (round {round_ + 1})", run, f"load {_loadavg()}")
            shutil.rmtree(out, ignore_errors=True)
            if run["returncode"] == 0 and (label not in best or run["cpu"] < best[label]["cpu"]):
                best[label] = run
    plain = best.get("plain")
    if plain is None:
        print("   the plain run failed: no ratios")
        return
    print(
        f"   best of {args.rounds}, against the plain run ({plain['cpu']:.1f} s CPU, {plain['peak_rss_mb']:.0f} MiB):"
    )
    for label, _ in variants[1:]:
        run = best.get(label)
        if run is None:
            print(f"   {label:<52} FAILED")
            continue
        print(
            f"   {label:<52} CPU {_verdict(run['cpu'] / plain['cpu'], CPU_TARGET)}, "
            f"peak memory {_verdict(run['peak_rss_mb'] / plain['peak_rss_mb'], MEMORY_TARGET)}"
        )
    print(f"   load average after: {_loadavg()}")


def engines_part(args, corpus: Path, work: Path, env: dict) -> None:
    records = args.engine_records
    data = _head(corpus, records, work / f"records-{records}.jsonl")
    print(f"== engines on {records:,} records ({data.stat().st_size / 2**20:.0f} MiB, one file)")
    print(f"   load average before: {_loadavg()}")
    base = [sys.executable, "-m", "pipeline", "--input", str(data), "--quiet", "--no-report", *args.flags]
    variants = [
        ("FnApiRunner, 1 process", []),
        ("FnApiRunner, 2 processes", ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]),
        *([] if args.skip_dask else [("DaskRunner, own local cluster (2 workers)", ["--runner", "DaskRunner"])]),
    ]
    if args.dask_only:
        variants = variants[-1:]
    runs: dict[str, dict] = {}
    digests: dict[str, str] = {}
    _header()
    for round_ in range(args.rounds):
        for label, flags in variants:
            out = work / f"engine-{abs(hash(label)) % 10**6}"
            shutil.rmtree(out, ignore_errors=True)
            run = _run(label, [*base, "--output", str(out), *flags], work, env)
            if run["returncode"] == 0:
                digests[label] = _digest(out)
                if label not in runs or run["wall"] < runs[label]["wall"]:  # the least disturbed
                    runs[label] = run
            _row(f"{label} (round {round_ + 1})", run, f"outputs {digests.get(label, '-')}  load {_loadavg()}")
            if run["returncode"] == 0 and run["processes"] > 1:
                shown = ", ".join(f"{name} {cpu:.1f}" for name, cpu in run["cpu_by_process"] if cpu >= 0.05)
                print(f"   {'':<52} CPU by process: {shown}")
            shutil.rmtree(out, ignore_errors=True)
    if args.rounds > 1:
        print(f"   the fastest of {args.rounds} rounds of each:")
    one = runs.get("FnApiRunner, 1 process")
    if one is None:
        return
    two = runs.get("FnApiRunner, 2 processes")
    if two is not None:
        print(
            "   two processes / one: throughput "
            f"{_verdict(one['wall'] / two['wall'], TWO_THROUGHPUT_TARGET, most=False)}, "
            f"CPU {_verdict(two['cpu'] / one['cpu'], TWO_CPU_TARGET)}"
        )
    dask = runs.get("DaskRunner, own local cluster (2 workers)")
    if dask is not None:
        print(f"   DaskRunner / FnApiRunner (1 process): CPU {_verdict(dask['cpu'] / one['cpu'], DASK_CPU_TARGET)}")
    if len(set(digests.values())) > 1:
        print(f"   OUTPUTS DIFFER: {digests}")
    elif digests:
        print("   every run the same bytes")
    print(f"   load average after: {_loadavg()}")


def big_part(args, corpus: Path, work: Path, env: dict) -> None:
    records = args.big_records
    data = _head(corpus, records, work / f"records-{records}.jsonl")
    print(
        f"== --dedupe prefix on {records:,} records ({data.stat().st_size / 2**20:.0f} MiB) "
        f"under ulimit -v {BIG_ULIMIT_KIB}"
    )
    print(f"   load average before: {_loadavg()}")
    out = work / "big-out"
    shutil.rmtree(out, ignore_errors=True)
    job = [sys.executable, "-m", "pipeline", "--input", str(data), "--quiet", "--no-report", "--dedupe", "prefix"]
    # exec: the shell becomes the job, so wait4's CPU and /proc's memory are the job's.
    shell = f"ulimit -v {BIG_ULIMIT_KIB} && exec " + " ".join(_quote(a) for a in [*job, "--output", str(out)])
    _header()
    run = _run("big", ["sh", "-c", shell], work, env, timeout=args.big_timeout)
    _row(f"--dedupe prefix, {records:,} records", run, f"load {_loadavg()}")
    print(f"   finished under the cap: {'PASS' if run['returncode'] == 0 else 'MISS'}")
    if run["returncode"] == 0:
        summary = json.loads((out / "summary.json").read_text())
        print(f"   summary: records in {summary.get('records_in')}, dedupe {summary.get('dedupe')}")
    shutil.rmtree(out, ignore_errors=True)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="records of the dataset part (100,000)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the dataset part, the best kept (1)")
    parser.add_argument(
        "--engine-records", type=int, default=200_000, help="records of the engines part (200,000; 0: skip)"
    )
    parser.add_argument(
        "--big-records", type=int, default=1_000_000, help="records of the big part (1,000,000; 0: skip)"
    )
    parser.add_argument("--big-timeout", type=float, default=3600, help="the big run's time box, seconds (3,600)")
    parser.add_argument("--skip-dask", action="store_true", help="the engines part without DaskRunner")
    parser.add_argument("--dask-only", action="store_true", help="the engines part with DaskRunner only")
    parser.add_argument("--only", choices=("dataset", "engines", "big"), help="one part only")
    parser.add_argument(
        "--flags", nargs=argparse.REMAINDER, default=[], help="more flags for every engines run (last on the line)"
    )
    parser.add_argument("--corpus", help="a JSONL file to take the records from (default: generated)")
    parser.add_argument("--work", help="keep the inputs in this directory (made if missing; reused)")
    args = parser.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="convnorm-bench-dataset-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    sizes = [args.records, args.engine_records, args.big_records]
    corpus = Path(args.corpus) if args.corpus else work / f"corpus-{max(sizes)}.jsonl"
    if not corpus.exists():
        print(f"writing {max(sizes):,} records to {corpus} ...", flush=True)
        write_corpus(corpus, max(sizes), seed=7)
    print(f"load average (1, 5, 15 min): {_loadavg()} on {os.cpu_count()} CPUs")
    try:
        if args.only in (None, "dataset") and args.records:
            dataset_part(args, corpus, work, env)
        if args.only in (None, "engines") and args.engine_records:
            engines_part(args, corpus, work, env)
        if args.only in (None, "big") and args.big_records:
            big_part(args, corpus, work, env)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
