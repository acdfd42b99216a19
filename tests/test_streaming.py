"""Streaming mode without a runner: names, the landing convention, stop conditions, the
per-file write, window totals, and the options that refuse what cannot work."""

from __future__ import annotations

import json
import time

import pytest

from pipeline.main import main
from pipeline.options import parse_duration
from pipeline.streaming import (
    WatchPlan,
    _OutputDirectory,
    has_output,
    is_ignored,
    processed_sources,
    ready_files,
    should_stop,
    source_id,
    total_of_windows,
    window_total,
)
from transforms import summary as summaries
from transforms.settings import Settings


def _plan(**changes) -> WatchPlan:
    fields = dict(
        patterns=("landing/*.jsonl",),
        output="out",
        poll_interval_s=1.0,
        skipped_at_start=frozenset(),
        stop_files=(),
        stop_at=None,
    )
    fields.update(changes)
    return WatchPlan(**fields)


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("1.5m", 90), ("2h", 7200), (" 5M ", 300)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "0", "-5s", "ten", "5d", "inf", "nan", "infs"])
def test_parse_duration_refuses_what_is_not_a_positive_duration(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_source_id_is_the_name_without_suffix_and_a_hash_of_the_full_path():
    a, b = source_id("/landing/one/s.jsonl.gz"), source_id("/landing/two/s.jsonl.gz")
    assert a.startswith("s-") and b.startswith("s-") and a != b
    assert a == source_id("/landing/one/s.jsonl.gz")  # deterministic
    assert len(a) == len("s-") + 8


@pytest.mark.parametrize(
    "path, ignored",
    [
        ("landing/a.jsonl", False),
        ("landing/.a.jsonl", True),
        ("landing/a.jsonl.tmp", True),
        ("landing/a.tmp", True),
        ("landing/sub.d/a.jsonl", False),
    ],
)
def test_dot_files_and_tmp_files_are_never_read(path, ignored):
    assert is_ignored(path) is ignored


def test_a_file_is_ready_once_it_kept_its_size_and_time_over_two_polls():
    plan = _plan(skipped_at_start=frozenset({"/l/old.jsonl"}))
    first = {"/l/a.jsonl": (10, 1.0), "/l/old.jsonl": (5, 0.0)}
    assert ready_files(plan, {}, first) == []  # seen once: maybe still being written
    growing = {"/l/a.jsonl": (20, 2.0), "/l/old.jsonl": (5, 0.0)}
    assert ready_files(plan, first, growing) == []
    assert ready_files(plan, growing, dict(growing)) == ["/l/a.jsonl"]  # settled; old.jsonl skipped


def test_files_of_unknown_kind_and_dot_files_are_not_ready():
    current = {"/l/a.txt": (1, 1.0), "/l/.b.jsonl": (1, 1.0), "/l/c.jsonl.tmp": (1, 1.0), "/l/d.jsonl.gz": (1, 1.0)}
    assert ready_files(_plan(), current, dict(current)) == ["/l/d.jsonl.gz"]


def test_stop_conditions(tmp_path):
    stop_file = tmp_path / "stop"
    plan = _plan(stop_files=(str(stop_file),), stop_at=time.time() + 60)
    assert not should_stop(plan, time.time())
    assert should_stop(plan, time.time() + 61)
    stop_file.write_text("")
    assert should_stop(plan, time.time())


def _metrics(i: int) -> dict:
    return {
        "id": f"c{i}",
        "source": "x",
        "position": i,
        "dropped": 1,
        "drops": {"orphan_result": 1},
        "healed": 0,
        "messages_in": 3,
        "messages_out": 2,
    }


def test_a_files_outputs_appear_in_one_rename_with_its_totals(tmp_path):
    target = _OutputDirectory(str(tmp_path), "W", "/landing/a.jsonl", Settings())
    target.write("normalized", [{"id": "c0"}, {"id": "c1"}])
    target.write("drops", [_metrics(0), _metrics(1)])
    target.write("dead_letter", [{"source": "x", "position": 100, "reason": "invalid_json"}])
    target.write("normalized", [{"id": "c2"}])
    target.write("drops", [_metrics(2)])
    final = tmp_path / "W" / source_id("/landing/a.jsonl")
    assert not final.exists() and not has_output(str(tmp_path), "/landing/a.jsonl")  # nothing visible yet
    part = target.commit(records=4, blank_lines=1)
    assert sorted(p.name for p in final.iterdir()) == [
        "dead_letter.jsonl",
        "drops.jsonl",
        "normalized.jsonl",
        "source.json",
    ]
    assert [json.loads(line)["id"] for line in (final / "normalized.jsonl").read_text().splitlines()] == [
        "c0",
        "c1",
        "c2",
    ]
    source = json.loads((final / "source.json").read_text())
    assert source["source"] == "/landing/a.jsonl" and source["window"] == "W"
    assert (source["records_in"], source["records_out"], source["dead_letters"], source["dropped"]) == (4, 3, 1, 3)
    assert source["accounted"] and part["records_in"] == 4 and part["blank_lines"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
    assert processed_sources(str(tmp_path)) == {final.name} and has_output(str(tmp_path), "/landing/a.jsonl")
    window = window_total(str(tmp_path), "W", Settings())  # the window's summary: its files' sum
    assert (window["records_in"], window["records_out"], window["dead_letters"], window["dropped"]) == (4, 3, 1, 3)


def test_an_abandoned_file_leaves_nothing(tmp_path):
    target = _OutputDirectory(str(tmp_path), "W", "/landing/a.jsonl", Settings())
    target.write("normalized", [{"id": "c0"}])
    target.abandon()
    assert list(tmp_path.iterdir()) == []


def test_an_empty_file_still_gets_its_outputs(tmp_path):
    target = _OutputDirectory(str(tmp_path), "W", "/landing/empty.jsonl", Settings())
    target.commit(records=0, blank_lines=0)
    final = tmp_path / "W" / source_id("/landing/empty.jsonl")
    assert (final / "normalized.jsonl").read_bytes() == b""
    assert json.loads((final / "source.json").read_text())["records_in"] == 0


def test_the_final_summary_is_the_sum_of_the_window_summaries(tmp_path):
    docs = [
        summaries.finalize(summaries.partial(3, [_metrics(0)], [{"reason": "invalid_json"}] * 2)),
        summaries.finalize(summaries.partial(1, [_metrics(1)])),
    ]
    for name, doc in zip(("W1", "W2"), docs):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(doc))
    total = total_of_windows(str(tmp_path), Settings())
    assert (total["records_in"], total["records_out"], total["dead_letters"], total["dropped"]) == (4, 2, 2, 2)
    assert total["dead_letters_by_reason"]["invalid_json"] == 2
    assert total["accounted"]


def test_streaming_on_fnapirunner_is_refused_naming_the_runners_that_can(tmp_path, capsys):
    status = main(["--streaming", f"--input={tmp_path}/*.jsonl", f"--output={tmp_path / 'out'}"])
    assert status == 2
    err = capsys.readouterr().err
    assert "--streaming needs a runner that can stream" in err
    for runner in ("PrismRunner", "FlinkRunner", "DataflowRunner"):
        assert runner in err
    assert not (tmp_path / "out").exists()


def test_streaming_checks_its_flags_before_starting(tmp_path, capsys):
    (tmp_path / "stop").write_text("")
    status = main(
        [
            "--streaming",
            "--runner=PrismRunner",
            f"--input={tmp_path}/*.jsonl",
            f"--output={tmp_path / 'out'}",
            "--window=soon",
            f"--stop-file={tmp_path / 'stop'}",
            "--output-format=parquet",
        ]
    )
    assert status == 2
    err = capsys.readouterr().err
    assert "--window 'soon'" in err and "exists already" in err and "JSON Lines only" in err


def test_validate_does_not_stream(tmp_path, capsys):
    status = main(["validate", "--streaming", "--runner=PrismRunner", f"--input={tmp_path}/*.jsonl"])
    assert status == 2
    assert "does not stream" in capsys.readouterr().err


def test_a_signal_asks_the_watcher_to_stop_through_the_runs_marker(tmp_path):
    import os
    import signal

    from pipeline.streaming import _StopOnSignal

    marker = tmp_path / ".stop-run"
    before = signal.getsignal(signal.SIGTERM)
    with _StopOnSignal(str(marker)) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not stop.signalled.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stop.signalled.is_set()
        assert should_stop(_plan(stop_files=(str(marker),)), time.time())
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored after the run


# --------------------------------------------------------------------------------------------
# The output directory: streaming writes only where it can prove it may, under the lock


def _stream(tmp_path, out) -> int:
    return main(
        ["--streaming", "--runner=PrismRunner", f"--input={tmp_path}/in/*.jsonl", f"--output={out}", "--stop-after=1s"]
    )


def test_streaming_refuses_a_directory_holding_files_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("mine")
    assert _stream(tmp_path, out) == 2
    assert "already holds summary.json" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]  # untouched, lock released
    assert (out / "summary.json").read_text() == "mine"


