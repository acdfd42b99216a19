"""What a run owns in its output directory, and how it proves it (see docs/outputs.md).

A run writes only into its own temporary directory, ``OUTPUT/_convnorm_temp-<run id>/``,
created with a proof file its lock records (``claim_temp``); ``pipeline.execution.finalize``
moves the files into place and writes the manifest, each file's size and sha256, by which a
later run knows the files its own (``read_manifest``, ``matches``). A dead run's leftovers
are deleted only where they match what its lock recorded (``clean_dead_run``).

Before anything is touched, ``check_output`` refuses directories that must not be written
(``/``, the home directory, a bucket root, one holding a planned input) and existing files it
cannot prove are convnorm's; ``plan_inputs`` drops input files lying under the output
directory (convnorm never reads its own outputs back).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

from apache_beam.io.filesystems import FileSystems

from pipeline.io import files
from pipeline.io.output_names import (
    CRASH_NOTE,
    LOCK_FILE,
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    STREAMING_FORMAT,
    STREAMING_MARKER,
    SUCCESS_FILE,
    TEMP_PREFIX,
    TEMP_PROOF,
)
from transforms.core.jsontext import document_bytes

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
    that is not a symbolic link is its directory's real path and its name (no ``realpath``
    walk per file: planning 100,000 inputs spent 28 s there). Which files are links is read
    from one listing of a directory that holds many of them, else one ``lstat`` each."""
    local: dict[str, list[tuple[str, str]]] = {}  # directory -> (path, name)
    found = {}
    for path in paths:
        if not files.is_local(path):
            found[path] = _canonical(path)
            continue
        directory, name = os.path.split(os.path.abspath(os.path.expanduser(path)))
        local.setdefault(directory, []).append((path, name))
    for directory, named in local.items():
        links = _links_among(directory, named)
        real = os.path.realpath(directory)
        for path, name in named:
            found[path] = _canonical(path) if name in links else os.path.join(real, name)
    return found


#: From this many files of one directory on, one listing says which are links (not an lstat each).
_LISTING_FROM = 16


def _links_among(directory: str, named: list[tuple[str, str]]) -> set[str]:
    """The names among ``named`` (path, name) that are symbolic links in ``directory``."""
    if len(named) >= _LISTING_FROM:
        try:
            with os.scandir(directory) as listing:
                links = {entry.name for entry in listing if entry.is_symlink()}
            return {name for _, name in named if name in links}
        except OSError:
            pass
    return {name for path, name in named if os.path.islink(path)}


def _inputs_inside(canonical: dict[str, str], directory: str) -> set[str]:
    """The input files (path -> canonical path, ``_canonical_files``) that lie inside ``directory``."""
    where, local = _canonical(directory), files.is_local(directory)
    return {p for p, c in canonical.items() if files.is_local(p) == local and _inside(c, where)}


def relative_path(path: str, output: str) -> str:
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


