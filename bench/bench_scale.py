"""Benchmark: convnorm at scale — many input files — and the engines on one input.

A report, not a test: it prints figures and PASS / MISS per target, and exits 0 either way.

    python bench/bench_scale.py                      # both parts: 100,000 files, then the engines
    python bench/bench_scale.py --files 20000        # a smaller first part
    python bench/bench_scale.py --skip-scale         # the engines only
    python bench/bench_scale.py --skip-scale --engine-input samples/conversations.jsonl

Part 1, planning and finalizing (the targets, at 100,000 small local files): the job
runs in this process on FnApiRunner (``pipeline.cli.main.main``), its phases timed by wrapping the
functions that do them: options and planning (``load_job``: matching the patterns, planning the
shards), building the graph (``construct_pipeline``), the runner's start until the first record
is read (the first ``read_shard`` call), the run, and finalizing (``outputs.finalize`` and the
manifest). Targets: **launcher** (everything before the first record is read) under 10 s, and
**finalize** under 10 s. Each file holds two small records (a few hundred bytes), so the
figures are about the number of files, not about the records.

Part 2, the engines on one input: ``--engine-records`` realistic records (``bench/corpus.py``,
~5 KB each) cut into ``--engine-files`` files, run as subprocesses by

- FnApiRunner, one process;
- FnApiRunner, two worker processes (``--direct_num_workers=2 --direct_running_mode=multi_processing``);
- FnApiRunner, one process, ``--dedupe exact`` (its bytes compared with its own kind's only);
- DaskRunner on convnorm's own local cluster (two worker processes of one thread: this machine's cores);

(``--engine-input FILE``: that file instead of generated records; ``--skip-dask``: no DaskRunner.)

each: wall time, CPU time of the whole process tree (the job, its workers, Dask's scheduler,
nannies and workers), peak memory of the tree (summed RSS polled from /proc; from
``bench_pipeline.measure``), and the outputs compared byte for byte with the first run's.
Wall times move with the machine's load: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_pipeline import _loadavg, measure, split_corpus, write_corpus  # noqa: E402

#: The targets at 100,000 small local files.
LAUNCHER_TARGET_S = 10.0
FINALIZE_TARGET_S = 10.0
#: Two small records per file.
SMALL_FILE = (
    b'{"id": "a", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n'
    b'{"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "x", "tool_call_id": "c"}]}\n'
)


def make_small_files(directory: Path, count: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    present = {p.name for p in directory.iterdir()}
    for i in range(count):
        name = f"f{i:06d}.jsonl"
        if name not in present:
            (directory / name).write_bytes(SMALL_FILE)


class Phases:
    """Wall-clock marks of one in-process run, set by wrappers around the job's functions."""

    def __init__(self) -> None:
        self.marks: dict[str, float] = {}

        self.cpu: dict[str, float] = {}

    def mark(self, name: str) -> None:
        if name not in self.marks:
            self.marks[name] = time.perf_counter()
            self.cpu[name] = time.process_time()  # this process, all threads, user + system

    def wrap(self, module, name: str, before: str | None, after: str | None) -> None:
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            if before:
                self.mark(before)
            try:
                return original(*args, **kwargs)
            finally:
                if after:
                    self.mark(after)

        setattr(module, name, wrapper)


def run_in_process(input_dir: Path, output: Path) -> dict:
    """The job on ``input_dir/*.jsonl`` in this process, phases timed (see the module docstring)."""
    import pipeline.cli.commands
    import pipeline.cli.main
    import pipeline.execution.execute
    import pipeline.execution.finalize
    import pipeline.io.read_shard

    phases = Phases()
    phases.wrap(pipeline.cli.commands, "load_job", "start", "planned")
    phases.wrap(pipeline.execution.execute, "construct_pipeline", None, "built")
    phases.wrap(pipeline.io.read_shard, "read_shard", "first_read", None)
    phases.wrap(pipeline.cli.commands, "run_pipeline", "run_start", "run_end")
    phases.wrap(pipeline.execution.finalize, "finalize", "finalize_start", None)
    phases.wrap(pipeline.execution.finalize, "write_manifest", None, "manifest_end")
    started = time.perf_counter()
    cpu = time.process_time()
    status = pipeline.cli.main.main(
        ["--input", str(input_dir / "*.jsonl"), "--output", str(output), "--quiet", "--no-report"]
    )
    m, c = phases.marks, phases.cpu
    m["begin"], c["begin"] = started, cpu

    def span(a: str, b: str) -> tuple[float, float]:
        return m[b] - m[a], c[b] - c[a]

    return {
        "status": status,
        "wall": time.perf_counter() - started,
        "cpu": time.process_time() - cpu,
        "planning": span("start", "planned"),
        "graph": span("planned", "built"),
        "to_first_read": span("built", "first_read"),
        "launcher": span("begin", "first_read"),
        "run": span("run_start", "run_end"),
        "finalize": span("finalize_start", "manifest_end"),
    }


