"""Input paths that are not plain (non-UTF-8 names, FIFOs, bare relative globs) and the exit
status of runs that read records but cannot vouch for them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import pipeline.graph.shard_step as shard_step
from pipeline.cli.main import main
from transforms.totals.summary import DeadLetterLimit, run_failures

GOOD = b'{"id":"g%d","messages":[{"role":"user","content":"hi"}]}\n'


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(directory.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def _good(n: int) -> bytes:
    return b"".join(GOOD % i for i in range(n))


# --------------------------------------------------------------------------------------------
# Paths


def test_non_utf8_file_name_is_read_and_shown_escaped_everywhere(tmp_path, capsys):
    inputs = tmp_path / "in"
    inputs.mkdir()
    name = os.fsencode(inputs) + b"/caf\xe9.jsonl"
    with open(name, "wb") as handle:
        handle.write(_good(2) + b"{broken\n")
    shown = str(inputs) + "/caf\\xe9.jsonl"
    assert main(["--input", str(inputs / "*.jsonl"), "--output", str(tmp_path / "out")]) == 0
    assert {d["source"] for d in _lines(tmp_path / "out" / "drops")} == {shown}
    assert [d["source"] for d in _lines(tmp_path / "out" / "dead_letter")] == [shown]
    assert main(["validate", "--input", str(inputs / "*.jsonl"), "--output", str(tmp_path / "v")]) == 1
    assert {r["source"] for r in _lines(tmp_path / "v" / "violations")} == {shown}
    assert [d["source"] for d in _lines(tmp_path / "v" / "dead_letter")] == [shown]


def test_fifo_is_refused_at_planning(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.jsonl")
    assert main(["--input", str(tmp_path / "pipe.jsonl"), "--output", str(tmp_path / "out")]) == 2
    assert "is a FIFO" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_device_behind_a_link_is_refused(tmp_path, capsys):
    (tmp_path / "zero.jsonl").symlink_to("/dev/zero")
    assert main(["validate", "--input", str(tmp_path / "*.jsonl")]) == 2
    assert "is a device" in capsys.readouterr().err


def test_relative_glob_without_a_directory_matches(tmp_path, monkeypatch):
    (tmp_path / "a.jsonl").write_bytes(_good(3))
    monkeypatch.chdir(tmp_path)
    assert main(["--input", "*.jsonl", "--output", "out"]) == 0
    assert {d["source"] for d in _lines(tmp_path / "out" / "drops")} == {"a.jsonl"}


def _relative_setup(tmp_path: Path, monkeypatch) -> Path:
    """A launcher's directory holding in/a.jsonl; the process is in it."""
    launcher = tmp_path / "launcher"
    (launcher / "in").mkdir(parents=True)
    (launcher / "in" / "a.jsonl").write_bytes(_good(3))
    monkeypatch.chdir(launcher)
    return launcher


def test_the_plan_holds_absolute_paths_for_relative_flags_and_presets(tmp_path, monkeypatch):
    """Found: a relative --input was planned by the launcher and opened by each worker against
    its own working directory (a Dask worker elsewhere: an unreadable_file dead letter, exit 0
    with another input beside it); a relative --output failed there and left a temporary folder
    in the worker's directory. Every local path is made absolute once, when the options load."""
    from pipeline.config.options import ConvNormOptions, load_job

    launcher = _relative_setup(tmp_path, monkeypatch)
    (launcher / "p.yaml").write_text("input: [in/a.jsonl]\noutput: out\n")
    for argv in (
        ["--input", "in/a.jsonl", "--input", "in/*.jsonl", "--input", "in", "--output", "out"],
        ["--config", "p.yaml"],  # a preset's relative paths: relative to the working directory, as flags
    ):
        job = load_job(argv)
        assert job.output == str(launcher / "out")
        assert job.inputs and all(os.path.isabs(p) and p.startswith(str(launcher / "in")) for p in job.inputs)
        assert {s.path for s in job.shards} == {str(launcher / "in" / "a.jsonl")}
        ours = job.options.view_as(ConvNormOptions)
        assert (ours.output, ours.input) == (job.output, job.inputs)
        # What the records name and what messages show is still what was typed.
        assert {s.name for s in job.shards} == {"in/a.jsonl"} and job.shown_output == "out"
    # --stop-file, a streaming flag (a batch run refuses it), from a flag and from a preset.
    (launcher / "s.yaml").write_text("input: [in/*.jsonl]\noutput: out\nstop_file: stop\n")
    streaming = ["--streaming", "--runner=PrismRunner"]
    for argv in (["--input", "in/*.jsonl", "--output", "out", "--stop-file", "stop"], ["--config", "s.yaml"]):
        job = load_job([*argv, *streaming])
        ours = job.options.view_as(ConvNormOptions)
        assert (job.output, ours.output, ours.stop_file) == (str(launcher / "out"),) * 2 + (str(launcher / "stop"),)


