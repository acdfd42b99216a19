"""Never write or delete through anything convnorm cannot prove is its own: the
report, symbolic links, the lock's and the manifest's entries. A second round of hostile cases
after tests/test_outputs.py; each one was found breaking a user's files, and docs/outputs.md
lists them.

The runs use a three-line input (one conversation kept, one that drops a message, one line
that is not JSON) so that every output has a file and a run takes a fraction of a second.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import paused_runs
import pytest

from pipeline.cli.main import main
from pipeline.execution import lock as locks
from pipeline.finished.report import TITLE_MARK
from pipeline.io.output_names import LOCK_FILE, MANIFEST_FILE, REPORT_FILE, SUCCESS_FILE, TEMP_PREFIX, TEMP_PROOF


def _run(*argv) -> int:
    return main([str(a) for a in argv])


def _tree(directory: Path) -> dict[str, bytes]:
    """Every file and link under ``directory`` (a link as the text of its target)."""
    found = {}
    for p in sorted(directory.rglob("*")):
        if p.is_symlink():
            found[str(p.relative_to(directory))] = b"-> " + os.readlink(p).encode()
        elif p.is_file():
            found[str(p.relative_to(directory))] = p.read_bytes()
    return found


def _manifest(out: Path) -> dict:
    return json.loads((out / MANIFEST_FILE).read_text())


def _listed(out: Path) -> dict[str, dict]:
    return {entry["path"]: entry for entry in _manifest(out)["files"]}


# --------------------------------------------------------------------------------------------
# Critical: the report is an output like the others


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--overwrite"]])
def test_a_users_report_html_in_a_fresh_directory_is_never_overwritten(extra, small, tmp_path, capsys):
    # Found: the run replaced it, with or without --overwrite, after writing everything else.
    out = tmp_path / "out"
    out.mkdir()
    (out / REPORT_FILE).write_text("my own report\n")
    assert _run("--input", small, "--output", out, *extra) == 2
    err = capsys.readouterr().err
    assert REPORT_FILE in err and "no _convnorm_manifest.json" in err
    assert _tree(out) == {REPORT_FILE: b"my own report\n"}  # refused before the pipeline ran
    # Without a report to write, that page is not in the way.
    assert _run("--input", small, "--output", out, "--no-report", *extra) == 0
    assert (out / REPORT_FILE).read_text() == "my own report\n" and REPORT_FILE not in _listed(out)


@pytest.mark.slow
def test_a_page_the_previous_manifest_does_not_list_is_not_replaced(small, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out, "--no-report") == 0
    page = TITLE_MARK.decode() + "mine</title> a page of mine that looks like convnorm's\n"
    (out / REPORT_FILE).write_text(page)  # Found: taken for convnorm's by its title
    before = _tree(out)
    assert _run("--input", small, "--output", out, "--overwrite") == 2
    err = capsys.readouterr().err
    assert REPORT_FILE in err and "lists" in err
    assert _tree(out) == before
    assert _run("report", out) == 1
    assert "did not write it" in capsys.readouterr().err
    assert _tree(out) == before


@pytest.mark.slow
def test_the_report_is_listed_in_the_manifest_with_its_hash(small, tmp_path):
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out) == 0
    entry = _listed(out)[REPORT_FILE]
    data = (out / REPORT_FILE).read_bytes()
    assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert (out / SUCCESS_FILE).exists()


@pytest.mark.slow
def test_an_old_report_does_not_survive_overwrite_beside_new_outputs(small, tmp_path):
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out) == 0
    assert (out / REPORT_FILE).exists()
    assert _run("--input", small, "--output", out, "--overwrite", "--no-report") == 0
    assert not (out / REPORT_FILE).exists() and REPORT_FILE not in _listed(out)


@pytest.mark.slow
def test_a_report_changed_since_the_run_wrote_it_is_kept(small, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out) == 0
    with (out / REPORT_FILE).open("a") as handle:
        handle.write("<!-- my notes -->\n")
    before = _tree(out)
    assert _run("--input", small, "--output", out, "--overwrite") == 2
    assert "report.html changed since convnorm wrote" in capsys.readouterr().err
    assert _tree(out) == before
    assert _run("report", out) == 1
    assert _tree(out) == before


@pytest.mark.slow
def test_the_report_command_replaces_its_own_page_and_records_it(small, tmp_path):
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out) == 0
    assert _run("report", out) == 0
    data = (out / REPORT_FILE).read_bytes()
    assert _listed(out)[REPORT_FILE]["sha256"] == hashlib.sha256(data).hexdigest()
    assert _run("--input", small, "--output", out, "--overwrite", "--no-report") == 0  # still provably ours
    assert not (out / REPORT_FILE).exists()


@pytest.mark.slow
def test_a_page_replaced_by_yours_while_the_report_command_draws_is_kept(small, tmp_path, monkeypatch, capsys):
    # Found: `convnorm report` proved the page its own, then drew the new one (seconds on a big
    # run) and renamed it over whatever was at report.html by then: your file put there meanwhile.
    from pipeline.finished import report

    out = tmp_path / "out"
    assert _run("--input", small, "--output", out) == 0
    render = report.render_page

    def render_while_yours_lands(where, run=None):
        page = render(where, run)
        (out / REPORT_FILE).unlink()
        (out / REPORT_FILE).write_text("my own page\n")
        return page

    monkeypatch.setattr(report, "render_page", render_while_yours_lands)
    before = _manifest(out)
    assert _run("report", out) == 1
    assert REPORT_FILE in capsys.readouterr().err
    assert (out / REPORT_FILE).read_text() == "my own page\n" and _manifest(out) == before


# --------------------------------------------------------------------------------------------
# Critical: no name convnorm writes is followed as a symbolic link


@pytest.mark.slow
@pytest.mark.parametrize("name", [REPORT_FILE, MANIFEST_FILE, "summary.json", SUCCESS_FILE, LOCK_FILE])
@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_at_a_name_convnorm_writes_is_refused(name, dangling, small, tmp_path, capsys):
    # Found: report.html -> a file outside was replaced; a dangling manifest link made
    # convnorm create the manifest outside the output directory.
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / name).symlink_to(victim)
    assert _run("--input", small, "--output", out) == 2
    assert name in capsys.readouterr().err
    if dangling:
        assert not os.path.lexists(victim)
    else:
        assert victim.read_text() == "precious\n"
    assert _tree(out) == {name: b"-> " + str(victim).encode()}


@pytest.mark.parametrize("name", [LOCK_FILE, MANIFEST_FILE])
def test_a_fifo_at_a_name_convnorm_reads_is_refused_not_waited_on(name, small, tmp_path, capsys):
    # Found: a FIFO at the lock's or the manifest's name made every run hang before it began
    # (opening a FIFO to read waits for a writer), where a folder there was refused.
    import signal

    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / name)

    class Hung(BaseException):  # no handler of the run's catches it
        pass

    def hung(signum, frame):
        raise Hung(f"the run hung on the FIFO at {name}")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        assert _run("--input", small, "--output", out, "--no-report") == 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert name in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == [name]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "validate"])
def test_links_planted_while_a_run_is_under_way_are_not_written_through(command, small, tmp_path):
    # Found: _SUCCESS and summary.json links planted during the run truncated the file they
    # pointed to, or created one outside; a folder link had the part files moved outside.
    out = tmp_path / "out"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("precious\n")
    argv = [command, "--input", small, "--output", out]
    proc, ready = paused_runs.start_paused(argv, "write", tmp_path)
    try:
        summary = "summary.json" if command == "run" else "validation.json"
        (out / SUCCESS_FILE).symlink_to(outside / "victim.txt")
        (out / summary).symlink_to(outside / "made-by-convnorm.json")
        (out / "dead_letter").symlink_to(outside, target_is_directory=True)
        status, printed = paused_runs.resume(proc, ready)
    finally:
        paused_runs.kill(proc)
    assert status != 0 and "_SUCCESS" in printed
    assert _tree(outside) == {"victim.txt": b"precious\n"}
    assert not os.path.lexists(out / LOCK_FILE) and not list(out.glob(TEMP_PREFIX + "*"))


@pytest.mark.slow
def test_the_report_command_never_writes_through_a_link(small, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out, "--no-report") == 0
    victim = tmp_path / "victim.txt"
    (out / REPORT_FILE).symlink_to(victim)  # dangling
    assert _run("report", out) == 1
    assert REPORT_FILE in capsys.readouterr().err
    assert not os.path.lexists(victim)
    victim.write_text("precious\n")
    assert _run("report", out) == 1
    assert victim.read_text() == "precious\n"


def test_the_streaming_summary_is_never_written_through_a_link(tmp_path):
    from pipeline.io.processed_files import write_json

    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "summary.json").symlink_to(victim)
    with pytest.raises(OSError):
        write_json(str(out / "summary.json"), {"records_in": 1}, str(out))
    assert victim.read_text() == "precious\n" and (out / "summary.json").is_symlink()
    (out / "w").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(OSError):
        write_json(str(out / "w" / "summary.json"), {"records_in": 1}, str(out))
    assert not (tmp_path / "summary.json").exists()


# --------------------------------------------------------------------------------------------
# High: a stale lock's entries are deleted only when provably the dead run's


#: The dead run's proof file (in its temporary directory), whose size and sha256 its lock records.
PROOF = b'{"run_id": "dead", "token": "0123456789abcdef"}\n'


def _stale_lock(out: Path, **fields) -> None:
    out.mkdir(exist_ok=True)
    holder = {
        "run_id": "dead",
        "pid": paused_runs.dead_pid(),
        "host": socket.gethostname(),
        "started": "2026-01-01T00:00:00+00:00",
        "command": "run",
        "temp_dir": TEMP_PREFIX + "dead",
        "temp_proof": {"bytes": len(PROOF), "sha256": hashlib.sha256(PROOF).hexdigest()},
        **fields,
    }
    (out / LOCK_FILE).write_text(json.dumps(holder))


def _dead_temp(out: Path) -> Path:
    """The dead run's temporary directory, holding the proof file its lock records."""
    temp = out / (TEMP_PREFIX + "dead")
    temp.mkdir(parents=True)
    (temp / TEMP_PROOF).write_bytes(PROOF)
    return temp


