"""End to end on Prism: ``convnorm --streaming`` watches an empty landing directory, three
files land a few seconds apart (one with defects, one with a malformed line, one gzipped),
each file's outputs appear within LATENCY_BOUND_S, SIGTERM drains and exits 0, the window
summaries add up to summary.json, every record is accounted for exactly once; then a restart
with --include-existing reads only the file that arrived while it was down.

The job runs as a subprocess with hard timeouts (a hang fails the test, with its output).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prism_build import BUILD_TIMEOUT_S, ROOT, prism_binary  # noqa: E402

from pipeline.main import main  # noqa: E402
from pipeline.streaming import source_id  # noqa: E402

#: The first test to ask for Prism may build it (tests/prism_build.py) before its run.
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT_S + 600)

#: The issue's bound from a file landing to its outputs being visible.
LATENCY_BOUND_S = 15
START_TIMEOUT_S = 60
DRAIN_TIMEOUT_S = 60
WINDOW = "4s"
SECONDS_BETWEEN_FILES = 3


def _call(call_id: str) -> dict:
    return {"tool_call_id": call_id, "name": "lookup", "args": {"q": call_id}}


def _with_defects(i: int) -> dict:
    kinds = [
        [
            {"role": "user", "content": "weather?"},  # unanswered call: healed
            {"role": "assistant", "content": "", "tool_calls": [_call(f"u{i}")]},
        ],
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},  # orphan result
            {"role": "tool", "content": "stray", "tool_call_id": "ghost"},
        ],
        [
            {"role": "tool", "content": "early", "tool_call_id": "x"},  # leading tool result
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "ok"},
        ],
        [{"role": "user", "content": f"clean {i} ✓"}, {"role": "assistant", "content": "fine"}],
    ]
    return {"id": f"defects-{i:02d}", "messages": kinds[i % len(kinds)]}


def _clean(prefix: str, i: int) -> dict:
    return {
        "id": f"{prefix}-{i:02d}",
        "meta": {"n": i},
        "messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}],
    }


def _lines(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)


DEFECTS = _lines([_with_defects(i) for i in range(12)])  # 12 records, 9 with drops
MALFORMED = (
    _lines([_clean("mal", i) for i in range(4)])
    + b'{"id": "broken", "messages": [\n'
    + _lines([_clean("mal", i) for i in range(4, 8)])
)  # 9 records, 1 of them invalid JSON
GZIPPED = gzip.compress(_lines([_clean("gz", i) for i in range(7)]), mtime=0)  # 7 records
LATE = _lines([_clean("late", i) for i in range(5)])  # lands while convnorm is stopped


def _land(landing: Path, name: str, data: bytes) -> float:
    """The landing convention: write under a dot-name, rename into place; returns the time."""
    temp = landing / f".{name}.partial"
    temp.write_bytes(data)
    os.rename(temp, landing / name)
    return time.monotonic()


def _start(landing: Path, out: Path, log: Path, *extra: str) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-m",
        "pipeline",
        "--streaming",
        "--runner=PrismRunner",
        f"--prism_location={prism_binary()}",
        f"--input={landing}/*.jsonl",
        f"--input={landing}/*.jsonl.gz",
        f"--output={out}",
        f"--window={WINDOW}",
        "--poll-interval=0.5s",
        *extra,
    ]
    with log.open("wb") as handle:
        return subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT)


def _wait_for(predicate, timeout: float, proc: subprocess.Popen, log: Path, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"convnorm exited ({proc.returncode}) waiting for {what}:\n{log.read_text()}")
        if time.monotonic() - start > timeout:
            proc.kill()
            raise AssertionError(f"no {what} within {timeout} s:\n{log.read_text()}")
        time.sleep(0.1)
    return time.monotonic()


def _outputs_of(out: Path, name: str) -> list[Path]:
    return sorted(out.glob(f"*/{source_id(str(name))}/source.json"))


def _finish(proc: subprocess.Popen, log: Path, timeout: float) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"convnorm did not finish within {timeout} s:\n{log.read_text()}") from None


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


COUNTED = (
    "records_in",
    "records_out",
    "dead_letters",
    "blank_lines",
    "messages_in",
    "messages_out",
    "dropped",
    "healed",
    "conversations_with_drops",
)


def _sum_of_windows(out: Path) -> dict:
    total = dict.fromkeys(COUNTED, 0)
    for path in out.glob("*/summary.json"):
        doc = json.loads(path.read_text())
        assert doc["accounted"], path
        for key in COUNTED:
            total[key] += doc[key]
    return total


@pytest.mark.slow
def test_streaming_on_prism_end_to_end(tmp_path):
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    log = tmp_path / "run1.log"
    proc = _start(landing, out, log)
    try:
        _wait_for(lambda: "watching" in log.read_text(), START_TIMEOUT_S, proc, log, "start")
        # Never read: a dot-file and a .tmp file (the landing convention).
        (landing / ".hidden.jsonl").write_bytes(DEFECTS)
        (landing / "partial.jsonl.tmp").write_bytes(DEFECTS)
        latencies = {}
        for name, data in (("defects.jsonl", DEFECTS), ("malformed.jsonl", MALFORMED), ("gzipped.jsonl.gz", GZIPPED)):
            landed = _land(landing, name, data)
            path = landing / name
            seen = _wait_for(lambda p=path: _outputs_of(out, p), LATENCY_BOUND_S, proc, log, f"output of {name}")
            latencies[name] = seen - landed
            time.sleep(SECONDS_BETWEEN_FILES)
        proc.send_signal(signal.SIGTERM)
        status = _finish(proc, log, DRAIN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert status == 0, text
    assert "SIGTERM: draining" in text and "running total" in text
    assert "counters: records_in " in text  # the Beam counters, live, once per window

    # Each file exactly once, complete; the ignored ones not at all.
    expected = {"defects.jsonl": (12, 12, 0), "malformed.jsonl": (9, 8, 1), "gzipped.jsonl.gz": (7, 7, 0)}
    for name, (records, normalized, dead) in expected.items():
        found = _outputs_of(out, landing / name)
        assert len(found) == 1, f"{name}: {found}"
        directory = found[0].parent
        source = json.loads(found[0].read_text())
        assert (source["records_in"], source["records_out"], source["dead_letters"]) == (records, normalized, dead)
        assert len(_jsonl(directory / "normalized.jsonl")) == normalized
        assert len(_jsonl(directory / "drops.jsonl")) == normalized
        assert len(_jsonl(directory / "dead_letter.jsonl")) == dead
    malformed_dir = _outputs_of(out, landing / "malformed.jsonl")[0].parent
    assert [d["reason"] for d in _jsonl(malformed_dir / "dead_letter.jsonl")] == ["invalid_json"]
    assert not _outputs_of(out, landing / ".hidden.jsonl") and not _outputs_of(out, landing / "partial.jsonl.tmp")
    assert len(list(out.glob("*/*/source.json"))) == 3
    assert not [p for p in out.rglob(".*")], "temporaries or the stop marker left behind"

    # The summaries add up; every record is accounted for.
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 28 == summary["records_out"] + summary["dead_letters"]
    assert summary["accounted"]
    assert summary["dropped"] > 0 and summary["healed"] > 0
    assert _sum_of_windows(out) == {key: summary[key] for key in COUNTED}

    # The streaming outputs are the batch job's, byte for byte (FnApiRunner, same file).
    batch_out = tmp_path / "batch"
    assert main([f"--input={landing / 'defects.jsonl'}", f"--output={batch_out}"]) == 0
    defects_dir = _outputs_of(out, landing / "defects.jsonl")[0].parent
    assert (defects_dir / "normalized.jsonl").read_bytes() == (batch_out / "normalized/part-00000.jsonl").read_bytes()
    assert (defects_dir / "drops.jsonl").read_bytes() == (batch_out / "drops/part-00000.jsonl").read_bytes()

    # A restart with --include-existing reads only the file without output; a stop file ends it.
    _land(landing, "late.jsonl", LATE)
    log2, stop_file = tmp_path / "run2.log", tmp_path / "stop-now"
    proc = _start(landing, out, log2, "--include-existing", f"--stop-file={stop_file}")
    try:
        _wait_for(lambda: _outputs_of(out, landing / "late.jsonl"), START_TIMEOUT_S, proc, log2, "output of late.jsonl")
        stop_file.write_text("")
        status = _finish(proc, log2, DRAIN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert status == 0, log2.read_text()
    assert "3 already have output" in log2.read_text()
    assert len(_outputs_of(out, landing / "late.jsonl")) == 1
    for name in expected:
        assert len(_outputs_of(out, landing / name)) == 1, f"{name} processed again"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 28 + 5 == summary["records_out"] + summary["dead_letters"]
    assert _sum_of_windows(out) == {key: summary[key] for key in COUNTED}

    # Once more with everything done: nothing is read, --stop-after ends it, totals unchanged.
    log3 = tmp_path / "run3.log"
    proc = _start(landing, out, log3, "--include-existing", "--stop-after=3s")
    assert _finish(proc, log3, START_TIMEOUT_S + DRAIN_TIMEOUT_S) == 0, log3.read_text()
    assert "4 already have output" in log3.read_text()
    assert len(list(out.glob("*/*/source.json"))) == 4
    assert json.loads((out / "summary.json").read_text()) == summary
    print("latency from landing to output (s):", {k: round(v, 2) for k, v in latencies.items()})


@pytest.mark.slow
def test_a_burst_of_files_landing_at_once_all_get_their_outputs(tmp_path):
    """Regression: ten 2,000-record files landing together. A design that shuffled each file's
    batches to a stateful DoFn lost two files' outputs on Prism (a split bundle's remainder ran
    before the first part's state was committed)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from corpus import jsonl_lines

    landing, out, log = tmp_path / "landing", tmp_path / "out", tmp_path / "burst.log"
    landing.mkdir()
    files = {f"burst-{i}.jsonl": b"".join(line + b"\n" for line in jsonl_lines(2000, seed=500 + i)) for i in range(10)}
    proc = _start(landing, out, log, "--window=60s")
    try:
        _wait_for(lambda: "watching" in log.read_text(), START_TIMEOUT_S, proc, log, "start")
        for name, data in files.items():
            _land(landing, name, data)
        _wait_for(
            lambda: len(list(out.glob("*/*/source.json"))) == len(files), 120, proc, log, "outputs of every burst file"
        )
        proc.send_signal(signal.SIGTERM)
        assert _finish(proc, log, DRAIN_TIMEOUT_S) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for name in files:
        found = _outputs_of(out, landing / name)
        assert len(found) == 1, name
        assert len(_jsonl(found[0].parent / "normalized.jsonl")) == 2000
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 20000 == summary["records_out"] + summary["dead_letters"]