def test_streaming_refuses_a_batch_runs_output(tmp_path, capsys):
    out = tmp_path / "out"
    (tmp_path / "in.jsonl").write_text('{"id": "a", "messages": [{"role": "user", "content": "hi"}]}\n')
    assert main(["--input", str(tmp_path / "in.jsonl"), "--output", str(out), "--quiet"]) == 0
    before = sorted(p.name for p in out.iterdir())
    assert _stream(tmp_path, out) == 2
    assert "batch convnorm run" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before


def test_streaming_refuses_an_output_another_run_holds(tmp_path, capsys):
    from pipeline import lock as locks

    out = tmp_path / "out"
    held = locks.acquire(
        str(out), run_id="other", command="run", temp_dir="", break_stale=False, clean_up=lambda holder: None
    )
    try:
        assert _stream(tmp_path, out) == 2
        assert "in use by another convnorm run" in capsys.readouterr().err
    finally:
        held.release()


def test_a_streaming_directory_is_marked_once_and_claimed_again(tmp_path):
    from pipeline.outputs import STREAMING_MARKER, claim_streaming_output

    out = tmp_path / "out"
    out.mkdir()
    claim_streaming_output(str(out))
    assert (out / STREAMING_MARKER).is_file()
    (out / "20261201T000000Z-20261201T000100Z").mkdir()  # a window an earlier run wrote
    (out / "summary.json").write_text("{}")
    claim_streaming_output(str(out))  # marked: the next run goes on into it
