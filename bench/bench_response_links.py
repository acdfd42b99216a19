"""Benchmark: what chaining Responses calls across groups by response id costs.

A report, not a test: it prints figures and exits 0.

    python bench/bench_response_links.py           # 4,000 conversations
    python bench/bench_response_links.py --quick   # 1,000 conversations

Generated Responses conversations (four turns each, every request sending only its question
and the previous response's id) as Helicone export rows, given two ways: a session id on every
call (one group per conversation: the chain resolved within the group, the baseline) and none
(a group per call: the groups joined by response id first). Each is run by ``convnorm run`` in
a child (FnApiRunner), the second also with ``--no-chain-groups`` (each call its new items
alone). Printed: CPU seconds and peak RSS of each run, the ratio over the baseline measured in
the same run, and the conversations written; a group per call chained writes the conversations
a session writes (checked).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(ROOT), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)

import bench_calllogs  # noqa: E402
from bench_chain_groups import _run  # noqa: E402

TURNS = 4


def _row(conversation: int, turn: int, session: bool) -> bytes:
    response = f"resp_{conversation}_{turn}"
    previous = f"resp_{conversation}_{turn - 1}" if turn else None
    question = f"Question {turn} of {conversation}?"
    request: dict = {"model": "gpt-4o-mini", "instructions": "You are brief.", "input": question}
    if previous:
        request["previous_response_id"] = previous
    answer = f"Answer {turn} to {conversation}, with some words to make it a plausible length."
    row = {
        "request_id": f"req-{conversation}-{turn}",
        "request_created_at": f"2026-12-01T10:{turn:02d}:{conversation % 60:02d}Z",
        "request_body": request,
        "response_body": {
            "id": response,
            "object": "response",
            "model": "gpt-4o-mini",
            "previous_response_id": previous,
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}],
        },
    }
    if session:
        row["request_properties"] = {"Helicone-Session-Id": f"s-{conversation}"}
    return json.dumps(row, sort_keys=True).encode() + b"\n"


def write_rows(directory: Path, conversations: int) -> tuple[Path, Path]:
    """The conversations as call rows: with a session id on each call, and without."""
    with_session, without = directory / "session.jsonl", directory / "per-call.jsonl"
    with with_session.open("wb") as one, without.open("wb") as each:
        for turn in range(TURNS):  # turn by turn, as a log interleaves conversations
            for conversation in range(conversations):
                one.write(_row(conversation, turn, True))
                each.write(_row(conversation, turn, False))
    return with_session, without


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    conversations = 1000 if args.quick else 4000
    with tempfile.TemporaryDirectory(prefix="bench-responses-") as tmp:
        work = Path(tmp)
        session, per_call = write_rows(work, conversations)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        print(f"{conversations * TURNS:,} call rows, {conversations:,} conversations of {TURNS} turns")
        runs = {
            "a session per conversation (baseline)": _run(session, work / "session"),
            "a group per call, joined by response id": _run(per_call, work / "joined"),
            "a group per call, --no-chain-groups": _run(per_call, work / "apart", "--no-chain-groups"),
        }
        base = runs["a session per conversation (baseline)"]
        for label, run in runs.items():
            made = run["summary"]["call_logs"]
            print(
                f"{label}: {run['cpu']:.2f} s CPU ({run['cpu'] / base['cpu']:.2f}x), "
                f"peak RSS {run['rss_mib']:,.0f} MiB, "
                f"{run['summary']['records_out']:,} written, {made.get('responses_chained', 0):,} chained, "
                f"{made.get('responses_unchained', 0):,} unchained"
            )
        assert bench_calllogs._messages(work / "joined") == bench_calllogs._messages(work / "session"), "joined differs"
        print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