def test_a_run_opens_its_paths_where_it_planned_them_whatever_the_working_directory(tmp_path, monkeypatch):
    # A worker in another working directory, simulated: the process moves after planning.
    from pipeline.cli.commands import run_job
    from pipeline.config.options import load_job
    from pipeline.execution.interrupts import Stopping

    launcher = _relative_setup(tmp_path, monkeypatch)
    job = load_job(["--input", "in/a.jsonl", "--output", "out", "--no-report"])
    elsewhere = tmp_path / "worker"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert run_job(job, Stopping("the run pipeline")) == 0
    summary = json.loads((launcher / "out" / "summary.json").read_text())
    assert (summary["records_in"], summary["records_out"], summary["dead_letters"]) == (3, 3, 0)
    assert {d["source"] for d in _lines(launcher / "out" / "drops")} == {"in/a.jsonl"}
    assert (launcher / "out" / "_SUCCESS").exists() and list(elsewhere.iterdir()) == []


def _directory_with_links(tmp_path: Path) -> tuple[Path, Path]:
    """dl/ holding a.jsonl, a link to it and a link to a file outside (dl/passwd.jsonl -> ...)."""
    dl, outside = tmp_path / "dl", tmp_path / "outside"
    dl.mkdir()
    outside.mkdir()
    (dl / "a.jsonl").write_bytes(_good(2))
    secret = outside / "secret.jsonl"
    secret.write_bytes(b'{"id":"SECRET","messages":[{"role":"user","content":"root:x:0:0"}]}\n')
    (dl / "passwd.jsonl").symlink_to(secret)
    (dl / "in-link.jsonl").symlink_to(dl / "a.jsonl")
    return dl, secret


def _sources(out: Path) -> set[str]:
    return {d["source"] for d in _lines(out / "drops") + _lines(out / "dead_letter")}


