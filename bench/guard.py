"""The per-record cost guard: run it before merging a change on the per-record path.

It measures each stage of the per-record path (``bench/stages.py``: parse, read, core, the
rest, the whole loop) as a multiple of an orjson round trip of the same records, measured in
the same run, on the project's corpus and on the same conversations in the flat shape; it
compares those ratios with the ones stored for this tree in ``bench/baseline.json``, prints what
the change costs per record, stage by stage, and exits 1 when the whole loop costs more than
the baseline plus a tolerance. Ratios, never times: the machine's speed cancels out.

    python bench/guard.py                  # CPU time (~20 s); exit 1 past --tolerance (8%)
    python bench/guard.py --instructions   # callgrind's instruction counts (~1 min): the
                                           # same on a busy machine as on an idle one (1%)
    python bench/guard.py --update         # store this run's ratios as the new baseline

CPU time is what the targets are about, but it moves with other load on the machine (a busy
machine slows Python more than orjson: the ratios rise); instruction counts are exact and do
not, but they leave out memory effects. A change that passes the instruction guard and fails
the CPU one on an idle machine costs memory traffic, not instructions. Update the baseline
only for a cost that was accepted, in the same commit as the change, and say so in it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(ROOT), str(HERE)):  # runnable as `python bench/guard.py` from anywhere
    if path not in sys.path:
        sys.path.insert(0, path)

import stages  # noqa: E402

BASELINE = HERE / "baseline.json"
#: Stages the guard reports, in path order; ``loop`` is the one it judges.
STAGES = ("parse", "read", "core", "rest", "loop")
#: Allowed growth of the loop's ratio over the baseline, by measure.
TOLERANCE = {"cpu": 0.08, "instructions": 0.01}
DEFAULT_RECORDS = {"cpu": 2000, "instructions": 300}


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def measure(kind: str, records: int, reps: int, seed: int) -> dict[str, dict[str, float]]:
    """``{corpus: {stage: ratio to the round trip}}`` and ``{corpus: {"unit": rt}}`` of this run."""
    if kind == "instructions":
        tables = stages.stage_instructions(records, seed)
    else:
        tables = {label: stages.stage_table(lines, reps) for label, lines in stages.corpora(records, seed).items()}
    ratios = {}
    for label, table in tables.items():
        table = stages.with_rest(table)
        rt = table["roundtrip"]
        ratios[label] = {stage: table[stage] / rt for stage in STAGES} | {"unit": rt}
    return ratios


def _tree() -> str:
    """The commit measured, ``+changes`` when tracked files besides the baseline differ from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        )
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", f":!{BASELINE.relative_to(ROOT)}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head.stdout.strip() + ("+changes" if changed.stdout.strip() else "")


def compare(kind: str, now: dict, base: dict, tolerance: float) -> bool:
    """Print the table; True when every corpus's loop is within the tolerance."""
    unit = "us" if kind == "cpu" else "instructions"
    ok = True
    for label, ratios in now.items():
        rt = ratios["unit"]
        before = base.get(label, {})
        print(f"\n{label}: round trip {rt:,.1f} {unit} per record in this run")
        print(f"  {'stage':<8}{'baseline':>10}{'now':>8}{'change':>9}  per record")
        for stage in STAGES:
            was, is_ = before.get(stage), ratios[stage]
            if was is None:
                print(f"  {stage:<8}{'-':>10}{is_:8.3f}")
                continue
            delta = is_ - was
            print(f"  {stage:<8}{was:10.3f}{is_:8.3f}{delta:+9.3f}  {delta * rt:+,.1f} {unit}")
        was = before.get("loop")
        if was is None:
            print("  (no baseline for this corpus)")
            continue
        limit = was * (1 + tolerance)
        passed = ratios["loop"] <= limit
        ok = ok and passed
        print(
            f"  loop {ratios['loop']:.3f} round trips against {was:.3f} + {tolerance:.0%} = {limit:.3f}: "
            f"{'PASS' if passed else 'FAIL'}"
        )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions with callgrind instead of timing CPU"
    )
    parser.add_argument("--records", type=int, default=None, help="records per corpus (default 2000; 300 counted)")
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions, CPU time (median kept)")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed (the baseline's is 7)")
    parser.add_argument("--tolerance", type=float, default=None, help="allowed growth of the loop's ratio (0.08 = 8%%)")
    parser.add_argument("--update", action="store_true", help="store this run's ratios in bench/baseline.json")
    args = parser.parse_args(argv)

    kind = "instructions" if args.instructions else "cpu"
    if kind == "instructions" and not stages.have_callgrind():
        print("guard: --instructions needs valgrind (callgrind_control included) on PATH", file=sys.stderr)
        return 2
    records = args.records or DEFAULT_RECORDS[kind]
    tolerance = TOLERANCE[kind] if args.tolerance is None else args.tolerance
    print(
        f"per-record guard ({kind}): {records:,} records per corpus, seed {args.seed}; Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs; load average {_loadavg()}",
        flush=True,
    )
    now = measure(kind, records, args.reps, args.seed)
    stored = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    if args.update:
        stored[kind] = {
            "tree": _tree(),
            "records": records,
            "seed": args.seed,
            "load_average": _loadavg(),
            "ratios": {label: {k: round(v, 4) for k, v in r.items() if k != "unit"} for label, r in now.items()},
        }
        BASELINE.write_text(json.dumps(stored, indent=2) + "\n")
        print(f"stored the {kind} baseline of {stored[kind]['tree']} in {BASELINE.relative_to(ROOT)}")
    base = stored.get(kind, {})
    if not base:
        print(f"no {kind} baseline in {BASELINE.relative_to(ROOT)}: run with --update on the tree to compare with")
        return 2
    if base.get("seed") != args.seed:
        print(f"note: the baseline was measured with seed {base.get('seed')}, this run with {args.seed}")
    print(f"baseline: tree {base['tree']}, {base['records']:,} records, load average {base.get('load_average', '?')}")
    ok = compare(kind, now, base["ratios"], tolerance)
    print(f"\nload average after: {_loadavg()}; {'PASS' if ok else 'FAIL: the per-record path costs more'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
