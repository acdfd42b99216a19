"""A run's life around its outputs (docs/outputs.md): stopped by SIGTERM, a finalize that fails
on a full or unwritable disk, a hand-edited lock, `convnorm report` and `explain` while a run is
finalizing, a drops/ line naming a file the run never read. Each case once broke a run or said
something untrue; docs/outputs.md lists them.

The runs use a three-line input (one conversation kept, one that drops a message, one line that
is not JSON), so every output has a file and a run takes a fraction of a second.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import paused_runs
import pytest
from conftest import SMALL_LINES
from prism_build import prism_binary

from pipeline.cli.main import main
from pipeline.execution.interrupts import interrupted_line
from pipeline.io.output_names import LOCK_FILE, SUCCESS_FILE, TEMP_PREFIX


def _run(*argv) -> int:
    return main([str(a) for a in argv])


def _tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _said(printed: str) -> list[str]:
    """convnorm's own lines of a run's output (not the plan's INFO lines)."""
    return [line for line in printed.splitlines() if line.startswith("convnorm:") and "warning" not in line]


def _no_leftovers(out: Path) -> bool:
    return not os.path.lexists(out / LOCK_FILE) and not list(out.glob(TEMP_PREFIX + "*"))


# --------------------------------------------------------------------------------------------
# SIGTERM (timeout, systemd, Kubernetes) stops a run as Ctrl-C does


@pytest.mark.slow
def test_sigterm_mid_pipeline_leaves_the_output_as_it_was_and_the_same_command_runs_again(small, tmp_path):
    # Found: SIGTERM killed the run outright, its lock and temporary directory stayed, and the
    # same command then failed (a stale lock) until --break-stale-lock.
    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report", "--overwrite"]
    assert _run(*argv) == 0
    before = _tree(out)
    proc, ready = paused_runs.start_paused(argv, "read", tmp_path)
    try:
        os.kill(proc.pid, signal.SIGTERM)  # to the process alone, as Kubernetes sends it
        status = proc.wait(timeout=paused_runs.RUN_TIMEOUT_S)
    finally:
        paused_runs.kill(proc)
    printed = proc.log_path.read_text()
    assert status == 143, printed[-3000:]
    assert _said(printed) == [interrupted_line("the run pipeline", str(out), signum=signal.SIGTERM)], printed
    assert "Traceback" not in printed
    assert _tree(out) == before and _no_leftovers(out)
    assert _run(*argv) == 0  # no --break-stale-lock needed


@pytest.mark.slow
def test_sigterm_while_the_outputs_move_into_place_finishes_them_first(small, tmp_path):
    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report", "--overwrite"]
    assert _run(*argv) == 0
    reference = _tree(out)
    proc, ready = paused_runs.start_paused(argv, "finalize", tmp_path)
    try:
        os.kill(proc.pid, signal.SIGTERM)
        status, printed = paused_runs.resume(proc, ready)
    finally:
        paused_runs.kill(proc)
    assert status == 143, printed[-3000:]
    line = interrupted_line("the run pipeline", str(out), written=True, signum=signal.SIGTERM)
    assert _said(printed) == [line], printed
    assert _tree(out) == reference and (out / SUCCESS_FILE).exists() and _no_leftovers(out)
    assert _run(*argv) == 0


def _wait_for(proc, text: str) -> str:
    """What the paused run printed, once it holds ``text`` (it waits in a stop marker's drain)."""
    deadline = time.monotonic() + paused_runs.RUN_TIMEOUT_S
    while text not in (printed := proc.log_path.read_text(errors="replace")):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"never printed {text!r}:\n{printed[-3000:]}")
        time.sleep(0.05)
    return printed


