"""End to end on Prism: ``convnorm --streaming`` as a user runs it, a subprocess with hard
timeouts (a hang fails the test, with its output). Each test is one scenario of the streaming mode:

- the whole path: files present at start and landing later, each read once, outputs and
  summary equal to a batch run over the same files, record by record and field by field;
  the run outlives a lowered ``--job_server_timeout``; counters that move; window progress;
- a crash: SIGKILL in the middle, restart: the lock taken over, the dead run's temporary
  files gone, every record out exactly once, totals exact;
- files that must never stop the job: a FIFO, a symbolic link out of the landing directory,
  a 246-byte name, a name that is not UTF-8, an output path with glob characters, a file
  appended to, a file rewritten, a record over ``--max-record-bytes``;
- a backlog: ``--max-files-per-poll`` bounds what is in flight, a stop drains within
  ``--drain-timeout`` and reports what is left, the next start reads it; ``--new-only``;
- a burst of files landing at once.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prism_build import BUILD_TIMEOUT_S  # noqa: E402
from streaming_runs import (  # noqa: E402
    COUNTED,
    DRAIN_TIMEOUT_S,
    START_TIMEOUT_S,
    Streaming,
    jsonl,
    land,
    no_leftovers,
    outputs_of,
    sample_lines,
    sources,
    sum_of_windows,
)

from pipeline.cli.main import main  # noqa: E402

#: Slow, every one; the first test to ask for Prism may build it (tests/prism_build.py) first.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_TIMEOUT_S + 600)]

#: How long a test waits for a landed file's outputs: a deadline against a hung run, not a
#: latency target (a loaded machine stretches it; bench/bench_streaming.py measures latency).
OUTPUT_TIMEOUT_S = 120


def _batch(tmp_path: Path, files: list[Path], *extra: str) -> Path:
    """A batch run (FnApiRunner) over the same files: the reference."""
    out = tmp_path / "batch"
    # One part per landed file (--part-bytes 0), as streaming writes them: compared file by file.
    argv = [*(f"--input={f}" for f in files), f"--output={out}", "--quiet", "--no-report", "--part-bytes=0", *extra]
    assert main(argv) == 0
    return out


def _same_as_batch(out: Path, batch: Path, files: list[Path]) -> None:
    """Every landed file's outputs equal the batch run's part files of that file, byte for byte,
    and summary.json equals the batch summary.json, field by field."""
    found = sources(out)
    for index, path in enumerate(sorted(files)):  # batch shards are numbered in path order
        versions = found.get(str(path), [])
        assert len(versions) == 1, f"{path}: {len(versions)} outputs"
        directory = versions[0][0]
        for kind in ("normalized", "drops", "dead_letter"):
            reference = batch / kind / f"part-{index:05d}.jsonl"
            expected = reference.read_bytes() if reference.exists() else b""
            assert (directory / f"{kind}.jsonl").read_bytes() == expected, f"{path}: {kind} differs from batch"
    streamed = json.loads((out / "summary.json").read_text())
    reference = json.loads((batch / "summary.json").read_text())
    assert streamed == reference


def test_streaming_end_to_end_equals_batch(tmp_path):
    """Files present at start are read with no flag (they were skipped); a run outlives Beam's
    --job_server_timeout (any run over 300 s failed with DEADLINE_EXCEEDED); the counters line
    moves (it froze at its first value); window and final summaries keep the ledger of
    discarded fields (they lost it), and everything equals a batch run over the same files,
    the token figures (--tokens: refused with --streaming before) and each example's count too."""
    tokens = ["--tokens=o200k_base", "--max-example-tokens=900"]
    lines = sample_lines()
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    present = landing / "a-present.jsonl"
    present.write_bytes(b"".join(lines[:100]))  # there before the run starts
    later = {
        "b-later.jsonl": b"".join(lines[100:200]),
        "c-later.jsonl.gz": gzip.compress(b"".join(lines[200:]), mtime=0),
    }
    with Streaming(tmp_path, landing, out, "run1", "--job_server_timeout=6", *tokens) as run:
        run.wait_started()
        run.wait_for(lambda: outputs_of(out, present), START_TIMEOUT_S, "output of the file present at start")
        (landing / ".hidden.jsonl").write_bytes(lines[0])  # the landing convention: never read
        (landing / "partial.jsonl.tmp").write_bytes(lines[0])
        latencies = {}
        for name, data in later.items():
            landed = land(landing, name, data)
            seen = run.wait_for(lambda n=name: outputs_of(out, landing / n), OUTPUT_TIMEOUT_S, f"output of {name}")
            latencies[name] = seen - landed
            time.sleep(4.5)  # the next file lands in another window
        # Outlive the lowered deadline by a margin, counted from the start of the job.
        run.wait_for(lambda: time.monotonic() - run.started > 20, 30, "20 s of running")
        status = run.stop()
    text = run.log.read_text()
    assert status == 0, text
    assert "SIGTERM: draining" in text and "running total" in text
    counters = [line for line in text.splitlines() if line.startswith("counters: ")]
    assert len(set(counters)) >= 2, f"the counters line does not move: {counters}"
    assert not outputs_of(out, landing / ".hidden.jsonl") and not outputs_of(out, landing / "partial.jsonl.tmp")
    assert not no_leftovers(out), no_leftovers(out)

    # Window summaries: the batch fields, the window, its progress; they add up to summary.json.
    summary = json.loads((out / "summary.json").read_text())
    assert summary["discarded_fields"] > 0 and summary["dropped"] > 0 and summary["dead_letters"] > 0
    assert sum_of_windows(out) == {key: summary[key] for key in COUNTED}
    for path in out.glob("*/summary.json"):
        progress = json.loads(path.read_text())["progress"]
        assert isinstance(progress["rows_per_s"], float) and progress["rows_per_s"] > 0
        assert isinstance(progress["files_done"], int) and progress["files_done"] >= 1
        assert isinstance(progress["files_pending"], int) and isinstance(progress["oldest_pending_age_s"], float)

    files = [present, *(landing / name for name in later)]
    assert summary["tokens"]["examples"] == summary["records_out"] and summary["tokens"]["over_limit_kept"] > 0
    _same_as_batch(out, _batch(tmp_path, files, *tokens), files)
    print("latency from landing to output (s):", {k: round(v, 2) for k, v in latencies.items()})