def plan_inputs(shards: list, patterns: list[str], output: str | None, skipped: list[str] | None = None) -> list:
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
    if skipped is not None:  # the files left out, for the caller's warning (one resolution of every path)
        skipped += sorted(inside)
    kept = [s for s in shards if s.path not in inside]
    if inside and not kept:
        raise OutputError(
            f"every file --input matches lies inside --output {output!r} ({listing(sorted(inside), output)}); "
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
    # An object store: the objects under the prefix, and one at the name itself (summary.json).
    return sorted({*files.objects_below(directory), *([directory] if FileSystems.exists(directory) else [])})


def listing(paths: list[str], output: str) -> str:
    shown = [relative_path(p, output) for p in paths[:SHOWN_ENTRIES]]
    more = f", and {len(paths) - SHOWN_ENTRIES} more" if len(paths) > SHOWN_ENTRIES else ""
    return ", ".join(shown) + more


def exists(path: str) -> bool:
    """Anything at ``path``, a dangling symbolic link included (local paths never followed)."""
    return os.path.lexists(path) if files.is_local(path) else FileSystems.exists(path)


def load_manifest(output: str) -> tuple[dict, bytes] | None:
    """The manifest and its bytes, every entry checked; None without one. Raises OutputError."""
    path = FileSystems.join(output, MANIFEST_FILE)
    if files.is_link(path):
        raise OutputError(
            f"--output {output!r}: {MANIFEST_FILE} is a symbolic link, not a manifest convnorm wrote (convnorm "
            "never writes through a link); move it away; nothing was deleted"
        )
    if not exists(path):
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
    loaded = load_manifest(output)
    return None if loaded is None else loaded[0]


def _is_sha256(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def manifest_entry(path: str, data: bytes, records: int = 1) -> dict:
    return {"path": path, "records": records, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def matches(path: str, entry: dict) -> bool:
    """The plain file at ``path`` has the size and sha256 ``entry`` records (size first: cheap)."""
    if files.is_link(path) or files.size(path) != entry.get("bytes"):
        return False
    return measure(path)[2] == entry.get("sha256")


def _changed_since(output: str, manifest: dict) -> list[str]:
    """Every existing file a manifest lists whose size or sha256 is not the one it records (or
    that is a symbolic link now): perhaps the user's, so never deleted.

    The size is compared first (cheap); a file of the same size is read once for its sha256,
    so an edit that kept the length is still seen.
    """
    changed = []
    for entry in manifest.get("files", []):
        path = _join(output, entry["path"])
        if exists(path) and not matches(path, entry):
            changed.append(path)
    marker = FileSystems.join(output, SUCCESS_FILE)
    if exists(marker) and (files.is_link(marker) or files.size(marker) != 0):
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
    return Previous(command, (marker, *manifest.get("files", []), manifest_entry(MANIFEST_FILE, data, 0)))


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
    if exists(FileSystems.join(output, STREAMING_MARKER)):
        # Its windows and summary.json are a streaming run's, which a later streaming run rewrites.
        raise OutputError(
            f"--output {output!r} holds the outputs of `convnorm --streaming` ({STREAMING_MARKER}); "
            f"`convnorm {command}` never writes beside them: choose another directory"
        )
    links = [FileSystems.join(output, name) for name in planned if files.is_link(FileSystems.join(output, name))]
    if links:
        raise OutputError(
            f"--output {output!r} already holds {listing(links, output)}, a symbolic link where convnorm would "
            "write; convnorm never writes through a link (it would write outside the directory): move it away"
        )
    loaded = load_manifest(output)
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
                f"--output {output!r}: {listing(changed, output)} changed since convnorm wrote them (their size or "
                f"sha256 is not the one {MANIFEST_FILE} records), so they may be yours now; convnorm deletes only "
                "what it can prove it wrote: move them away and run again"
            )
        previous = _previous(command, manifest, data)
        unlisted = [p for p in tops if exists(p) and p not in previous.paths(output)]
        if unlisted:
            raise OutputError(
                f"--output {output!r}: {listing(unlisted, output)} is there, where convnorm would write, but "
                f"{MANIFEST_FILE} does not list it as convnorm's; convnorm replaces only what the manifest lists: "
                "move it away and run again"
            )
        return previous
    candidates = tops if inherited else [FileSystems.join(output, n) for n in (*directories, *side_files, SUCCESS_FILE)]
    found = [f for c in candidates for f in _list_files(c)]
    if found:
        raise OutputError(
            f"--output {output!r} already holds {listing(found, output)}, where convnorm would write, and no "
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
    if exists(FileSystems.join(output, MANIFEST_FILE)):
        raise OutputError(
            f"--output {output!r} holds the outputs of a batch convnorm run ({MANIFEST_FILE}); "
            "--streaming writes windows of its own: choose another directory"
        )
    if exists(marker) and not files.is_link(marker):
        return
    lock = FileSystems.join(output, LOCK_FILE)
    found = [f for f in _list_files(output) if f != lock]
    if found:
        raise OutputError(
            f"--output {output!r} already holds {listing(found, output)} and no {STREAMING_MARKER} that shows "
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
            text += f" ({listing(self.deleted, output)})"
        if self.kept:
            text += (
                f"; kept {listing(self.kept, output)}: its lock names them, but their size or sha256 is not "
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


def crash_note(output: str, holder: dict) -> str | None:
    """The first line of the fatal-error report (``CRASH_NOTE``) a dead run left in its
    temporary directory (proved its: ``temp_proof``), e.g. ``Fatal Python error: Segmentation
    fault``; None when there is none (a run killed outright writes nothing)."""
    if not files.is_local(output):
        return None
    try:
        temp = _dead_temp_dir(output, holder)
    except OutputError:
        return None
    if temp is None or not _proven_temp(temp, holder.get("temp_proof")):
        return None
    try:
        fd = os.open(os.path.join(temp, CRASH_NOTE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        head = os.read(fd, 4096) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    finally:
        os.close(fd)
    lines = head.decode("utf-8", "replace").splitlines()
    return " ".join(lines[0].split())[:200] or None if lines else None


def _proven_temp(path: str, proof: Any) -> bool:
    """``path`` is a folder holding the proof file a dead run's lock records (size and sha256)."""
    if not isinstance(proof, dict) or not _is_sha256(proof.get("sha256")) or files.is_link(path):
        return False
    if files.is_local(path) and not os.path.isdir(path):
        return False
    found = FileSystems.join(path, TEMP_PROOF)
    return exists(found) and matches(found, proof)


def _temp_candidates(output: str, named: str | None, proof: Any) -> list[str]:
    """The folders that may be a dead run's temporary directory: the one its lock names and, for
    a lock that records a proof (local outputs), every other ``_convnorm_temp-*`` folder, so an
    edited name does not leave the real one behind for good."""
    found = [named] if named is not None and exists(named) else []
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
        if not exists(path):
            continue
        if _is_sha256(entry.get("sha256")) and not os.path.isdir(path) and matches(path, entry):
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
        elif exists(path):
            done.kept.append(path)
    return done


def measure(path: str, parquet: bool | None = None) -> tuple[int, int, str]:
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
    elif not files.is_local(temp_dir):
        proof = FileSystems.join(temp_dir, TEMP_PROOF)
        inside = [path for path in files.objects_below(temp_dir) if path != proof]
        if inside:
            FileSystems.delete(inside)
    files.delete(temp_dir, tree=True)


__all__ = [
    "OutputError",
    "Previous",
    "Takeover",
    "check_output",
    "claim_temp",
    "clean_dead_run",
    "new_temp_proof",
    "plan_inputs",
    "read_manifest",
    "remove_temp",
    "unreachable_output",
    "unsafe_output",
]
