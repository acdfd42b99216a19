"""Benchmark: what call logs cost a streaming run (``pipeline.streaming.assembled``).

A report, not a test: it prints figures and exits 0. No runner: it calls the steps the
streaming DoFns call (a landed file cleaned, a window closed), in one process.

    python bench/bench_streaming_calls.py           # 300 windows
    python bench/bench_streaming_calls.py --quick   # 60 windows
    python bench/bench_streaming_calls.py --quick --repeat 2   # best of 2 runs (a busy machine)

Each window gets two landed files of Langfuse export rows: 20 new sessions of 6 calls each
(every call holding the history so far), and one more call for 5 sessions of the window
before (re-opened groups). Figures, each measured in this run:

* **per file** — CPU of cleaning a file of call-log rows (its pieces kept in ``calls.jsonl``)
  against a file of the same conversations as whole records (the plain path);
* **a window's close** — CPU of assembling a window's groups, early in the run and late (after
  hundreds of windows), against a close that finds its groups' pieces by reading every
  ``calls.jsonl`` committed so far (no index: the baseline), measured at the same late window;
* **memory** — what the windows' indexes hold in memory once every window's is read.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.graph.shard_step import ShardWork, numbered_place, process_batches, process_shard  # noqa: E402
from pipeline.io import processed_files as processed  # noqa: E402
from pipeline.io.planning import plan_shards  # noqa: E402
from pipeline.streaming import assembled as assembly  # noqa: E402
from pipeline.streaming.clean import CleanPlan, clean_landed_file  # noqa: E402
from pipeline.streaming.watch import Landed  # noqa: E402
from transforms.conversations import NORMALIZE, freeze_gc  # noqa: E402
from transforms.record.assembled_calls import conversations_of, shard_batches  # noqa: E402
from transforms.record.record_settings import Settings  # noqa: E402

CALLS, NEW_GROUPS, REOPENED = 6, 20, 5


def _window(n: int) -> str:
    def stamp(seconds: int) -> str:
        return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(seconds))

    start = 1_796_000_000 + 60 * n
    return f"{stamp(start)}-{stamp(start + 60)}"


def _history(group: str, turns: int) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": "You help."}]
    for t in range(turns):
        messages.append({"role": "user", "content": f"{group}: question {t} " + "words " * 30})
        messages.append({"role": "assistant", "content": f"answer {t} " + "more words " * 40})
    return messages


def _row(group: str, call: int) -> bytes:
    history = _history(group, call + 1)
    row = {
        "id": f"{group}-obs-{call}",
        "trace_id": f"tr-{group}",
        "type": "GENERATION",
        "parent_observation_id": "",
        "start_time": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_796_000_000 + call)) + ".000000",
        "name": "chat",
        "provided_model_name": "gpt-4o",
        "input": json.dumps(history[:-1]),
        "output": json.dumps(history[-1]),
        "session_id": group,
    }
    return json.dumps(row).encode() + b"\n"


def _whole(group: str, turns: int) -> bytes:
    return json.dumps({"id": group, "messages": _history(group, turns)}).encode() + b"\n"


def _cpu() -> float:
    return time.process_time()  # this process's CPU (every step runs in it), finer than os.times


#: User CPU alone, summed by step: the kernel's time on the file system left out (a busy disk
#: on a shared machine inflates it, and the streaming steps create files by the dozen).
USER: dict[str, float] = {"streaming": 0.0, "whole": 0.0, "batch": 0.0}


class _User:
    def __init__(self, step: str) -> None:
        self._step = step

    def __enter__(self) -> None:
        self._start = resource.getrusage(resource.RUSAGE_SELF).ru_utime

    def __exit__(self, *_) -> None:
        USER[self._step] += resource.getrusage(resource.RUSAGE_SELF).ru_utime - self._start


class Run:
    def __init__(self, root: Path) -> None:
        self.landing, self.out = root / "landing", root / "out"
        self.landing.mkdir(parents=True)
        temp = self.out / "_convnorm_temp-bench"
        temp.mkdir(parents=True)
        work = ShardWork(NORMALIZE, dataclasses.replace(Settings(), calls=True))
        self.plan = CleanPlan(output=str(self.out), run_id="bench", run_temp=str(temp), work=work)

    def clean(self, name: str, data: bytes, window: str) -> float:
        path = self.landing / name
        path.write_bytes(data)
        info = path.stat()
        start = _cpu()
        with _User("streaming" if name.startswith("calls") else "whole"):
            ok = clean_landed_file(
                Landed(str(path), info.st_size, info.st_mtime_ns, info.st_ctime_ns), window, self.plan
            )
        assert ok
        return _cpu() - start

    def close(self, window: str) -> float:
        start = _cpu()
        with _User("streaming"):
            done = assembly.assemble_window(
                str(self.out), window, self.plan.work, self.plan.run_temp, assembly.move_committing
            )
            doc = processed.write_window_summary(str(self.out), window, self.plan.settings, None)
        assert done == "done" and doc["accounted"]
        return _cpu() - start


def _full_scan(out: Path, window: str) -> float:
    """The baseline: the pieces of the window's groups found by reading every calls.jsonl so far."""
    start = _cpu()
    own = assembly.window_index(str(out), window, fresh=True).groups
    found = 0
    for path in sorted(out.glob("*/*/" + processed.CALLS_FILE)):
        if path.parent.parent.name > window:
            continue
        for _, _, piece in assembly.read_calls(str(path)):
            found += assembly._key_text((piece.format, piece.group)) in own
    assert found
    return _cpu() - start