def test_a_crash_and_a_restart_give_every_record_once_and_exact_totals(tmp_path):
    """The CI miniature of the soak test. SIGKILL while a window is open: the killed run's
    window had no summary and the totals undercounted with accounted true; the restart stopped
    at "stale lock" (exit 2) and left the dead run's temporary files."""
    lines = sample_lines()
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    first = {"f1.jsonl": lines[:120], "f2.jsonl": lines[120:200]}
    with Streaming(tmp_path, landing, out, "killed", "--window=60s") as run:
        run.wait_started()
        land(landing, "f1.jsonl", b"".join(first["f1.jsonl"]))
        run.wait_for(lambda: outputs_of(out, landing / "f1.jsonl"), START_TIMEOUT_S, "output of f1")
        land(landing, "f2.jsonl", b"".join(first["f2.jsonl"]))
        time.sleep(0.5)  # f2 is being admitted or read
        run.kill()
    assert (out / "_convnorm.lock").exists()  # what a crash leaves

    land(landing, "f3.jsonl", b"".join(lines[200:260]))  # lands while convnorm is down
    with Streaming(tmp_path, landing, out, "restarted") as run:
        run.wait_started()
        run.wait_for(
            lambda: all(outputs_of(out, landing / n) for n in ("f2.jsonl", "f3.jsonl")),
            START_TIMEOUT_S,
            "outputs of f2 and f3",
        )
        land(landing, "f4.jsonl", b"".join(lines[260:]))
        run.wait_for(lambda: outputs_of(out, landing / "f4.jsonl"), OUTPUT_TIMEOUT_S, "output of f4")
        status = run.stop()
    assert status == 0, run.text
    assert not no_leftovers(out), no_leftovers(out)
    assert not (out / "_convnorm.lock").exists()

    files = [landing / f"f{i}.jsonl" for i in range(1, 5)]
    _same_as_batch(out, _batch(tmp_path, files), files)  # each file once, totals exact
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 307  # the sample's records (its blank line is not one)
    assert sum_of_windows(out) == {key: summary[key] for key in COUNTED}