@pytest.mark.slow
def test_a_directory_input_never_follows_a_link_out_of_it_unless_told(tmp_path, capsys):
    """Found: a batch directory input read dl/passwd.jsonl -> /etc/passwd (its lines landed in
    dead_letter/), where streaming refused it. One rule now: a link that leads out of the
    directory is not read, with a warning saying why, unless --follow-symlinks."""
    dl, secret = _directory_with_links(tmp_path)
    out = tmp_path / "out"
    assert main(["--input", str(dl), "--output", str(out), "--no-report"]) == 0
    err = capsys.readouterr().err
    assert _sources(out) == {str(dl / "a.jsonl"), str(dl / "in-link.jsonl")}  # a link inside: read
    assert not any(b"SECRET" in p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert f"{dl / 'passwd.jsonl'} is a symbolic link that leads out of the directory" in err
    assert "--follow-symlinks" in err and str(secret) in err

    followed = tmp_path / "followed"
    assert main(["--input", str(dl), "--output", str(followed), "--no-report", "--follow-symlinks"]) == 0
    assert str(dl / "passwd.jsonl") in _sources(followed)
    # validate plans its inputs the same way, and takes the flag too.
    assert main(["validate", "--input", str(dl)]) == 0
    assert "leads out of the directory" in capsys.readouterr().err
    assert main(["validate", "--input", str(dl), "--follow-symlinks"]) == 0
    assert "leads out of the directory" not in capsys.readouterr().err


def test_batch_and_streaming_refuse_the_same_links(tmp_path):
    from pipeline.io.planning import plan_shards
    from pipeline.io.shard import Stamp
    from pipeline.streaming.landing import LandingRules, Refused, examine

    dl, secret = _directory_with_links(tmp_path)
    refused: list[str] = []
    planned = {s.path for s in plan_shards([str(dl)], refused=refused)}
    assert planned == {str(dl / "a.jsonl"), str(dl / "in-link.jsonl")}
    (batch,) = refused
    rules = LandingRules((f"{dl}/*",), str(tmp_path / "out"))
    streaming = examine(str(dl / "passwd.jsonl"), rules)
    assert isinstance(streaming, Refused) and isinstance(examine(str(dl / "in-link.jsonl"), rules), Stamp)
    for said in (batch, streaming.reason):
        assert "a symbolic link that leads out of the" in said and str(secret) in said and "--follow-symlinks" in said
    refused.clear()
    assert len(plan_shards([str(dl)], follow_symlinks=True, refused=refused)) == 3 and refused == []


def test_a_link_to_nothing_in_a_directory_input_is_refused_whatever_its_stat_error(tmp_path):
    """Found: a link in a directory input whose target's path goes through a file (ENOTDIR,
    not ENOENT) refused the whole plan ('cannot match --input') since the one-listing plan;
    it is a link to nothing, left out with a warning, like one whose target is missing."""
    from pipeline.io.planning import plan_shards

    (tmp_path / "a.jsonl").write_bytes(GOOD % 0)
    (tmp_path / "through-a-file.jsonl").symlink_to(tmp_path / "a.jsonl" / "x")
    (tmp_path / "missing.jsonl").symlink_to(tmp_path / "nothing.jsonl")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.jsonl").write_bytes(GOOD % 1)
    for follow in (False, True):
        refused: list[str] = []
        notes: list[str] = []
        planned = plan_shards([str(tmp_path)], notes=notes, follow_symlinks=follow, refused=refused)
        assert [s.path for s in planned] == [str(tmp_path / "a.jsonl")]
        # The subdirectory beside it is still said (the link made the whole note go).
        assert len(notes) == 1 and "1 subdirectory not read: sub/" in notes[0]
        assert refused == [
            f"--input {tmp_path}: {tmp_path / name} is a link to nothing"
            for name in ("missing.jsonl", "through-a-file.jsonl")
        ]


# --------------------------------------------------------------------------------------------
# Exit status


def test_run_that_normalizes_nothing_exits_1_with_a_message(tmp_path, capsys):
    (tmp_path / "in.jsonl").write_bytes(b'not json\n"text"\n')
    assert main(["--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out")]) == 1
    assert "normalized none" in capsys.readouterr().err
    assert len(_lines(tmp_path / "out" / "dead_letter")) == 2  # outputs written all the same


def test_empty_input_is_not_a_failure(tmp_path):
    (tmp_path / "in.jsonl").write_bytes(b"\n")
    assert main(["--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out")]) == 0


@pytest.mark.slow
def test_empty_json_array_is_empty_input_but_a_zero_byte_json_file_is_a_dead_letter(tmp_path):
    # As docs/input-limits.md says: `[]` holds no records; zero bytes are not a JSON document.
    (tmp_path / "empty.json").write_bytes(b"[]")
    (tmp_path / "zero.json").write_bytes(b"")
    assert main(["--input", str(tmp_path / "empty.json"), "--output", str(tmp_path / "a")]) == 0
    assert main(["--input", str(tmp_path / "zero.json"), "--output", str(tmp_path / "b")]) == 1
    [letter] = _lines(tmp_path / "b" / "dead_letter")
    assert letter["reason"] == "invalid_json" and "zero-length" in letter["detail"]


