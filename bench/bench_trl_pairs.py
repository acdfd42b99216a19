"""What pairing across conversations costs: ``--sink trl-dpo`` (the per-record step, a spill, one
shuffle of claims by prompt and the write from the spill) against ``--sink hf`` on the same
records (the per-record step writing as it goes) and against ``--sink hf --dedupe exact`` (the
other dataset step: a spill, claims shuffled), each a fresh ``convnorm`` process.

The records: ``--prompts`` prompts of a few turns, each answered ``--answers`` times with a
thumb on each answer (the first one up, the others down), as whole records carrying their
labels in ``metadata``; every prompt makes ``answers - 1`` pairs. Prints wall and CPU time and
the peak memory of each run, the ratios to the ``hf`` run and the load average: ratios measured
in one run, never times to compare with another machine's.

    python bench/bench_trl_pairs.py                       # 5,000 prompts x 4 answers, ~1 min
    python bench/bench_trl_pairs.py --prompts 500 --answers 2   # smoke
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

ROOT = Path(__file__).resolve().parent.parent


_WRAPPER = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
    "u = resource.getrusage(resource.RUSAGE_CHILDREN); print(u.ru_utime + u.ru_stime, u.ru_maxrss)"
)


def write_input(path: Path, prompts: int, answers: int) -> int:
    records = 0
    with path.open("w", encoding="utf-8") as handle:
        for p in range(prompts):
            history = [
                {"role": "system", "content": "You answer questions about the weather briefly."},
                {"role": "user", "content": f"Question {p}: will it rain in city {p % 97} tomorrow? " * 3},
            ]
            for a in range(answers):
                answer = {"role": "assistant", "content": f"Answer {a} to question {p}: " + "maybe " * (10 + a)}
                labels = [{"name": "thumb", "value": a == 0, "source": "langfuse", "message": 2}]
                record = {"id": f"p{p}-a{a}", "messages": [*history, answer], "metadata": {"labels": labels}}
                handle.write(json.dumps(record) + "\n")
                records += 1
    return records


def run(sink: str, source: Path, out: Path, *more: str) -> dict:
    start = time.monotonic()
    job = [sys.executable, "-m", "pipeline", "--input", str(source), "--output", str(out), "--sink", sink]
    job += ["--quiet", "--no-report", "--shard-bytes", str(4 << 20), *more]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    # A wrapper process per run: its children's usage is this run's alone (CPU, and the peak of
    # the largest process of the run, workers included).
    wrapper = [sys.executable, "-c", _WRAPPER, *job]
    done = subprocess.run(wrapper, check=True, capture_output=True, env=environment, cwd=ROOT, text=True)
    wall = time.monotonic() - start
    cpu, peak_kib = map(float, done.stdout.split()[-2:])
    summary = json.loads((out / "summary.json").read_text())
    return {
        "wall": wall,
        "cpu": cpu,
        "peak_mib": peak_kib / 1024,
        "out": summary["records_out"],
        "refused": summary.get("sink_refusals_by_reason", {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=5000)
    parser.add_argument("--answers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "labelled.jsonl"
        records = write_input(source, args.prompts, args.answers)
        size = source.stat().st_size / (1 << 20)
        print(f"{records:,} records ({size:.1f} MiB), load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        baseline = run("hf", source, Path(tmp) / "hf")
        deduplicated = run("hf", source, Path(tmp) / "dedupe", "--dedupe", "exact")
        pairs = run("trl-dpo", source, Path(tmp) / "dpo")
        expected = args.prompts * (args.answers - 1)
        print(f"{'run':<10}{'wall s':>9}{'cpu s':>9}{'peak MiB':>10}{'rows':>9}")
        for name, figures in (("hf", baseline), ("hf dedupe", deduplicated), ("trl-dpo", pairs)):
            print(
                f"{name:<10}{figures['wall']:>9.1f}{figures['cpu']:>9.1f}{figures['peak_mib']:>10.0f}{figures['out']:>9,}"
            )
        print(
            f"trl-dpo / hf: wall {pairs['wall'] / baseline['wall']:.2f}x, cpu {pairs['cpu'] / baseline['cpu']:.2f}x; "
            f"pairs {pairs['out']:,} (expected {expected:,}), refused {pairs['refused']}"
        )
        print(
            f"trl-dpo / hf --dedupe exact (the other dataset step): wall {pairs['wall'] / deduplicated['wall']:.2f}x, "
            f"cpu {pairs['cpu'] / deduplicated['cpu']:.2f}x, peak {pairs['peak_mib'] / deduplicated['peak_mib']:.2f}x"
        )
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
