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
import logging
import os
import platform
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from apache_beam.io.filesystems import FileSystems

from pipeline.execution.lock import OutputLock
from pipeline.io import files
from pipeline.io.output_names import (
    LOCK_FILE,
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    STREAMING_FORMAT,
    STREAMING_MARKER,
    SUCCESS_FILE,
    TEMP_PREFIX,
    TEMP_PROOF,
)
from pipeline.io.written_files import WrittenFile, final_names, report_path
from pipeline.testhooks import pause_point
from transforms.jsontext import document_bytes

LOG = logging.getLogger("convnorm")

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
    return _inside(path, directory)


def _inside(path: str, directory: str) -> bool:
    """Of two canonical paths: ``path`` is ``directory`` or lies inside it."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _canonical_files(paths: Iterable[str]) -> dict[str, str]:
    """Path -> ``_canonical(path)`` for many files, each directory resolved once: a local file
    that is not a symbolic link is its directory's real path and its name (one ``lstat`` per
    file instead of a ``realpath`` walk: planning 100,000 inputs spent 28 s there)."""
    directories: dict[str, str] = {}
    found = {}
    for path in paths:
        if not files.is_local(path) or os.path.islink(path):
            found[path] = _canonical(path)
            continue
        directory, name = os.path.split(os.path.abspath(os.path.expanduser(path)))
        if directory not in directories:
            directories[directory] = os.path.realpath(directory)
        found[path] = os.path.join(directories[directory], name)
    return found


def _inputs_inside(canonical: dict[str, str], directory: str) -> set[str]:
    """The input files (path -> canonical path, ``_canonical_files``) that lie inside ``directory``."""
    where, local = _canonical(directory), files.is_local(directory)
    return {p for p, c in canonical.items() if files.is_local(p) == local and _inside(c, where)}


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
    paths = sorted({shard.path for shard in shards})
    canonical, where = _canonical_files(paths), _canonical(output)
    for path in paths:
        if files.is_local(path) == files.is_local(output) and _inside(where, canonical[path]):
            raise OutputError(f"--output {output!r} lies inside the input {path!r}")
    inside = _inputs_inside(canonical, output)
    skipped = sorted(inside)
    kept = [s for s in shards if s.path not in inside]
    if skipped and not kept:
        raise OutputError(
            f"every file --input matches lies inside --output {output!r} ({_listing(skipped, output)}); "
            "convnorm never reads its own output directory: choose another --output"
        )
    return [shard._replace(number=i) for i, shard in enumerate(kept)]


def paths_inside(paths: Iterable[str], output: str) -> set[str]:
    """The ``paths`` that lie inside ``output`` (each directory resolved once)."""
    return _inputs_inside(_canonical_files(paths), output)


def skipped_inputs(shards: list, output: str | None) -> list[str]:
    return sorted(_inputs_inside(_canonical_files({s.path for s in shards}), output)) if output else []


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
        matched = FileSystems.match([FileSystems.join(files.escape_glob(directory), "**")])[0].metadata_list
    except Exception:  # noqa: BLE001 — nothing there
        return []
    return sorted(m.path for m in matched)


def _listing(paths: list[str], output: str) -> str:
    shown = [_relative(p, output) for p in paths[:SHOWN_ENTRIES]]
    more = f", and {len(paths) - SHOWN_ENTRIES} more" if len(paths) > SHOWN_ENTRIES else ""
    return ", ".join(shown) + more


def _exists(path: str) -> bool:
    """Anything at ``path``, a dangling symbolic link included (local paths never followed)."""
    return os.path.lexists(path) if files.is_local(path) else FileSystems.exists(path)


def _load_manifest(output: str) -> tuple[dict, bytes] | None:
    """The manifest and its bytes, every entry checked; None without one. Raises OutputError."""
    path = FileSystems.join(output, MANIFEST_FILE)
    if files.is_link(path):
        raise OutputError(
            f"--output {output!r}: {MANIFEST_FILE} is a symbolic link, not a manifest convnorm wrote (convnorm "
            "never writes through a link); move it away; nothing was deleted"
        )
    if not _exists(path):
        return None
    try:
        data = files.read_own(path)
        manifest = json.loads(data)
    except (OSError, ValueError) as error:
        raise OutputError(f"cannot read the manifest {path}: {error}; nothing was deleted") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise OutputError(f"{path} is not a convnorm manifest ({MANIFEST_FORMAT}); nothing was deleted")
    for entry in manifest.get("files", []):  # every entry checked before anything is deleted
        if not isinstance(entry, dict):
            raise OutputError(f"{path} is not a convnorm manifest (an entry is {entry!r}); nothing was deleted")
        _join(output, entry.get("path"))
        if not isinstance(entry.get("bytes"), int) or isinstance(entry.get("bytes"), bool):
            raise OutputError(_not_ours(output, entry["path"], "the manifest", "without its size"))
        if not _is_sha256(entry.get("sha256")):
            raise OutputError(_not_ours(output, entry["path"], "the manifest", "without its sha256"))
    _join(output, SUCCESS_FILE)  # a folder at the marker's name is not a marker
    return manifest, data


def read_manifest(output: str) -> dict | None:
    """The previous run's manifest (every entry checked), or None. Raises OutputError."""
    loaded = _load_manifest(output)
    return None if loaded is None else loaded[0]