def _import_seconds() -> tuple[float, float]:
    """(wall, CPU) of a fresh interpreter importing the command, as ``convnorm`` starts."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import pipeline.cli.main as c; c.quiet_beam_noise(); c.import_beam_without_pandas(); "
            "import pipeline.cli.commands",
        ],
        check=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - started, cpu


def scale_part(args, work: Path) -> None:
    input_dir = Path(args.input_dir) if args.input_dir else work / "small-files"
    print(f"== Part 1: {args.files:,} small files ({input_dir}), in process, FnApiRunner")
    started = time.perf_counter()
    make_small_files(input_dir, args.files)
    print(f"   input ready in {time.perf_counter() - started:.1f} s; load average {_loadavg()}")
    output = work / "scale-out"
    imports = _import_seconds()
    result = run_in_process(input_dir, output)
    shutil.rmtree(output, ignore_errors=True)
    print(f"   exit status {result['status']}; wall {result['wall']:.1f} s, CPU of this process {result['cpu']:.1f} s")
    launcher_wall, launcher_cpu = result["launcher"]
    rows = [
        ("imports (a fresh interpreter)", imports, None),
        ("options + planning (match, shards)", result["planning"], None),
        ("graph built (Beam's apply)", result["graph"], None),
        ("runner start -> first record read", result["to_first_read"], None),
        ("launcher: main() -> first record read", result["launcher"], None),
        (
            "launcher with imports: command -> first record",
            (launcher_wall + imports[0], launcher_cpu + imports[1]),
            LAUNCHER_TARGET_S,
        ),
        ("the run (Pipeline.run to its end)", result["run"], None),
        ("finalize (moves, checks, summary, manifest)", result["finalize"], FINALIZE_TARGET_S),
    ]
    print(f"   {'phase':<46} {'wall s':>8} {'CPU s':>8}")
    for label, (seconds, cpu), target in rows:
        verdict = (
            "" if target is None else ("  PASS" if seconds < target else "  MISS") + f" (target < {target:g} s wall)"
        )
        print(f"   {label:<46} {seconds:8.2f} {cpu:8.2f}{verdict}")
    print("   (CPU: this process, user + system; on a loaded machine wall waits for the CPU, CPU does not)")
    print(f"   load average after: {_loadavg()}")


def _tree_digest(directory: Path) -> str:
    digest = hashlib.sha256()
    for name in ("normalized", "drops", "dead_letter"):
        for path in sorted((directory / name).glob("part-*")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update((directory / "summary.json").read_bytes())
    return digest.hexdigest()


def engines_part(args, work: Path) -> None:
    corpus_dir = work / "engine-input"
    if args.engine_input:
        corpus_dir.mkdir(exist_ok=True)
        shutil.copy(args.engine_input, corpus_dir / "input.jsonl")
        print(f"== Part 2: the engines on {args.engine_input}")
    else:
        print(f"== Part 2: the engines on {args.engine_records:,} records in {args.engine_files} files")
    if not corpus_dir.exists() or not any(corpus_dir.iterdir()):
        corpus_dir.mkdir(exist_ok=True)
        corpus_dir.mkdir()
        corpus = work / "corpus.jsonl"
        write_corpus(corpus, args.engine_records, seed=7)
        split_corpus(corpus, corpus_dir, args.engine_files)
        corpus.unlink()
    size = sum(p.stat().st_size for p in corpus_dir.iterdir())
    print(f"   input: {size / 2**20:.0f} MiB; load average {_loadavg()}")
    common = [sys.executable, "-m", "pipeline", "--input", str(corpus_dir / "*.jsonl"), "--quiet", "--no-report"]
    two = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    variants = [
        ("FnApiRunner, 1 process", []),
        ("FnApiRunner, 2 processes", two),
        ("FnApiRunner, 1 process, --dedupe exact", ["--dedupe", "exact"]),
        *([] if args.skip_dask else [("DaskRunner, own local cluster (2 workers)", ["--runner", "DaskRunner"])]),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    references: dict[tuple[str, ...], str] = {}  # by dataset flags: a deduplicated run's bytes differ
    print(f"   {'variant':<46} {'wall s':>7} {'CPU s':>7} {'peak MiB':>9} {'procs':>5}  outputs")
    for label, flags in variants:
        out = work / f"engine-{len(label)}-{abs(hash(label)) % 10**6}"
        shutil.rmtree(out, ignore_errors=True)
        run = measure([*common, "--output", str(out), *flags], str(work / f"{out.name}.log"), env)
        if run["returncode"] != 0:
            print(f"   {label:<46} FAILED (exit {run['returncode']}; log {run['log']})")
            continue
        digest = _tree_digest(out)
        kind = tuple(flag for flag in flags if flag in ("--dedupe", "exact"))
        reference = references.setdefault(kind, digest)
        same = "same bytes" if digest == reference else "DIFFERENT"
        print(
            f"   {label:<46} {run['wall']:7.1f} {run['cpu']:7.1f} {run['peak_rss_mb']:9.0f} "
            f"{run['processes']:5d}  {same}"
        )
        if run["processes"] > 1:  # where the CPU went, process by process (polled from /proc)
            shown = ", ".join(f"{name} {cpu:.1f}" for name, cpu in run["cpu_by_process"] if cpu >= 0.05)
            print(f"   {'':<46} CPU by process: {shown}")
        shutil.rmtree(out, ignore_errors=True)
    print(f"   load average after: {_loadavg()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=100_000, help="small files of part 1 (100,000)")
    parser.add_argument("--input-dir", help="reuse (or fill) this directory for part 1's files")
    parser.add_argument("--engine-input", help="part 2 on this JSONL file instead of generated records")
    parser.add_argument("--skip-dask", action="store_true", help="part 2 without DaskRunner")
    parser.add_argument("--engine-records", type=int, default=120_000, help="records of part 2 (120,000)")
    parser.add_argument("--engine-files", type=int, default=16, help="files of part 2 (16)")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-engines", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="convnorm-bench-scale-"))
    try:
        if not args.skip_engines:
            engines_part(args, work)
        if not args.skip_scale:
            scale_part(args, work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
