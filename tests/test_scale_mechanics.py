"""Planning and finalizing that scale with the input: finalize trusts each file's
measure taken while writing and checks sizes by listing, renames in batches; planning resolves
each input directory once; the plan travels in chunks. The figures: bench/bench_scale.py."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.execution import finalize
from pipeline.graph.read import CreateParts, pack_parts, unpack_parts
from pipeline.io import files
from pipeline.io import ownership as outputs
from pipeline.io.output_names import MANIFEST_FILE, SUCCESS_FILE
from pipeline.io.ownership import plan_inputs, skipped_inputs
from pipeline.io.planning import plan_shards, shard_sizes
from pipeline.io.shard import Shard

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _run(*argv) -> int:
    return main([str(a) for a in argv] + ["--quiet", "--no-report"])


@pytest.mark.slow
def test_finalize_reads_no_output_back_and_the_manifest_holds_each_files_sha256(tmp_path, monkeypatch):
    read_back = []
    monkeypatch.setattr(outputs, "measure", lambda path, parquet=None: read_back.append(path))
    monkeypatch.setattr(finalize, "measure", lambda path, parquet=None: read_back.append(path))
    opened = []
    original = files._open_directory

    def open_directory(root, parts):
        opened.append(tuple(parts))
        return original(root, parts)

    monkeypatch.setattr(files, "_open_directory", open_directory)
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out, "--shard-bytes=65536") == 0
    assert not read_back
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    parts = [entry for entry in manifest["files"] if "/part-" in entry["path"]]
    assert len(parts) > 6
    for entry in manifest["files"]:
        data = (out / entry["path"]).read_bytes()
        assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
        if entry["path"].endswith(".jsonl"):
            assert entry["records"] == data.count(b"\n")
    # Each output directory opened once to move its files into, not once per file.
    moved_into = [p for p in opened if p in {("normalized",), ("drops",), ("dead_letter",)}]
    assert sorted(moved_into) == [("dead_letter",), ("drops",), ("normalized",)]
    assert (out / SUCCESS_FILE).exists()


def test_object_store_moves_go_in_lists(tmp_path, monkeypatch):
    # What an object store gets: FileSystems.rename with lists of at most MOVE_BATCH files.
    for i in range(5):
        (tmp_path / f"t{i}").write_text(str(i))
    (tmp_path / "out" / "normalized").mkdir(parents=True)
    calls = []
    original = files.FileSystems.rename

    def rename(sources, destinations):
        calls.append(len(sources))
        return original(sources, destinations)

    monkeypatch.setattr(files.FileSystems, "rename", rename)
    monkeypatch.setattr(files, "is_local", lambda path: False)
    monkeypatch.setattr(files, "MOVE_BATCH", 2)
    moves = [(str(tmp_path / f"t{i}"), f"normalized/part-{i}") for i in range(5)] + [
        (str(tmp_path / "gone"), "normalized/x")
    ]
    failed = files.move_many(moves, str(tmp_path / "out"))
    assert calls == [2, 2, 2] and list(failed) == ["normalized/x"]
    assert sorted(p.name for p in (tmp_path / "out" / "normalized").iterdir()) == [f"part-{i}" for i in range(5)]


@pytest.mark.slow
def test_a_file_changed_after_writing_is_read_back_and_fails_the_run(tmp_path, monkeypatch):
    # A temporary file of another size than its writer reported is read back, and the run says
    # what it holds (one of the same size is not seen: the writer's measure is trusted).
    original = finalize._load_reports

    def load_then_grow(temp_dir, names):
        reports = original(temp_dir, names)
        with open(reports["normalized"][0].temp, "ab") as handle:
            handle.write(b"{}\n")
        return reports

    monkeypatch.setattr(finalize, "_load_reports", load_then_grow)
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 1
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["complete"] is False
    assert "normalized/part-00000.jsonl holds 302 records" in manifest["missing"][0]
    entry = next(e for e in manifest["files"] if e["path"] == "normalized/part-00000.jsonl")
    data = (out / entry["path"]).read_bytes()
    assert entry["sha256"] == hashlib.sha256(data).hexdigest() and entry["records"] == 302
    assert not (out / SUCCESS_FILE).exists()


@pytest.mark.parametrize("others", [0, 40], ids=["few-files", "many-files"])
def test_inputs_inside_the_output_are_found_through_links_to_directories_and_files(tmp_path, others):
    """``others``: more files beside them, so that one listing of the directory (not an lstat
    per file) says which are links."""
    out = tmp_path / "out"
    (out / "normalized").mkdir(parents=True)
    (out / "normalized" / "part-00000.jsonl").write_text("{}\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "mine.jsonl").write_text("{}\n")
    for n in range(others):
        (data / f"other-{n:02d}.jsonl").write_text("{}\n")
    (data / "into-output").symlink_to(out / "normalized")  # a directory link into the output
    (data / "file-link.jsonl").symlink_to(out / "normalized" / "part-00000.jsonl")  # a file link
    shards = plan_shards([str(data / "*.jsonl"), str(data / "into-output" / "*.jsonl")])
    assert len(shards) == 3 + others
    skipped = skipped_inputs(shards, str(out))
    assert skipped == sorted([str(data / "file-link.jsonl"), str(data / "into-output" / "part-00000.jsonl")])
    kept = plan_inputs(shards, [str(data / "*.jsonl")], str(out))
    assert str(data / "mine.jsonl") in [s.path for s in kept] and len(kept) == 1 + others
    assert [s.number for s in kept] == list(range(len(kept)))
    # A directory input reads the file link into the output as a link that leads out of it:
    # refused unless --follow-symlinks, and then found inside the output and skipped.
    refused: list[str] = []
    listed = plan_shards([str(data)], refused=refused)
    assert len(listed) == 1 + others and "file-link.jsonl is a symbolic link that leads out" in refused[0]
    followed = plan_shards([str(data)], follow_symlinks=True)
    assert skipped_inputs(followed, str(out)) == [str(data / "file-link.jsonl")]


def test_planning_keeps_file_sizes_so_progress_needs_no_lookups(tmp_path, monkeypatch):
    (tmp_path / "a.jsonl").write_bytes(b"{}\n" * 100_000)
    (tmp_path / "b.jsonl").write_bytes(b"{}\n")
    shards = plan_shards([str(tmp_path / "*.jsonl")], shard_bytes=65536)
    assert {s.file_size for s in shards} == {300_000, 3}
    from apache_beam.io.filesystems import FileSystems

    monkeypatch.setattr(FileSystems, "match", lambda *a, **k: pytest.fail("a file was looked up again"))
    assert sum(shard_sizes(shards)) == 300_003
    # A shard planned elsewhere (streaming) has no size: it is looked up.
    monkeypatch.undo()
    assert shard_sizes([Shard(0, str(tmp_path / "b.jsonl"), ".jsonl", 0, None)]) == [3]


@pytest.mark.slow
def test_the_plan_travels_in_chunks_and_every_part_arrives_once():
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from pipeline.io.parts import Part

    shards = [Shard(i, f"f{i}.jsonl", ".jsonl", 0, None) for i in range(2501)]
    # Parts of one shard each, and the last of two: a part is never cut between chunks.
    parts = [Part(i, (shards[i],)) for i in range(2499)] + [Part(2499, (shards[2499], shards[2500]))]
    with TestPipeline(options=beam.options.pipeline_options.PipelineOptions(["--runner=FnApiRunner"])) as p:
        got = p | CreateParts(parts) | beam.FlatMap(lambda part: [s.number for s in part.shards])
        assert_that(got, equal_to(list(range(2501))))
        chunked = p | "Few" >> CreateParts(parts[:7], chunks=3) | "Index" >> beam.Map(lambda part: part.number)
        assert_that(chunked, equal_to(list(range(7))), label="seven")
    assert CreateParts(parts)._chunks == 1000  # a Create of 1,000 elements, not 2,500
    assert CreateParts(parts[:7])._chunks == 7  # a small plan: one element per part
    assert unpack_parts(pack_parts(parts[-3:])) == parts[-3:]


def test_listing_a_directory_gives_sizes_and_marks_what_is_not_a_file(tmp_path):
    from pipeline.io.files import sizes_in

    (tmp_path / "a").write_bytes(b"123")
    (tmp_path / "d").mkdir()
    (tmp_path / "l").symlink_to(tmp_path / "a")
    assert sizes_in(str(tmp_path)) == {str(tmp_path / "a"): 3, str(tmp_path / "d"): -1, str(tmp_path / "l"): -1}
    assert sizes_in(str(tmp_path / "missing")) == {}
    # Taken literally: a path with glob characters is not a pattern.
    (tmp_path / "o[1]").mkdir()
    (tmp_path / "o1").mkdir()
    (tmp_path / "o1" / "x").write_bytes(b"x")
    assert sizes_in(str(tmp_path / "o[1]")) == {}
    assert os.path.exists(tmp_path / "o1" / "x")
