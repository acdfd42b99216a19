"""Finalize: the run's files moved into place and checked, the manifest, ``_SUCCESS``, the page.

A run writes only into its own temporary directory, ``OUTPUT/_convnorm_temp-<run id>/``,
while the pipeline runs. Afterwards the driver (``finalize``):

1. reads the list of files every writer reported (path, records, bytes);
2. records in the lock what it is about to create and delete, then deletes the previous run's
   files (``--overwrite``: only what that run's manifest lists) and moves the new files into
   place (``normalized/part-00000.jsonl``, ...), never over a file it does not own;
3. checks every reported file is there with the bytes and records reported, and rewrites the
   summary's record counts from the files on disk;
4. writes ``summary.json`` and, for an ``hf`` run, the dataset card (``README.md``), then
   ``_convnorm_manifest.json`` (every file with records, bytes and sha256, the options,
   the versions) and, only if nothing is missing, ``_SUCCESS`` — last.

``Progress`` says how far it got, for the message when a step fails. ``rewrite_page`` writes
a finished run's page again (``convnorm report``). What the run may touch, and how it proves
a file its own, is ``pipeline.io.ownership``'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.execution import lock as locks
from pipeline.execution.lock import OutputLock
from pipeline.io import files
from pipeline.io.output_names import MANIFEST_FILE, MANIFEST_FORMAT, STREAMING_FORMAT, STREAMING_MARKER, SUCCESS_FILE
from pipeline.io.ownership import (
    OutputError,
    Previous,
    exists,
    listing,
    load_manifest,
    manifest_entry,
    matches,
    measure,
    relative_path,
)
from pipeline.io.written_files import WrittenFile, final_names, report_path
from pipeline.testhooks import pause_point
from transforms.core.jsontext import document_bytes

LOG = logging.getLogger("convnorm")


@dataclass
class Progress:
    """How far finalize got, so that a step that fails (a full disk, a folder made read-only)
    is reported with what it left on disk: ``step`` is the one under way."""

    step: str = "checking the new files"
    #: The output directories the run writes (``normalized``, ...), for the message.
    outputs: tuple[str, ...] = ()
    #: Deleting the previous run's files (``--overwrite``) began, and ended.
    deleting: bool = False
    deleted: bool = False
    #: Moving the new files into place began, and ended.
    moving: bool = False
    moved: bool = False
    #: The files written at the top so far (summary.json, the manifest, ...).
    written: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the output directory is no longer as it was before finalize."""
        return self.deleting or self.moving or bool(self.written)

    def on_disk(self, output: str) -> str:
        """What the output directory holds after a failed step, in words."""
        if not self.changed:
            return f"nothing in {output} was changed: the previous outputs, if any, are as they were"
        said = []
        if self.deleting:
            said.append(
                "the previous run's files were deleted"
                if self.deleted
                else "some of the previous run's files may be deleted (its _SUCCESS first: none claims completeness)"
            )
        folders = ", ".join(f"{name}/" for name in self.outputs)
        if not self.moving:
            said.append("none of the new files is in place")
        elif not self.moved:
            said.append(f"some of the new files may be in place in {folders}")
        else:
            said.append(f"the new files are in place in {folders}" + "".join(f", {n}" for n in self.written))
        missing = [name for name in ("summary.json", MANIFEST_FILE) if name not in self.written]
        said.append(f"there is {' and '.join(f'no {name}' for name in [*missing, SUCCESS_FILE])}")
        return "; ".join(said)


@dataclass
class Finalized:
    files: list[dict] = field(default_factory=list)  # manifest entries of the output files
    counts: dict = field(default_factory=dict)  # output name -> records in its files on disk
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.problems


#: Bytes copied at a time when files are joined.
_JOIN_CHUNK = 1 << 20


