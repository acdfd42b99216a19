"""Benchmark: what assembling conversations from call logs costs.

A report, not a test: it prints figures and exits 0.

    python bench/bench_calllogs.py           # 20,000 conversations; a trace of 10,000 calls
    python bench/bench_calllogs.py --quick   # 3,000 conversations; a trace of 2,000 calls

Figures, each measured in this run on this machine:

* **per call record** — the same conversations (``bench/corpus.py``) given two ways, each run by
  ``convnorm run`` in a child process (FnApiRunner): as whole records (the
  per-record path), and as Langfuse blob-export rows, one per LLM call (a row per assistant
  turn, each holding the history so far and that turn as output; what an observability export
  holds). Printed: CPU seconds of each run (the child's, user + system), its fixed start-up
  cost taken out (a run of one record, measured alike), and the cost per call record over the
  cost per whole record: what reading one call-log row and assembling its conversation costs,
  in records of the plain path. Both runs write the same conversations (checked).
* **side by side** — the two runs' CPU seconds and a plain-Python assembly's (the rows read,
  grouped by trace, sorted, the longest history kept and written: no normalization, no checks),
  each ratio beside the load average: the call records' run against the whole records' run is
  the target (<= 2.5x).
* **one long trace** — a trace of 10,000 calls whose agent keeps its context short: the history
  grows for 50 calls, then is summarised and starts again (200 segments), so the trace gives one
  conversation and 199 branches; and a trace of 1,500 calls of one growing history (call n sends
  2n messages: the input holds ~1.1 million messages, the conversation 3,000). Printed: each
  run's CPU seconds, per call, and the child's peak resident memory against the input's size (a
  state that held every call's history would hold the input's messages as Python objects, ~20x
  its bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(ROOT), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)

import corpus  # noqa: E402

#: A segment of the long trace: calls before its agent summarises its context.
SEGMENT = 50


def _stamp(n: int) -> str:
    seconds = 1_700_000_000 + n
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{n % 1_000_000:06d}"


def _row(trace: str, n: int, history: list, output: dict) -> bytes:
    row = {
        "id": f"{trace}-obs-{n}",
        "trace_id": trace,
        "type": "GENERATION",
        "parent_observation_id": "",
        "start_time": _stamp(n),
        "name": "chat",
        "provided_model_name": "gpt-4o",
        "input": json.dumps(history, ensure_ascii=False),
        "output": json.dumps(output, ensure_ascii=False),
        "session_id": "",
    }
    return json.dumps(row, ensure_ascii=False).encode() + b"\n"


def _clean(conversation: list) -> list | None:
    """A generated conversation as a well-formed chat (calls answered, ends on the assistant),
    or None: the bench compares like with like, so it leaves MEM-5's repairs out."""
    messages = [m for m in conversation if isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")]
    messages = [{"role": m["role"], "content": m["content"]} for m in messages if isinstance(m.get("content"), str)]
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()
    return messages if any(m["role"] == "assistant" for m in messages) else None


def write_inputs(directory: Path, conversations: int) -> tuple[Path, Path, int]:
    """The conversations as whole records and as call rows; the number of call rows."""
    whole, calls = directory / "whole.jsonl", directory / "calls.jsonl"
    rows = 0
    with whole.open("wb") as w, calls.open("wb") as c:
        for index, line in enumerate(corpus.jsonl_lines(conversations, seed=11)):
            messages = _clean(json.loads(line)["messages"])
            if messages is None:
                continue
            trace = f"trace-{index}"
            w.write(json.dumps({"id": trace, "messages": messages}, ensure_ascii=False).encode() + b"\n")
            for n, message in enumerate(messages):
                if message["role"] == "assistant":
                    c.write(_row(trace, rows, messages[:n], message))
                    rows += 1
    return whole, calls, rows


def write_long_trace(path: Path, calls: int, segment: int = SEGMENT) -> None:
    with path.open("wb") as out:
        history: list = [{"role": "system", "content": "You are a careful agent."}]
        for n in range(calls):
            if n and n % segment == 0:
                history = [{"role": "system", "content": f"Summary of the work so far, part {n // SEGMENT}."}]
            history.append({"role": "user", "content": f"step {n}: what next?"})
            answer = {"role": "assistant", "content": f"Doing step {n}."}
            out.write(_row("long-trace", n, history, answer))
            history.append(answer)


#: Runs a command in a process forked from a small one and writes its rusage as JSON to the
#: file named first: a child forked from this process would count this process's memory in
#: its peak (a forked child's resident pages are its parent's until it execs).
_MEASURED = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    json.dump({"cpu": usage.ru_utime + usage.ru_stime, "maxrss": usage.ru_maxrss, "status": status}, out)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run(inputs: Path, output: Path) -> dict:
    """``convnorm run`` in a child; its CPU seconds and peak RSS (MiB), and its summary."""
    started = time.perf_counter()
    measured = output.with_name(output.name + ".usage.json")
    with tempfile.TemporaryFile() as errors:
        code = subprocess.call(
            [sys.executable, "-c", _MEASURED, str(measured), sys.executable, "-m", "pipeline"]
            + ["--input", str(inputs), "--output", str(output), "--quiet", "--no-report"],
            stdout=subprocess.DEVNULL,
            stderr=errors,
            cwd=ROOT,
        )
        wall = time.perf_counter() - started
        if code not in (0, 1):
            errors.seek(0)
            raise SystemExit(f"convnorm failed on {inputs}:\n{errors.read()[-2000:].decode()}")
    usage = json.loads(measured.read_text())
    summary = json.loads((output / "summary.json").read_text())
    return {"cpu": usage["cpu"], "wall": wall, "rss_mib": usage["maxrss"] / 1024, "summary": summary}


def plain_assembly(calls: Path, output: Path) -> float:
    """The plain-Python baseline: the call rows read, grouped by trace, each trace's calls
    sorted by start time and its longest history (with its answer) written as one record.
    Its CPU seconds (this process's)."""
    started = time.process_time()
    traces: dict[str, list] = {}
    with calls.open("rb") as rows:
        for line in rows:
            row = json.loads(line)
            traces.setdefault(row["trace_id"], []).append(row)
    with output.open("wb") as out:
        for trace in sorted(traces):
            longest: list = []
            for row in sorted(traces[trace], key=lambda r: r["start_time"]):
                messages = [*json.loads(row["input"]), json.loads(row["output"])]
                if len(messages) > len(longest):
                    longest = messages
            out.write(json.dumps({"id": trace, "messages": longest}, ensure_ascii=False).encode() + b"\n")
    return time.process_time() - started


def _messages(output: Path) -> list:
    return sorted(
        json.dumps(json.loads(line)["messages"])
        for part in sorted((output / "normalized").glob("part-*"))
        for line in part.read_bytes().splitlines()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    conversations, long_calls, growing_calls = (3000, 2000, 400) if args.quick else (20_000, 10_000, 1500)
    with tempfile.TemporaryDirectory(prefix="bench-calllogs-") as tmp:
        work = Path(tmp)
        whole, calls, rows = write_inputs(work, conversations)
        one = work / "one.jsonl"
        one.write_bytes(whole.read_bytes().splitlines(True)[0])
        start = run(one, work / "out-one")
        plain = run(whole, work / "out-whole")
        logged = run(calls, work / "out-calls")
        python_cpu = plain_assembly(calls, work / "plain.jsonl")
        records = plain["summary"]["records_in"]
        assert _messages(work / "out-whole") == _messages(work / "out-calls"), "the two ways differ"
        per_record = (plain["cpu"] - start["cpu"]) / records
        per_call = (logged["cpu"] - start["cpu"]) / rows
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        print(f"start-up (a run of one record): {start['cpu']:.2f} s CPU")
        print(
            f"whole records: {records:,} conversations, {plain['cpu']:.2f} s CPU, "
            f"{per_record * 1e6:,.0f} µs a record past start-up"
        )
        print(
            f"call records:  {rows:,} rows -> {logged['summary']['call_logs']['conversations']:,} conversations, "
            f"{logged['cpu']:.2f} s CPU, {per_call * 1e6:,.0f} µs a call record past start-up"
        )
        print(f"a call record costs {per_call / per_record:.2f} whole records (same conversations written)")
        print(
            f"side by side (CPU seconds, start-up included): whole records {plain['cpu']:.2f}, "
            f"call records {logged['cpu']:.2f}, plain-Python assembly {python_cpu:.2f}"
        )
        print(
            f"call records / whole records: {logged['cpu'] / plain['cpu']:.2f}x (target <= 2.5x); "
            f"call records / plain Python: {logged['cpu'] / python_cpu:.1f}x; load {os.getloadavg()[0]:.2f}"
        )
        print(
            f"peak RSS: one record {start['rss_mib']:,.0f} MiB, whole records {plain['rss_mib']:,.0f} MiB, "
            f"call records {logged['rss_mib']:,.0f} MiB"
        )
        for n, (label, calls_in_trace, segment) in enumerate(
            (
                ("summarised every 50 calls", long_calls, SEGMENT),
                ("one growing history", growing_calls, growing_calls),
            )
        ):
            trace = work / "long.jsonl"
            write_long_trace(trace, calls_in_trace, segment)
            long = run(trace, work / f"out-long-{n}")
            found = long["summary"]["call_logs"]
            size = trace.stat().st_size / (1 << 20)
            print(
                f"one trace of {calls_in_trace:,} calls, {label} ({size:,.0f} MiB): {long['cpu']:.2f} s CPU "
                f"({(long['cpu'] - start['cpu']) / calls_in_trace * 1e6:,.0f} µs a call past start-up), "
                f"{found['conversations']:,} conversation(s) ({found['branches']:,} branches), "
                f"{found['prefixes_collapsed']:,} calls collapsed; peak RSS {long['rss_mib']:,.0f} MiB"
            )
            trace.unlink()


if __name__ == "__main__":
    main()