@pytest.mark.slow
def test_a_stale_lock_naming_a_users_files_deletes_none_of_them(small, tmp_path, capsys):
    # Found: a lock naming a user's file and directory in creating/dirs had both deleted.
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("precious\n")
    (out / "photos").mkdir()
    (_dead_temp(out) / "00000-x").write_text("the dead run's\n")
    _stale_lock(
        out,
        creating=[{"path": "notes.txt", "bytes": 9, "sha256": "0" * 64}, "notes.txt"],
        deleting=["notes.txt"],
        dirs=["photos"],
    )
    assert _run("--input", small, "--output", out, "--break-stale-lock") == 0
    err = capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "precious\n" and (out / "photos").is_dir()
    assert not (out / (TEMP_PREFIX + "dead")).exists()  # its own temporary directory: deleted
    assert "kept" in err and "notes.txt" in err and "photos" in err


@pytest.mark.slow
def test_a_stale_lock_entry_outside_the_output_is_refused_and_nothing_is_deleted(small, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    _dead_temp(out)
    digest = hashlib.sha256(b"precious\n").hexdigest()
    _stale_lock(out, creating=[{"path": "../victim.txt", "bytes": 9, "sha256": digest}])
    before = _tree(out)
    assert _run("--input", small, "--output", out, "--break-stale-lock") == 2
    err = capsys.readouterr().err
    assert "../victim.txt" in err and "nothing was deleted" in err
    assert victim.read_text() == "precious\n" and _tree(out) == before and (out / (TEMP_PREFIX + "dead")).is_dir()


@pytest.mark.slow
def test_a_stale_lock_entry_matching_what_the_dead_run_recorded_is_deleted(small, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "normalized").mkdir()
    (out / "normalized" / "part-00000.jsonl").write_bytes(b"{}\n")
    _stale_lock(
        out,
        creating=[{"path": "normalized/part-00000.jsonl", "bytes": 3, "sha256": hashlib.sha256(b"{}\n").hexdigest()}],
        dirs=["normalized"],
    )
    assert _run("--input", small, "--output", out, "--break-stale-lock") == 0
    assert (out / "normalized" / "part-00000.jsonl").read_bytes() != b"{}\n"


# --------------------------------------------------------------------------------------------
# High: a live run is never judged dead


def _hold_os_lock(path: Path) -> subprocess.Popen:
    """A process that holds the OS lock on ``path`` (as a live run does) until it is killed."""
    code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(path)!r}, os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
    return proc