@pytest.mark.slow
def test_a_second_sigterm_aborts_a_draining_streaming_run_cleanly(tmp_path):
    # Found: the first SIGTERM drains, but a second one killed the run outright (the default
    # action), leaving its lock and temporary directory.
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    (landing / "a.jsonl").write_bytes(SMALL_LINES)
    argv = [
        "--streaming",
        "--runner=PrismRunner",
        f"--prism_location={prism_binary()}",
        f"--input={landing}/*.jsonl",
        f"--output={out}",
        "--no-report",
    ]
    proc, ready = paused_runs.start_paused(argv, "streaming-commit", tmp_path)
    try:
        os.kill(proc.pid, signal.SIGTERM)
        _wait_for(proc, "SIGTERM: draining")  # the commit is paused: the drain waits for it
        os.kill(proc.pid, signal.SIGTERM)
        status = proc.wait(timeout=paused_runs.RUN_TIMEOUT_S)
    finally:
        ready.unlink(missing_ok=True)
        paused_runs.kill(proc)
    printed = proc.log_path.read_text(errors="replace")
    assert status == 143, printed[-3000:]
    line = interrupted_line("the streaming run", str(out), streaming=True, signum=signal.SIGTERM)
    assert printed.strip().splitlines()[-1] == line, printed[-3000:]
    assert "Traceback" not in printed and _no_leftovers(out)
    # The same command again (told to stop soon): nothing of the aborted run is in its way.
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", *argv, "--stop-after=1s"],
        cwd=tmp_path,
        env=paused_runs.env(),
        capture_output=True,
        text=True,
        timeout=paused_runs.RUN_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "took over" not in done.stderr and "taking over" not in done.stderr and _no_leftovers(out)


# --------------------------------------------------------------------------------------------
# A finalize that fails (a full disk, a folder made read-only) says what happened


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("convnorm: error:")]


def _recover(err: str) -> list[str]:
    """The command the error line gives, as arguments for ``main`` (``convnorm`` dropped)."""
    found = re.search(r"then run(?: the same command again)?: (convnorm .*?)(?: \(|$)", err, re.MULTILINE)
    assert found, err
    words = shlex.split(found.group(1))
    assert words[0] == "convnorm"
    return words[1:]


@pytest.mark.slow
def test_a_full_disk_while_finalize_writes_the_summary_says_what_is_on_disk(small, tmp_path, monkeypatch, capsys):
    # Found: "the run pipeline failed" (with a traceback), though the pipeline had finished,
    # the previous outputs were deleted and the lock was kept for --break-stale-lock.
    from pipeline.io import files

    out, reference = tmp_path / "out", tmp_path / "reference"
    argv = ["--input", small, "--output", out, "--no-report", "--overwrite"]
    assert _run(*argv) == 0 and _run("--input", small, "--output", reference, "--no-report") == 0
    write = files.write_file

    def full(root, relative, data, **kwargs):
        if root == str(out) and relative == "summary.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(root, relative, data, **kwargs)

    monkeypatch.setattr(files, "write_file", full)
    capsys.readouterr()
    assert _run(*argv) == 1
    err = capsys.readouterr().err
    [line] = _errors(err)
    assert "pipeline failed" not in err and "Traceback" not in err
    assert "the run pipeline finished, but finalizing its outputs failed while writing summary.json" in line
    assert "No space left on device" in line and "the previous run's files were deleted" in line
    assert "no summary.json" in line and "no _SUCCESS" in line and f"lock {out / LOCK_FILE} is kept" in line
    assert "free some space" in line
    recover = _recover(line)
    assert recover == [*map(str, argv), "--break-stale-lock"]
    monkeypatch.setattr(files, "write_file", write)  # the disk has room again
    assert main(recover) == 0
    assert _tree(out) == _tree(reference) and _no_leftovers(out)


