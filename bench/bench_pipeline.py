"""Benchmark: the Beam job against a plain single-process loop doing identical work.

A report, not a test: it prints figures and PASS/FAIL per target, and exits 0 either way
(except when it cannot run at all).

    python bench/bench_pipeline.py             # full run (default --records, a few minutes)
    python bench/bench_pipeline.py --quick     # smoke run, a few seconds per variant
    python bench/bench_pipeline.py --records 100000 --keep   # keep the temp dir to inspect
    python bench/bench_pipeline.py --stages-only  # the per-record stage table alone (~1 min)

Stage table (``bench/stages.py``): in this process, before the job runs, the
CPU time per record of each stage of the per-record path (parse with the 64-bit guard,
detection and reader, the MEM-5 core, the rest: id, ledger, assembly, writer, serialization,
the batch) and the whole ``normalize_batch`` loop, each against an orjson ``loads`` + ``dumps`` round trip of
the same lines, on the project's corpus (OpenAI-shaped calls, defects) and on the same
conversations in the flat shape; after the job, the Beam share (job CPU - plain-loop CPU) and
the job's ratios. Stages are timed alone on prepared inputs, interleaved, median of 5: CPU
time, so a loaded machine skews them less than wall time (not nothing: caches and frequency
are shared). PASS / MISS per target.

One corpus is generated once (``bench/corpus.py``, seed 7: realistic conversations of 4-40
messages, ~5 KB per record, about a third with a defect) and written as ONE uncompressed
JSONL file. One file is deliberate: it is the common real-world layout, and the job cuts
uncompressed JSONL into byte ranges of ``--shard-bytes`` (default 64 MiB), so a single large
file still gives many shards to spread over workers (the table prints how many). The larger
input for the memory check is two hard links of that same file in another directory (2N
records in 2 files, no extra generation time, same per-record work).

Variants, each run as its own subprocess (so memory and CPU are measured per run):

(a) plain   — one Python process: read the file line by line, build ``RawRecord``s exactly as
              ``pipeline.io.text_containers`` does (source path, byte offset, the line's bytes), cut them
              into the job's batches (256 records or 256 KiB), call
              ``transforms.record.records.normalize_batch`` with ``Settings()`` as the job's DoFn does
              (the lines kept, not the records) and write normalized / drops / dead-letter
              JSONL files;
(b) fnapi   — ``python -m pipeline`` (that is ``pipeline.cli.main.main``) on FnApiRunner;
(c) fnapi×2 — the same with ``--direct_num_workers=2 --direct_running_mode=multi_processing``;
(b') fnapi on the 2N input, for the peak-memory ratio.

Times are wall-clock of the whole subprocess (interpreter start and imports included: that is
what a user waits for); the import cost of the pipeline is printed separately for reference.

Memory. Peak RSS must include child processes: with ``multi_processing`` the work happens in
SDK-worker subprocesses that the job process starts. ``getrusage(RUSAGE_CHILDREN).ru_maxrss``
(or ``wait4``'s rusage) is the maximum RSS of the *single largest* process in the tree, not
the sum, and for RUSAGE_CHILDREN it is a running maximum over every child ever waited for, so
its "deltas" are meaningless once an earlier run was bigger. So the headline figure polls
/proc every 100 ms and sums RSS over the whole process tree (the subprocess and all its
descendants), keeping the maximum. Summed RSS counts pages shared between processes (shared
libraries, the interpreter) once per process, so PSS (proportional set size, from
/proc/PID/smaps_rollup) is printed too. As a cross-check, the largest single process's own
high-water mark (VmHWM in /proc/PID/status, exact, not sampled) is printed. Not ``wait4``'s
ru_maxrss: subprocess starts children with vfork, and Linux records the *parent's* RSS
high-water mark into the child's maxrss at exec, so a child of a parent that imported Beam
reports >= the parent's ~125 MB even for a 20 MB loop. Polling can miss a spike shorter than
the interval; for a job whose memory grows with buffered data that is not a concern.

Correctness: the job's ``normalized/part-*.jsonl`` (and ``drops/part-*.jsonl``), concatenated
in file-name order, must be byte-identical to the plain loop's output; the script compares
SHA-256 digests and prints the result, and checks ``summary.json`` (``accounted``, counts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

#: Targets (ratios of wall time to the plain loop, and of peak memory 2N / N).
TARGET_FNAPI = 2.0
TARGET_MULTI = 1.2
#: "Flat" peak memory: doubling the input may raise the peak by at most this factor.
TARGET_MEMORY = 1.25
#: Two workers' throughput over one worker's, on 2 idle cores, for both layouts.
TARGET_SCALING = 1.7
#: The many-small-files layout: the same corpus cut into this many files (--files).
DEFAULT_FILES = 64
QUICK_FILES = 16

#: Default corpus size: the plain loop takes ~25-30 s on a 2-core machine (~1 GB of JSONL).
DEFAULT_RECORDS = 200_000
QUICK_RECORDS = 5_000
QUICK_SHARD_BYTES = 4 << 20

POLL_SECONDS = 0.1
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# --------------------------------------------------------------------------------------------
# Child mode (a): the plain loop. Runs in its own process, prints one JSON line of counts.


def plain_loop(paths: list[str], out_dir: str) -> dict:
    from transforms.core.jsontext import dumps_line
    from transforms.record.inputs import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_SIZE, RawRecord, batch_is_full
    from transforms.record.record_settings import Settings
    from transforms.record.record_steps import ReaderHint
    from transforms.record.records import normalize_batch

    settings = Settings()
    counts = {"records": 0, "blank_lines": 0, "records_out": 0, "dead_letters": 0}
    os.makedirs(out_dir, exist_ok=True)
    with (
        open(os.path.join(out_dir, "normalized.jsonl"), "wb") as normalized,
        open(os.path.join(out_dir, "drops.jsonl"), "wb") as drops,
        open(os.path.join(out_dir, "dead_letter.jsonl"), "wb") as dead,
    ):

        def flush(batch: list) -> None:
            # As the job's DoFn and writers do: a batch at a time, its lines written as made.
            result = normalize_batch(batch, settings, taken={}, keep_records=False, hint=hint)
            counts["records_out"] += len(result.lines)
            counts["dead_letters"] += len(result.dead_letters)
            normalized.write(b"".join(line + b"\n" for line in result.lines))
            drops.write(b"".join(dumps_line(m) + b"\n" for m in result.metrics))
            dead.write(b"".join(dumps_line(d) + b"\n" for d in result.dead_letters))

        for path in paths:
            hint = ReaderHint()  # one per file, as the job's DoFn keeps it
            with open(path, "rb") as handle:
                position, batch, size = 0, [], 0
                for line in handle:  # splits on b"\n" only, like the job's readline()
                    if line.strip():
                        counts["records"] += 1
                        batch.append(RawRecord(path, position, line))
                        size += len(line)
                        if batch_is_full(len(batch), size, DEFAULT_BATCH_SIZE, DEFAULT_BATCH_BYTES):
                            flush(batch)
                            batch, size = [], 0
                    else:
                        counts["blank_lines"] += 1
                    position += len(line)
                if batch:
                    flush(batch)
    return counts


# --------------------------------------------------------------------------------------------
# Measuring a subprocess: wall time, CPU, peak tree RSS / PSS


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        # Field 4 is the parent pid; the command name (field 2) may hold spaces and ')'.
        ppid = int(data[data.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_and_name(pid: int) -> tuple[float, str] | None:
    """(user+sys CPU seconds, short label) of one process, from /proc/PID/stat and cmdline."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14, 15)
    text = b" ".join(argv).decode(errors="replace")
    # Beam's worker command, convnorm's (-m pipeline.runners.sdk_worker), the portable worker pool.
    if "sdk_worker" in text or "worker_pool_main" in text:
        label = "sdk worker"
    elif "-m pipeline" in text:
        label = "job"
    elif "multiprocessing.spawn" in text:
        label = "dask worker"  # a Dask nanny's worker process (bench_scale.py's DaskRunner runs)
    elif text.strip():
        label = os.path.basename(argv[0].decode(errors="replace")) or "?"
    else:
        label = "?"
    return cpu, label


