"""convnorm run on call logs: every export family's samples in one directory, auto-detected,
their conversations assembled, the same bytes whatever the runner or the split."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from engine_outputs import assert_same_outputs, write_call_log_input

from pipeline.cli.main import main


def _lines(directory: Path) -> list[bytes]:
    return [line for part in sorted(directory.glob("part-*")) for line in part.read_bytes().splitlines()]


def _run(patterns: list[str], out: Path, *extra: str) -> dict:
    inputs = [arg for pattern in patterns for arg in ("--input", pattern)]
    assert main([*inputs, "--output", str(out), "--quiet", "--no-report", *extra]) in (0, 1)
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def calls_input(tmp_path_factory) -> list[str]:
    return write_call_log_input(tmp_path_factory.mktemp("calls") / "input")


@pytest.fixture(scope="module")
def calls_run(tmp_path_factory, calls_input) -> Path:
    out = tmp_path_factory.mktemp("calls-run") / "out"
    _run(calls_input, out)
    return out


def test_a_directory_of_exports_is_read_assembled_and_accounted(calls_run):
    summary = json.loads((calls_run / "summary.json").read_text())
    calls = summary["call_logs"]
    assert summary["accounted"]
    # Each record gives a call, a tool result, a part of a call read apart (joined by key) or
    # labels (no call of their own).
    pieces = calls["calls"] + calls.get("fragments", 0)
    labels = summary.get("labels", {}).get("read", 0)
    assert calls["records"] > 0 and pieces >= calls["records"] - calls["tool_results"] - labels
    assert calls["conversations"] >= 1
    # Every call is in exactly one conversation's account, and each conversation is written.
    drops = [json.loads(line) for line in _lines(calls_run / "drops")]
    assembled = [d for d in drops if "assembly" in d]
    # (Calls read in parts, a LangSmith post and its patch, OTel events split over documents,
    # are counted once joined.)
    assert sum(len(d["assembly"]["calls"]) for d in assembled) == calls["calls"] + calls["calls_joined"]
    assert sum(d["assembly"]["collapsed"] for d in assembled) == calls["prefixes_collapsed"]
    assert (
        len(assembled) + summary["dead_letters_by_reason"]["no_llm_calls"]
        >= calls["conversations"] - (summary["dead_letters"])
    )
    # No call-log record is read as a conversation of its own, or refused as unknown.
    assert summary["dead_letters_by_reason"]["unknown_format"] == 0
    formats = {d["assembly"]["format"] for d in assembled}
    assert len(formats) >= 3, formats
    # The whole conversations beside them are read as they always were (the other dead letters
    # are call logs': a group's, or a part of a record refused alone).
    call_log_letters = summary["dead_letters_by_reason"]["no_llm_calls"] + calls.get("parts_refused", 0)
    assert calls.get("parts_refused", 0) == 3  # the claude-agent trace's three unreadable generations
    assert len(drops) - len(assembled) == 20 - summary["dead_letters"] + call_log_letters


def test_assembled_conversations_follow_the_input_shards_sorted(calls_run):
    parts = sorted((calls_run / "normalized").glob("part-*"))
    manifest = json.loads((calls_run / "_convnorm_manifest.json").read_text())
    assert manifest and parts
    ids = [json.loads(line)["id"] for line in _lines(calls_run / "normalized")]
    assert len(ids) == len(set(ids)), "an assembled id twice"


def test_explain_shows_the_calls_that_made_a_conversation(calls_run, capsys):
    drops = [json.loads(line) for line in _lines(calls_run / "drops")]
    most = max((d for d in drops if "assembly" in d), key=lambda d: len(d["assembly"]["calls"]))
    assert main(["explain", str(calls_run), "--id", most["id"]]) == 0
    shown = capsys.readouterr().out
    assert f"assembled from {len(most['assembly']['calls'])} " in shown
    for call in most["assembly"]["calls"]:
        assert str(call["call"]) in shown


@pytest.mark.slow
def test_two_processes_give_the_same_bytes(tmp_path, calls_input, calls_run):
    two = tmp_path / "two"
    _run(calls_input, two, "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    assert_same_outputs(two, calls_run, "two processes on call logs")


@pytest.mark.slow
def test_the_order_files_are_read_in_changes_no_conversation(tmp_path, calls_input, calls_run):
    # The same records in other files (reversed names: another read order, other shards).
    moved = tmp_path / "moved"
    moved.mkdir()
    files = sorted(p for pattern in calls_input for p in Path(pattern).parent.glob(Path(pattern).name))
    for n, path in enumerate(reversed(files)):
        shutil.copy(path, moved / f"{n:02d}-{path.name}")
    out = tmp_path / "out"
    _run([str(moved / "*.json"), str(moved / "*.jsonl")], out)

    def conversations(run: Path) -> list[dict]:
        records = [json.loads(line) for line in _lines(run / "normalized")]
        return sorted((r for r in records if "assembly" in json.dumps(r) or True), key=lambda r: json.dumps(r))

    assert conversations(out) == conversations(calls_run)


EXPECTED = Path(__file__).parent / "data" / "expected" / "calllogs_conversations.jsonl"


def _shape(record: dict, metrics: dict) -> dict:
    """A conversation as the expectation pins it: its id, roles in order, the calls in it."""
    return {
        "id": record["id"],
        "roles": [m["role"] + ("+calls" if m.get("tool_calls") else "") for m in record["messages"]],
        "format": metrics["assembly"]["format"],
        "calls": [c["call"] for c in metrics["assembly"]["calls"]],
        "collapsed": metrics["assembly"]["collapsed"],
    }


def test_the_exports_give_the_expected_conversations(calls_run):
    """Every export family's samples give the conversations pinned in tests/data/expected (read,
    reviewed and kept: CONVNORM_REGEN_GOLDEN=1 writes the file anew)."""
    import os

    records = [json.loads(line) for line in _lines(calls_run / "normalized")]
    metrics = {d["id"]: d for d in (json.loads(line) for line in _lines(calls_run / "drops"))}
    shapes = [_shape(r, metrics[r["id"]]) for r in records if "assembly" in metrics[r["id"]]]
    text = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in shapes)
    if os.environ.get("CONVNORM_REGEN_GOLDEN") == "1":
        EXPECTED.write_text(text)
    assert text == EXPECTED.read_text()


@pytest.mark.slow
def test_a_forced_call_log_format_reads_its_records_and_refuses_others(tmp_path):
    from engine_outputs import CALL_LOGS

    source = CALL_LOGS / "langfuse"
    auto, forced = tmp_path / "auto", tmp_path / "forced"
    _run([str(source / "*.json")], auto)
    _run([str(source / "*.json")], forced, "--format", "langfuse")
    assert _lines(auto / "normalized") == _lines(forced / "normalized")
    other = tmp_path / "other"
    summary = _run([str(CALL_LOGS / "litellm" / "*.json")], other, "--format", "langfuse")
    assert summary["dead_letters_by_reason"]["format_error"] == summary["records_in"] > 0


@pytest.mark.slow
def test_call_logs_off_leaves_the_assembly_out_and_dead_letters_call_logs(tmp_path, calls_input):
    """--call-logs off: the same outputs for whole conversations, and every call-log record a
    call_log dead letter that says so (never a silent skip)."""
    from engine_outputs import SAMPLE

    on, off = tmp_path / "on", tmp_path / "off"
    _run([str(SAMPLE)], on)
    _run([str(SAMPLE)], off, "--call-logs", "off")
    for name in ("normalized", "drops", "dead_letter"):
        assert _lines(on / name) == _lines(off / name)
    calls = tmp_path / "calls-off"
    summary = _run(calls_input, calls, "--call-logs", "off")
    assert summary["accounted"] and "call_logs" not in summary
    letters = [json.loads(line) for line in _lines(calls / "dead_letter")]
    logged = [d for d in letters if d["reason"] == "call_log"]
    assert logged and all("does not assemble" in d["detail"] for d in logged)


def test_the_assembly_is_built_only_where_call_logs_can_be_read(tmp_path):
    """--call-logs auto (the default) builds the assembly's steps only for an input whose first
    records hold a call log; on always, off never; a --format naming a conversation reader never."""
    from engine_outputs import CALL_LOGS, SAMPLE

    from pipeline.config.options import load_job

    base = ["--input", str(SAMPLE), "--output", str(tmp_path / "o")]
    plain = load_job(base)
    assert not plain.call_logs and plain.settings.calls_sampled_out
    assert load_job([*base, "--call-logs", "on"]).call_logs
    assert load_job([*base, "--format", "langfuse"]).call_logs
    assert not load_job([*base, "--format", "openai"]).call_logs
    off = load_job([*base, "--call-logs", "off"])
    assert not off.call_logs and not off.settings.calls_sampled_out
    logs = ["--input", str(CALL_LOGS / "langfuse" / "blob-export-rows.jsonl")]
    assert load_job([*logs, "--output", str(tmp_path / "c")]).call_logs
    # A call log in the first records of any one input file is enough.
    assert load_job([*base, *logs]).call_logs


def test_past_the_files_it_samples_auto_builds_the_assembly(tmp_path):
    from engine_outputs import SAMPLE

    from pipeline.config.options import AUTO_SAMPLED_FILES, load_job

    line = SAMPLE.read_bytes().splitlines()[0] + b"\n"
    (tmp_path / "in").mkdir()
    for n in range(AUTO_SAMPLED_FILES + 1):
        (tmp_path / "in" / f"{n:03}.jsonl").write_bytes(line)
    argv = ["--input", str(tmp_path / "in"), "--output", str(tmp_path / "o")]
    assert load_job(argv).call_logs
    (tmp_path / "in" / "000.jsonl").unlink()
    assert not load_job(argv).call_logs


def test_auto_samples_only_json_lines_and_builds_the_assembly_for_other_files(tmp_path):
    """A .json document or a Parquet row group would be read whole before the run to sample
    it (a 200 MB row under a memory cap failed the run): such inputs build the steps."""
    from engine_outputs import SAMPLE

    from pipeline.config.options import load_job

    lines = SAMPLE.read_bytes().splitlines()[:2]
    document = tmp_path / "two.json"
    document.write_bytes(b"[" + b",".join(lines) + b"]")
    plain = ["--input", str(SAMPLE), "--output", str(tmp_path / "o")]
    assert not load_job(plain).call_logs
    assert load_job([*plain, "--input", str(document)]).call_logs


@pytest.mark.slow
def test_a_call_log_past_the_sample_is_a_dead_letter_that_says_to_rerun(tmp_path, capsys):
    """A file whose first records are whole conversations and whose later ones are call logs:
    --call-logs auto leaves the assembly out, so each call log is a call_log dead letter saying
    to run again with --call-logs on, and the run warns; with on they are assembled."""
    from engine_outputs import CALL_LOGS, SAMPLE

    mixed = tmp_path / "mixed.jsonl"
    rows = (CALL_LOGS / "langfuse" / "blob-export-rows.jsonl").read_bytes().splitlines(keepends=True)
    mixed.write_bytes(SAMPLE.read_bytes() + b"".join(rows))
    summary = _run([str(mixed)], tmp_path / "auto")
    letters = [json.loads(line) for line in _lines(tmp_path / "auto" / "dead_letter")]
    logged = [d for d in letters if d["reason"] == "call_log"]
    assert len(logged) == len(rows) == summary["dead_letters_by_reason"]["call_log"]
    assert all("--call-logs on" in d["detail"] for d in logged)
    assert "run again with --call-logs on" in capsys.readouterr().err
    assembled = _run([str(mixed)], tmp_path / "on", "--call-logs", "on")
    assert assembled["call_logs"]["records"] == len(rows)
    assert not assembled["dead_letters_by_reason"].get("call_log")
    assert set(_lines(tmp_path / "auto" / "normalized")) < set(_lines(tmp_path / "on" / "normalized"))
