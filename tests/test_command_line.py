"""The command line as a person meets it: answers without Beam, usage, hints, directories as
inputs, dry runs, --limit, the dead-letter warning, a quiet console that says how long it took."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.config import beam_flags, make_beam_flag_table
from pipeline.config.flags import ConfigError, our_dests
from pipeline.config.precheck import precheck

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _convnorm(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``python -X importtime -m pipeline ARGV``: stderr lists every module the process imported."""
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pipeline", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("import time:")]


@pytest.mark.parametrize(
    "argv, status, where, text",
    [
        (["--help"], 0, "out", "usage: convnorm [run]"),
        (["validate", "--help"], 0, "out", "usage: convnorm validate"),
        (["--version"], 0, "out", "convnorm "),
        ([], 2, "err", "usage: convnorm"),
        (["--input", "x.jsonl", "--output", "o", "--profle", "lossless"], 2, "err", "did you mean --profile?"),
        (["--input", "x.jsonl", "--output", "o", "--sink", "nope"], 2, "err", "unknown --sink 'nope'"),
        (["--input", "x.jsonl", "--output", "o", "--runner", "NoSuchRunner"], 2, "err", "unknown --runner"),
        (["--output", "o"], 2, "err", "--input is required"),
        (["valdate"], 2, "err", "did you mean validate?"),
        (["report", "--help"], 0, "out", "usage: convnorm report"),
        (["explain", "--help"], 0, "out", "usage: convnorm explain"),
    ],
)
def test_help_version_and_option_errors_never_import_beam(argv, status, where, text, tmp_path):
    done = _convnorm(*argv, cwd=tmp_path if argv[:1] == ["--input"] else ROOT)
    assert done.returncode == status, done.stderr[-2000:]
    shown = done.stdout if where == "out" else "\n".join(_errors(done.stderr))
    assert text in shown
    imported = _imported(done.stderr)
    assert "pipeline.cli.main" in imported  # the measurement saw our modules
    assert not {name for name in imported if name == "apache_beam" or name.startswith("apache_beam.")}
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_a_run_does_import_beam_so_the_check_above_can_fail(tmp_path):
    done = _convnorm("--input", str(SAMPLE), "--output", str(tmp_path / "o"), "--no-report", "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "apache_beam" in _imported(done.stderr)


def test_version_prints_the_installed_versions(capsys):
    assert main(["--version"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"convnorm {metadata.version('convnorm')} (apache-beam {metadata.version('apache-beam')}")


def test_a_bare_convnorm_prints_usage_and_how_to_start(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: convnorm [run] --input INPUT --output OUTPUT")
    assert "convnorm --config configs/local.yaml" in err and "convnorm --help" in err


def test_an_unquoted_glob_gets_a_hint_to_quote_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        (tmp_path / name).write_text('{"messages": []}\n')
    # What `convnorm --input *.jsonl --output o` reaches us as, once the shell expanded it.
    for argv in (["--input", "a.jsonl", "b.jsonl", "c.jsonl"], ["--input=a.jsonl", "b.jsonl", "c.jsonl"]):
        assert main([*argv, "--output", "o"]) == 2
        err = capsys.readouterr().err
        assert "unrecognized argument 'b.jsonl': the shell expanded an unquoted --input pattern into 3 files" in err
        assert "quote the pattern (--input 'logs/*.jsonl')" in err
    # A stray word that is no file keeps the plain message.
    assert main(["--input", "a.jsonl", "stray", "--output", "o"]) == 2
    assert "unrecognized argument 'stray'; see convnorm --help" in capsys.readouterr().err


def test_the_beam_flag_table_is_the_installed_beams():
    """When Beam is upgraded this fails: regenerate with `python -m pipeline.config.make_beam_flag_table > pipeline/config/_beam_flag_table.py`."""
    version, flags, dests, runners = make_beam_flag_table.from_beam(our_dests())
    assert beam_flags.table_is_current()
    assert (version, flags, dests, runners) == (
        beam_flags.BEAM_VERSION,
        beam_flags.FLAGS,
        beam_flags.DESTS,
        beam_flags.RUNNERS,
    )


def test_the_check_without_beam_accepts_beams_flags_and_refuses_what_beam_would(tmp_path):
    base = ["--input", "x.jsonl", "--output", "o"]
    precheck(
        [
            *base,
            "--runner",
            "FnApiRunner",
            "--direct_num_workers=2",
            "--direct_running_mode",
            "multi_processing",
            "--experiments",
            "a",
            "--experiments=b",
            "--no_use_public_ips",
            "--save_main_session",
        ]
    )
    for argv, message in [
        ([*base, "--direct_num_workerz=2"], "unrecognized argument '--direct_num_workerz=2'"),
        ([*base, "--batch-size", "many"], "invalid int value"),
        ([*base, "--limit", "0"], "--limit must be at least 1"),
        ([*base, "--warn-dead-letters", "lots"], "--warn-dead-letters 'lots': expected a count"),
        ([*base, "--streaming", "--window", "soon"], "--window 'soon': expected a duration"),
        ([*base, "--streaming", "--runner", "PrismRunner", "--dry-run"], "--dry-run and --limit plan a batch run"),
    ]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            precheck(argv)
    preset = tmp_path / "p.yaml"
    preset.write_text("input: [x.jsonl]\noutput: o\nrunner: FnApiRunner\ndirect_num_workers: 2\n")
    assert precheck(["--config", str(preset)]).input == ["x.jsonl"]
    preset.write_text("input: [x.jsonl]\noutput: o\ndirect_num_workerz: 2\n")
    with pytest.raises(ConfigError, match="unknown option 'direct_num_workerz'"):
        precheck(["--config", str(preset)])


# --------------------------------------------------------------------------------------------
# --input DIR


def _records(n: int, tag: str) -> str:
    return "".join(
        json.dumps({"id": f"{tag}{i}", "messages": [{"role": "user", "content": "q"}]}) + "\n" for i in range(n)
    )


@pytest.mark.slow
def test_an_input_directory_means_every_supported_file_directly_in_it(tmp_path, capsys):
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "a.jsonl").write_text(_records(2, "a"))
    (logs / "b.json").write_text(json.dumps([{"id": "b0", "messages": []}]))
    (logs / ".hidden.jsonl").write_text(_records(5, "h"))
    (logs / "_SUCCESS").write_text("")
    (logs / "notes.txt").write_text("not a log")
    (logs / "sub" / "c.jsonl").write_text(_records(7, "c"))
    out = tmp_path / "out"
    assert main(["--input", str(logs), "--output", str(out), "--no-report"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 3  # a.jsonl (2) and b.json (1): no dot-file, no subdirectory
    assert "1 file(s) without a known suffix not read: notes.txt" in capsys.readouterr().err

    # A convnorm output directory as --input: its summary and manifest are never read.
    assert main(["--input", str(out), "--output", str(tmp_path / "again"), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "is a directory with no input file directly in it" in err and ".jsonl.gz" in err


def test_what_a_directory_input_leaves_out_is_in_the_plan_and_quiet_keeps_it_off_the_console(tmp_path, capsys):
    """Found: the files a directory input leaves out were an INFO line printed while the options
    were read, before --quiet took effect (and under another logger's name); subdirectories were
    left out without a word, and a directory holding only subdirectories of logs gave no hint."""
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "a.jsonl").write_text(_records(2, "a"))
    (logs / "notes.txt").write_text("not a log")
    (logs / "sub" / "c.jsonl").write_text(_records(7, "c"))
    out = tmp_path / "out"
    assert main(["--input", str(logs), "--output", str(out), "--dry-run", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    note = next(line for line in captured.out.splitlines() if "not read" in line)
    assert "1 file(s) without a known suffix not read: notes.txt" in note
    assert "1 subdirectory not read: sub/" in note and f"--input '{logs}/*/*.jsonl'" in note

    (logs / "a.jsonl").unlink()
    (logs / "notes.txt").unlink()
    assert main(["--input", str(logs), "--output", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "is a directory with no input file directly in it" in err and f"--input '{logs}/*/*.jsonl'" in err


# --------------------------------------------------------------------------------------------
# --dry-run


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.mark.slow
def test_a_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_bytes(SAMPLE.read_bytes())
    (inputs / "b.json").write_text(json.dumps([{"messages": [{"role": "user", "content": "q"}]}]))
    before = _tree(tmp_path)
    out = tmp_path / "out"
    argv = ["--input", str(inputs), "--output", str(out), "--shard-bytes", "400000", "--dry-run"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert _tree(tmp_path) == before and not out.exists()  # nothing created, nothing touched
    assert "input: 2 file(s), 4 shard(s)" in printed
    a_line = next(line for line in printed.splitlines() if "a.jsonl" in line)
    assert "3 shard(s)" in a_line and "jsonl" in a_line and "reader: openai 20 (of the first 20)" in a_line
    assert " 1 (of the first 1)" in next(line for line in printed.splitlines() if "b.json" in line)
    assert f"output: {out} (does not exist: the run creates it)" in printed
    assert f"{out}/normalized/part-00000.jsonl … part-00003.jsonl" in printed
    assert f"{out}/summary.json" in printed and "report.html" in printed

    # The output of an earlier run: refused without --overwrite, as the run would be (exit 2).
    assert main(["--input", str(SAMPLE), "--output", str(out), "--no-report", "--quiet"]) == 0
    before = _tree(tmp_path)
    assert main(["--input", str(inputs), "--output", str(out), "--dry-run"]) == 2
    assert "the run would be refused" in capsys.readouterr().err
    assert main(["--input", str(inputs), "--output", str(out), "--dry-run", "--overwrite"]) == 0
    assert "--overwrite replaces the" in capsys.readouterr().out
    assert _tree(tmp_path) == before


def test_a_dry_run_of_validate_and_the_reader_of_each_format(tmp_path, capsys):
    formats = sorted((ROOT / "samples" / "formats").glob("*.jsonl"))
    argv = ["validate", *[a for f in formats for a in ("--input", str(f))], "--dry-run"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "output: a temporary directory" in printed
    for path in formats:
        line = next(line for line in printed.splitlines() if path.name in line)
        assert "reader: " in line and "dead letter" not in line, line


def test_a_dry_run_names_the_call_log_reader_of_each_export(tmp_path, capsys):
    """A call log is not a conversation on its own: the plan says which call-log reader takes it
    (it said unknown_format, the conversation readers' verdict, before)."""
    exports = ROOT / "tests" / "data" / "calllogs"
    files = sorted(p for p in (exports / "langfuse").glob("*.json")) + [exports / "otlp" / "semconv-examples.jsonl"]
    assert main([*[a for f in files for a in ("--input", str(f))], "--output", str(tmp_path / "o"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    for path in files:
        line = next(line for line in printed.splitlines() if path.name in line)
        assert "(call log)" in line and "dead letter" not in line, line


def _listed(plan: str, out: Path) -> set[str]:
    """Every file a --dry-run's plan names under ``out`` (a range ``part-A … part-B`` expanded)."""
    names = set()
    for line in plan.splitlines():
        for match in re.finditer(rf"{re.escape(str(out))}/(\S+?)/part-(\d+)(\.\w+)(?: … part-(\d+)\.\w+)?", line):
            folder, first, extension, last = match.groups()
            for n in range(int(first), int(last or first) + 1):
                names.add(f"{folder}/part-{n:05d}{extension}")
        names.update(name for name in re.findall(rf"{re.escape(str(out))}/([^/\s,]+)(?=,|$)", line))
    return names


def _whole_records_and_call_logs(tmp_path: Path) -> Path:
    """An input directory of the bundled sample and a Langfuse call-log export."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_bytes(SAMPLE.read_bytes())
    (inputs / "calls.jsonl").write_bytes((ROOT / "tests/data/calllogs/langfuse/blob-export-rows.jsonl").read_bytes())
    return inputs


@pytest.mark.slow
def test_a_dry_run_names_every_file_of_a_run_with_whole_records_and_call_logs(tmp_path, capsys):
    # The assembled conversations have parts of their own, after the input's: the plan names
    # them (it named the input's parts only).
    inputs = _whole_records_and_call_logs(tmp_path)
    out = tmp_path / "out"
    argv = ["--input", str(inputs), "--output", str(out), "--split", "eval=0.2", "--shard-bytes", "400000"]
    assert main([*argv, "--dry-run"]) == 0
    listed = _listed(capsys.readouterr().out, out)
    assert main([*argv, "--quiet"]) == 0
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    # Exactly the files written: a part with no record of an output is an empty file, so the
    # plan does not depend on what the records turn out to be (it listed parts never written).
    assert written == listed, (sorted(written - listed), sorted(listed - written))
    assembled = json.loads((out / "summary.json").read_text())["call_logs"]
    assert assembled and "normalized/part-00004.jsonl" in written  # 4 shards, then the assembled part


# --------------------------------------------------------------------------------------------
# --limit
# --------------------------------------------------------------------------------------------
# --limit


@pytest.mark.slow
def test_limit_reads_the_first_records_of_the_plan_across_files(tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text(_records(3, "a"))
    (inputs / "b.jsonl").write_text("\n" + _records(4, "b"))
    (inputs / "c.jsonl").write_text(_records(5, "c"))
    out = tmp_path / "out"
    assert main(["--input", str(inputs), "--output", str(out), "--limit", "5", "--no-report"]) == 0
    ids = [json.loads(line)["id"] for p in sorted((out / "normalized").glob("*.jsonl")) for line in p.open()]
    assert ids == ["a0", "a1", "a2", "b0", "b1"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_in"] == 5 and summary["accounted"]
    manifest = json.loads((out / "_convnorm_manifest.json").read_text())
    assert manifest["options"]["limit"] == 5


# --------------------------------------------------------------------------------------------
# The end of a run: the warning, the duration, the report's place


@pytest.mark.slow
def test_dead_letters_past_the_warning_threshold_are_said_at_the_end(tmp_path, capsys):
    # The sample: 6 dead letters of 307 records (2.0%), past the default 1%.
    out = tmp_path / "o"
    assert main(["--input", str(SAMPLE), "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert (
        "convnorm: warning: 6 of 307 records read (2.0%) are dead letters, past --warn-dead-letters 1% of the "
        "records read: invalid_json 2, not_a_record 2, messages_not_a_list 1, unknown_format 1; "
        f"see {out}/dead_letter/"
    ) in captured.err
    lines = captured.out.splitlines()
    assert lines[-2] == f"report:  {out}/report.html" and lines[-1].startswith("done in ")
    info = [line for line in captured.err.splitlines() if line.startswith("INFO") and "progress:" not in line]
    assert len(info) == 1 and info[0].startswith("INFO convnorm: 1 input file(s)")  # the plan, then progress
    # Under the threshold, or with --max-dead-letters deciding the exit status: no warning, status as before.
    for flags, status, warned in ((["--warn-dead-letters", "6"], 0, False), (["--max-dead-letters", "1%"], 1, True)):
        assert main(["--input", str(SAMPLE), "--output", str(out), "--overwrite", "--no-report", *flags]) == status
        assert ("convnorm: warning:" in capsys.readouterr().err) == warned


@pytest.mark.slow
def test_files_read_are_counted_in_the_progress_line_not_logged_one_by_one(tmp_path, capsys):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(6):
        (inputs / f"f{i}.jsonl").write_text(_records(2, f"f{i}"))
    assert main(["--input", str(inputs), "--output", str(tmp_path / "o"), "--progress", "log", "--no-report"]) == 0
    err = capsys.readouterr().err
    assert "read shard" not in err and "f3.jsonl" not in err
    assert "6 of 6 files" in err.splitlines()[-1]
    assert [line for line in err.splitlines() if line.startswith("INFO")][0].startswith(
        "INFO convnorm: 6 input file(s) in 6 shard(s)"
    )


def test_durations_read_as_a_person_reads_them():
    from pipeline.cli.progress import duration_text

    assert [duration_text(s) for s in (2.44, 59.9, 65, 3725)] == ["2.4 s", "59.9 s", "1 min 05 s", "1 h 02 min"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX")
def test_main_is_the_same_command_as_the_console_script(capsys):
    import ast
    import re

    import pipeline.cli.main

    # One entry point: the console script, ``python -m pipeline`` and the tests run one function.
    root = Path(__file__).resolve().parents[1]
    scripts = (root / "pyproject.toml").read_text().split("[project.scripts]", 1)[1]
    assert re.search(r'^convnorm = "([^"]+)"$', scripts, re.M).group(1) == "pipeline.cli.main:main"
    dunder_main = ast.parse((root / "pipeline" / "__main__.py").read_text())
    imported = [(n.module, [a.name for a in n.names]) for n in ast.walk(dunder_main) if isinstance(n, ast.ImportFrom)]
    assert imported == [("pipeline.cli.main", ["main"])]
    assert main is pipeline.cli.main.main
    assert main(["--version"]) == 0 and pipeline.cli.main.main(["--version"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == out[1] == pipeline.cli.main.version_line()


@pytest.mark.slow
def test_validate_names_lines_a_person_can_jump_to(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    first = json.dumps({"id": "ok", "messages": [{"role": "user", "content": "q"}]})
    second = json.dumps({"id": "bad", "messages": [{"role": "tool", "content": "r", "tool_call_id": "c"}]})
    log.write_text(first + "\n" + second + "\n")
    assert main(["validate", "--input", str(log)]) == 1
    assert f"  bad ({log} line 2 (byte {len(first) + 1:,})): " in capsys.readouterr().out


def test_the_warning_and_the_table_name_the_sinks_reasons_for_refusing():
    """Found: a run whose sink refused records said only "unwritable 2" on the console, and its
    table did not show why, though summary.json had it (sink_refusals_by_reason)."""
    from transforms.totals.summary import RUN, DeadLetterLimit, dead_letter_warning
    from transforms.totals.summary import partial as summary_partial

    letters = [
        {"source": "a", "position": i, "reason": "unwritable", "detail": f"openai-finetune: {why}: ...", "raw": ""}
        for i, why in enumerate(["unsupported_role", "unsupported_role", "result_not_adjacent"])
    ]
    doc = RUN.finalize(summary_partial(records_in=4, dead_letters=letters))
    assert doc["sink_refusals_by_reason"] == {"result_not_adjacent": 1, "unsupported_role": 2}
    warning = dead_letter_warning(doc, DeadLetterLimit.parse("1%"))
    assert "unwritable 3 (unsupported_role 2, result_not_adjacent 1)" in warning
    table = RUN.format_table(doc)
    assert "        unsupported_role" in table and "        result_not_adjacent" in table


@pytest.mark.slow
def test_done_in_counts_from_when_the_command_started(tmp_path, capsys):
    """Found: "done in 0.6 s" after a command a person waited 3 s for: the time counted from
    after Beam's import and the plan. It counts from the command's start (the report's footer too)."""
    import re
    import time

    from pipeline.cli.commands import run_command

    out = tmp_path / "out"
    started = time.monotonic() - 90  # as if importing and planning had taken a minute and a half
    assert run_command("run", ["--input", str(SAMPLE), "--output", str(out), "--quiet"], started) == 0
    assert main(["--input", str(SAMPLE), "--output", str(tmp_path / "again")]) == 0
    assert re.search(r"^done in \d+\.\d s$", capsys.readouterr().out, re.M)
    assert run_command("run", ["--input", str(SAMPLE), "--output", str(tmp_path / "late")], started) == 0
    # At least the minute and a half before the command ran; how much more, the machine says.
    done = re.search(r"^done in (\d+) min (\d+) s$", capsys.readouterr().out, re.M)
    assert done and 60 * int(done[1]) + int(done[2]) >= 90
    took = re.search(r"The run took (\d+) min (\d+) s\.", (tmp_path / "late" / "report.html").read_text())
    assert took and 60 * int(took[1]) + int(took[2]) >= 90


@pytest.mark.parametrize(
    "argv, status",
    [
        pytest.param(["--help"], 0, id="help"),
        pytest.param(
            ["--input", "samples/formats", "--output", "{tmp}/never", "--dry-run"],
            0,
            id="dry-run",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_output_piped_into_a_reader_that_stops_early_is_no_error(argv, status, tmp_path):
    """Found: `convnorm explain ... | head`, `convnorm --help | head` and `--dry-run | head`
    ended in a BrokenPipeError traceback (a dry run: "the run pipeline failed", exit 1). The
    rest of the output goes nowhere and the command ends as it would have."""
    child = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *[a.format(tmp=tmp_path) for a in argv]],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child.stdout.close()  # the reader is gone before the first line is written
    err = child.stderr.read()
    assert child.wait(timeout=120) == status
    assert "Traceback" not in err and "BrokenPipe" not in err and "failed" not in err, err


@pytest.mark.slow
def test_openai_finetune_writes_one_training_and_one_validation_file_whatever_the_parts(tmp_path, capsys):
    # Whole conversations and call logs over several parts: OpenAI takes one training file and
    # one validation file, so each split is one file; the bill counts the training file only.
    inputs = _whole_records_and_call_logs(tmp_path)
    out = tmp_path / "out"
    argv = ["--input", str(inputs), "--output", str(out), "--sink", "openai-finetune", "--split", "eval=0.2"]
    argv += ["--shard-bytes", "262144", "--tokens", "o200k_base", "--price-per-mtok", "3"]
    assert main([*argv, "--dry-run"]) == 0
    listed = _listed(capsys.readouterr().out, out)
    assert main(argv) == 0
    printed = capsys.readouterr().out
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    records = {name for name in written if name.startswith(("normalized/", "eval/"))}
    assert records == {"normalized/part-00000.jsonl", "eval/part-00000.jsonl"}
    assert {name for name in listed if name.startswith(("normalized/", "eval/"))} == records
    assert written == listed, (sorted(written - listed), sorted(listed - written))  # --dry-run names every file
    summary = json.loads((out / "summary.json").read_text())
    training = (out / "normalized/part-00000.jsonl").read_text().splitlines()
    validation = (out / "eval/part-00000.jsonl").read_text().splitlines()
    assert summary["splits"] == {"train": len(training), "eval": len(validation)} and summary["call_logs"]
    assert all(json.loads(line)["messages"] for line in training + validation)
    assert summary["tokens"]["training_examples"] == len(training)
    assert summary["tokens"]["splits"]["eval"]["examples"] == len(validation)
    manifest = {e["path"]: e for e in json.loads((out / "_convnorm_manifest.json").read_text())["files"]}
    assert manifest["normalized/part-00000.jsonl"]["records"] == len(training)
    assert f"upload:  {out}/normalized/part-00000.jsonl is the training file, {out}/eval/part-00000.jsonl" in printed
