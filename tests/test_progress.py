"""Progress of local runs (live line, log lines, --quiet) and a console without Beam's noise."""

from __future__ import annotations

import io
import logging
import tempfile
from pathlib import Path

import pytest

from pipeline import console
from pipeline.cli import progress
from pipeline.cli.main import main
from pipeline.graph import tally as tallies

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def test_the_line_says_records_bytes_of_the_total_rate_eta_and_dead_letters():
    snap = progress.Snapshot(records=5_000, bytes_done=25 << 20, dead_letters=3)
    line = progress.format_progress(snap, total_bytes=100 << 20, total_shards=4, elapsed=10.0)
    assert line == "5,000 records · 25.0 MiB of 100.0 MiB (25%) · 500 records/s · ETA 0:30 · 3 dead letters · 0:10"
    done = progress.format_progress(progress.Snapshot(records=9, bytes_done=100), 100, 1, 3725.0)
    assert "(100%)" in done and "writing" in done and done.endswith("1:02:05")
    # Without byte sizes (an empty file list), shards stand in for bytes.
    assert "1 of 2 shards" in progress.format_progress(progress.Snapshot(shards_done=1), 0, 2, 1.0)


def test_tallies_of_several_workers_add_up(tmp_path, monkeypatch):
    monkeypatch.setenv(tallies.ENV, str(tmp_path))
    reader_a, reader_b, dead = tallies.Tally("read"), tallies.Tally("read"), tallies.Tally("dead_letter")
    reader_a.add("records", 10)
    reader_a.at(0, 400)
    reader_a.flush()
    reader_b.add("records", 5)
    reader_b.shard_done(1)
    dead.add("dead_letter", 2)
    dead.flush()
    snap = progress.read_tallies(str(tmp_path), [1000, 300])
    assert (snap.records, snap.bytes_done, snap.dead_letters, snap.shards_done) == (15, 700, 2, 1)
    # An offset past the shard's planned size (its last line runs over) counts the size.
    reader_a.at(0, 5000)
    reader_a.flush()
    assert progress.read_tallies(str(tmp_path), [1000, 300]).bytes_done == 1300


def test_a_tally_outside_a_monitored_run_does_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(tallies.ENV, raising=False)
    tally = tallies.Tally("read")
    tally.add("records", 3)
    tally.flush()
    assert not tally.enabled and tally.counts == {}


@pytest.mark.parametrize(
    "setting, quiet, local, tty, mode",
    [
        ("auto", False, True, True, "line"),
        ("auto", False, True, False, "log"),
        ("line", False, True, False, "line"),
        ("log", False, True, True, "log"),
        ("off", False, True, True, "off"),
        ("auto", True, True, True, "off"),
        ("line", False, False, True, "off"),  # remote runners: workers cannot see our directory
    ],
)
def test_mode_follows_flags_and_terminal(setting, quiet, local, tty, mode):
    stream = io.StringIO()
    stream.isatty = lambda: tty
    assert progress.choose_mode(setting, quiet, local, stream) == mode


def test_beam_noise_is_filtered_and_nothing_else():
    noise = console.BeamNoiseFilter()

    def record(name, message, level=logging.WARNING):
        return logging.LogRecord(name, level, __file__, 1, message, None, None)

    assert not noise.filter(record("root", "apitools not found, and bigquery client libraries are not available"))
    assert not noise.filter(
        record(
            "apache_beam.runners.portability.local_job_service",
            'Worker: severity: WARN message: "No semi_persistent_directory found: ..."',
        )
    )
    assert noise.filter(record("apache_beam.runners.portability.local_job_service", "Worker: severity: ERROR boom"))
    assert noise.filter(record("convnorm", "apitools not found"))  # ours are never hidden


def test_log_mode_prints_progress_lines_with_the_totals(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "LOG_EVERY", 0.2)
    assert main(["--input", str(SAMPLE), "--output", str(tmp_path / "o"), "--progress=log", "--no-report"]) == 0
    err = capsys.readouterr().err
    last = [line for line in err.splitlines() if "progress:" in line][-1]
    assert "307 records" in last and f"of {progress.size_text(SAMPLE.stat().st_size)} (100%)" in last
    assert "6 dead letters" in last


def test_line_mode_redraws_one_line_in_place(tmp_path, capsys, monkeypatch):
    # The line is drawn every REDRAW_EVERY (0.5 s): the sample's run can end before the first
    # draw on an idle machine, so redraw faster here (as the log-mode test shortens LOG_EVERY).
    monkeypatch.setattr(progress, "REDRAW_EVERY", 0.02)
    assert main(["--input", str(SAMPLE), "--output", str(tmp_path / "o"), "--progress", "--no-report"]) == 0
    err = capsys.readouterr().err
    assert "\r" in err and " records · " in err and "progress:" not in err


def test_quiet_prints_nothing_but_the_run_still_writes_everything(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["--input", str(SAMPLE), "--output", str(out), "--quiet", "--no-report"]) == 0
    captured = capsys.readouterr()
    # Warnings only: the sample's dead letters (2.0%) pass --warn-dead-letters' 1%.
    assert captured.out == "" and captured.err.startswith("convnorm: warning: 6 of 307 records read")
    assert len(captured.err.splitlines()) == 1
    assert (out / "summary.json").exists()


@pytest.mark.slow
def test_multi_process_runs_show_progress_without_beam_chatter(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(progress, "LOG_EVERY", 0.5)
    argv = [
        "--input",
        str(SAMPLE),
        "--output",
        str(tmp_path / "o"),
        "--progress=log",
        "--no-report",
        "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
    ]
    temp = tmp_path / "temp"  # private: other processes on this machine make temporary files too
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    assert main(argv) == 0
    err = capfd.readouterr().err
    for noise in ("apitools", "semi_persistent_directory", "sdk_worker", "Logging handler created"):
        assert noise not in err, err
    # The workers' tallies reached this process: the records they read, the dead letters they wrote.
    last = [line for line in err.splitlines() if "progress:" in line][-1]
    assert "307 records" in last and "6 dead letters" in last, err
    # The progress directory and the workers' stderr file are gone after a run that succeeded.
    assert not list(temp.glob("convnorm-progress-*")) and not list(temp.glob("convnorm-workers-*"))