@pytest.mark.slow
def test_the_rerun_after_a_full_disk_says_the_run_failed_not_died(small, tmp_path, monkeypatch, capsys):
    # Found: the rerun called the kept lock that of a run that "died"; it had failed (ENOSPC).
    from pipeline.io import files

    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report", "--overwrite"]
    assert _run(*argv) == 0
    write = files.write_file

    def full(root, relative, data, **kwargs):
        if root == str(out) and relative == "summary.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(root, relative, data, **kwargs)

    monkeypatch.setattr(files, "write_file", full)
    assert _run(*argv) == 1
    monkeypatch.setattr(files, "write_file", write)
    capsys.readouterr()
    for extra in ((), ("--dry-run",)):  # the run and its plan say the same
        assert _run(*argv, *extra) == 2
        [line] = _errors(capsys.readouterr().err)
        assert "stale lock" in line and "died" not in line, line
        assert "failed (OSError: [Errno 28] No space left on device while writing summary.json)" in line
        assert "--break-stale-lock" in line
    assert _run(*argv, "--break-stale-lock") == 0 and _no_leftovers(out)


@pytest.mark.slow
def test_a_permission_error_while_the_files_move_into_place_says_how_to_recover(small, tmp_path, monkeypatch, capsys):
    from pipeline.io import files

    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report"]
    link = files._link_into

    def denied(directory, source, name, shown):
        raise PermissionError(errno.EACCES, "Permission denied", shown)

    monkeypatch.setattr(files, "_link_into", denied)
    assert _run(*argv) == 1
    err = capsys.readouterr().err
    [line] = _errors(err)
    assert "pipeline failed" not in err and "Traceback" not in err
    assert "finalizing its outputs failed while moving the new files into place" in line
    assert "Permission denied" in line and "make " in line and " writable" in line
    assert os.path.exists(out / LOCK_FILE)
    monkeypatch.setattr(files, "_link_into", link)
    assert main(_recover(line)) == 0
    assert (out / SUCCESS_FILE).exists() and _no_leftovers(out)


@pytest.mark.slow
def test_a_permission_error_while_writing_is_said_once_and_truly(small, tmp_path, monkeypatch, capsys):
    # Found: "the previous outputs, if any, are untouched", then "the run pipeline failed:
    # PermissionError" when the temporary directory could not be removed either, its lock left.
    from pipeline.io import files

    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report", "--overwrite"]
    assert _run(*argv) == 0
    before = _tree(out)
    create, delete = files.create, files.delete

    def unwritable(path, *args, **kwargs):
        create(path + ".begun").close()  # the writer's folder exists, its file cannot be made
        raise PermissionError(errno.EACCES, "Permission denied", path)

    def undeletable(path, *, tree=False):
        if tree:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return delete(path, tree=tree)

    monkeypatch.setattr(files, "create", unwritable)
    monkeypatch.setattr(files, "delete", undeletable)
    capsys.readouterr()
    assert _run(*argv) == 1
    err = capsys.readouterr().err
    untouched, kept = _errors(err)
    assert "Traceback" not in err.split(untouched)[1]  # Beam logs the failed bundle's; nothing after
    assert "the run pipeline failed" in untouched and "previous outputs, if any, are untouched" in untouched
    assert "could not be removed" in kept and "Permission denied" in kept and "pipeline failed" not in kept
    monkeypatch.setattr(files, "create", create)
    monkeypatch.setattr(files, "delete", delete)
    assert main(_recover(kept)) == 0
    assert _tree(out) == before and _no_leftovers(out)


@pytest.mark.slow
def test_a_full_disk_before_finalize_changed_anything_leaves_the_output_as_it_was(small, tmp_path, monkeypatch, capsys):
    from pipeline.execution.lock import OutputLock

    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report", "--overwrite"]
    assert _run(*argv) == 0
    before = _tree(out)
    record = OutputLock.record

    def full(self, **fields):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(OutputLock, "record", full)
    capsys.readouterr()
    assert _run(*argv) == 1
    [line] = _errors(capsys.readouterr().err)
    assert "failed while recording in the lock what it creates and deletes" in line
    assert f"nothing in {out} was changed" in line and "--break-stale-lock" not in line
    assert _tree(out) == before and _no_leftovers(out)
    monkeypatch.setattr(OutputLock, "record", record)
    assert main(_recover(line)) == 0


