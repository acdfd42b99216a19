"""Inputs that change under a batch run: truncated, replaced by a rename, rewritten between the
plan and the reading. The plan holds each local file's size, modification time, inode and
device; the reader compares them with the file it opened (when it opens it and when it is done)
and with what the path names at the end. A change is one ``input_changed`` dead letter, the run
exits 1 and writes no ``_SUCCESS``: before, a file truncated mid-run gave exit 0, ``_SUCCESS``
and ``accounted: true`` with half its records never read, and no word of it."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import paused_runs
import pytest

from pipeline.cli.main import main
from pipeline.io import read_shard as shard_reader
from pipeline.io.planning import plan_shards
from pipeline.io.read_shard import read_shard
from pipeline.io.shard import BLANK, Shard
from transforms.record.inputs import Unreadable

LINE = '{"id":"r%05d","messages":[{"role":"user","content":"hello there"},{"role":"assistant","content":"hi"}]}\n'
#: Records of a test input: ~200 KB, many times a read buffer, so a change mid-read is seen.
RECORDS = 2000


def _content(n: int = RECORDS, start: int = 0) -> bytes:
    return "".join(LINE % i for i in range(start, start + n)).encode()


def _records(items) -> list:
    return [item for item in items if item is not BLANK]


def _changed(items) -> list:
    return [i for i in items if isinstance(i.payload, Unreadable) and i.payload.reason == "input_changed"]


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 4)


def _replace(path: Path) -> None:
    """Another file put at the name by a rename (how tools replace a file atomically)."""
    new = path.with_name(path.name + ".new")
    new.write_bytes(_content(RECORDS // 2, start=50_000))
    os.replace(new, path)


# --------------------------------------------------------------------------------------------
# The reader (plain generators)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".json"])
def test_a_file_replaced_between_the_plan_and_the_reading_is_not_read(suffix, tmp_path):
    path = tmp_path / f"in{suffix}"
    data = _content(10)
    if suffix == ".json":
        data = json.dumps([json.loads(line) for line in data.splitlines()]).encode()
    path.write_bytes(gzip.compress(data) if suffix == ".jsonl.gz" else data)
    (shard,) = plan_shards([str(path)])
    _replace(path)
    items = _records(read_shard(shard))
    assert [i.payload.reason for i in items] == ["input_changed"]  # the new file's records are not read
    assert items[0].position == 0 and items[0].source == str(path)
    assert "when it was opened" in items[0].payload.detail and "another file" in items[0].payload.detail


def test_a_file_truncated_while_it_is_read_ends_in_an_input_changed_record(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(_content())
    (shard,) = plan_shards([str(path)])
    items = read_shard(shard)
    first = next(items)
    _truncate(path)
    rest = _records([first, *items])
    assert len(rest) < RECORDS // 2  # the records past the cut were never there to read
    (changed,) = _changed(rest)
    assert changed is rest[-1]
    detail = changed.payload.detail
    assert f"planned {len(_content()):,} bytes" in detail and f"now {path.stat().st_size:,}" in detail


def test_a_file_replaced_by_a_rename_while_it_is_read_ends_in_an_input_changed_record(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(_content())
    (shard,) = plan_shards([str(path)])
    items = read_shard(shard)
    first = next(items)
    _replace(path)
    rest = _records([first, *items])
    # The open file is read to its end (it is the one planned), then the name is looked at.
    assert len(rest) == RECORDS + 1
    (changed,) = _changed(rest)
    assert changed is rest[-1] and changed.position == rest[-2].position + 1  # after the last record read
    assert "names another file" in changed.payload.detail


def test_a_file_removed_while_it_is_read_ends_in_an_input_changed_record(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(_content())
    (shard,) = plan_shards([str(path)])
    items = read_shard(shard)
    first = next(items)
    path.unlink()
    rest = _records([first, *items])
    (changed,) = _changed(rest)
    assert changed is rest[-1] and "no longer there" in changed.payload.detail


def test_a_file_that_grew_while_it_is_read_ends_in_an_input_changed_record(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(_content())
    (shard,) = plan_shards([str(path)])
    items = read_shard(shard)
    first = next(items)
    with path.open("ab") as handle:
        handle.write(_content(5, start=90_000))
    rest = _records([first, *items])
    assert rest[-1].payload.reason == "input_changed" and len(_changed(rest)) == 1


def test_a_shard_of_a_file_cut_short_says_so_once(tmp_path):
    # Two byte ranges of one file, the second planned past where the file now ends.
    path = tmp_path / "in.jsonl"
    path.write_bytes(_content())
    shards = plan_shards([str(path)], shard_bytes=len(_content()) // 2 + 1)
    assert len(shards) == 2
    _truncate(path)
    assert [i.payload.reason for i in _records(read_shard(shards[1]))] == ["input_changed"]


def test_an_unchanged_file_and_a_shard_without_a_plan_read_as_before(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(_content(20))
    (shard,) = plan_shards([str(path)])
    assert not _changed(_records(read_shard(shard)))
    # Streaming and `convnorm explain` read shards of no plan: they look at changes themselves.
    unplanned = Shard(0, str(path), ".jsonl", 0, None)
    path.write_bytes(_content(10))
    assert len(_records(read_shard(unplanned))) == 10


# --------------------------------------------------------------------------------------------
# Runs: the change made while a batch is being read (the "reading" pause point, in-process)


def _change_while_reading(monkeypatch, change) -> None:
    """Make ``change`` when the first shard being read has handed on its first batch."""
    done: list[str] = []

    def pause_point(point: str) -> None:
        if point == "reading" and not done:
            done.append(point)
            change()

    monkeypatch.setattr(shard_reader, "pause_point", pause_point)


def _dead_letters(out: Path) -> list[dict]:
    return [
        json.loads(line) for p in sorted((out / "dead_letter").glob("part-*")) for line in p.read_text().splitlines()
    ]


def _assert_refused(out: Path, path: Path, status: int, err: str) -> None:
    assert status == 1
    assert not (out / "_SUCCESS").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dead_letters_by_reason"]["input_changed"] == 1
    letters = [d for d in _dead_letters(out) if d["reason"] == "input_changed"]
    assert [d["source"] for d in letters] == [str(path)]
    manifest = json.loads((out / "_convnorm_manifest.json").read_text())
    assert manifest["complete"] is False and any("changed" in m for m in manifest["missing"])
    assert "an input changed while the run read it (1 input_changed dead letter" in err
    assert f"convnorm: error: {path}: " in err  # which file, and how


@pytest.mark.parametrize("change", [_truncate, _replace], ids=["truncated", "replaced"])
def test_a_run_whose_input_changes_while_read_exits_1_without_success(change, tmp_path, monkeypatch, capsys):
    path, out = tmp_path / "in.jsonl", tmp_path / "out"
    path.write_bytes(_content())
    _change_while_reading(monkeypatch, lambda: change(path))
    argv = ["--input", str(path), "--output", str(out), "--batch-size", "50", "--no-report"]
    status = main(argv)
    _assert_refused(out, path, status, capsys.readouterr().err)


@pytest.mark.slow
def test_a_paused_run_whose_input_is_truncated_under_it_exits_1(tmp_path):
    """The same, in a run of its own, with worker processes: the change made from outside."""
    path, out = tmp_path / "in.jsonl", tmp_path / "out"
    path.write_bytes(_content())
    argv = ["--input", path, "--output", out, "--batch-size", "50"]
    argv += ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    proc, ready = paused_runs.start_paused(argv, "reading", tmp_path)
    try:
        _truncate(path)
        status, printed = paused_runs.resume(proc, ready)
    finally:
        paused_runs.kill(proc)
    _assert_refused(out, path, status, printed)
    assert "WARNING: an input changed while it was read" in printed  # the summary table
    assert "An input changed while the run read it" in (out / "report.html").read_text()


def test_the_verdicts_of_run_and_validate_and_the_table_say_an_input_changed():
    from transforms.totals.summary import RUN, VALIDATE, finalize, finalize_validation

    run, validation = finalize({}), finalize_validation({})
    for view, doc in ((RUN, run), (VALIDATE, validation)):
        assert view.verdict(doc).status == 0
        doc["dead_letters_by_reason"]["input_changed"] = doc["dead_letters"] = doc["records_in"] = 1
        status, errors = view.verdict(doc)
        assert status == 1 and any("an input changed while the run read it" in e for e in errors)
    assert "WARNING: an input changed while it was read" in RUN.format_table(run)
