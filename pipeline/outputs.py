"""What a run owns in its output directory, and how it proves it (see docs/outputs.md).

A run writes only into its own temporary directory, ``OUTPUT/_convnorm_temp-<run id>/``,
while the pipeline runs. Afterwards the driver (``finalize``):

1. reads the list of files every writer reported (path, records, bytes);
2. records in the lock what it is about to create and delete, then deletes the previous run's
   files (``--overwrite``: only what that run's manifest lists) and moves the new files into
   place (``normalized/part-00000.jsonl``, ...), never over a file it does not own;
3. checks every reported file is there with the bytes and records reported, and rewrites the
   summary's record counts from the files on disk;
4. writes ``_convnorm_manifest.json`` (every file with records, bytes and sha256, the options,
   the versions) and, only if nothing is missing, ``_SUCCESS`` — last.

Before anything is touched, ``check_output`` refuses directories that must not be written
(``/``, the home directory, a bucket root, one holding a planned input) and existing files it
cannot prove are convnorm's; ``plan_inputs`` drops input files lying under the output
directory (convnorm never reads its own outputs back).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import dataclass, field
from typing import Any, Callable

from apache_beam.io.filesystems import FileSystems

from pipeline import files
from pipeline.lock import LOCK_FILE, OutputLock
from pipeline.sinks import WrittenFile, final_names, report_path
from pipeline.testhooks import pause_point
from transforms.jsontext import document_bytes

MANIFEST_FILE = "_convnorm_manifest.json"
SUCCESS_FILE = "_SUCCESS"
TEMP_PREFIX = "_convnorm_temp-"
MANIFEST_FORMAT = "convnorm-manifest/1"
#: Entries listed when refusing a directory.
SHOWN_ENTRIES = 10


class OutputError(ValueError):
    """An output directory convnorm refuses to write (or to clear); exit status 2."""


# --------------------------------------------------------------------------------------------
# Paths


def _canonical(path: str) -> str:
    if files.is_local(path):
        return os.path.realpath(os.path.expanduser(path))
    return path.rstrip("/")


def is_under(path: str, directory: str) -> bool:
    """``path`` is ``directory`` or lies inside it (symlinks resolved for local paths)."""
    path, directory = _canonical(path), _canonical(directory)
    if files.is_local(path) != files.is_local(directory):
        return False
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _relative(path: str, output: str) -> str:
    return path[len(output.rstrip("/")) + 1 :] if path.startswith(output.rstrip("/") + "/") else path


def _join(output: str, relative: Any, listed_in: str = "the manifest", *, is_file: bool = True) -> str:
    """``OUTPUT/relative`` for an entry of a manifest (or lock), refusing anything that is not
    a file inside OUTPUT: ``..``, an absolute path, a directory, a path through a symbolic
    link that leads out of OUTPUT (each of these once deleted a user's files)."""
    parts = relative.split("/") if isinstance(relative, str) else [""]
    if not relative or relative.startswith("/") or "://" in relative or any(p in ("", ".", "..") for p in parts):
        raise OutputError(_not_ours(output, relative, listed_in, "which is not a plain path inside it"))
    path = FileSystems.join(output, *parts)
    if files.is_local(path):
        if not is_under(os.path.dirname(path), output):
            raise OutputError(
                _not_ours(
                    output,
                    relative,
                    listed_in,
                    f"which lies outside it through a symbolic link (at {os.path.realpath(path)})",
                )
            )
        if is_file and os.path.isdir(path) and not os.path.islink(path):
            raise OutputError(_not_ours(output, relative, listed_in, "which is not a file (a directory)"))
    return path


def _not_ours(output: str, relative, listed_in: str, why: str) -> str:
    return f"{listed_in} in {output!r} lists {relative!r}, {why}; convnorm did not write it there: nothing was deleted"


def unsafe_output(output: str) -> str | None:
    """Why ``output`` must never be an output directory, or None."""
    if files.is_local(output):
        path = _canonical(output)
        if path == "/":
            return "is the filesystem root"
        if path == _canonical("~") or path == _canonical(os.environ.get("HOME", "~")):
            return "is the home directory"
        return None
    scheme, rest = output.split("://", 1)
    if not rest.strip("/") or "/" not in rest.strip("/"):
        return f"is the root of a {scheme}:// bucket"
    return None


def unreachable_output(output: str) -> str | None:
    """Why Beam cannot use ``output``'s filesystem (unknown scheme, extra not installed), or None.
    Asked up front: later the first touch of the directory would end in a traceback."""
    if files.is_local(output):
        return None
    try:
        FileSystems.exists(output)
    except Exception as error:  # noqa: BLE001 — ValueError, BeamIOError, ImportError ...
        return " ".join(str(error).split())[:500]
    return None


# --------------------------------------------------------------------------------------------
# Inputs and the output directory


def _has_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def plan_inputs(shards: list, patterns: list[str], output: str | None) -> list:
    """The planned shards without files under ``output``, renumbered; raises ``OutputError``.

    A file named outright (no wildcard) under the output directory, or an output directory
    inside an input, is refused; files a wildcard matches under it are skipped, so
    ``--input 'data/**' --output data/clean`` never reads its own outputs back.
    """
    if not output:
        return shards
    for pattern in patterns:
        if not _has_glob(pattern) and is_under(pattern, output):
            raise OutputError(
                f"--input {pattern!r} lies inside --output {output!r}; convnorm never reads its "
                "own output directory: choose another --output"
            )
    paths = {shard.path for shard in shards}
    for path in sorted(paths):
        if is_under(output, path):
            raise OutputError(f"--output {output!r} lies inside the input {path!r}")
    skipped = sorted(p for p in paths if is_under(p, output))
    kept = [s for s in shards if s.path not in skipped]
    if skipped and not kept:
        raise OutputError(
            f"every file --input matches lies inside --output {output!r} ({_listing(skipped, output)}); "
            "convnorm never reads its own output directory: choose another --output"
        )
    return [shard._replace(number=i) for i, shard in enumerate(kept)]


def skipped_inputs(shards: list, output: str | None) -> list[str]:
    return sorted({s.path for s in shards if output and is_under(s.path, output)})


# --------------------------------------------------------------------------------------------
# What is in the output directory


def _list_files(directory: str) -> list[str]:
    """Every file under ``directory`` (recursively), as full paths; [] if it does not exist.
    A symbolic link is listed itself: convnorm would write through it into someone's folder."""
    if files.is_local(directory):
        if os.path.islink(directory) or not os.path.isdir(directory):
            return [directory] if os.path.lexists(directory) else []
        found = []
        for root, _dirs, names in os.walk(directory):
            found += [os.path.join(root, name) for name in names]
        return sorted(found)
    try:
        matched = FileSystems.match([FileSystems.join(directory, "**")])[0].metadata_list
    except Exception:  # noqa: BLE001 — nothing there
        return []
    return sorted(m.path for m in matched)


def _listing(paths: list[str], output: str) -> str:
    shown = [_relative(p, output) for p in paths[:SHOWN_ENTRIES]]
    more = f", and {len(paths) - SHOWN_ENTRIES} more" if len(paths) > SHOWN_ENTRIES else ""
    return ", ".join(shown) + more


def read_manifest(output: str) -> dict | None:
    path = FileSystems.join(output, MANIFEST_FILE)
    if not FileSystems.exists(path):
        return None
    try:
        with FileSystems.open(path) as handle:
            manifest = json.loads(handle.read())
    except (OSError, ValueError) as error:
        raise OutputError(f"cannot read the manifest {path}: {error}; nothing was deleted") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise OutputError(f"{path} is not a convnorm manifest ({MANIFEST_FORMAT}); nothing was deleted")
    for entry in manifest.get("files", []):  # every entry checked before anything is deleted
        if not isinstance(entry, dict):
            raise OutputError(f"{path} is not a convnorm manifest (an entry is {entry!r}); nothing was deleted")
        _join(output, entry.get("path"))
        if not isinstance(entry.get("bytes"), int):
            raise OutputError(_not_ours(output, entry["path"], "the manifest", "without its size"))
    owned_paths(output, manifest)  # the marker too: a folder at its name is not a marker
    return manifest


def _changed_since(output: str, manifest: dict) -> list[str]:
    """Every existing file a manifest lists whose size or sha256 is not the one it records.

    The size is compared first (cheap); a file of the same size is read once for its sha256,
    so an edit that kept the length is still seen (the user's file is never deleted).
    """
    changed = []
    for entry in manifest.get("files", []):
        path = _join(output, entry["path"])
        size = files.size(path)
        if size is None:
            continue
        if size != entry["bytes"] or ("sha256" in entry and _measure(path)[2] != entry["sha256"]):
            changed.append(path)
    return changed


def owned_paths(output: str, manifest: dict | None) -> list[str]:
    """Every path a manifest makes ours: its files, the summary, the marker, itself."""
    if not manifest:
        return []
    return [_join(output, e["path"]) for e in manifest.get("files", [])] + [
        _join(output, SUCCESS_FILE),
        FileSystems.join(output, MANIFEST_FILE),
    ]


def check_output(output: str, names: tuple[str, ...], overwrite: bool) -> dict | None:
    """Refuse an output directory whose existing files convnorm cannot prove are its own.

    ``names`` are the entries the command writes (``normalized``, ..., ``summary.json``).
    Returns the previous run's manifest (``--overwrite`` replaces exactly its files), or None.
    Raises ``OutputError``.
    """
    manifest = read_manifest(output)
    if manifest is not None:
        if not overwrite:
            raise OutputError(
                f"--output {output!r} holds the outputs of an earlier convnorm run ({len(manifest.get('files', []))} "
                f"files listed in {MANIFEST_FILE}); pass --overwrite to replace exactly those, or choose another "
                "directory"
            )
        changed = _changed_since(output, manifest)
        if changed:
            raise OutputError(
                f"--output {output!r}: {_listing(changed, output)} changed since convnorm wrote them (their size or "
                f"sha256 is not the one {MANIFEST_FILE} records), so they may be yours now; convnorm deletes only "
                "what it can prove it wrote: move them away and run again"
            )
        return manifest
    candidates = [FileSystems.join(output, n) for n in (*names, SUCCESS_FILE)]
    found = [f for c in candidates for f in _list_files(c)]
    if found:
        raise OutputError(
            f"--output {output!r} already holds {_listing(found, output)}, where convnorm would write, and no "
            f"{MANIFEST_FILE} that shows these files were written by convnorm; convnorm only replaces files a "
            "manifest lists (even with --overwrite): move them away or choose another directory"
        )
    return None


#: Marks a directory as the output of ``--streaming`` runs: a later streaming run goes on
#: writing into it (the final summary sums every window it holds).
STREAMING_MARKER = "_convnorm_streaming.json"
STREAMING_FORMAT = "convnorm-streaming/1"


def claim_streaming_output(output: str) -> None:
    """Make ``output`` a streaming output directory, or raise ``OutputError``.

    Streaming writes a directory per window and a ``summary.json`` at the top, and never
    deletes; so it may only write into an empty (or new) directory, which it then marks, or
    into one an earlier streaming run marked. Call it holding the output lock.
    """
    marker = FileSystems.join(output, STREAMING_MARKER)
    if FileSystems.exists(marker):
        return
    if read_manifest(output) is not None:
        raise OutputError(
            f"--output {output!r} holds the outputs of a batch convnorm run ({MANIFEST_FILE}); "
            "--streaming writes windows of its own: choose another directory"
        )
    lock = FileSystems.join(output, LOCK_FILE)
    found = [f for f in _list_files(output) if f != lock]
    if found:
        raise OutputError(
            f"--output {output!r} already holds {_listing(found, output)} and no {STREAMING_MARKER} that shows "
            "an earlier --streaming run wrote there; convnorm never writes over files it did not write: move "
            "them away or choose another directory"
        )
    with FileSystems.create(marker) as handle:
        handle.write(document_bytes({"format": STREAMING_FORMAT}))


def _delete_existing(paths: list[str]) -> None:
    for path in paths:
        files.delete(path)


def clean_dead_run(output: str, holder: dict) -> None:
    """Delete what a dead run recorded in its lock as its own: temp dir, files in flight."""
    # By name, in this OUTPUT: the dead run wrote its path as it was given (maybe relative to
    # another working directory).
    recorded = holder.get("temp_dir")
    temp_name = recorded.rstrip("/").rsplit("/", 1)[-1] if isinstance(recorded, str) else ""
    if temp_name.startswith(TEMP_PREFIX) and temp_name != TEMP_PREFIX:
        files.delete(FileSystems.join(output, temp_name), tree=True)
    for key in ("creating", "deleting"):
        _delete_existing([_join(output, rel, "the stale lock") for rel in holder.get(key, [])])
    for rel in holder.get("dirs", []):
        files.remove_if_empty(_join(output, rel, "the stale lock", is_file=False))


# --------------------------------------------------------------------------------------------
# Finalize


@dataclass
class Finalized:
    files: list[dict] = field(default_factory=list)  # manifest entries of the output files
    counts: dict = field(default_factory=dict)  # output name -> records in its files on disk
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.problems


def _load_reports(temp_dir: str, names: tuple[str, ...]) -> dict[str, list[WrittenFile]]:
    reports = {}
    for name in names:
        path = report_path(temp_dir, name)
        if not FileSystems.exists(path):
            raise OutputError(f"the pipeline finished without reporting the files of {name}/ ({path} is missing)")
        with FileSystems.open(path) as handle:
            reports[name] = [WrittenFile(**row) for row in json.loads(handle.read())]
    return reports


def _measure(path: str) -> tuple[int, int, str]:
    """(records, bytes, sha256) of a file on disk: lines of JSONL, rows of Parquet."""
    digest, size, lines = hashlib.sha256(), 0, 0
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        while True:
            chunk = handle.read(1 << 20)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        with FileSystems.open(path, compression_type="uncompressed") as handle:
            lines = pq.ParquetFile(handle).metadata.num_rows
    return lines, size, digest.hexdigest()


def finalize(
    output: str,
    temp_dir: str,
    outputs: dict[str, str],
    summary_name: str,
    lock: OutputLock,
    previous: dict | None,
    recount: Callable[[dict, dict], dict],
) -> tuple[Finalized, dict]:
    """Move the reported files into place and check them; returns (result, summary).

    ``outputs`` maps each output directory name to its file extension. The summary the
    pipeline wrote (in the temp dir) is rewritten by ``recount(summary, counts)`` with the
    records found in the files on disk, then written to ``OUTPUT/summary_name``.
    """
    reports = _load_reports(temp_dir, tuple(outputs))
    moves = [
        (name, file, final)
        for name, ext in outputs.items()
        for file, final in final_names(reports[name], FileSystems.join(output, name), ext)
    ]
    summary_path = FileSystems.join(output, summary_name)
    replaced = set(owned_paths(output, previous))
    in_the_way = [final for _, _, final in moves if FileSystems.exists(final) and final not in replaced]
    if FileSystems.exists(summary_path) and summary_path not in replaced:
        in_the_way.append(summary_path)
    if in_the_way:
        raise OutputError(
            f"{_listing(in_the_way, output)} already exist(s) in --output {output!r} and no manifest "
            "lists them as convnorm's: nothing was replaced"
        )

    creating = [_relative(final, output) for _, _, final in moves] + [summary_name, MANIFEST_FILE, SUCCESS_FILE]
    new_dirs = [name for name in outputs if not FileSystems.exists(FileSystems.join(output, name))]
    lock.record(creating=creating, deleting=[_relative(p, output) for p in sorted(replaced)], dirs=new_dirs)
    # The previous run's marker first (no moment claims completeness falsely), its manifest last.
    previous_paths = sorted(replaced, key=lambda p: (p.endswith(SUCCESS_FILE) is False, p.endswith(MANIFEST_FILE)))
    _delete_existing(previous_paths)

    for name in new_dirs:
        FileSystems.mkdirs(FileSystems.join(output, name))
    result = Finalized(counts={name: 0 for name in outputs})
    for i, (name, file, final) in enumerate(moves):
        if FileSystems.exists(file.temp):
            FileSystems.rename([file.temp], [final])
        if i == 0:
            pause_point("finalize")
        if not FileSystems.exists(final):
            result.problems.append(
                f"{_relative(final, output)} is missing (the writer reported {file.records} records in {file.temp})"
            )
            continue
        records, size, sha = _measure(final)
        result.counts[name] += records
        result.files.append({"path": _relative(final, output), "records": records, "bytes": size, "sha256": sha})
        if (records, size) != (file.records, file.size):
            result.problems.append(
                f"{_relative(final, output)} holds {records} records in {size} bytes; the writer "
                f"reported {file.records} records in {file.size} bytes"
            )

    with FileSystems.open(FileSystems.join(temp_dir, summary_name)) as handle:
        summary = recount(json.loads(handle.read()), result.counts)
    body = document_bytes(summary)
    with FileSystems.create(summary_path, mime_type="application/json") as handle:
        handle.write(body)
    result.files.append(
        {"path": summary_name, "records": 1, "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    )
    return result, summary


def write_manifest(output: str, result: Finalized, command: str, options: dict) -> None:
    """The manifest, then (only when every file is there) the marker: the last two writes."""
    import apache_beam

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
    with FileSystems.create(FileSystems.join(output, MANIFEST_FILE), mime_type="application/json") as handle:
        handle.write(document_bytes(manifest, indent=1, ascii_only=True))
    if result.complete:
        with FileSystems.create(FileSystems.join(output, SUCCESS_FILE)) as handle:
            handle.write(b"")


def remove_temp(temp_dir: str) -> None:
    files.delete(temp_dir, tree=True)


__all__ = [
    "LOCK_FILE",
    "MANIFEST_FILE",
    "SUCCESS_FILE",
    "TEMP_PREFIX",
    "OutputError",
    "Finalized",
    "check_output",
    "clean_dead_run",
    "finalize",
    "plan_inputs",
    "read_manifest",
    "remove_temp",
    "unreachable_output",
    "unsafe_output",
    "write_manifest",
]