# --------------------------------------------------------------------------------------------
# A run that cannot finish says why: a worker process killed, memory exhausted


def _error_lines(printed: str) -> list[str]:
    return [line for line in printed.splitlines() if line.startswith(("ERROR convnorm:", "convnorm: error:"))]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_worker_process_killed_by_a_signal_is_named(small, tmp_path, sig):
    # Found: "the pipeline failed: RuntimeError: Channel closed prematurely", nothing more.
    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report", "--direct_num_workers=2"]
    argv.append("--direct_running_mode=multi_processing")
    proc, ready = paused_runs.start_paused(argv, "read", tmp_path)
    worker = int(ready.read_text())  # the process that paused: a worker
    assert worker != proc.pid
    os.kill(worker, sig)
    status, printed = paused_runs.resume(proc, ready)
    assert status == 1, printed
    lines = _error_lines(printed)  # and one naming the workers' own log
    failed, said = lines[0], lines[-1]
    assert f"a worker process was killed by {sig.name}" in failed and "--direct_num_workers" in failed
    assert "previous outputs, if any, are untouched" in said
    assert not out.exists()  # the run itself was alive: it removed its lock and temporary directory


@pytest.mark.slow
def test_a_run_that_crashed_is_named_by_the_next_run_and_cleaned_up(small, tmp_path):
    # Found: a run that died of SIGSEGV (under ulimit -v) printed nothing, and the next run said
    # only that it "died".
    out = tmp_path / "out"
    argv = ["--input", small, "--output", out, "--no-report"]
    proc, _ = paused_runs.start_paused(argv, "write", tmp_path)
    os.kill(proc.pid, signal.SIGSEGV)  # the run's own process (in-process runner): a crash
    assert proc.wait(timeout=paused_runs.RUN_TIMEOUT_S) == -signal.SIGSEGV
    assert (out / LOCK_FILE).exists() and list(out.glob(TEMP_PREFIX + "*"))
    run = subprocess.run(
        [sys.executable, "-m", "pipeline", *map(str, argv)], capture_output=True, text=True, env=paused_runs.env()
    )
    assert run.returncode == 2
    [line] = _errors(run.stderr)
    assert "stale lock: the run that held it died of a crash (Fatal Python error: Segmentation fault;" in line
    assert "ulimit -v" in line and "--break-stale-lock" in line
    assert _run(*argv, "--break-stale-lock") == 0 and _no_leftovers(out)  # the documented recovery


#: Bytes of the one record of the memory test, and the memory the run gets on top of what it
#: holds when it is paused before reading it (any margin from 30 to 250 MB ran out the same way).
BIG_RECORD, MARGIN = 50_000_000, 100_000_000


@pytest.mark.slow
def test_a_run_out_of_memory_says_so_and_leaves_nothing(tmp_path):
    # Found, by the margin: a MemoryError read as the data's fault, an unreadable_file or an
    # invalid_json dead letter ("Not enough memory to allocate buffer for parsing"), exit 1 for
    # "normalized none"; or a Beam traceback and "RuntimeError: MemoryError" with no hint.
    import resource

    big = tmp_path / "big.jsonl"
    content = "x" * BIG_RECORD
    big.write_text(
        json.dumps({"messages": [{"role": "user", "content": content}, {"role": "assistant", "content": "ok"}]}) + "\n"
    )
    out = tmp_path / "out"
    argv = ["--input", big, "--output", out, "--no-report", "--max-record-bytes", str(1 << 30)]
    proc, ready = paused_runs.start_paused(argv, "read", tmp_path)
    pid = int(ready.read_text())
    status_lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    held = int(next(line for line in status_lines if line.startswith("VmSize:")).split()[1]) * 1024
    resource.prlimit(pid, resource.RLIMIT_AS, (held + MARGIN, held + MARGIN))  # a `ulimit -v` from outside
    status, printed = paused_runs.resume(proc, ready)
    assert status == 1, printed
    failed, said = _error_lines(printed)
    assert "the pipeline failed: out of memory (" in failed and "MemoryError" in failed, failed
    assert "give it more memory" in failed and "previous outputs, if any, are untouched" in said
    assert not out.exists()  # no dead letter blaming the record, no lock, no temporary directory