def batch_cpu(paths: list[Path], work: ShardWork, temp: Path) -> float:
    """The batch path on the same rows, in this process (no runner, as the streaming steps here):
    every file read and processed by the per-shard step, its groups' states merged, each group's
    conversations assembled, normalized and written (``pipeline.graph.shard_assembly``'s work)."""
    start = _cpu()
    groups: dict = {}
    for number, shard in enumerate(plan_shards([str(p) for p in paths])):
        result = process_shard(shard, work, numbered_place(str(temp), number, 0, "bench"))
        for key, state in result.calls:
            if key in groups:
                groups[key].merge(state)
            else:
                groups[key] = state
    made = [c for keyed in sorted(groups.items()) for _, c in conversations_of(keyed, work.settings, 1)]
    assembled = dataclasses.replace(work, settings=dataclasses.replace(work.settings, input_format="flat", calls=False))
    batches = shard_batches((0, made), 1 << 20, work.batch_size)
    process_batches(batches, 1 << 20, 0, assembled, numbered_place(str(temp), 1 << 20, 0, "bench"), read=False)
    return _cpu() - start


def measure(root: Path, windows: int) -> tuple[Run, list[float], list[float], list[float], int, float, dict]:
    """One run: each window's files cleaned and its close, then the batch path on the same rows
    (and the user CPU of each, ``USER``)."""
    USER.update(dict.fromkeys(USER, 0.0))
    run = Run(root)
    file_cpu, whole_cpu, closes = [], [], []
    records = 0
    for n in range(windows):
        window = _window(n)
        groups = [f"w{n}-g{g}" for g in range(NEW_GROUPS)]
        rows = b"".join(_row(group, call) for group in groups for call in range(CALLS))
        later = b"".join(_row(f"w{n - 1}-g{g}", CALLS) for g in range(REOPENED)) if n else b""
        file_cpu.append(run.clean(f"calls-{n:04d}.jsonl", rows + later, window))
        records += rows.count(b"\n") + later.count(b"\n")
        whole = b"".join(_whole(group, CALLS) for group in groups)
        whole_cpu.append(run.clean(f"whole-{n:04d}.jsonl", whole, window))
        closes.append(run.close(window))
    batch_temp = root / "batch"
    for name in ("normalized", "drops", "dead_letter"):
        (batch_temp / name).mkdir(parents=True)
    with _User("batch"):
        batch = batch_cpu(sorted(run.landing.glob("calls-*.jsonl")), run.plan.work, batch_temp)
    return run, file_cpu, whole_cpu, closes, records, batch, dict(USER)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs, each in a fresh directory: the figures of the one whose "
        "streaming CPU was least, its batch CPU the least of all (a busy machine)",
    )
    args = parser.parse_args()
    windows = 60 if args.quick else 300
    root = Path(tempfile.mkdtemp(prefix="bench-streaming-calls-"))
    # What each DoFn's setup does (the batch path's per-shard step freezes as it goes): else
    # every full collection of the streaming steps, measured first, re-scans Beam's objects.
    freeze_gc()
    try:
        runs = [measure(root / f"run-{n}", windows) for n in range(max(1, args.repeat))]
        run, file_cpu, whole_cpu, closes, records, _, _ = min(runs, key=lambda r: sum(r[1]) + sum(r[3]))
        batch = min(r[5] for r in runs)
        user_streaming, user_batch = min(r[6]["streaming"] for r in runs), min(r[6]["batch"] for r in runs)
        baseline = _full_scan(run.out, _window(windows - 1))
        early, late = closes[1:11], closes[-10:]
        per_file, per_whole = sum(file_cpu) / windows, sum(whole_cpu) / windows
        print(f"windows: {windows}; call-log records: {records}; groups: {NEW_GROUPS * windows}")
        print(
            f"per landed file of {NEW_GROUPS} conversations: as call-log rows ({CALLS} calls each, cleaned, pieces "
            f"kept) {per_file * 1e3:.1f} ms CPU, as whole records {per_whole * 1e3:.1f} ms; ratio "
            f"{per_file / per_whole:.2f} (the close's assembly is apart, below)"
        )
        streaming = sum(file_cpu) + sum(closes)
        print(
            f"per call-log row, streaming (cleaned, then its window's close) {streaming / records * 1e3:.3f} ms CPU, "
            f"batch (the same rows, the per-shard step and the assembly, no runner) {batch / records * 1e3:.3f} ms; "
            f"ratio {streaming / batch:.2f} (target <= 2); load {os.getloadavg()[0]:.2f}"
        )
        print(
            f"user CPU alone (the kernel's, on the file system, left out): a call-log row streaming "
            f"{user_streaming / records * 1e3:.3f} ms, batch {user_batch / records * 1e3:.3f} ms; ratio "
            f"{user_streaming / user_batch:.2f}"
        )
        print(
            f"a window's close ({NEW_GROUPS + REOPENED} groups): windows 2-11 median {sorted(early)[5] * 1e3:.1f} ms "
            f"CPU, the last 10 median {sorted(late)[5] * 1e3:.1f} ms; ratio late/early "
            f"{sorted(late)[5] / sorted(early)[5]:.2f}"
        )
        print(
            f"finding the last window's pieces by reading every calls.jsonl so far (no index): {baseline * 1e3:.1f} ms "
            f"CPU; the whole indexed close {sorted(late)[5] * 1e3:.1f} ms"
        )
        tracemalloc.start()
        held = assembly._Indexes()
        for n in range(windows):
            held.of(str(run.out), _window(n))
        index_bytes = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        entries = sum(len(held.of(str(run.out), _window(n)).groups) for n in range(windows))
        print(
            f"the windows' indexes held in memory (every window's, as a close keeps them): {index_bytes / 1e6:.1f} MB "
            f"for {entries} group entries, {index_bytes / entries:.0f} bytes each"
        )
        size = sum(p.stat().st_size for p in run.out.glob("*/*/" + processed.CALLS_FILE))
        landed = sum(p.stat().st_size for p in run.landing.glob("calls-*.jsonl"))
        print(
            f"calls.jsonl on disk: {size / 1e6:.1f} MB for {records} call-log records of {landed / 1e6:.1f} MB landed "
            f"(ratio {size / landed:.2f}: a call's history kept after what it shares with its group's call before it)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