def _tree(root: int) -> list[int]:
    children = _children_map()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, ()))
    return pids


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return 0


class TreeMemory(threading.Thread):
    """Polls the process tree under ``pid``; keeps the peak of summed RSS and of summed PSS."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_rss_kb = 0
        self.peak_pss_kb = 0
        self.max_processes = 0
        self.max_single_hwm_kb = 0
        #: pid -> (label, last seen CPU seconds): where the CPU went, per process.
        self.cpu_by_pid: dict[int, tuple[str, float]] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            pids = _tree(self.pid)
            self.max_processes = max(self.max_processes, len(pids))
            self.peak_rss_kb = max(self.peak_rss_kb, sum(_rss_kb(p) for p in pids))
            self.peak_pss_kb = max(self.peak_pss_kb, sum(_pss_kb(p) for p in pids))
            self.max_single_hwm_kb = max(self.max_single_hwm_kb, *(_hwm_kb(p) for p in pids))
            for pid in pids:
                seen = _cpu_and_name(pid)
                if seen is not None:
                    # An exiting process has no command line any more: keep the label it had.
                    label = self.cpu_by_pid.get(pid, ("?",))[0] if seen[1] == "?" else seen[1]
                    self.cpu_by_pid[pid] = (label, seen[0])
            self._done.wait(POLL_SECONDS)

    def stop(self) -> None:
        self._done.set()
        self.join()


def measure(argv: list[str], log_path: str, env: dict) -> dict:
    """Run ``argv`` to completion; wall seconds, CPU seconds, memory peaks, exit status."""
    with open(log_path, "wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO), env=env)
        poller = TreeMemory(proc.pid)
        poller.start()
        # wait4 gives this child's own rusage (its waited-for descendants included): CPU time.
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        poller.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": poller.peak_rss_kb / 1024,
        "peak_pss_mb": poller.peak_pss_kb / 1024,
        "max_single_rss_mb": poller.max_single_hwm_kb / 1024,
        "processes": poller.max_processes,
        "cpu_by_process": sorted(poller.cpu_by_pid.values(), key=lambda item: -item[1]),
        "returncode": proc.returncode,
        "log": log_path,
    }


# --------------------------------------------------------------------------------------------
# Corpus and checks


def write_corpus(path: Path, records: int, seed: int) -> int:
    """Stream ``records`` conversations to ``path`` (same bytes as ``corpus.jsonl_lines``)."""
    import orjson
    from corpus import conversations

    with open(path, "wb", buffering=1 << 20) as handle:
        for record in conversations(records, seed):
            handle.write(orjson.dumps(record) + b"\n")
    return path.stat().st_size


def split_corpus(corpus: Path, directory: Path, files: int) -> int:
    """Cut ``corpus`` into ``files`` JSONL files of consecutive lines (about equal record counts)."""
    with open(corpus, "rb") as handle:
        lines = handle.readlines()
    for k in range(files):
        with open(directory / f"part-{k:04d}.jsonl", "wb") as out:
            out.writelines(lines[len(lines) * k // files : len(lines) * (k + 1) // files])
    return files


def digest(paths: list[Path]) -> tuple[str, int]:
    sha = hashlib.sha256()
    size = 0
    for path in paths:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                sha.update(chunk)
                size += len(chunk)
    return sha.hexdigest(), size


def parts(directory: Path) -> list[Path]:
    return sorted(directory.glob("part-*.jsonl"), key=lambda p: p.name)


def tail(path: str, lines: int = 25) -> str:
    with open(path, "rb") as handle:
        return b"\n".join(handle.read().splitlines()[-lines:]).decode(errors="replace")


# --------------------------------------------------------------------------------------------
# The report


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _fmt_row(cells: list, widths: list[int]) -> str:
    return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))


def run_bench(args) -> int:
    records = QUICK_RECORDS if args.quick and args.records is None else (args.records or DEFAULT_RECORDS)
    python = sys.executable
    work = Path(tempfile.mkdtemp(prefix="convnorm-bench-", dir=args.tmp))
    env = dict(os.environ)
    # SDK-worker subprocesses (multi_processing) unpickle DoFns from pipeline/ and transforms/.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("PYTHONHASHSEED", "0")
    try:
        from pipeline.io.planning import plan_shards
        from transforms.record.inputs import DEFAULT_SHARD_BYTES

        in_n, in_2n, in_many = work / "in_n", work / "in_2n", work / "in_many"
        in_n.mkdir()
        in_2n.mkdir()
        in_many.mkdir()
        corpus = in_n / "corpus.jsonl"
        print(
            f"convnorm benchmark: {records:,} records{' (quick)' if args.quick else ''}, "
            f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, temp dir {work}",
            flush=True,
        )
        print(
            f"load average before: {_loadavg()} (other processes on the machine skew wall times; "
            "CPU seconds are less sensitive)",
            flush=True,
        )
        started = time.perf_counter()
        size = write_corpus(corpus, records, args.seed)
        print(
            f"corpus: 1 file, {size / 2**20:,.1f} MiB ({size / records:,.0f} B/record), "
            f"generated in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        for name in ("corpus-a.jsonl", "corpus-b.jsonl"):
            os.link(corpus, in_2n / name)
        split_corpus(corpus, in_many, args.files)
        shards_n = len(plan_shards([str(in_n / "*.jsonl")], args.shard_bytes))
        shards_2n = len(plan_shards([str(in_2n / "*.jsonl")], args.shard_bytes))
        print(
            f"layout: N = 1 file -> {shards_n} shard(s); 2N = 2 hard links of it -> {shards_2n} shard(s) "
            f"(--shard-bytes {args.shard_bytes:,}{' = default' if args.shard_bytes == DEFAULT_SHARD_BYTES else ''})",
            flush=True,
        )
        print(
            f"layout: many small files = the same records in {args.files} files of "
            f"~{size / args.files / 2**20:,.1f} MiB -> {args.files} shard(s)",
            flush=True,
        )

        tables = {} if args.no_stages else print_stages(args)

        imports = measure([python, "-c", "import pipeline.cli.commands"], str(work / "imports.log"), env)

        def best_of(name: str, argv: list[str]) -> dict:
            # --repeat K: keep the fastest of K runs (the least disturbed by other load).
            results = [measure(argv, str(work / f"{name}.{i}.log"), env) for i in range(args.repeat)]
            best = min(results, key=lambda r: r["wall"] if r["returncode"] == 0 else float("inf"))
            if args.repeat > 1:
                walls = ", ".join("%.1f" % r["wall"] for r in results)
                print(f"  {name}: wall s of {args.repeat} runs: {walls}", flush=True)
            return best

        def pipeline_run(name: str, inputs: Path, extra: list[str]) -> dict:
            out = work / f"out_{name}"
            argv = [
                python,
                "-m",
                "pipeline",
                "--input",
                str(inputs / "*.jsonl"),
                "--output",
                str(out),
                # No report.html: the plain loop writes none, and the job is what is measured.
                f"--shard-bytes={args.shard_bytes}",
                "--overwrite",
                "--no-report",
                *extra,
            ]
            print(f"running {name}: {' '.join(argv[1:])}", flush=True)
            result = best_of(name, argv)
            result["out"] = out
            return result

        runs: dict[str, dict] = {}
        plain_out = work / "out_plain"
        print("running plain: single-process loop", flush=True)
        plain_argv = [python, str(Path(__file__).resolve()), "--_plain", str(plain_out), str(corpus)]
        runs["plain"] = best_of("plain", plain_argv)
        runs["fnapi"] = pipeline_run("fnapi", in_n, [])
        runs["fnapi_x2"] = pipeline_run("fnapi_x2", in_n, TWO_WORKERS)
        runs["fnapi_2N"] = pipeline_run("fnapi_2N", in_2n, [])
        runs["fnapi_x2_2N"] = pipeline_run("fnapi_x2_2N", in_2n, TWO_WORKERS)
        runs["many"] = pipeline_run("many", in_many, [])
        runs["many_x2"] = pipeline_run("many_x2", in_many, TWO_WORKERS)

        failed = [name for name, r in runs.items() if r["returncode"] != 0]
        for name in failed:
            print(f"\n!! {name} exited with status {runs[name]['returncode']}; last lines of {runs[name]['log']}:")
            print(tail(runs[name]["log"]))

        # ---- correctness -------------------------------------------------------------------
        plain_counts = json.loads((plain_out / "counts.json").read_text()) if "plain" not in failed else {}
        want_norm = digest([plain_out / "normalized.jsonl"]) if "plain" not in failed else None
        want_drops = digest([plain_out / "drops.jsonl"]) if "plain" not in failed else None
        checks = []
        for name in ("fnapi", "fnapi_x2", "fnapi_2N", "fnapi_x2_2N"):
            r = runs[name]
            if name in failed:
                checks.append((name, "not run (job failed)", False))
                continue
            summary = json.loads((r["out"] / "summary.json").read_text())
            n_expected = plain_counts.get("records", 0) * (2 if name.endswith("_2N") else 1)
            ok_summary = summary.get("accounted") is True and summary.get("records_in") == n_expected
            if name.endswith("_2N"):
                # Two copies of the same file: each half must equal the plain output.
                norm_files = parts(r["out"] / "normalized")
                ok = ok_summary and digest(norm_files)[1] == 2 * want_norm[1]
                checks.append(
                    (
                        name,
                        f"summary accounted={summary.get('accounted')} records_in="
                        f"{summary.get('records_in')} (want {n_expected}); normalized bytes "
                        f"{'= 2x plain' if ok else 'differ from 2x plain'}",
                        ok,
                    )
                )
                continue
            got_norm = digest(parts(r["out"] / "normalized"))
            got_drops = digest(parts(r["out"] / "drops"))
            dead = sum(1 for p in parts(r["out"] / "dead_letter") for _ in open(p, "rb"))
            ok = (
                got_norm == want_norm
                and got_drops == want_drops
                and ok_summary
                and dead == plain_counts.get("dead_letters")
            )
            checks.append(
                (
                    name,
                    f"normalized {'IDENTICAL' if got_norm == want_norm else 'DIFFERENT'} "
                    f"({len(parts(r['out'] / 'normalized'))} part files, {got_norm[1]:,} B, sha256 "
                    f"{got_norm[0][:12]}); drops {'IDENTICAL' if got_drops == want_drops else 'DIFFERENT'}; "
                    f"dead letters {dead} (plain {plain_counts.get('dead_letters')}); summary accounted="
                    f"{summary.get('accounted')} records_in={summary.get('records_in')}",
                    ok,
                )
            )

        if not {"many", "many_x2"} & set(failed):
            # Other sources and offsets than the plain loop's: one worker against two.
            one, two = (digest(parts(runs[n]["out"] / "normalized")) for n in ("many", "many_x2"))
            checks.append(
                (
                    "many_x2",
                    f"normalized of {args.files} files, 2 workers vs 1 worker: "
                    f"{'IDENTICAL' if one == two else 'DIFFERENT'} ({one[1]:,} B)",
                    one == two,
                )
            )

        # ---- table ---------------------------------------------------------------------------
        base = runs["plain"]["wall"]
        labels = {
            "plain": "(a) plain loop, 1 process",
            "fnapi": "(b) FnApiRunner",
            "fnapi_x2": "(c) FnApiRunner, 2 workers (multi_processing)",
            "fnapi_2N": "(b') FnApiRunner, 2N input",
            "fnapi_x2_2N": "(c') 2 workers, 2N input",
            "many": f"(d) FnApiRunner, {args.files} small files",
            "many_x2": f"(e) 2 workers, {args.files} small files",
        }
        base_cpu = runs["plain"]["cpu"]
        header = [
            "run",
            "records",
            "wall s",
            "records/s",
            "x plain",
            "CPU s",
            "CPU x plain",
            "peak tree RSS MB",
            "peak tree PSS MB",
            "max 1-proc HWM MB",
            "procs",
        ]
        rows = []
        for name, r in runs.items():
            n = records * (2 if name.endswith("_2N") else 1)
            rows.append(
                [
                    labels[name],
                    f"{n:,}",
                    f"{r['wall']:.1f}",
                    f"{n / r['wall']:,.0f}",
                    f"{r['wall'] / base:.2f}",
                    f"{r['cpu']:.1f}",
                    f"{r['cpu'] / base_cpu:.2f}",
                    f"{r['peak_rss_mb']:,.0f}",
                    f"{r['peak_pss_mb']:,.0f}",
                    f"{r['max_single_rss_mb']:,.0f}",
                    r["processes"],
                ]
            )
        widths = [max(len(str(x[i])) for x in [header, *rows]) for i in range(len(header))]
        print()
        print(_fmt_row(header, widths))
        print("  ".join("-" * w for w in widths))
        for row in rows:
            print(_fmt_row(row, widths))
        for name, r in runs.items():
            if r["processes"] > 1:
                shares = ", ".join(f"{label} {cpu:.1f}" for label, cpu in r["cpu_by_process"] if cpu >= 0.05)
                print(f"{labels[name]}: CPU s by process (last sample before exit): {shares}")
        print(
            f"(pipeline import alone: {imports['wall']:.1f} s wall, {imports['cpu']:.1f} s CPU, "
            f"{imports['peak_rss_mb']:.0f} MB; times are whole-subprocess wall clock; CPU = user+sys of the "
            f"process tree; load average after: {_loadavg()})"
        )

        b_ratio = runs["fnapi"]["wall"] / base
        c_ratio = runs["fnapi_x2"]["wall"] / base
        mem_ratio = runs["fnapi_2N"]["peak_rss_mb"] / runs["fnapi"]["peak_rss_mb"]
        pss_ratio = runs["fnapi_2N"]["peak_pss_mb"] / runs["fnapi"]["peak_pss_mb"]
        print()
        print_scaling(runs, labels)
        print()
        print("targets:")
        print(
            f"  b/a  FnApiRunner / plain           {b_ratio:5.2f}  (<= {TARGET_FNAPI})  "
            f"{'PASS' if b_ratio <= TARGET_FNAPI and 'fnapi' not in failed else 'FAIL'}"
        )
        print(
            f"  c/a  2 workers / plain             {c_ratio:5.2f}  (<= {TARGET_MULTI})  "
            f"{'PASS' if c_ratio <= TARGET_MULTI and 'fnapi_x2' not in failed else 'FAIL'}"
        )
        print(
            f"  mem  peak tree RSS 2N / N (b)      {mem_ratio:5.2f}  (<= {TARGET_MEMORY}, flat)  "
            f"{'PASS' if mem_ratio <= TARGET_MEMORY and 'fnapi_2N' not in failed else 'FAIL'}"
            f"   [PSS ratio {pss_ratio:.2f}]"
        )
        mem_x2 = runs["fnapi_x2_2N"]["peak_rss_mb"] / runs["fnapi_x2"]["peak_rss_mb"]
        print(
            f"  mem  peak tree RSS 2N / N (c)      {mem_x2:5.2f}  (<= {TARGET_MEMORY}, flat)  "
            f"{'PASS' if mem_x2 <= TARGET_MEMORY and 'fnapi_x2_2N' not in failed else 'FAIL'}"
        )
        for one, two, layout in (("fnapi", "fnapi_x2", "one large file"), ("many", "many_x2", "many small files")):
            ratio = runs[one]["wall"] / runs[two]["wall"]
            ok = ratio >= TARGET_SCALING and not {one, two} & set(failed)
            print(
                f"  x2   2 workers / 1, {layout:<16} {ratio:5.2f}  (>= {TARGET_SCALING}, throughput, "
                f"2 idle cores)  {'PASS' if ok else 'MISS'}   [load average now {_loadavg()}]"
            )
        if args.quick:
            print(
                "  (--quick: the job's fixed start-up, ~2 s of imports and graph building, dominates a small "
                "corpus; the time targets are meant for the full size)"
            )
        print()
        print("correctness (pipeline part files concatenated in name order vs plain loop output):")
        for name, text, ok in checks:
            print(f"  {'PASS' if ok else 'FAIL'}  {name}: {text}")
        if "fnapi" not in failed and "plain" not in failed and tables:
            from stages import print_stage_table

            # The job's CPU without its start-up (the import measured above): the per-record cost.
            print_stage_table(
                "project corpus, with the job (job CPU minus the pipeline import)",
                tables["project (OpenAI-shaped)"],
                job_us=(runs["fnapi"]["cpu"] - imports["cpu"]) / records * 1e6,
                loop_us=runs["plain"]["cpu"] / records * 1e6,
            )
            print(f"  (load average now: {_loadavg()})")
        print(f"\ntotal bench time {time.perf_counter() - started:.0f} s")
        if args.keep:
            print(f"kept {work}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


TWO_WORKERS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def print_scaling(runs: dict, labels: dict) -> None:
    """Two workers against one, per layout: wall ratio (the target; load skews it) and where the
    CPU went, which load skews less: the job process (driver: start-up, graph, runner) and
    each SDK worker. ``balance`` is the busier worker's CPU over the mean of the two (1.00:
    even); ``bound`` is the speed-up the CPU split allows on 2 idle cores, one worker's CPU
    over (driver CPU + the busier worker's CPU), pessimistic since the driver also overlaps."""
    print("two workers against one (multi_processing; CPU s from /proc, last sample before exit):")
    for one, two in (("fnapi", "fnapi_x2"), ("many", "many_x2")):
        a, b = runs[one], runs[two]
        job = sum(cpu for label, cpu in b["cpu_by_process"] if label == "job")
        # (The shell that Beam starts each worker through is labelled too; it spends ~0.)
        workers = sorted(
            (cpu for label, cpu in b["cpu_by_process"] if label == "sdk worker" and cpu >= 0.05), reverse=True
        )
        busiest = workers[0] if workers else 0.0
        balance = busiest / (sum(workers[:2]) / 2) if len(workers) >= 2 and sum(workers[:2]) else float("nan")
        bound = a["cpu"] / (job + busiest) if job + busiest else float("nan")
        print(
            f"  {labels[two]}: wall x{a['wall'] / b['wall']:.2f} of one worker's throughput; CPU {b['cpu']:.1f} s vs "
            f"{a['cpu']:.1f} s (x{b['cpu'] / a['cpu']:.2f}); driver {job:.1f} s, workers "
            f"{', '.join(f'{w:.1f}' for w in workers)} s; balance {balance:.2f}; bound x{bound:.2f}"
        )


def print_stages(args) -> dict:
    """The stage table on both corpora (this process); returns the tables."""
    from stages import corpora, print_stage_table, stage_table

    n = args.stage_records or (1_000 if args.quick else 5_000)
    print(f"per-record stages: {n:,} records per corpus; load average {_loadavg()}", flush=True)
    tables = {}
    for label, lines in corpora(n, args.seed).items():
        tables[label] = stage_table(lines)
        print_stage_table(label, tables[label])
    print(f"  (load average after the stages: {_loadavg()})", flush=True)
    return tables


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--_plain":  # child mode (a): OUT_DIR INPUT...
        out_dir, paths = argv[1], argv[2:]
        result = plain_loop(paths, out_dir)
        counts_path = os.path.join(out_dir, "counts.json")
        with open(counts_path, "w") as handle:
            json.dump(result, handle)
        print(counts_path)
        return 0
    from transforms.record.inputs import DEFAULT_SHARD_BYTES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records",
        type=int,
        default=None,
        help=f"records in the corpus (N); default {DEFAULT_RECORDS:,}, {QUICK_RECORDS:,} with --quick",
    )
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed")
    parser.add_argument(
        "--shard-bytes",
        type=int,
        default=None,
        help="passed to the job; default the job's own (64 MiB), 4 MiB with --quick "
        "so that the small corpus still splits into several shards",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each variant K times and report the fastest (noisy, shared machines)"
    )
    parser.add_argument("--tmp", default=None, help="parent directory for the temp dir")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (corpus, outputs, logs)")
    parser.add_argument("--stages-only", action="store_true", help="print the per-record stage table and stop")
    parser.add_argument("--no-stages", action="store_true", help="skip the per-record stage table (jobs only)")
    parser.add_argument(
        "--files",
        type=int,
        default=None,
        help=f"files of the many-small-files layout (default {DEFAULT_FILES}; {QUICK_FILES} with --quick)",
    )
    parser.add_argument(
        "--stage-records",
        type=int,
        default=None,
        help="records per corpus for the stage table (default 5,000; 1,000 with --quick)",
    )
    args = parser.parse_args(argv)
    if args.stages_only:
        print_stages(args)
        return 0
    if args.shard_bytes is None:
        args.shard_bytes = QUICK_SHARD_BYTES if args.quick else DEFAULT_SHARD_BYTES
    if args.files is None:
        args.files = QUICK_FILES if args.quick else DEFAULT_FILES
    return run_bench(args)


if __name__ == "__main__":
    sys.exit(main())