# --------------------------------------------------------------------------------------------
# A hand-edited lock: --break-stale-lock deletes only what it proves the dead run's


def _killed_run(small: Path, out: Path, tmp_path: Path) -> dict:
    """A run killed while it writes: its lock (stale now) and its temporary directory stay."""
    proc, _ = paused_runs.start_paused(["--input", small, "--output", out, "--no-report"], "write", tmp_path)
    paused_runs.kill(proc)
    return json.loads((out / LOCK_FILE).read_text())


def _edit_lock(out: Path, **fields) -> None:
    holder = json.loads((out / LOCK_FILE).read_text())
    (out / LOCK_FILE).write_text(json.dumps({**holder, **fields}))


@pytest.mark.slow
@pytest.mark.parametrize(
    "temp_dir",
    [
        lambda out, name: str(out / ".." / "elsewhere" / name),
        lambda out, name: f"../elsewhere/{name}",
        lambda out, name: str(out.parent / "elsewhere" / name),
        lambda out, name: str(out / name / ".."),
    ],
    ids=["dot-dot-inside-an-absolute-path", "relative-dot-dot", "absolute-outside", "ends-in-dot-dot"],
)
def test_a_lock_whose_temp_dir_is_not_in_the_output_is_refused(temp_dir, small, tmp_path, capsys):
    # Found: a temp_dir ending in '..' was skipped without a word (the dead run's temporary
    # directory stayed for good, its lock gone); one through '../' was taken by its last name.
    out = tmp_path / "out"
    holder = _killed_run(small, out, tmp_path)
    name = TEMP_PREFIX + holder["run_id"]
    (tmp_path / "elsewhere" / name).mkdir(parents=True)
    (tmp_path / "elsewhere" / name / "mine.txt").write_text("precious\n")
    recorded = temp_dir(out, name)
    _edit_lock(out, temp_dir=recorded)
    before, elsewhere = _tree(out), _tree(tmp_path / "elsewhere")
    assert _run("--input", small, "--output", out, "--no-report", "--break-stale-lock") == 2
    err = capsys.readouterr().err
    assert repr(recorded) in err and "nothing was deleted" in err and str(out / LOCK_FILE) in err
    assert _tree(out) == before and _tree(tmp_path / "elsewhere") == elsewhere  # the lock and both folders


@pytest.mark.slow
def test_an_edited_run_id_never_deletes_a_folder_the_lock_does_not_prove_the_dead_runs(small, tmp_path, capsys):
    # Found: a lock edited to run_id 'photos' had --break-stale-lock delete the user's
    # _convnorm_temp-photos/ folder: the name alone was taken as proof.
    out = tmp_path / "out"
    holder = _killed_run(small, out, tmp_path)
    dead_temp = out / (TEMP_PREFIX + holder["run_id"])
    assert dead_temp.is_dir()
    photos = out / (TEMP_PREFIX + "photos")
    photos.mkdir()
    (photos / "cat.jpg").write_bytes(b"\xff\xd8 a cat\n")
    _edit_lock(out, run_id="photos", temp_dir=str(photos))
    assert _run("--input", small, "--output", out, "--no-report", "--break-stale-lock") == 0
    err = capsys.readouterr().err
    assert (photos / "cat.jpg").read_bytes() == b"\xff\xd8 a cat\n"
    assert "kept" in err and photos.name in err
    assert not dead_temp.exists()  # the dead run's own, proven by the file its lock records