def test_a_held_os_lock_keeps_its_holder_alive_whatever_its_pid(tmp_path):
    # A holder in another PID namespace: its recorded pid is nobody (or someone else) here.
    out = tmp_path / "out"
    _stale_lock(out, os_lock=locks.OS_LOCK)
    holder = json.loads((out / LOCK_FILE).read_text())
    assert locks.is_stale(holder)  # the pid rule alone: dead
    proc = _hold_os_lock(out / LOCK_FILE)
    try:
        assert not locks.is_stale(holder, str(out / LOCK_FILE))
    finally:
        proc.kill()
        proc.wait()
    assert locks.is_stale(holder, str(out / LOCK_FILE))  # the kernel let go of it: dead
    # And a live pid does not keep a lock whose OS lock is free (the pid was reused).
    mine = {**holder, "pid": os.getpid(), "pid_start": locks._process_start(os.getpid())}
    assert locks.is_stale(mine, str(out / LOCK_FILE))


def _pid_namespace_prefix() -> list[str]:
    unshare = shutil.which("unshare")
    if not unshare:
        pytest.skip("no unshare(1)")
    prefix = [unshare, "--pid", "--fork", "--mount-proc"]
    if os.geteuid() != 0:
        prefix[1:1] = ["--user", "--map-root-user"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot make a PID namespace here")
    return prefix


@pytest.mark.slow
def test_a_live_run_in_another_pid_namespace_is_not_judged_dead(small, tmp_path, capsys):
    # Found: a second run saw the holder's pid missing and --break-stale-lock deleted the live
    # run's temporary directory.
    prefix = _pid_namespace_prefix()
    out = tmp_path / "out"
    proc, ready = paused_runs.start_paused(["--input", small, "--output", out], "write", tmp_path, prefix)
    try:
        temp = list(out.glob(TEMP_PREFIX + "*"))
        assert temp
        assert _run("--input", small, "--output", out, "--break-stale-lock") == 2
        assert "in use by another convnorm run" in capsys.readouterr().err
        assert temp[0].is_dir()
        status, printed = paused_runs.resume(proc, ready)
    finally:
        paused_runs.kill(proc)
    assert status == 0, printed
    assert (out / SUCCESS_FILE).exists()


# --------------------------------------------------------------------------------------------
# Medium


@pytest.mark.slow
def test_paths_derived_from_the_output_are_never_glob_patterns(small, tmp_path, capsys):
    # Found: --output 'b/out[1]' beside b/out1 made the report show out1's sources (and
    # validate print out1's violations): the output path was matched as a pattern.
    metrics = {"id": "z", "source": "SIBLINGS-FILE.jsonl", "position": 0, "dropped": 1, "drops": {"no_role": 1}}
    (tmp_path / "out1" / "drops").mkdir(parents=True)
    (tmp_path / "out1" / "drops" / "part-00000.jsonl").write_text(json.dumps(metrics) + "\n")
    report = {"id": "SIBLINGS-ID", "source": "s.jsonl", "position": 0, "violations": {"orphan_result": 1}}
    (tmp_path / "val1" / "violations").mkdir(parents=True)
    (tmp_path / "val1" / "violations" / "part-00000.jsonl").write_text(json.dumps(report) + "\n")
    out = tmp_path / "out[1]"
    assert _run("--input", small, "--output", out) == 0
    assert "SIBLINGS-FILE" not in (out / REPORT_FILE).read_text()
    capsys.readouterr()
    assert _run("validate", "--input", small, "--output", tmp_path / "val[1]") == 1
    assert "SIBLINGS-ID" not in capsys.readouterr().out


def test_streaming_finds_its_own_files_only_under_an_output_named_like_a_pattern(tmp_path):
    from pipeline.io import processed_files as processed

    window = "20260101T000000Z-20260101T000100Z"
    for name in ("o1", "o[1]"):
        (tmp_path / name / window / f"{name}-0000").mkdir(parents=True)
        (tmp_path / name / window / f"{name}-0000" / processed.SOURCE_FILE).write_text('{"source": "%s"}' % name)
    out = str(tmp_path / "o[1]")
    assert processed.window_names(out) == [window]
    assert [name for name, _ in processed.file_results(out, window)] == ["o[1]-0000"]


@pytest.mark.slow
def test_a_field_named_like_a_formula_is_drawn_as_text(tmp_path):
    # Found: a field named `$\undefined$` broke matplotlib's mathtext after _SUCCESS: exit 1, no page.
    source = tmp_path / "in.jsonl"
    source.write_text('{"id":"a","messages":[{"role":"user","content":"hi","$\\\\undefined$":1}]}\n')
    out = tmp_path / "out"
    assert _run("--input", source, "--output", out) == 0
    assert "$\\undefined$" in (out / REPORT_FILE).read_text() and REPORT_FILE in _listed(out)


@pytest.mark.slow
def test_a_report_that_cannot_be_drawn_never_fails_a_finished_run(small, tmp_path, monkeypatch, capsys):
    from pipeline.finished import report

    def broken(*_args, **_kwargs):
        raise RuntimeError("the renderer broke")

    monkeypatch.setattr(report, "render_html", broken)
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "report skipped" in line] == [
        f"WARNING convnorm: report skipped: RuntimeError: the renderer broke (convnorm report {out} tries again)"
    ]
    assert not (out / REPORT_FILE).exists() and REPORT_FILE not in _listed(out) and (out / SUCCESS_FILE).exists()
    assert _manifest(out)["complete"] is True