def test_files_that_must_not_stop_the_job(tmp_path):
    """A FIFO (the drain never ended), a 246-byte name and a name that is not UTF-8 (each stopped
    the job, on every restart), a symbolic link out of the landing directory (followed), an
    output path holding glob characters (every summary read 0), a file appended to (read once:
    the rest never), a file rewritten (ignored), a record over --max-record-bytes (ignored)."""
    lines = sample_lines()
    landing, outside = tmp_path / "landing", tmp_path / "elsewhere"
    landing.mkdir()
    outside.mkdir()
    (tmp_path / "b").mkdir()
    out = tmp_path / "b" / "out[1]"
    decoy = tmp_path / "b" / "out1" / "20200101T000000Z-20200101T000100Z"
    decoy.mkdir(parents=True)
    (decoy / "summary.json").write_text(json.dumps({"records_in": 999}))  # what a glob would match

    os.mkfifo(landing / "pipe.jsonl")
    (outside / "secret.jsonl").write_bytes(b"".join(lines[:5]))
    os.symlink(outside / "secret.jsonl", landing / "link.jsonl")
    long_name = "l" * 240 + ".jsonl"  # 246 bytes: a temporary name built from it is over 255
    odd_name = b"caf\xe9-latin1.jsonl"
    land(landing, long_name, b"".join(lines[5:15]))
    land(landing, odd_name, b"".join(lines[15:25]))

    def line(i: int, text: str) -> bytes:
        return json.dumps({"id": f"big-{i}", "messages": [{"role": "user", "content": text}]}).encode() + b"\n"

    land(landing, "big.jsonl", line(1, "small") + line(2, "x" * 3000) + line(3, "small"))

    argv = ("--max-record-bytes=2048", "--batch-bytes=1024", "--stop-file=" + str(tmp_path / "stop"))
    with Streaming(tmp_path, landing, out, "odd", *argv) as run:
        run.wait_started()
        land(landing, "grows.jsonl", b"".join(lines[30:40]))
        run.wait_for(lambda: outputs_of(out, landing / "grows.jsonl"), START_TIMEOUT_S, "output of grows.jsonl")
        with (landing / "grows.jsonl").open("ab") as handle:  # appended in place
            handle.write(b"".join(lines[40:50]))
        land(landing, "redo.jsonl", b"".join(lines[50:55]))
        run.wait_for(lambda: outputs_of(out, landing / "redo.jsonl"), OUTPUT_TIMEOUT_S, "output of redo.jsonl")
        land(landing, "redo.jsonl", b"".join(lines[55:58]))  # rewritten under the same name
        run.wait_for(lambda: len(outputs_of(out, landing / "redo.jsonl")) == 2, OUTPUT_TIMEOUT_S, "redo.jsonl again")
        run.wait_for(lambda: len(outputs_of(out, landing / "grows.jsonl")) == 2, OUTPUT_TIMEOUT_S, "grows.jsonl's rest")
        run.wait_for(lambda: len(sources(out)) == 5, OUTPUT_TIMEOUT_S, "every readable file")
        (tmp_path / "stop").write_text("")
        status = run.finish()
    text = run.text
    assert status == 0, text
    assert "pipe.jsonl is a FIFO" in text
    assert "link.jsonl is a symbolic link that leads out of the landing directory" in text

    found = sources(out)
    assert str(landing / "link.jsonl") not in found and str(landing / "pipe.jsonl") not in found
    long_out = found[str(landing / long_name)]
    assert len(long_out) == 1 and len(long_out[0][0].name.encode()) < 255
    assert long_out[0][1]["totals"]["records_in"] == 10
    odd = [versions for source, versions in found.items() if "caf" in source and "latin1" in source]
    assert len(odd) == 1 and odd[0][0][1]["totals"]["records_in"] == 10
    assert odd[0][0][1]["source"].endswith("caf\\xe9-latin1.jsonl")  # the escaped name, as batch shows it

    # Appended: the rest read as version 2, from the byte where version 1 ended.
    grows = found[str(landing / "grows.jsonl")]
    assert [doc["totals"]["records_in"] for _, doc in grows] == [10, 10]
    assert grows[1][1]["why"] == "appended" and grows[1][1]["start"] == len(b"".join(lines[30:40]))
    ids = [r["id"] for directory, _ in grows for r in jsonl(directory / "normalized.jsonl")]
    ids += [d["position"] for directory, _ in grows for d in jsonl(directory / "dead_letter.jsonl")]
    assert len(ids) == len(set(ids)) == 20
    # Rewritten: read again whole, as version 2.
    redo = found[str(landing / "redo.jsonl")]
    assert [(doc["why"], doc["totals"]["records_in"]) for _, doc in redo] == [("new", 5), ("rewritten", 3)]
    assert redo[1][0].name.endswith("-v2")
    # --max-record-bytes: the big record is a dead letter.
    big_out = found[str(landing / "big.jsonl")][0][0]
    assert [d["reason"] for d in jsonl(big_out / "dead_letter.jsonl")] == ["record_too_large"]

    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == sum(doc["totals"]["records_in"] for v in found.values() for _, doc in v) == 51
    assert summary["accounted"]
    assert sum_of_windows(out)["records_in"] == 51  # the decoy in out1/ is not read