def join_files(temp_dir: str, name: str, extension: str, written: list[WrittenFile]) -> list[WrittenFile]:
    """Output ``name``'s files as one file: their bytes in the order of their final names (the
    input's order), measured as they are copied, in a new file of the run's temporary directory;
    the parts, this run's own, deleted. A trainer takes one file per split (OpenAI: a training
    file and a validation file), whatever the part layout; an output with no records is one
    empty file, so a plan names the same file whatever the input holds. JSON Lines only: the
    bytes of its files joined are the file of their lines."""
    ordered = [file for file, _ in final_names(written, temp_dir, extension)]
    path = FileSystems.join(temp_dir, name, f"joined-{uuid.uuid4().hex}{extension}")
    digest, size, records = hashlib.sha256(), 0, 0
    with files.create(path) as out:
        for file in ordered:
            with FileSystems.open(file.temp, compression_type=CompressionTypes.UNCOMPRESSED) as part:
                while chunk := part.read(_JOIN_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
            records += file.records
    for file in ordered:
        files.delete(file.temp)
    return [WrittenFile(0, 0, path, records, size, digest.hexdigest())]


def _load_reports(temp_dir: str, names: tuple[str, ...]) -> dict[str, list[WrittenFile]]:
    reports = {}
    for name in names:
        path = report_path(temp_dir, name)
        if not FileSystems.exists(path):
            raise OutputError(f"the pipeline finished without reporting the files of {name}/ ({path} is missing)")
        with FileSystems.open(path) as handle:
            reports[name] = [WrittenFile(**row) for row in json.loads(handle.read())]
    return reports


def _write_recorded(
    lock: OutputLock, output: str, name: str, data: bytes, records: int = 1, *, replacing: bytes | None = None
) -> dict:
    """Record a side file in the lock (size and sha256: a dead run's file is told from anyone's),
    then write it, never over anything and never through a link; its manifest entry.
    ``replacing``: the bytes this run wrote there before, which must still be there."""
    entry = manifest_entry(name, data, records)
    creating = [e for e in lock.content.get("creating", []) if not (isinstance(e, dict) and e.get("path") == name)]
    lock.record(creating=[*creating, entry])
    mime = {".json": "application/json", ".html": "text/html", ".md": "text/markdown"}.get(
        os.path.splitext(name)[1], "application/octet-stream"
    )
    if replacing is not None and not matches(FileSystems.join(output, name), manifest_entry(name, replacing)):
        raise OutputError(f"{name} in {output!r} changed while the run was writing it: not replaced")
    files.write_file(output, name, data, replace=replacing is not None, mime_type=mime)
    return entry


def _present(output: str, names: Iterable[str], *, sizes: bool = True) -> dict[str, int]:
    """Path -> size of every entry in the directories ``names`` of ``output`` (-1: a link or
    not a file): one listing each (``files.sizes_in``)."""
    present: dict[str, int] = {}
    for name in names:
        present.update(files.sizes_in(FileSystems.join(output, name), sizes=sizes))
    return present


def _state(path: str, listed: dict[str, int], directories: set[str]) -> int | None:
    """What is at ``path``: its size, -1 for a link or not a file, None for nothing; from the
    listings of ``directories`` where it lies in one, else asked of the filesystem."""
    if path.rsplit("/", 1)[0] in directories:
        return listed.get(path)
    if not exists(path):
        return None
    return -1 if files.is_link(path) else files.size(path)


def finalize(
    output: str,
    temp_dir: str,
    outputs: dict[str, str],
    summary_name: str,
    lock: OutputLock,
    previous: Previous | None,
    recount: Callable[[dict, dict], dict],
    page: str | None = None,
    progress: Progress | None = None,
    card: tuple[str, Callable[[dict], bytes | None]] | None = None,
    one_file: tuple[str, ...] = (),
) -> tuple[Finalized, dict]:
    """Move the reported files into place and check them; returns (result, summary).

    ``outputs`` maps each output directory name to its file extension. Each file was measured
    while it was written (records, bytes, sha256: ``pipeline.io.written_files.WrittenFile``), so none is read back
    unless its size on disk is not the one reported; what is where comes from one listing per
    directory, and the files move in batches (``files.move_many``): the cost grows with the
    files only by a rename each (100,000 inputs on local disk: bench/bench_scale.py). The
    summary the pipeline wrote (in the temp dir) is rewritten by ``recount(summary, counts)``
    with the records of the files in place, then written to ``OUTPUT/summary_name``. ``page``
    (report.html) is written afterwards by ``write_page``; its name must be free too.
    ``progress`` is kept up to date with the step under way (what a failure leaves on disk).
    ``card`` (``(name, render)``): a file drawn from the records in place (the dataset card),
    written after the summary; ``render`` returns None when there is nothing to write.
    ``one_file``: the output directories whose files are joined into one first (``join_files``).
    """
    progress = progress if progress is not None else Progress()
    progress.outputs = tuple(outputs)
    reports = _load_reports(temp_dir, tuple(outputs))
    for name in one_file:
        reports[name] = join_files(temp_dir, name, outputs[name], reports[name])
    moves = _planned_moves(output, outputs, reports)
    relative = {final: relative_path(final, output) for _, _, final in moves}
    side = [summary_name, *([card[0]] if card else []), *([page] if page else []), MANIFEST_FILE, SUCCESS_FILE]
    _refuse_what_is_in_the_way(output, outputs, moves, side, previous)
    measured = _measure_new_files(temp_dir, outputs, moves)
    new_dirs = [name for name in outputs if not exists(FileSystems.join(output, name))]
    progress.step = "recording in the lock what it creates and deletes"
    _record_in_lock(lock, previous, measured, relative, new_dirs)
    progress.step = "deleting the previous run's files"
    _delete_previous(output, previous, progress)
    progress.step, progress.moving = "moving the new files into place", True
    failed = _move_into_place(output, new_dirs, moves, measured, relative)
    progress.moved, progress.step = True, "checking the files in place"
    result = _check_in_place(output, outputs, moves, measured, relative, failed)
    with FileSystems.open(FileSystems.join(temp_dir, summary_name)) as handle:
        summary = recount(json.loads(handle.read()), result.counts)
    _write_summary_and_card(lock, output, summary_name, summary, card, result, progress)
    return result, summary


#: A new file's move: (output directory name, what its writer reported, its final path).
Move = tuple[str, WrittenFile, str]


def _planned_moves(output: str, outputs: dict[str, str], reports: dict[str, list[WrittenFile]]) -> list[Move]:
    """Where each reported file goes: its output directory's next free final name."""
    return [
        (name, file, final)
        for name, ext in outputs.items()
        for file, final in final_names(reports[name], FileSystems.join(output, name), ext)
    ]


def _refuse_what_is_in_the_way(
    output: str, outputs: dict[str, str], moves: list[Move], side: list[str], previous: Previous | None
) -> None:
    """Raise OutputError, before anything is changed, where a final name (a new file's, or a
    side file's in ``side``) is taken by a file the previous run's manifest does not list, an
    output directory is a link, or a file the manifest lists is no longer the size it had."""
    replaced = previous.paths(output) if previous else set()
    listed = _present(output, outputs)
    directories = {FileSystems.join(output, name) for name in outputs}
    in_the_way = [final for _, _, final in moves if final in listed and final not in replaced]
    in_the_way += [p for p in (FileSystems.join(output, n) for n in side) if exists(p) and p not in replaced]
    in_the_way += [p for p in directories if files.is_link(p)]
    # Still the previous run's (checked in full before the pipeline; here its size, cheaply).
    for entry in previous.entries if previous else ():
        path = FileSystems.join(output, *entry["path"].split("/"))
        state = _state(path, listed, directories)
        if state is not None and state != entry["bytes"]:
            in_the_way.append(path)
    if in_the_way:
        raise OutputError(
            f"{listing(in_the_way, output)} already exist(s) in --output {output!r} (or changed during the run) and "
            "no manifest lists them as convnorm's (convnorm never writes through a symbolic link): nothing was replaced"
        )


def _measure_new_files(temp_dir: str, outputs: dict[str, str], moves: list[Move]) -> dict[str, tuple]:
    """Final path -> (records, bytes, sha256) of each new file still in the temporary
    directory, before it moves: the lock records it, so --break-stale-lock deletes after a
    kill only a file that is provably this run's. The writer's measure, where the temporary
    file on disk has the reported size (one listing per directory); read otherwise."""
    temps = _present(temp_dir, outputs)
    measured = {}
    for _, file, final in moves:
        size = temps[file.temp] if file.temp in temps else files.size(file.temp)
        if size is None or size < 0:
            continue
        same = size == file.size and file.sha256
        measured[final] = (
            (file.records, file.size, file.sha256) if same else measure(file.temp, final.endswith(".parquet"))
        )
    return measured


def _record_in_lock(
    lock: OutputLock, previous: Previous | None, measured: dict[str, tuple], relative: dict[str, str], new_dirs: list
) -> None:
    """The lock records the files about to be created and deleted, and the directories made."""
    creating = [
        {"path": relative[final], "records": m[0], "bytes": m[1], "sha256": m[2]} for final, m in measured.items()
    ]
    lock.record(creating=creating, deleting=list(previous.entries if previous else ()), dirs=new_dirs)


def _delete_previous(output: str, previous: Previous | None, progress: Progress) -> None:
    """``--overwrite``: the previous run's files, as its manifest lists them. Its marker first
    (no moment claims completeness falsely), its manifest last. By name below OUTPUT, never
    through a link, and only at the size checked: a folder swapped for a link while the new
    files were measured had the linked folder's files deleted."""
    for entry in previous.entries if previous else ():
        progress.deleting = True
        files.delete_below(output, entry["path"], size=entry["bytes"])
    progress.deleted = progress.deleting


def _move_into_place(
    output: str, new_dirs: list[str], moves: list[Move], measured: dict[str, tuple], relative: dict[str, str]
) -> dict[str, str]:
    """Make the output directories that are not there and move the measured files into them;
    relative path -> why, of each move that failed."""
    for name in new_dirs:
        files.make_directory(output, name)
    return files.move_many(
        [(file.temp, relative[final]) for _, file, final in moves if final in measured],
        output,
        after_first=lambda: pause_point("finalize"),
    )


def _check_in_place(
    output: str,
    outputs: dict[str, str],
    moves: list[Move],
    measured: dict[str, tuple],
    relative: dict[str, str],
    failed: dict[str, str],
) -> Finalized:
    """Each new file in place with the size measured (one listing per directory): its manifest
    entry and records counted; a problem for each one missing or not what its writer reported."""
    on_disk = _present(output, outputs)
    result = Finalized(counts={name: 0 for name in outputs})
    for name, file, final in moves:
        rel = relative[final]
        if final not in measured or rel in failed or on_disk.get(final) != measured[final][1]:
            why = f": {failed[rel]}" if rel in failed else ""
            result.problems.append(f"{rel} is missing (the writer reported {file.records} records in {file.temp}{why})")
            continue
        records, size, sha = measured[final]
        result.counts[name] += records
        result.files.append({"path": rel, "records": records, "bytes": size, "sha256": sha})
        if (records, size) != (file.records, file.size):
            result.problems.append(
                f"{rel} holds {records} records in {size} bytes; the writer "
                f"reported {file.records} records in {file.size} bytes"
            )
    return result


def _write_summary_and_card(
    lock: OutputLock,
    output: str,
    summary_name: str,
    summary: dict,
    card: tuple[str, Callable[[dict], bytes | None]] | None,
    result: Finalized,
    progress: Progress,
) -> None:
    """The summary, then the card drawn from the records in place (when it has anything to
    say), each recorded in the lock and listed in ``result``."""
    progress.step = f"writing {summary_name}"
    result.files.append(_write_recorded(lock, output, summary_name, document_bytes(summary)))
    progress.written.append(summary_name)
    data = card[1](result.counts) if card else None
    if card and data is not None:
        progress.step = f"writing {card[0]}"
        result.files.append(_write_recorded(lock, output, card[0], data, 0))  # no records: a description
        progress.written.append(card[0])


def write_page(output: str, name: str, render: Callable[[str], bytes], lock: OutputLock) -> dict | None:
    """A page drawn from the finished outputs (report.html), written like them; its manifest
    entry, or None when it could not be made: a page is a view of the run, so any error making
    it is one warning line and the page is absent, never a failed run."""
    try:
        data = render(output)
        return _write_recorded(lock, output, name, data)
    except Exception as error:  # noqa: BLE001 — whatever the renderer raises, the data's run stands
        text = " ".join(str(error).split())[:300]
        LOG.warning(
            "%s skipped: %s: %s (convnorm report %s tries again)",
            name.removesuffix(".html"),
            type(error).__name__,
            text,
            output,
        )
        return None


def _page_ledger(output: str) -> tuple[str, dict, bytes] | None:
    """What records the pages of ``output`` as convnorm's: the manifest of a batch run, or the
    marker of a streaming output; (its name, its content, its bytes), or None."""
    loaded = load_manifest(output)
    if loaded is not None:
        return MANIFEST_FILE, loaded[0], loaded[1]
    marker = FileSystems.join(output, STREAMING_MARKER)
    if exists(marker) and not files.is_link(marker):
        try:
            content = json.loads(data := files.read_own(marker))
        except (OSError, ValueError):
            content = None
        if isinstance(content, dict) and content.get("format") == STREAMING_FORMAT:
            return STREAMING_MARKER, content, data
    return None


def rewrite_page(output: str, name: str, render: Callable[[str], bytes], *, locked: bool = False) -> str:
    """``convnorm report`` (and a streaming run's end): write the page ``name`` of a finished
    run again; its path.

    Holds the run's lock (``locked``: the caller holds it), so no run is finalizing meanwhile.
    An existing page is replaced only when the run's manifest (a streaming output: its marker)
    lists it with the size and sha256 it still has; the new one is recorded there. Without
    either nothing proves a page convnorm's: one is written only where nothing is. Raises
    OutputError (refused), LockError, and what ``render`` raises.
    """
    lock = None
    if not locked:
        # convnorm report takes no lock over: the command that wrote the directory does that.
        lock = locks.acquire(
            output,
            run_id=uuid.uuid4().hex,
            command="report",
            temp_dir="",
            break_stale=False,
            clean_up=None,
            take_over_hint="run the command that wrote it again with --break-stale-lock (it deletes what the "
            "dead run recorded as its own and takes the lock over), then convnorm report",
        )
    try:
        ledger = _page_ledger(output)
        path = FileSystems.join(output, name)
        listed = next((e for e in ledger[1].get("files", []) if e.get("path") == name), None) if ledger else None
        present = exists(path)
        if present and (listed is None or not matches(path, listed)):
            why = (
                "is a symbolic link"
                if files.is_link(path)
                else f"is not listed in {ledger[0]} with its size and sha256"
                if ledger
                else f"and no {MANIFEST_FILE} shows it was"
            )
            raise OutputError(f"{path} exists and convnorm did not write it ({why}); move it away first")
        data = render(output)
        if listed is not None and present and not matches(path, listed):  # drawing takes seconds: still ours?
            raise OutputError(f"{path} changed while the page was drawn; convnorm did not write it: not replaced")
        files.write_file(output, name, data, replace=present, mime_type="text/html")
        if ledger is not None:
            ledger_name, content, before = ledger
            content["files"] = [e for e in content.get("files", []) if e.get("path") != name] + [
                manifest_entry(name, data)
            ]
            if not matches(FileSystems.join(output, ledger_name), manifest_entry(ledger_name, before)):
                raise OutputError(f"{ledger_name} in {output!r} changed while the page was written; not rewritten")
            data = document_bytes(content, indent=1, ascii_only=True, rows=True)
            files.write_file(output, ledger_name, data, replace=True)
        return path
    finally:
        if lock is not None:
            lock.release()


def write_manifest(
    output: str,
    result: Finalized,
    command: str,
    options: dict,
    lock: OutputLock,
    page: tuple[str, Callable[[str], bytes]] | None = None,
    progress: Progress | None = None,
) -> dict | None:
    """The manifest; the page (``(name, render)``: drawn from the outputs and the manifest, then
    listed in it, written again); then, only when every file is there, the marker: the last
    writes of a run. Returns the page's manifest entry, or None without a page. ``progress``:
    as for ``finalize``."""
    import apache_beam

    progress = progress if progress is not None else Progress()

    try:
        from importlib.metadata import version

        ours = version("convnorm")
    except Exception:  # noqa: BLE001 — not installed (run from a checkout)
        ours = "unknown"
    manifest = {
        "format": MANIFEST_FORMAT,
        "command": command,
        "complete": result.complete,
        "files": result.files,
        "missing": result.problems,
        "options": options,
        "versions": {"convnorm": ours, "apache_beam": apache_beam.__version__, "python": platform.python_version()},
    }
    data = document_bytes(manifest, indent=1, ascii_only=True, rows=True)  # one line per file
    progress.step = f"writing {MANIFEST_FILE}"
    _write_recorded(lock, output, MANIFEST_FILE, data, 0)
    progress.written.append(MANIFEST_FILE)
    entry = write_page(output, page[0], page[1], lock) if page is not None else None
    if page is not None and entry is not None:
        progress.written.append(page[0])
        progress.step = f"writing {MANIFEST_FILE} again, with {page[0]} listed"
        manifest["files"] = [*result.files, entry]
        listed = document_bytes(manifest, indent=1, ascii_only=True, rows=True)
        _write_recorded(lock, output, MANIFEST_FILE, listed, 0, replacing=data)
    if result.complete:
        progress.step = f"writing {SUCCESS_FILE}"
        _write_recorded(lock, output, SUCCESS_FILE, b"", 0)
    return entry