@pytest.mark.slow
def test_an_output_directory_named_in_another_encoding_finishes_with_its_report(small, tmp_path):
    # Found: a non-UTF-8 directory name: exit 1 after _SUCCESS, a 0-byte report.html.
    out = os.fsencode(tmp_path) + b"/out-\xff"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "--input", str(small), "--output", out],
        capture_output=True,
        env=paused_runs.env(),
        timeout=paused_runs.RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    page = Path(os.fsdecode(out)) / REPORT_FILE
    assert page.stat().st_size > 1000 and (Path(os.fsdecode(out)) / SUCCESS_FILE).exists()
    assert "out-\ufffd" in page.read_text()


def _append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage, where",
    [
        (lambda out: (out / "summary.json").write_text('{"records_in": 1,'), "summary.json"),
        (lambda out: (out / "summary.json").write_text("[1, 2]\n"), "summary.json"),
        (lambda out: _append(out / "drops" / "part-00000.jsonl", "not json\n"), "drops/part-00000.jsonl:3"),
        (lambda out: _append(out / "drops" / "part-00000.jsonl", "[1]\n"), "drops/part-00000.jsonl:3"),
    ],
)
def test_the_report_command_on_a_damaged_run_says_which_file_and_line(damage, where, small, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out, "--no-report") == 0
    damage(out)
    capsys.readouterr()
    assert _run("report", out) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and where in err
    assert not (out / REPORT_FILE).exists()