def test_a_backlog_is_bounded_a_stop_drains_in_time_and_reports_what_is_left(tmp_path):
    """1,390 queued files took 348 s to drain after SIGTERM: --max-files-per-poll bounds what is
    in flight, --drain-timeout bounds the drain, the files left are named and read next time;
    --new-only leaves the files present at start alone."""
    lines = [line for line in sample_lines() if line.strip()]  # 307 records, one a line
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    for i in range(30):
        land(landing, f"tiny-{i:02d}.jsonl", b"".join(lines[i * 10 : i * 10 + 10]))
    pause = tmp_path / "paused"
    env = {
        "CONVNORM_TEST_PAUSE_AT": "streaming-commit",
        "CONVNORM_TEST_PAUSE_FILE": str(pause),
        "CONVNORM_TEST_PAUSE_SECONDS": "600",
    }
    argv = ("--max-files-per-poll=2", "--drain-timeout=3s")
    with Streaming(tmp_path, landing, out, "backlog", *argv, env=env) as run:
        run.wait_started()
        run.wait_for(lambda: pause.exists() and len(sources(out)) >= 3, START_TIMEOUT_S, "a paused file and 3 done")
        stopped = time.monotonic()
        status = run.stop(timeout=300)
        drain = time.monotonic() - stopped
    text = run.text
    assert status == 0, text
    # Bounded by --drain-timeout, not by the paused file (600 s): the margin is wide so that a
    # loaded machine's slower stop is no failure.
    assert drain < 300, f"the drain took {drain:.1f} s"
    assert "--drain-timeout" in text and "cancelling" in text
    done = len(sources(out))
    assert 3 <= done < 30
    assert f"left pending: {30 - done} file(s) not read yet" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 10 * done and summary["accounted"]
    assert not no_leftovers(out)

    land(landing, "not-new.jsonl", lines[300])  # present at the next start: --new-only ignores it
    with Streaming(tmp_path, landing, out, "new-only", "--new-only") as run:
        run.wait_started()
        land(landing, "new.jsonl", lines[301])
        run.wait_for(lambda: outputs_of(out, landing / "new.jsonl"), START_TIMEOUT_S, "output of new.jsonl")
        assert run.stop() == 0, run.text
    assert not outputs_of(out, landing / "not-new.jsonl")
    assert len(sources(out)) == done + 1  # the backlog too is left alone
    assert f"--new-only: {30 - done + 1} file(s) present at start were left alone" in run.text

    with Streaming(tmp_path, landing, out, "rest", "--stop-after=40s") as run:
        run.wait_started()
        run.wait_for(lambda: len(sources(out)) == 32, START_TIMEOUT_S, "every file")
        assert run.stop() == 0, run.text
    assert "left pending: none" in run.text
    for name in [f"tiny-{i:02d}.jsonl" for i in range(30)] + ["not-new.jsonl", "new.jsonl"]:
        assert len(outputs_of(out, landing / name)) == 1, name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 302 and summary["accounted"]


def test_a_burst_of_files_landing_at_once_all_get_their_outputs(tmp_path):
    """Regression: ten 2,000-record files landing together. A design that shuffled each file's
    batches to a stateful DoFn lost two files' outputs on Prism (a split bundle's remainder ran
    before the first part's state was committed)."""
    from prism_build import ROOT

    sys.path.insert(0, str(ROOT / "bench"))
    from corpus import jsonl_lines

    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    files = {f"burst-{i}.jsonl": b"".join(line + b"\n" for line in jsonl_lines(2000, seed=500 + i)) for i in range(10)}
    with Streaming(tmp_path, landing, out, "burst", "--window=60s") as run:
        run.wait_started()
        for name, data in files.items():
            land(landing, name, data)
        run.wait_for(lambda: len(sources(out)) == len(files), 120, "outputs of every burst file")
        assert run.stop(DRAIN_TIMEOUT_S) == 0, run.text
    for name in files:
        found = outputs_of(out, landing / name)
        assert len(found) == 1, name
        assert len(jsonl(found[0] / "normalized.jsonl")) == 2000
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 20000 == summary["records_out"] + summary["dead_letters"]
