"""Benchmark: what chaining conversations across groups costs (``--chain-groups``).

A report, not a test: it prints figures and exits 0.

    python bench/bench_chain_groups.py           # 6,000 conversations
    python bench/bench_chain_groups.py --quick   # 1,500 conversations

The same generated conversations (``bench/corpus.py``, as ``bench_calllogs.py`` cleans them)
as Langfuse blob-export rows, one per LLM call, given two ways: a trace per conversation (what
an export with its trace ids gives: chaining finds nothing, but every conversation's keys are
shuffled) and a trace per call (what LiteLLM without a session id or openai-v2 without a parent
span gives: chaining rebuilds each conversation). Each is run by ``convnorm run`` in a child
(FnApiRunner) with ``--chain-groups`` and with ``--no-chain-groups``. Printed: CPU seconds
of each run and the ratio of chained over not (the baseline measured in the same run), and
the conversations written; a trace per call chained writes the conversations a trace per
conversation writes (checked).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(ROOT), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)

import bench_calllogs  # noqa: E402
import corpus  # noqa: E402


def write_rows(directory: Path, conversations: int) -> tuple[Path, Path, int]:
    """The conversations as call rows: one trace per conversation, and one trace per call."""
    by_conversation, by_call = directory / "by-conversation.jsonl", directory / "by-call.jsonl"
    rows = 0
    with by_conversation.open("wb") as one, by_call.open("wb") as each:
        for index, line in enumerate(corpus.jsonl_lines(conversations, seed=11)):
            messages = bench_calllogs._clean(json.loads(line)["messages"])
            if messages is None:
                continue
            for n, message in enumerate(messages):
                if message["role"] == "assistant":
                    one.write(bench_calllogs._row(f"trace-{index}", rows, messages[:n], message))
                    each.write(bench_calllogs._row(f"call-{rows}", rows, messages[:n], message))
                    rows += 1
    return by_conversation, by_call, rows


def _run(inputs: Path, output: Path, *flags: str) -> dict:
    """``convnorm run`` with ``flags`` in a child: its CPU seconds, peak RSS (MiB) and summary."""
    argv = [sys.executable, "-m", "pipeline", "--input", str(inputs), "--output", str(output), "--quiet"]
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen([*argv, "--no-report", *flags], stdout=subprocess.DEVNULL, stderr=errors, cwd=ROOT)
        _, status, usage = os.wait4(child.pid, 0)
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            errors.seek(0)
            raise SystemExit(f"convnorm failed on {inputs}:\n{errors.read()[-2000:].decode()}")
    summary = json.loads((output / "summary.json").read_text())
    return {"cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    conversations = 1500 if args.quick else 6000
    with tempfile.TemporaryDirectory(prefix="bench-chain-") as tmp:
        work = Path(tmp)
        by_conversation, by_call, rows = write_rows(work, conversations)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        print(f"{rows:,} call rows")
        written = {}
        for label, path in (("a trace per conversation", by_conversation), ("a trace per call", by_call)):
            off = _run(path, work / f"off-{path.stem}", "--no-chain-groups")
            on = _run(path, work / f"on-{path.stem}", "--chain-groups")
            written[label] = bench_calllogs._messages(work / f"on-{path.stem}")
            made = on["summary"]["call_logs"]
            print(
                f"{label}: --no-chain-groups {off['cpu']:.2f} s CPU, {off['summary']['records_out']:,} written; "
                f"--chain-groups {on['cpu']:.2f} s CPU ({on['cpu'] / off['cpu']:.2f}x), "
                f"{on['summary']['records_out']:,} written, {made.get('chained_across_groups', 0):,} chained; "
                f"peak RSS {off['rss_mib']:,.0f} / {on['rss_mib']:,.0f} MiB"
            )
        assert written["a trace per conversation"] == written["a trace per call"], "chaining differs from traces"
        print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