@pytest.mark.slow
def test_the_documented_recovery_after_a_kill_at_finalize_keeps_a_users_file(small, tmp_path):
    # Found: with a user's file in drops/, the rerun after a kill at finalize was refused (the
    # previous manifest was gone, and without one drops/ is not provably convnorm's).
    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report"]
    assert _run(*argv) == 0
    reference = _tree(out)
    (out / "drops" / "keep.txt").write_text("mine\n")
    killed, _ = paused_runs.start_paused([*argv, "--overwrite"], "finalize", tmp_path)
    paused_runs.kill(killed)
    assert not (out / MANIFEST_FILE).exists()
    assert _run(*argv, "--overwrite", "--break-stale-lock") == 0
    assert _tree(out) == {**reference, "drops/keep.txt": b"mine\n"}


@pytest.mark.slow
def test_validate_never_replaces_the_outputs_of_a_run(small, tmp_path, capsys):
    # Found: validate --overwrite into a run's output deleted its normalized/ and drops/.
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out) == 0
    before = _tree(out)
    assert _run("validate", "--input", small, "--output", out, "--overwrite") == 2
    assert "convnorm run" in capsys.readouterr().err
    assert _tree(out) == before


@pytest.mark.slow
def test_utf16_and_carriage_return_files_are_counted_record_by_record(tmp_path):
    # Found: both were one dead letter each, so records_in said 2 for 6 records.
    records = [{"id": f"r{i}", "messages": [{"role": "user", "content": "hi"}]} for i in range(3)]
    (tmp_path / "u16.jsonl").write_bytes(
        b"\xff\xfe" + "".join(json.dumps(r) + "\r\n" for r in records).encode("utf-16-le")
    )
    (tmp_path / "cr.jsonl").write_bytes("".join(json.dumps(r) + "\r" for r in records).encode())
    out = tmp_path / "out"
    assert _run("--input", tmp_path / "*.jsonl", "--output", out, "--no-report") == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["records_in"], summary["records_out"], summary["dead_letters"]) == (6, 6, 0)