@pytest.mark.parametrize("limit, status", [("2", 0), ("1", 1), ("0", 1), ("20%", 0), ("19.9%", 1)])
def test_max_dead_letters_fails_past_the_threshold_with_outputs_written(tmp_path, capsys, limit, status):
    (tmp_path / "in.jsonl").write_bytes(_good(8) + b'{bad\n"text"\n')  # 2 dead letters of 10
    out = tmp_path / "out"
    assert main(["--input", str(tmp_path / "in.jsonl"), "--output", str(out), f"--max-dead-letters={limit}"]) == status
    assert len(_lines(out / "normalized")) == 8 and (out / "summary.json").exists()
    assert ("past --max-dead-letters" in capsys.readouterr().err) == bool(status)


@pytest.mark.parametrize("bad", ["-1", "x", "101%", "%"])
def test_bad_max_dead_letters_is_an_option_error(tmp_path, capsys, bad):
    (tmp_path / "in.jsonl").write_bytes(_good(1))
    assert (
        main(["--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "o"), f"--max-dead-letters={bad}"]) == 2
    )
    assert "--max-dead-letters" in capsys.readouterr().err


def test_run_failures_policy():
    doc = {"records_in": 10, "records_out": 7, "dead_letters": 3, "accounted": True}
    assert run_failures(doc) == []
    assert run_failures(doc, DeadLetterLimit.parse("3")) == []
    assert len(run_failures(doc, DeadLetterLimit.parse("2"))) == 1
    assert len(run_failures(doc, DeadLetterLimit.parse("29%"))) == 1
    assert run_failures({**doc, "accounted": False}) != []
    assert run_failures({"records_in": 0, "records_out": 0, "dead_letters": 0, "accounted": True}) == []


def test_validate_exits_3_on_a_crash(tmp_path, monkeypatch, capsys):
    (tmp_path / "in.jsonl").write_bytes(_good(2))

    def crash(*args, **kwargs):
        raise RuntimeError("boom")

    # Outside the per-record guard: the step's call fails the pipeline itself.
    monkeypatch.setattr(shard_step, "normalize_batch", crash)
    assert main(["validate", "--input", str(tmp_path / "in.jsonl")]) == 3
    assert "validate pipeline failed" in capsys.readouterr().err


def _losing_one_record(monkeypatch):
    """Make the per-shard step lose the last record of each batch that has one: a bug that only
    the accounting check sees (records in != through + dead-lettered)."""
    real = shard_step.normalize_batch

    def lose(*args, **kwargs):
        result = real(*args, **kwargs)
        if not (result.records or result.lines):  # (a JSON Lines run keeps lines, not records)
            return result
        return result._replace(
            records=result.records[:-1],
            metrics=result.metrics[:-1],
            lines=None if result.lines is None else result.lines[:-1],
        )

    monkeypatch.setattr(shard_step, "normalize_batch", lose)


@pytest.mark.parametrize("command, output", [([], "normalized"), (["validate"], "violations")])
def test_unaccounted_records_exit_1_and_leave_no_success_marker(tmp_path, monkeypatch, capsys, command, output):
    # Found: a run whose accounting check failed exited 1 but still wrote _SUCCESS, the marker
    # that says every record is on disk.
    (tmp_path / "in.jsonl").write_bytes(_good(3))
    _losing_one_record(monkeypatch)
    out = tmp_path / "out"
    assert main([*command, "--input", str(tmp_path / "in.jsonl"), "--output", str(out)]) == 1
    assert "some records are not accounted for" in capsys.readouterr().err
    assert len(_lines(out / output)) == 2  # the outputs are written all the same
    assert not (out / "_SUCCESS").exists()
    manifest = json.loads((out / "_convnorm_manifest.json").read_text())
    assert manifest["complete"] is False and "not accounted for" in " ".join(manifest["missing"])


@pytest.mark.parametrize("flags", [["--max-dead-letters=0"], []])
def test_policy_exits_keep_the_success_marker(tmp_path, flags):
    # Past --max-dead-letters, or nothing normalized: a verdict on the data, not on what was
    # written; every record is on disk (docs/outputs.md).
    data = _good(2) + b"{bad\n" if flags else b"{bad\n"
    (tmp_path / "in.jsonl").write_bytes(data)
    out = tmp_path / "out"
    assert main(["--input", str(tmp_path / "in.jsonl"), "--output", str(out), *flags]) == 1
    assert (out / "_SUCCESS").exists()