# --------------------------------------------------------------------------------------------
# convnorm report and explain while a run is finalizing


@pytest.mark.slow
def test_report_and_explain_while_a_run_finalizes_say_it_is_in_use(small, tmp_path, capsys):
    # Found: `convnorm report` said the directory "holds no summary.json (is it a convnorm
    # run's --output?)" and `convnorm explain` that it "holds no drops/ lines", exit 1, while a
    # run was moving its files into place there.
    out = tmp_path / "out"
    proc, ready = paused_runs.start_paused(["--input", small, "--output", out, "--no-report"], "finalize", tmp_path)
    try:
        for command in (["report", out], ["explain", out, "--id", "b"]):
            assert _run(*command) == 2, command
            err = capsys.readouterr().err
            assert "in use by a running convnorm" in err and str(out / LOCK_FILE) in err, err
            assert "summary.json" not in err and "drops/" not in err
        status, printed = paused_runs.resume(proc, ready)
    finally:
        paused_runs.kill(proc)
    assert status == 0, printed
    assert _run("explain", out, "--id", "b") == 0  # finished: explained


# --------------------------------------------------------------------------------------------
# A forged drops/ line: explain opens only files the run read


@pytest.mark.slow
def test_explain_never_opens_a_source_the_run_did_not_read(small, tmp_path, monkeypatch, capsys):
    # Found: a drops/ line naming another file made `convnorm explain` read it and print it.
    from pipeline.io import reread

    out = tmp_path / "out"
    assert _run("--input", small, "--output", out, "--no-report", "--quiet") == 0
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"id": "forged", "messages": [{"role": "user", "content": "the password is hunter2"}]}\n')
    forged = {"id": "forged", "source": str(secret), "position": 0, "dropped": 0, "drops": {}, "healed": 0}
    with (out / "drops" / "part-00000.jsonl").open("a") as handle:
        handle.write(json.dumps(forged) + "\n")
    opened = []
    record_at = reread.record_at
    monkeypatch.setattr(reread, "record_at", lambda path, *args: opened.append(path) or record_at(path, *args))
    capsys.readouterr()
    assert _run("explain", out, "--id", "forged") == 2
    printed = capsys.readouterr()
    assert "hunter2" not in printed.out + printed.err and opened == []
    [line] = printed.err.strip().splitlines()
    assert str(secret) in line and "not one of the run's inputs" in line and "_convnorm_manifest.json" in line
    assert _run("explain", out, "--id", "b") == 0 and opened == [str(small)]  # the run's own input: shown


def test_explain_on_a_streaming_output_opens_only_the_files_it_processed(small, tmp_path, capsys):
    from pipeline.io import processed_files as processed
    from pipeline.io.output_names import STREAMING_FORMAT, STREAMING_MARKER

    out, window = tmp_path / "out", "20260101T000000Z-20260101T000100Z"
    (out / window / "in-0").mkdir(parents=True)
    (out / STREAMING_MARKER).write_text(json.dumps({"format": STREAMING_FORMAT}))
    processed.write_record(str(out), str(small), {"path": str(small), "versions": [{"version": 1}]})
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"id": "forged", "messages": [{"role": "user", "content": "hunter2"}]}\n')
    lines = [
        {"id": "b", "source": str(small), "position": SMALL_LINES.index(b'{"id":"b"'), "drops": {"orphan_result": 1}},
        {"id": "forged", "source": str(secret), "position": 0, "drops": {}},
    ]
    (out / window / "in-0" / "drops.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert _run("explain", out, "--id", "b") == 0
    assert "DROPPED orphan_result" in capsys.readouterr().out
    assert _run("explain", out, "--id", "forged") == 2
    printed = capsys.readouterr()
    assert "hunter2" not in printed.out and "record of processed files" in printed.err
