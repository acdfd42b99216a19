"""Outputs you can trust: a run deletes only what a manifest says it wrote, refuses
dangerous output directories, checks every option before touching anything, holds a lock,
and succeeds only when every file it reported is on disk. See docs/outputs.md.

Runs that must be killed at a chosen point run as subprocesses paused by
``pipeline.testhooks`` (an environment variable), then get SIGKILL: deterministic, no sleeps
guessing at timing.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import output_trees
import paused_runs
import pytest

from pipeline.cli.main import main
from pipeline.io.output_names import LOCK_FILE, MANIFEST_FILE, SUCCESS_FILE, TEMP_PREFIX

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


def _run(*argv: str) -> int:
    return main([str(a) for a in argv])


_tree = output_trees.tree
_start_paused = paused_runs.start_paused
_kill = paused_runs.kill
_dead_pid = paused_runs.dead_pid


# --------------------------------------------------------------------------------------------
# 1. --overwrite deletes by ownership, not by name


@pytest.mark.slow
def test_overwrite_keeps_a_users_file_inside_an_output_folder(tmp_path):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    (out / "drops" / "keep.txt").write_text("mine")
    assert _run("--input", SAMPLE, "--output", out, "--overwrite") == 0
    assert (out / "drops" / "keep.txt").read_text() == "mine"
    listed = [f["path"] for f in json.loads((out / MANIFEST_FILE).read_text())["files"]]
    assert "drops/keep.txt" not in listed and "drops/part-00000.jsonl" in listed


def test_overwrite_refuses_a_listed_file_that_was_changed_since(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    with (out / "drops" / "part-00000.jsonl").open("ab") as handle:
        handle.write(b'{"mine": true}\n')
    before = _tree(out)
    assert _run("--input", SAMPLE, "--output", out, "--overwrite") == 2
    assert "drops/part-00000.jsonl changed since convnorm wrote them" in capsys.readouterr().err
    assert _tree(out) == before


def test_overwrite_refuses_a_listed_file_edited_to_the_same_size(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    part = out / "drops" / "part-00000.jsonl"
    text = part.read_bytes()
    part.write_bytes(text[:-2] + (b"X" if text[-2:-1] != b"X" else b"Y") + text[-1:])  # same length, other bytes
    before = _tree(out)
    assert _run("--input", SAMPLE, "--output", out, "--overwrite") == 2
    assert "drops/part-00000.jsonl changed since convnorm wrote them" in capsys.readouterr().err
    assert _tree(out) == before


@pytest.mark.slow
def test_overwrite_removes_every_file_of_the_previous_run_and_nothing_else(tmp_path):
    second = tmp_path / "second.jsonl"
    second.write_text('{"id": "x", "messages": [{"role": "user", "content": "hi"}]}\n')
    out = tmp_path / "out"
    # A part file per input (--part-bytes 0): the second run, of one input, writes fewer files.
    assert _run("--input", SAMPLE, "--input", second, "--output", out, "--part-bytes", "0") == 0
    assert (out / "normalized" / "part-00001.jsonl").exists()
    (out / "notes.txt").write_text("mine")
    assert _run("--input", SAMPLE, "--output", out, "--overwrite") == 0
    assert not (out / "normalized" / "part-00001.jsonl").exists()  # listed by the previous manifest
    assert (out / "notes.txt").read_text() == "mine"
    reference = tmp_path / "reference"
    assert _run("--input", SAMPLE, "--output", reference) == 0
    assert {k: v for k, v in _tree(out).items() if k != "notes.txt"} == _tree(reference)


def test_input_under_the_output_is_neither_read_nor_deleted(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    before = _tree(out)
    # Found: this deleted its own input and still said accounted: true, exit 0.
    assert _run("--input", out / "normalized" / "*.jsonl", "--output", out, "--overwrite") == 2
    assert "never reads its own output directory" in capsys.readouterr().err
    assert _run("--input", out / "normalized" / "part-00000.jsonl", "--output", out, "--overwrite") == 2
    assert "lies inside --output" in capsys.readouterr().err
    assert _tree(out) == before


@pytest.mark.slow
def test_files_a_wildcard_matches_under_the_output_are_skipped(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    before = _tree(out)
    assert _run("--input", SAMPLE, "--input", out / "normalized" / "*.jsonl", "--output", out, "--overwrite") == 0
    after = _tree(out)
    assert after.keys() == before.keys()
    # The same single input: outputs identical, not read back (the manifest records the flags).
    assert {k: v for k, v in after.items() if k != MANIFEST_FILE} == {
        k: v for k, v in before.items() if k != MANIFEST_FILE
    }


@pytest.mark.parametrize(
    "target, message",
    [
        ("/", "is the filesystem root"),
        ("HOME", "is the home directory"),
        ("gs://some-bucket", "is the root of a gs:// bucket"),
        ("gs://some-bucket/", "is the root of a gs:// bucket"),
        ("s3://some-bucket", "is the root of a s3:// bucket"),
    ],
)
def test_dangerous_output_directories_are_refused(target, message, tmp_path, monkeypatch, capsys):
    from pipeline.config.options import ConfigError, load_job

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    if target == "HOME":
        target = str(home)
    # Found: --output / --overwrite was accepted (it deleted /normalized/... in a sandbox).
    # Checked through load_job, which never runs anything: should the check ever regress, this
    # test must not write into / (tests may run as root).
    with pytest.raises(ConfigError, match=message):
        load_job(["--input", str(SAMPLE), "--output", target, "--overwrite"])
    if target != "/":
        assert _run("--input", SAMPLE, "--output", target, "--overwrite") == 2
        assert message in capsys.readouterr().err
    assert list(home.iterdir()) == []


@pytest.mark.slow
def test_bad_beam_options_delete_nothing_and_exit_2_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    before = _tree(out)
    capsys.readouterr()
    # Found: this emptied the previous output, then failed with a traceback, exit 1.
    assert _run("--input", SAMPLE, "--output", out, "--overwrite", "--runner", "DataflowRunner") == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("convnorm: error:")]
    assert "Traceback" not in err and len(errors) == 1
    assert "Missing required option: project" in errors[0]
    assert _tree(out) == before


def test_a_users_folder_is_not_called_convnorm_outputs(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "drops").mkdir(parents=True)
    (out / "drops" / "mine.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        assert _run("--input", SAMPLE, "--output", out, *extra) == 2
        err = capsys.readouterr().err
        assert "convnorm outputs" not in err
        assert "drops/mine.txt" in err and "no _convnorm_manifest.json" in err
    assert _tree(out) == {"drops/mine.txt": b"mine"}


def test_without_overwrite_a_previous_run_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    assert _run("--input", SAMPLE, "--output", out) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_a_manifest_entry_outside_the_directory_is_never_followed(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    manifest["files"].append({"path": "../victim.txt", "records": 0, "bytes": 0, "sha256": ""})
    (out / MANIFEST_FILE).write_text(json.dumps(manifest))
    assert _run("--input", SAMPLE, "--output", out, "--overwrite") == 2
    assert "not a plain path inside it" in capsys.readouterr().err
    assert victim.read_text() == "precious"


# --------------------------------------------------------------------------------------------
# 2. success means every file is there


class _LosingFile:
    """A JSONL writer that loses (or truncates) its file after closing it."""

    def __init__(self, path: str, mode: str) -> None:
        from pipeline.io.file_formats import _JsonLinesFile

        self._inner, self._path, self._mode = _JsonLinesFile(path), path, mode

    def write(self, items, lines=None):
        self._inner.write(items, lines)

    def close(self):
        measure = self._inner.close()  # what the writer wrote, reported as it was
        if "/drops/" in self._path:
            if self._mode == "delete":
                os.remove(self._path)
            else:
                data = Path(self._path).read_bytes()
                Path(self._path).write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])
        return measure


@pytest.mark.parametrize("mode", ["delete", "truncate"])
def test_a_missing_or_short_file_fails_the_run(mode, tmp_path, monkeypatch, capsys):
    from pipeline.io import file_formats as sinks

    monkeypatch.setitem(
        sinks.FILE_FORMATS, "jsonl", sinks.FileFormat(".jsonl", lambda path, *_: _LosingFile(path, mode))
    )
    out = tmp_path / "out"
    # Found: _finalize skipped the missing temp file and the run exited 0.
    assert _run("--input", SAMPLE, "--output", out) == 1
    err = capsys.readouterr().err
    assert "drops/part-00000.jsonl" in err
    assert not (out / SUCCESS_FILE).exists()
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["complete"] is False and manifest["missing"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] is False
    if mode == "truncate":
        lines = (out / "drops" / "part-00000.jsonl").read_bytes().count(b"\n")
        assert "holds 300 records" in err and lines == 300
    assert not (out / LOCK_FILE).exists() and not list(out.glob(TEMP_PREFIX + "*"))


def test_summary_counts_the_records_in_the_files(tmp_path):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    summary = json.loads((out / "summary.json").read_text())
    manifest = {f["path"]: f for f in json.loads((out / MANIFEST_FILE).read_text())["files"]}
    assert summary["records_out"] == manifest["normalized/part-00000.jsonl"]["records"] == 301
    assert summary["dead_letters"] == manifest["dead_letter/part-00000.jsonl"]["records"] == 6
    for entry in manifest.values():
        assert (out / entry["path"]).stat().st_size == entry["bytes"]
    assert (out / SUCCESS_FILE).exists()


# --------------------------------------------------------------------------------------------
# 3. one run per output directory


@pytest.mark.slow
def test_a_second_run_into_the_same_output_exits_2_naming_the_holder(tmp_path, capsys):
    out = tmp_path / "out"
    first, _ = _start_paused(["--input", SAMPLE, "--output", out], "write", tmp_path)
    try:
        # Found: two overlapping runs both exited 0 with one run's files (or a mix) on disk.
        for extra in ([], ["--overwrite"], ["--overwrite", "--break-stale-lock"]):
            assert _run("--input", SAMPLE, "--output", out, *extra) == 2
            err = capsys.readouterr().err
            assert f"pid {first.pid} on host {socket.gethostname()}" in err and "in use" in err
    finally:
        _kill(first)
    # Its holder is dead now: a stale lock, reported, and taken over only when asked.
    assert _run("--input", SAMPLE, "--output", out) == 2
    err = capsys.readouterr().err
    assert "stale lock" in err and "--break-stale-lock" in err
    assert _run("--input", SAMPLE, "--output", out, "--break-stale-lock") == 0
    assert (out / SUCCESS_FILE).exists() and not (out / LOCK_FILE).exists()
    assert not list(out.glob(TEMP_PREFIX + "*"))


def test_a_lock_held_on_another_host_is_never_broken(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_FILE).write_text(
        json.dumps(
            {
                "run_id": "x",
                "pid": _dead_pid(),
                "host": "elsewhere",
                "started": "2026-01-01T00:00:00+00:00",
                "command": "run",
            }
        )
    )
    assert _run("--input", SAMPLE, "--output", out, "--break-stale-lock") == 2
    assert "host elsewhere" in capsys.readouterr().err
    assert (out / LOCK_FILE).exists()


def test_a_stale_lock_names_its_dead_holder(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    pid = _dead_pid()
    (out / LOCK_FILE).write_text(
        json.dumps(
            {
                "run_id": "x",
                "pid": pid,
                "host": socket.gethostname(),
                "started": "2026-01-01T00:00:00+00:00",
                "command": "run",
            }
        )
    )
    assert _run("--input", SAMPLE, "--output", out) == 2
    err = capsys.readouterr().err
    assert "stale lock" in err and f"pid {pid}" in err and "--break-stale-lock" in err
    assert _run("--input", SAMPLE, "--output", out, "--break-stale-lock") == 0


@pytest.mark.slow
def test_a_dry_run_calls_a_dead_runs_lock_stale_as_the_run_does(tmp_path, capsys):
    # Found: --dry-run said "locked by another run" where the run said "stale lock".
    out = tmp_path / "out"
    out.mkdir()
    holder = {"run_id": "x", "host": socket.gethostname(), "started": "2026-01-01T00:00:00+00:00", "command": "run"}
    (out / LOCK_FILE).write_text(json.dumps({**holder, "pid": _dead_pid()}))
    assert _run("--input", SAMPLE, "--output", out) == 2
    [run_line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("convnorm: error:")]
    assert _run("--input", SAMPLE, "--output", out, "--dry-run") == 2
    [dry_line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("convnorm: error:")]
    assert "stale lock" in run_line and "another run" not in dry_line
    assert dry_line == "convnorm: error: the run would be refused: " + run_line.removeprefix("convnorm: error: ")
    # With --break-stale-lock the run takes it over: the plan says so, and goes on.
    assert _run("--input", SAMPLE, "--output", out, "--dry-run", "--break-stale-lock") == 0
    assert "which the run takes over" in capsys.readouterr().out
    # A live holder (this process) is "in use", in both.
    (out / LOCK_FILE).write_text(json.dumps({**holder, "pid": os.getpid()}))
    assert _run("--input", SAMPLE, "--output", out, "--dry-run", "--break-stale-lock") == 2
    assert "in use by another convnorm run" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # the plan wrote nothing


# --------------------------------------------------------------------------------------------
# 4. kill -9 at read, at write, at finalize; then --overwrite gives the uninterrupted outputs


@pytest.mark.slow
@pytest.mark.parametrize("point", ["read", "write", "finalize"])
def test_kill_9_then_overwrite_gives_byte_identical_outputs(point, tmp_path, capsys):
    out = tmp_path / "out"
    # Several shards, so finalize has files left to move when it is killed.
    argv = ["--input", SAMPLE, "--output", out, "--shard-bytes=262144"]
    assert _run(*argv) == 0
    reference = _tree(out)
    assert len([k for k in reference if k.startswith("normalized/")]) > 1

    killed, _ = _start_paused([*argv, "--overwrite"], point, tmp_path)
    _kill(killed)
    assert (out / LOCK_FILE).exists()
    if point == "finalize":
        # The previous run's files are being replaced: no marker claims completeness, and
        # no manifest claims files (the lock records them).
        assert not (out / SUCCESS_FILE).exists() and not (out / MANIFEST_FILE).exists()
        holder = json.loads((out / LOCK_FILE).read_text())
        creating, deleting = ([e["path"] for e in holder[key]] for key in ("creating", "deleting"))
        assert "normalized/part-00000.jsonl" in creating and "summary.json" in deleting
    else:
        assert _tree(out).items() >= reference.items()  # the previous outputs are untouched so far

    assert _run(*argv, "--overwrite") == 2
    assert "stale lock" in capsys.readouterr().err
    assert _run(*argv, "--overwrite", "--break-stale-lock") == 0
    assert _tree(out) == reference


@pytest.mark.slow
def test_a_killed_first_run_is_cleaned_up_completely(tmp_path):
    out = tmp_path / "out"
    argv = ["--input", SAMPLE, "--output", out, "--shard-bytes=262144"]
    killed, _ = _start_paused(argv, "finalize", tmp_path)
    _kill(killed)
    assert not (out / MANIFEST_FILE).exists() and not (out / SUCCESS_FILE).exists()
    assert list(out.glob(TEMP_PREFIX + "*"))
    assert _run(*argv, "--break-stale-lock") == 0  # its files are its own: no --overwrite needed
    reference = tmp_path / "reference"
    assert _run("--input", SAMPLE, "--output", reference, "--shard-bytes=262144") == 0
    assert _tree(out) == _tree(reference)


def test_a_reused_pid_does_not_keep_a_lock_alive():
    from pipeline.execution.lock import _process_start, is_stale

    me = {"pid": os.getpid(), "host": socket.gethostname()}
    assert not is_stale({**me, "pid_start": _process_start(os.getpid())})
    assert is_stale({**me, "pid_start": "1"})  # same pid, another process start: the holder is gone
    assert is_stale({"pid": _dead_pid(), "host": socket.gethostname()})
    assert not is_stale({"pid": _dead_pid(), "host": "elsewhere"})


# --------------------------------------------------------------------------------------------
# Found in review: paths taken literally, manifest entries that are not convnorm's files


@pytest.mark.slow
def test_an_output_path_with_glob_characters_is_taken_literally(tmp_path):
    # Found: --output 'o[1]' exited 1 (sizes looked up by pattern: -1), left its lock and temp
    # dir, and --overwrite deleted by pattern: o[1]/normalized/... matches o1/normalized/...
    neighbour = tmp_path / "o1" / "normalized" / "part-00000.jsonl"
    neighbour.parent.mkdir(parents=True)
    neighbour.write_text("mine\n")
    out = tmp_path / "o[1]"
    assert _run("--input", SAMPLE, "--output", out) == 0
    assert _run("--input", SAMPLE, "--output", out, "--overwrite") == 0
    assert neighbour.read_text() == "mine\n"
    assert (out / SUCCESS_FILE).exists() and (out / "normalized" / "part-00000.jsonl").exists()
    assert not (out / LOCK_FILE).exists() and not [p for p in out.iterdir() if p.name.startswith(TEMP_PREFIX)]


def _list_in_manifest(out: Path, entry: dict) -> None:
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    manifest["files"].append(entry)
    (out / MANIFEST_FILE).write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "entry, why",
    [
        ({"path": "mydocs", "records": 0, "bytes": 4096}, "not a file"),  # Found: deleted mydocs/ and all in it
        ({"path": "link/notes.txt", "records": 0, "bytes": 9}, "outside"),  # Found: deleted home/notes.txt
        ({"path": "notes.txt", "records": 0}, "size"),  # Found: no size recorded, so none to differ: deleted
        ({"path": "notes.txt", "records": 0, "bytes": 9}, "sha256"),  # Found: the right size was enough: deleted
    ],
)
def test_a_manifest_entry_that_is_not_a_file_convnorm_wrote_deletes_nothing(entry, why, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    (out / "mydocs").mkdir()
    (out / "mydocs" / "a.txt").write_text("precious\n")
    (out / "notes.txt").write_text("precious\n")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("precious\n")
    (out / "link").symlink_to(tmp_path / "home")
    _list_in_manifest(out, entry)
    before = _tree(out)
    assert _run("--input", SAMPLE, "--output", out, "--overwrite") == 2
    err = capsys.readouterr().err
    assert entry["path"] in err and why in err and "nothing was deleted" in err
    assert _tree(out) == before and (tmp_path / "home" / "notes.txt").read_text() == "precious\n"


@pytest.mark.slow
def test_a_dead_runs_temp_dir_is_cleaned_whatever_the_spelling_of_the_output(tmp_path):
    # Found: the lock recorded the temp dir as given ('out/_convnorm_temp-...', relative to the
    # dead run's working directory); a rerun from elsewhere (or with an absolute --output)
    # resolved it against its own directory and left the dead run's temp dir for good.
    killed, _ = _start_paused(["--input", SAMPLE, "--output", "out"], "write", tmp_path)
    _kill(killed)
    out = tmp_path / "out"
    assert [p for p in out.iterdir() if p.name.startswith(TEMP_PREFIX)]
    assert _run("--input", SAMPLE, "--output", out, "--break-stale-lock") == 0
    assert not [p for p in out.iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_an_output_folder_that_is_a_symbolic_link_is_not_written_through(tmp_path, capsys):
    # Found: out/drops -> a user's (empty) folder: the run put its part files there, and the
    # next --overwrite could not tell them from the user's.
    users = tmp_path / "users-folder"
    users.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "drops").symlink_to(users)
    assert _run("--input", SAMPLE, "--output", out) == 2
    assert "already holds drops" in capsys.readouterr().err
    assert list(users.iterdir()) == []


def test_an_output_on_a_filesystem_beam_cannot_use_is_a_bad_option(capsys):
    # Found: a traceback and exit status 1 (README: 2, one line).
    assert _run("--input", SAMPLE, "--output", "nosuchfs://bucket/out") == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("convnorm: error:")]
    assert "Traceback" not in err and len(errors) == 1 and "nosuchfs://bucket/out" in errors[0]


def test_the_manifest_never_holds_credentials(tmp_path):
    # Found: --s3_secret_access_key and friends were written into the manifest, which travels
    # with the outputs.
    out = tmp_path / "out"
    assert (
        _run(
            "--input",
            SAMPLE,
            "--output",
            out,
            "--s3_access_key_id=AKIAEXAMPLE",
            "--s3_secret_access_key=TOPSECRET",
            "--s3_session_token=TOKEN123",
            "--azure_connection_string=AccountKey=KEY456",
        )
        == 0
    )
    text = (out / MANIFEST_FILE).read_text()
    for secret in ("AKIAEXAMPLE", "TOPSECRET", "TOKEN123", "KEY456"):
        assert secret not in text
    options = json.loads(text)["options"]
    assert options["s3_secret_access_key"] == "<redacted>"  # given, but not what


def test_convnorm_s_own_options_are_never_taken_for_credentials(tmp_path):
    """Found: every option with "token" in its name was redacted, so the manifest (and the
    report's options, and what explain reads back) said <redacted> for --tokens o200k_base,
    --max-example-tokens 900 and --max-tokens 1024. Only Beam's credential options are."""
    from pipeline.config.options import load_job
    from pipeline.execution.execute import manifest_options

    argv = ["--input", SAMPLE, "--output", str(tmp_path / "out"), "--sink", "anthropic", "--max-tokens", "1024"]
    argv += ["--tokens", "o200k_base", "--max-example-tokens", "900", "--s3_session_token=TOKEN123"]
    options = manifest_options(load_job([str(a) for a in argv]))
    assert (options["tokens"], options["max_example_tokens"], options["max_tokens"]) == ("o200k_base", "900", 1024)
    assert options["s3_session_token"] == "<redacted>"


def test_a_folder_at_the_marker_name_is_not_deleted_as_the_marker(tmp_path, capsys):
    # Found: with a manifest present, --overwrite deleted OUTPUT/_SUCCESS as "the previous
    # run's marker" even when it was a folder of someone's files (recursively).
    out = tmp_path / "out"
    assert _run("--input", SAMPLE, "--output", out) == 0
    (out / SUCCESS_FILE).unlink()
    (out / SUCCESS_FILE).mkdir()
    (out / SUCCESS_FILE / "mine.txt").write_text("precious\n")
    assert _run("--input", SAMPLE, "--output", out, "--overwrite") == 2
    assert "not a file" in capsys.readouterr().err
    assert (out / SUCCESS_FILE / "mine.txt").read_text() == "precious\n"


def test_a_tilde_in_the_output_means_the_home_directory(tmp_path, monkeypatch):
    # Found: `output: ~/clean` in a preset (no shell to expand it) made a folder named '~' in
    # the working directory (one `rm -rf ~` away from a disaster), while the safety checks
    # took '~' as the home directory.
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    preset = work / "preset.yaml"
    preset.write_text(f"input: {SAMPLE}\noutput: ~/clean\n")
    assert _run("--config", preset) == 0
    assert (home / "clean" / SUCCESS_FILE).exists()
    assert not (work / "~").exists()


def test_joining_an_outputs_files_keeps_their_order_and_measures_the_one_file(tmp_path):
    import hashlib

    from pipeline.execution.finalize import join_files
    from pipeline.io.written_files import WrittenFile

    temp = tmp_path / "temp"
    (temp / "normalized").mkdir(parents=True)
    parts = {(1, 0): b'{"b":1}\n', (0, 0): b'{"a":1}\n{"a":2}\n', (1, 900): b'{"c":1}\n'}
    written = []
    for (shard, start), data in parts.items():
        path = temp / "normalized" / f"{shard}-{start}-x.jsonl"
        path.write_bytes(data)
        written.append(WrittenFile(shard, start, str(path), data.count(b"\n"), len(data), ""))
    [one] = join_files(str(temp), "normalized", ".jsonl", written)
    joined = b'{"a":1}\n{"a":2}\n{"b":1}\n{"c":1}\n'  # by shard, then offset: the input's order
    assert Path(one.temp).read_bytes() == joined
    assert (one.records, one.size, one.sha256) == (4, len(joined), hashlib.sha256(joined).hexdigest())
    assert sorted(p.name for p in (temp / "normalized").iterdir()) == [Path(one.temp).name]  # the parts are gone
    [empty] = join_files(str(temp), "eval", ".jsonl", [])
    assert Path(empty.temp).read_bytes() == b"" and empty.records == 0  # a split with nothing: one empty file
