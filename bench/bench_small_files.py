"""Benchmark: many small input files against the same records in one file, end to end.

A report, not a test: it prints figures and PASS / MISS per goal, and exits 0 either way.

    python bench/bench_small_files.py                    # 50,000 files; 100,000 for the memory goal
    python bench/bench_small_files.py --files 5000 --memory-files 10000   # a quick look
    python bench/bench_small_files.py --unparted 5000    # also the layout before parts, on 5,000 files

Each variant is ``python -m pipeline`` in a fresh subprocess, with the command's defaults (the
one graph; ``--part-bytes`` 64 MiB), on
this machine's FnApiRunner in one process, so the process is the driver: its CPU time (user +
system, from ``wait4``), its wall time, its peak memory (``ru_maxrss``), and the files it wrote.

Goals (many small files): ``--files`` files of two conversations each end to end within
2x the CPU of the same conversations in one file (**files / one file <= 2.0**); the driver's
peak memory at ``--memory-files`` files under 300 MiB. Both measured in this run. The records
are small (about 110 bytes: the cost per file, not per record, is what is measured) and the
normalized output of the many files, concatenated, must be the one file's, byte for byte.
CPU time, not wall time, is the figure that means something on a shared machine; the load
average is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

RATIO_GOAL = 2.0
MEMORY_GOAL_MIB = 300
#: Two conversations per file; ``%d`` makes each file's content its own.
PAIR = (
    b'{"id": "a-%d", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n'
    b'{"id": "b-%d", "messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "x", '
    b'"tool_call_id": "c"}]}\n'
)


def pair(number: int) -> bytes:
    return PAIR.replace(b"%d", str(number).encode())


def write_files(directory: Path, count: int) -> None:
    directory.mkdir(parents=True)
    for number in range(count):
        (directory / f"session-{number:07d}.jsonl").write_bytes(pair(number))


def write_one_file(path: Path, count: int) -> None:
    path.parent.mkdir(parents=True)
    with open(path, "wb") as out:
        for number in range(count):
            out.write(pair(number))


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(label: str, input_arg: str, output: Path, *extra: str) -> dict:
    """``python -m pipeline`` as a child; its CPU (user + sys), wall, peak RSS, exit status, files."""
    argv = [sys.executable, "-m", "pipeline", "--input", input_arg, "--output", str(output), "--quiet", "--no-report"]
    started, load = time.monotonic(), _load()
    proc = subprocess.Popen([*argv, *extra], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    files = sum(len(list((output / name).glob("part-*"))) for name in ("normalized", "drops", "dead_letter"))
    figures = {
        "label": label,
        "cpu": usage.ru_utime + usage.ru_stime,
        "wall": wall,
        "rss_mib": usage.ru_maxrss / 1024,
        "code": code,
        "files": files,
        "load": load,
    }
    print(
        f"  {label:<44} CPU {figures['cpu']:7.1f} s  wall {wall:7.1f} s  peak RSS {figures['rss_mib']:6.0f} MiB  "
        f"exit {code}  {files:,} output files  (load {load})",
        flush=True,
    )
    if code != 0:
        print("    " + "\n    ".join(stderr.strip().splitlines()[-5:]))
    return figures


def normalized_bytes(output: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((output / "normalized").glob("part-*")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=50_000, help="files of two conversations (the ratio goal)")
    parser.add_argument("--memory-files", type=int, default=100_000, help="files for the memory goal (0: skip)")
    parser.add_argument("--unparted", type=int, default=0, help="also run --part-bytes 0 on this many files")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="convnorm-small-files-"))
    print(f"convnorm: many small files against one file (work in {work}; load {_load()}; {os.cpu_count()} CPUs)")
    try:
        write_files(work / "files", args.files)
        write_one_file(work / "one" / "all.jsonl", args.files)
        print(f"== {args.files:,} files of two conversations, and the same {2 * args.files:,} in one file")
        one = run("one file", str(work / "one" / "all.jsonl"), work / "out-one")
        many = run(f"{args.files:,} files", f"{work / 'files'}/", work / "out-files")
        same = normalized_bytes(work / "out-one") == normalized_bytes(work / "out-files")
        ratio = many["cpu"] / one["cpu"]
        verdict = "PASS" if ratio <= RATIO_GOAL else "MISS"
        print(
            f"  files / one file, CPU: {ratio:.2f} (goal <= {RATIO_GOAL}: {verdict}); "
            f"wall {many['wall'] / one['wall']:.2f}"
        )
        print(f"  normalized output, concatenated: {'the same bytes' if same else 'DIFFERENT BYTES'}")
        if args.unparted:
            subset = work / "files-unparted"
            subset.mkdir()
            for path in sorted((work / "files").iterdir())[: args.unparted]:
                os.link(path, subset / path.name)
            print(f"== the layout before parts (--part-bytes 0), {args.unparted:,} files")
            parted = run(f"{args.unparted:,} files", f"{subset}/", work / "out-unparted-parts")
            each = run(
                f"{args.unparted:,} files, --part-bytes 0", f"{subset}/", work / "out-unparted", "--part-bytes", "0"
            )
            print(
                f"  --part-bytes 0 / parts, CPU: {each['cpu'] / parted['cpu']:.2f}; "
                f"output files {each['files']:,} / {parted['files']:,}"
            )
        if args.memory_files:
            shutil.rmtree(work / "files")
            write_files(work / "files", args.memory_files)
            print(f"== the driver's peak memory at {args.memory_files:,} files")
            memory = run(f"{args.memory_files:,} files", f"{work / 'files'}/", work / "out-memory")
            verdict = "PASS" if memory["rss_mib"] < MEMORY_GOAL_MIB else "MISS"
            print(f"  peak RSS {memory['rss_mib']:.0f} MiB (goal < {MEMORY_GOAL_MIB} MiB: {verdict})")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
