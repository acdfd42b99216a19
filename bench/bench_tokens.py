"""What ``--tokens`` costs per record, and that runs without it pay nothing.

The job's per-record path (``normalize_batch`` over batches of 256 lines, as the DoFn runs it)
is timed in fresh subprocesses, CPU time per record, interleaved round by round, the median
kept:

- ``off``        this tree, without ``--tokens``;
- ``off @ REV``  the same path of another revision (``--against``, default ``main``), exported
                 with ``git archive``: runs without ``--tokens`` must cost what they cost there;
- ``o200k_base`` / ``cl100k_base``  this tree with ``--tokens`` (and ``--max-example-tokens``).

Each worker also says whether the tokenizer module was imported: it must not be, without
``--tokens``. Printed: µs per record, the counting's cost (on - off) and the ratio on / off,
for the OpenAI fine-tuning sink and the flat one, on the project's corpus (~5 KB records) and
the bundled sample, with the load average. A report, not a test: it always exits 0.

    python bench/bench_tokens.py                    # 2,000 corpus records, 5 rounds (~1 min)
    python bench/bench_tokens.py --records 5000 --rounds 7 --against HEAD~1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

#: One timing in a fresh interpreter: argv = corpus path, sink, encoding or "-", repeats.
WORKER = r"""
import gc, json, sys, time
sys.path.insert(0, ".")
from transforms.record.inputs import RawRecord
from transforms.record.records import normalize_batch
from transforms.record.record_settings import Settings
corpus, sink, encoding, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
options = {"sink": sink, "model": "bench"}
if encoding != "-":
    from transforms.record.record_settings import TokenSettings
    options["tokens"] = TokenSettings(encoding, max_example_tokens=4096)
settings = Settings(**options)
lines = [line for line in open(corpus, "rb").read().splitlines() if line.strip()]
raws = [RawRecord("bench", i, line) for i, line in enumerate(lines)]
batches = [raws[s:s + 256] for s in range(0, len(raws), 256)]
def run():
    for batch in batches:
        normalize_batch(batch, settings, taken={})
run()  # warm: imports, the tokenizer's load, caches
gc.freeze()
best = []
for _ in range(repeats):
    gc.collect()
    start = time.process_time()
    run()
    best.append(time.process_time() - start)
print(json.dumps({"us": min(best) / len(lines) * 1e6, "tokenizer_imported": "bpe_openai" in sys.modules}))
"""


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _timing(src: Path, corpus: Path, sink: str, encoding: str, repeats: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(corpus), sink, encoding, str(repeats)],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _export(rev: str, into: Path) -> Path | None:
    """``rev``'s tree under ``into`` (git archive), or None when it cannot be had."""
    try:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"(no baseline: git archive {rev} failed: {error})")
        return None
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000, help="corpus records (default 2,000)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is kept (default 5)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per worker, the best kept (default 3)")
    parser.add_argument("--against", default="main", help="revision whose path without --tokens is the baseline")
    args = parser.parse_args()

    import corpus as corpus_module

    print(f"load average before: {_loadavg()}  (2 cores shared: compare the columns of one run, not runs)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        corpora = {
            f"corpus ({args.records:,} records)": tmp_path / "corpus.jsonl",
            "bundled sample (301 records)": ROOT / "samples" / "conversations.jsonl",
        }
        corpora[f"corpus ({args.records:,} records)"].write_bytes(
            b"\n".join(corpus_module.jsonl_lines(args.records)) + b"\n"
        )
        (tmp_path / "base").mkdir()
        base = _export(args.against, tmp_path / "base")
        variants = [("off", ROOT, "-")]
        if base is not None:
            variants.append((f"off @ {args.against}", base, "-"))
        variants += [("o200k_base", ROOT, "o200k_base"), ("cl100k_base", ROOT, "cl100k_base")]
        for label, path in corpora.items():
            for sink in ("openai-finetune", "flat"):
                samples: dict[str, list[dict]] = {name: [] for name, _, _ in variants}
                for _ in range(args.rounds):
                    for name, src, encoding in variants:
                        samples[name].append(_timing(src, path, sink, encoding, args.repeats))
                us = {name: statistics.median(s["us"] for s in runs) for name, runs in samples.items()}
                imported = {name: any(s["tokenizer_imported"] for s in runs) for name, runs in samples.items()}
                print(f"\n{label}, --sink {sink}: CPU us per record (median of {args.rounds} rounds)")
                for name, _, encoding in variants:
                    line = f"  {name:<16} {us[name]:8.1f}"
                    if encoding != "-":
                        cost = us[name] - us["off"]
                        line += f"   counting {cost:6.1f} us/record   on / off {us[name] / us['off']:.2f}"
                    elif name != "off":
                        line += f"   this tree off / {args.against} off {us['off'] / us[name]:.3f}"
                    line += "   tokenizer imported" if imported[name] else "   tokenizer not imported"
                    print(line)
    print(f"\nload average after: {_loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