def _is_sha256(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _entry(path: str, data: bytes, records: int = 1) -> dict:
    return {"path": path, "records": records, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _matches(path: str, entry: dict) -> bool:
    """The plain file at ``path`` has the size and sha256 ``entry`` records (size first: cheap)."""
    if files.is_link(path) or files.size(path) != entry.get("bytes"):
        return False
    return _measure(path)[2] == entry.get("sha256")


def _changed_since(output: str, manifest: dict) -> list[str]:
    """Every existing file a manifest lists whose size or sha256 is not the one it records (or
    that is a symbolic link now): perhaps the user's, so never deleted.

    The size is compared first (cheap); a file of the same size is read once for its sha256,
    so an edit that kept the length is still seen.
    """
    changed = []
    for entry in manifest.get("files", []):
        path = _join(output, entry["path"])
        if _exists(path) and not _matches(path, entry):
            changed.append(path)
    marker = FileSystems.join(output, SUCCESS_FILE)
    if _exists(marker) and (files.is_link(marker) or files.size(marker) != 0):
        changed.append(marker)  # convnorm's marker is an empty file
    return changed


@dataclass(frozen=True)
class Previous:
    """What a run may replace: the files the previous run's manifest lists, its marker and the
    manifest itself, each with the size and sha256 that prove it convnorm's (marker first,
    manifest last: the order they are deleted in)."""

    command: str
    entries: tuple[dict, ...] = ()

    @property
    def files(self) -> list[dict]:
        """The entries the manifest lists (without the marker and the manifest itself)."""
        return [e for e in self.entries if e["path"] not in (SUCCESS_FILE, MANIFEST_FILE)]

    def paths(self, output: str) -> set[str]:
        return {FileSystems.join(output, *e["path"].split("/")) for e in self.entries}


def _previous(command: str, manifest: dict, data: bytes) -> Previous:
    marker = {"path": SUCCESS_FILE, "records": 0, "bytes": 0, "sha256": hashlib.sha256(b"").hexdigest()}
    return Previous(command, (marker, *manifest.get("files", []), _entry(MANIFEST_FILE, data, 0)))


def check_output(
    output: str,
    directories: tuple[str, ...],
    side_files: tuple[str, ...],
    overwrite: bool,
    command: str,
    *,
    inherited: bool = False,
) -> Previous | None:
    """Refuse an output directory whose existing files convnorm cannot prove are its own.

    ``directories`` and ``side_files`` are what the command writes (``normalized``, ...;
    ``summary.json``, ``report.html``). Returns what ``--overwrite`` replaces: the previous
    run's manifest's files, or nothing (``inherited``: a stale lock's dead run proved the
    directory convnorm's and its files were deleted, see ``clean_dead_run``). Raises OutputError.
    """
    planned = (*directories, *side_files, SUCCESS_FILE, MANIFEST_FILE)
    if _exists(FileSystems.join(output, STREAMING_MARKER)):
        # Its windows and summary.json are a streaming run's, which a later streaming run rewrites.
        raise OutputError(
            f"--output {output!r} holds the outputs of `convnorm --streaming` ({STREAMING_MARKER}); "
            f"`convnorm {command}` never writes beside them: choose another directory"
        )
    links = [FileSystems.join(output, name) for name in planned if files.is_link(FileSystems.join(output, name))]
    if links:
        raise OutputError(
            f"--output {output!r} already holds {_listing(links, output)}, a symbolic link where convnorm would "
            "write; convnorm never writes through a link (it would write outside the directory): move it away"
        )
    loaded = _load_manifest(output)
    tops = [FileSystems.join(output, name) for name in (*side_files, SUCCESS_FILE)]
    if loaded is not None:
        manifest, data = loaded
        if manifest.get("command") != command:
            raise OutputError(
                f"--output {output!r} holds the outputs of `convnorm {manifest.get('command')}` ({MANIFEST_FILE}); "
                f"`convnorm {command}` replaces only its own outputs: choose another directory"
            )
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
        previous = _previous(command, manifest, data)
        unlisted = [p for p in tops if _exists(p) and p not in previous.paths(output)]
        if unlisted:
            raise OutputError(
                f"--output {output!r}: {_listing(unlisted, output)} is there, where convnorm would write, but "
                f"{MANIFEST_FILE} does not list it as convnorm's; convnorm replaces only what the manifest lists: "
                "move it away and run again"
            )
        return previous
    candidates = tops if inherited else [FileSystems.join(output, n) for n in (*directories, *side_files, SUCCESS_FILE)]
    found = [f for c in candidates for f in _list_files(c)]
    if found:
        raise OutputError(
            f"--output {output!r} already holds {_listing(found, output)}, where convnorm would write, and no "
            f"{MANIFEST_FILE} that shows these files were written by convnorm; convnorm only replaces files a "
            "manifest lists (even with --overwrite): move them away or choose another directory"
        )
    return Previous(command) if inherited else None


def claim_streaming_output(output: str) -> None:
    """Make ``output`` a streaming output directory, or raise ``OutputError``.

    Streaming writes a directory per window and a ``summary.json`` at the top, and never
    deletes; so it may only write into an empty (or new) directory, which it then marks, or
    into one an earlier streaming run marked. Call it holding the output lock.
    """
    marker = FileSystems.join(output, STREAMING_MARKER)
    # A manifest first, marker or not: a batch run's summary.json and page are never rewritten.
    if _exists(FileSystems.join(output, MANIFEST_FILE)):
        raise OutputError(
            f"--output {output!r} holds the outputs of a batch convnorm run ({MANIFEST_FILE}); "
            "--streaming writes windows of its own: choose another directory"
        )
    if _exists(marker) and not files.is_link(marker):
        return
    lock = FileSystems.join(output, LOCK_FILE)
    found = [f for f in _list_files(output) if f != lock]
    if found:
        raise OutputError(
            f"--output {output!r} already holds {_listing(found, output)} and no {STREAMING_MARKER} that shows "
            "an earlier --streaming run wrote there; convnorm never writes over files it did not write: move "
            "them away or choose another directory"
        )
    files.write_file(output, STREAMING_MARKER, document_bytes({"format": STREAMING_FORMAT}))


# --------------------------------------------------------------------------------------------
# A dead run's leftovers (--break-stale-lock)


@dataclass
class Takeover:
    """What ``clean_dead_run`` did: paths deleted, paths kept (not provably the dead run's),
    and whether the dead run had proven the directory convnorm's (it was replacing a manifest)."""

    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    inherited: bool = False

    def describe(self, output: str) -> str:
        text = f"deleted {len(self.deleted)} path(s) the dead run provably wrote"
        if self.deleted:
            text += f" ({_listing(self.deleted, output)})"
        if self.kept:
            text += (
                f"; kept {_listing(self.kept, output)}: its lock names them, but their size or sha256 is not "
                "what that run recorded (a temporary directory: it does not hold the file that proves it the "
                "run's; or they are not its kind of file), so they may be yours"
            )
        return text


def _lock_entries(output: str, holder: dict, key: str) -> list[tuple[str, dict]]:
    """(path, entry) of a stale lock's ``creating`` or ``deleting`` list; raises OutputError,
    deleting nothing, for an entry outside ``output`` (or not a plain relative path)."""
    found = []
    for entry in holder.get(key) or []:
        if not isinstance(entry, dict):
            entry = {"path": entry}  # a lock of an older convnorm: no size or hash, never deleted
        path = entry.get("path")
        try:
            found.append((_join(output, path if isinstance(path, str) else "", "the stale lock", is_file=False), entry))
        except OutputError as error:
            raise OutputError(
                f"{error}; the dead run's temporary directory and files are kept too: check the lock "
                f"{FileSystems.join(output, LOCK_FILE)}, delete it by hand, and run again"
            ) from None
    return found


def _temp_name(output: str, recorded: Any) -> str | None:
    """The name in ``output`` of the temporary directory a lock records, or None when it is not
    a folder directly inside ``output`` named like one (``../x``, an absolute path elsewhere,
    ``x/..``)."""
    if not isinstance(recorded, str):
        return None
    if "/" not in recorded:  # this convnorm records the name alone
        name = recorded
    elif "://" in recorded:  # an object store's full path
        parent, name = recorded.rstrip("/").rsplit("/", 1)
        if parent != output.rstrip("/"):
            return None
    else:  # an older convnorm's path as given: maybe relative to the dead run's working directory
        parts = recorded.split("/")
        name = parts[-1]
        if os.path.isabs(recorded) or ".." in parts or "." in parts:
            if _canonical(os.path.dirname(os.path.normpath(os.path.abspath(recorded)))) != _canonical(output):
                return None
    return name if name.startswith(TEMP_PREFIX) and name != TEMP_PREFIX else None


def _dead_temp_dir(output: str, holder: dict) -> str | None:
    """``OUTPUT/<name>`` of the temporary directory a stale lock records, None if it records
    none; OutputError, nothing deleted, when it is not a folder directly inside ``output``."""
    recorded = holder.get("temp_dir")
    if recorded in (None, ""):
        return None
    name = _temp_name(output, recorded)
    if name is None:
        why = f"as its temporary directory, which is not a {TEMP_PREFIX}<run id> folder directly inside it"
        raise OutputError(
            f"{_not_ours(output, recorded, 'the stale lock', why)}; the dead run's temporary directory and files "
            f"are kept too: check the lock {FileSystems.join(output, LOCK_FILE)}, delete it by hand, and run again"
        )
    return FileSystems.join(output, name)


def _proven_temp(path: str, proof: Any) -> bool:
    """``path`` is a folder holding the proof file a dead run's lock records (size and sha256)."""
    if not isinstance(proof, dict) or not _is_sha256(proof.get("sha256")) or files.is_link(path):
        return False
    if files.is_local(path) and not os.path.isdir(path):
        return False
    found = FileSystems.join(path, TEMP_PROOF)
    return _exists(found) and _matches(found, proof)


def _temp_candidates(output: str, named: str | None, proof: Any) -> list[str]:
    """The folders that may be a dead run's temporary directory: the one its lock names and, for
    a lock that records a proof (local outputs), every other ``_convnorm_temp-*`` folder, so an
    edited name does not leave the real one behind for good."""
    found = [named] if named is not None and _exists(named) else []
    if isinstance(proof, dict) and files.is_local(output) and os.path.isdir(output):
        with os.scandir(output) as entries:
            found += sorted(
                e.path
                for e in entries
                if e.name.startswith(TEMP_PREFIX) and e.is_dir(follow_symlinks=False) and e.path != named
            )
    return found


def clean_dead_run(output: str, holder: dict, directories: tuple[str, ...] = ()) -> Takeover:
    """Delete what a dead run provably wrote: its own temporary directory (the folder holding the
    proof file its lock records: never taken on its name alone) and each file its lock lists
    with the size and sha256 the file still has; the directories it created (``directories``,
    the names convnorm makes) if they are empty. Every entry is checked before anything is
    deleted: one outside ``output`` raises OutputError."""
    temp = _dead_temp_dir(output, holder)
    entries = _lock_entries(output, holder, "creating") + _lock_entries(output, holder, "deleting")
    dirs = [d for d in holder.get("dirs") or [] if isinstance(d, str)]
    outside = [d for d in dirs if "/" in d or d in ("", ".", "..")]
    if outside:
        raise OutputError(_not_ours(output, outside[0], "the stale lock", "which is not a folder convnorm makes"))
    done = Takeover(
        inherited=any(entry.get("path") == MANIFEST_FILE for _, entry in _lock_entries(output, holder, "deleting"))
    )
    # In this OUTPUT, whatever the spelling the dead run gave it; only a folder its proof file
    # shows the dead run's (a lock edited to name a folder of yours names, but proves, nothing).
    proof = holder.get("temp_proof")
    for path in _temp_candidates(output, temp, proof):
        if _proven_temp(path, proof):
            files.delete(path, tree=True)
            done.deleted.append(path)
        elif path == temp:
            done.kept.append(path)
    for path, entry in entries:
        if not _exists(path):
            continue
        if _is_sha256(entry.get("sha256")) and not os.path.isdir(path) and _matches(path, entry):
            try:
                files.delete_below(output, entry["path"], size=entry["bytes"])
            except OSError:  # reached through a link, or changed since it was measured: not provably its
                done.kept.append(path)
                continue
            done.deleted.append(path)
        else:
            done.kept.append(path)
    for name in dirs:
        path = FileSystems.join(output, name)
        if name in directories and not files.is_link(path):
            files.remove_if_empty(path)
        elif _exists(path):
            done.kept.append(path)
    return done


# --------------------------------------------------------------------------------------------
# Finalize


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


def _load_reports(temp_dir: str, names: tuple[str, ...]) -> dict[str, list[WrittenFile]]:
    reports = {}
    for name in names:
        path = report_path(temp_dir, name)
        if not FileSystems.exists(path):
            raise OutputError(f"the pipeline finished without reporting the files of {name}/ ({path} is missing)")
        with FileSystems.open(path) as handle:
            reports[name] = [WrittenFile(**row) for row in json.loads(handle.read())]
    return reports


def _measure(path: str, parquet: bool | None = None) -> tuple[int, int, str]:
    """(records, bytes, sha256) of a file on disk: lines of JSONL, rows of Parquet (``parquet``:
    by default its name says; a writer's temporary file has no extension)."""
    digest, size, lines = hashlib.sha256(), 0, 0
    with FileSystems.open(path, compression_type="uncompressed") as handle:
        while True:
            chunk = handle.read(1 << 20)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
    if path.endswith(".parquet") if parquet is None else parquet:
        import pyarrow.parquet as pq

        with FileSystems.open(path, compression_type="uncompressed") as handle:
            lines = pq.ParquetFile(handle).metadata.num_rows
    return lines, size, digest.hexdigest()


def _write_recorded(
    lock: OutputLock, output: str, name: str, data: bytes, records: int = 1, *, replacing: bytes | None = None
) -> dict:
    """Record a side file in the lock (size and sha256: a dead run's file is told from anyone's),
    then write it, never over anything and never through a link; its manifest entry.
    ``replacing``: the bytes this run wrote there before, which must still be there."""
    entry = _entry(name, data, records)
    creating = [e for e in lock.content.get("creating", []) if not (isinstance(e, dict) and e.get("path") == name)]
    lock.record(creating=[*creating, entry])
    mime = {".json": "application/json", ".html": "text/html"}.get(
        os.path.splitext(name)[1], "application/octet-stream"
    )
    if replacing is not None and not _matches(FileSystems.join(output, name), _entry(name, replacing)):
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
    if not _exists(path):
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
) -> tuple[Finalized, dict]:
    """Move the reported files into place and check them; returns (result, summary).

    ``outputs`` maps each output directory name to its file extension. Each file was measured
    while it was written (records, bytes, sha256: ``sinks.WrittenFile``), so none is read back
    unless its size on disk is not the one reported; what is where comes from one listing per
    directory, and the files move in batches (``files.move_many``): the cost grows with the
    files only by a rename each (100,000 inputs on local disk: bench/bench_scale.py). The
    summary the pipeline wrote (in the temp dir) is rewritten by ``recount(summary, counts)``
    with the records of the files in place, then written to ``OUTPUT/summary_name``. ``page``
    (report.html) is written afterwards by ``write_page``; its name must be free too.
    ``progress`` is kept up to date with the step under way (what a failure leaves on disk).
    """
    progress = progress if progress is not None else Progress()
    progress.outputs = tuple(outputs)
    reports = _load_reports(temp_dir, tuple(outputs))
    moves = [
        (name, file, final)
        for name, ext in outputs.items()
        for file, final in final_names(reports[name], FileSystems.join(output, name), ext)
    ]
    relative = {final: _relative(final, output) for _, _, final in moves}
    replaced = previous.paths(output) if previous else set()
    listed = _present(output, outputs)
    directories = {FileSystems.join(output, name) for name in outputs}
    side = [summary_name, *([page] if page else []), MANIFEST_FILE, SUCCESS_FILE]
    in_the_way = [final for _, _, final in moves if final in listed and final not in replaced]
    in_the_way += [p for p in (FileSystems.join(output, n) for n in side) if _exists(p) and p not in replaced]
    in_the_way += [p for p in directories if files.is_link(p)]
    # Still the previous run's (checked in full before the pipeline; here its size, cheaply).
    for entry in previous.entries if previous else ():
        path = FileSystems.join(output, *entry["path"].split("/"))
        state = _state(path, listed, directories)
        if state is not None and state != entry["bytes"]:
            in_the_way.append(path)
    if in_the_way:
        raise OutputError(
            f"{_listing(in_the_way, output)} already exist(s) in --output {output!r} (or changed during the run) and "
            "no manifest lists them as convnorm's (convnorm never writes through a symbolic link): nothing was replaced"
        )

    # What each file is, before it moves: the lock records it, so --break-stale-lock deletes
    # after a kill only a file that is provably this run's. The writer's measure, where the
    # temporary file on disk has the reported size (one listing per directory); read otherwise.
    temps = _present(temp_dir, outputs)
    measured = {}
    for _, file, final in moves:
        size = temps[file.temp] if file.temp in temps else files.size(file.temp)
        if size is None or size < 0:
            continue
        same = size == file.size and file.sha256
        measured[final] = (
            (file.records, file.size, file.sha256) if same else _measure(file.temp, final.endswith(".parquet"))
        )
    creating = [
        {"path": relative[final], "records": m[0], "bytes": m[1], "sha256": m[2]} for final, m in measured.items()
    ]
    new_dirs = [name for name in outputs if not _exists(FileSystems.join(output, name))]
    progress.step = "recording in the lock what it creates and deletes"
    lock.record(creating=creating, deleting=list(previous.entries if previous else ()), dirs=new_dirs)
    # The previous run's marker first (no moment claims completeness falsely), its manifest last.
    # By name below OUTPUT, never through a link, and only at the size checked: a folder swapped
    # for a link while the new files were measured had the linked folder's files deleted.
    progress.step = "deleting the previous run's files"
    for entry in previous.entries if previous else ():
        progress.deleting = True
        files.delete_below(output, entry["path"], size=entry["bytes"])
    progress.deleted = progress.deleting

    progress.step, progress.moving = "moving the new files into place", True
    for name in new_dirs:
        files.make_directory(output, name)
    failed = files.move_many(
        [(file.temp, relative[final]) for _, file, final in moves if final in measured],
        output,
        after_first=lambda: pause_point("finalize"),
    )
    progress.moved, progress.step = True, "checking the files in place"
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

    with FileSystems.open(FileSystems.join(temp_dir, summary_name)) as handle:
        summary = recount(json.loads(handle.read()), result.counts)
    progress.step = f"writing {summary_name}"
    result.files.append(_write_recorded(lock, output, summary_name, document_bytes(summary)))
    progress.written.append(summary_name)
    return result, summary


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
    loaded = _load_manifest(output)
    if loaded is not None:
        return MANIFEST_FILE, loaded[0], loaded[1]
    marker = FileSystems.join(output, STREAMING_MARKER)
    if _exists(marker) and not files.is_link(marker):
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
    from pipeline.execution import lock as locks

    lock = None
    if not locked:
        lock = locks.acquire(
            output, run_id=uuid.uuid4().hex, command="report", temp_dir="", break_stale=False, clean_up=None
        )
    try:
        ledger = _page_ledger(output)
        path = FileSystems.join(output, name)
        listed = next((e for e in ledger[1].get("files", []) if e.get("path") == name), None) if ledger else None
        present = _exists(path)
        if present and (listed is None or not _matches(path, listed)):
            why = (
                "is a symbolic link"
                if files.is_link(path)
                else f"is not listed in {ledger[0]} with its size and sha256"
                if ledger
                else f"and no {MANIFEST_FILE} shows it was"
            )
            raise OutputError(f"{path} exists and convnorm did not write it ({why}); move it away first")
        data = render(output)
        if listed is not None and present and not _matches(path, listed):  # drawing takes seconds: still ours?
            raise OutputError(f"{path} changed while the page was drawn; convnorm did not write it: not replaced")
        files.write_file(output, name, data, replace=present, mime_type="text/html")
        if ledger is not None:
            ledger_name, content, before = ledger
            content["files"] = [e for e in content.get("files", []) if e.get("path") != name] + [_entry(name, data)]
            if not _matches(FileSystems.join(output, ledger_name), _entry(ledger_name, before)):
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


def new_temp_proof(run_id: str) -> tuple[bytes, dict]:
    """The content of a run's ``TEMP_PROOF`` file (random: no other directory holds it) and what
    its lock records of it (size and sha256)."""
    data = document_bytes({"run_id": run_id, "token": uuid.uuid4().hex})
    return data, {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def claim_temp(temp_dir: str, proof: bytes) -> None:
    """Create the run's temporary directory with its proof file, before anything else is in it."""
    files.write_in_place(FileSystems.join(temp_dir, TEMP_PROOF), proof)


def remove_temp(temp_dir: str) -> None:
    """Delete the run's temporary directory, its proof file last: a removal that fails half way
    (a folder made read-only) leaves a directory its lock still proves the run's."""
    if files.is_local(temp_dir) and os.path.isdir(temp_dir) and not os.path.islink(temp_dir):
        with os.scandir(temp_dir) as entries:
            inside = [entry.path for entry in entries if entry.name != TEMP_PROOF]
        for path in inside:
            files.delete(path, tree=True)
    files.delete(temp_dir, tree=True)


__all__ = [
    "OutputError",
    "Finalized",
    "Progress",
    "Previous",
    "Takeover",
    "check_output",
    "claim_temp",
    "clean_dead_run",
    "finalize",
    "new_temp_proof",
    "plan_inputs",
    "read_manifest",
    "remove_temp",
    "unreachable_output",
    "unsafe_output",
    "write_manifest",
    "write_page",
]