@pytest.mark.slow
def test_a_folder_swapped_for_a_link_while_finalize_measures_is_never_deleted_through(small, tmp_path, monkeypatch):
    # Found: finalize checked the previous run's folders for links, then measured the new files
    # (seconds on a big run), then deleted the previous files by their full paths: a folder
    # swapped for a link meanwhile had the files of that name in the linked folder deleted.
    # The new files' measure now comes from their writers; the swap happens where finalize
    # lists the temporary files, the step between the check and the deletes.

    out = tmp_path / "out"
    assert _run("--input", small, "--output", out, "--no-report") == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    for part in (out / "normalized").iterdir():
        (outside / part.name).write_text("precious\n")
    from pipeline.execution import finalize

    present = finalize._present

    def swap_while_listing(path, *args, **kwargs):
        if TEMP_PREFIX in str(path) and not (out / "normalized").is_symlink():
            (out / "normalized").rename(tmp_path / "moved")
            (out / "normalized").symlink_to(outside, target_is_directory=True)
        return present(path, *args, **kwargs)

    monkeypatch.setattr(finalize, "_present", swap_while_listing)
    assert _run("--input", small, "--output", out, "--overwrite", "--no-report") == 1
    assert [p.read_text() for p in outside.iterdir()] == ["precious\n"]


# --------------------------------------------------------------------------------------------
# The no-follow writers themselves (pipeline/io/files.py): fast, no run


def test_the_writers_never_follow_a_link(tmp_path):
    from pipeline.io import files

    out = tmp_path / "out"
    out.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (out / "dangling").symlink_to(outside / "made.txt")
    (out / "victim").symlink_to(outside / "victim.txt")
    (outside / "victim.txt").write_text("precious\n")
    (out / "folder").symlink_to(outside, target_is_directory=True)
    with pytest.raises(FileExistsError):
        files.write_file(str(out), "dangling", b"x")
    with pytest.raises(files.NotFollowed):
        files.write_file(str(out), "victim", b"x", replace=True)
    with pytest.raises(files.NotFollowed):
        files.write_file(str(out), "folder/new.txt", b"x")
    with pytest.raises(files.NotFollowed):
        files.make_directory(str(out), "folder/sub")
    temp = tmp_path / "temp.txt"
    temp.write_text("ours\n")
    with pytest.raises(files.NotFollowed):
        files.move_into(str(temp), str(out), "folder/moved.txt")
    with pytest.raises(FileExistsError):
        files.move_into(str(temp), str(out), "dangling")
    assert (
        sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
        and (outside / "victim.txt").read_text() == "precious\n"
    )
    files.write_file(str(out), "new.txt", b"ours\n")
    files.write_file(str(out), "new.txt", b"ours again\n", replace=True)
    files.move_into(str(temp), str(out), "moved.txt")
    assert (out / "new.txt").read_bytes() == b"ours again\n" and (out / "moved.txt").read_text() == "ours\n"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_convnorm_report_on_a_stale_lock_says_what_to_run_not_a_flag_it_does_not_take(small, tmp_path, capsys):
    # Found: `convnorm report` on a directory with a dead run's lock said "pass
    # --break-stale-lock", which convnorm report does not accept.
    out = tmp_path / "out"
    assert _run("--input", small, "--output", out, "--no-report") == 0
    capsys.readouterr()
    _stale_lock(out)
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert "stale lock" in err and "pass --break-stale-lock" not in err, err
    assert "run the command that wrote it again with --break-stale-lock" in err, err
    with pytest.raises(SystemExit) as refused:  # indeed not one of its flags: argparse's exit
        main(["report", str(out), "--break-stale-lock"])
    assert refused.value.code == 2
