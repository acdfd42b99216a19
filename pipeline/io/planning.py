"""``--input`` matched and cut into shards before the pipeline is built: a pattern that matches
nothing is an error up front, and shard numbers are fixed. A directory is read whole (never
following a link out of it unless ``--follow-symlinks``); ``--limit`` is applied to the plan;
``landing_root`` is the directory a streaming pattern watches."""

from __future__ import annotations

import logging
import os
import stat
from typing import Iterable, NamedTuple

from apache_beam.io.filesystems import FileSystems

from pipeline.io import files
from pipeline.io.files import is_local
from pipeline.io.output_names import OWN_OUTPUT_FILES
from pipeline.io.parquet_rows import row_ranges
from pipeline.io.read_shard import read_shard
from pipeline.io.shard import FILE_KINDS, Blank, Shard, display_path, file_suffix, special_file_kind
from pipeline.io.text_containers import starts_utf16
from transforms.record.inputs import DEFAULT_MAX_RECORD_BYTES, DEFAULT_SHARD_BYTES

LOG = logging.getLogger(__name__)


class InputError(ValueError):
    """An input that cannot be planned: nothing matched, or an unknown file kind."""


def _match(pattern: str) -> dict[str, int]:
    """Path -> size for a pattern; relative globs with no directory (``*.jsonl``), which
    Beam's local filesystem does not match, are matched under ``./`` and shown without it."""
    bare = is_local(pattern) and not os.path.dirname(pattern) and any(c in pattern for c in "*?[")
    matched = FileSystems.match(["./" + pattern if bare else pattern])[0].metadata_list
    found = {}
    for meta in matched:
        path = meta.path[2:] if bare and meta.path.startswith("./") else meta.path
        found[path] = meta.size_in_bytes
    return found


def _refuse_special_file(path: str, listed: os.stat_result | None = None) -> os.stat_result | None:
    """A FIFO, device or socket never ends (or blocks on open): refuse it before the run. The
    file's ``stat`` (local files; None elsewhere; ``listed``: as its directory's listing gave
    it), which the plan keeps."""
    if not is_local(path):
        return None
    try:
        info = listed if listed is not None else os.stat(path)
    except OSError as error:
        raise InputError(f"cannot read --input file {display_path(path)!r}: {error.strerror}") from None
    kind = special_file_kind(info.st_mode)
    if kind is not None:
        raise InputError(f"--input {display_path(path)!r} is {kind}; convnorm reads regular files only")
    return info


def is_directory(pattern: str) -> bool:
    """Does ``--input`` name a directory (a local one, or a remote path ending in ``/``)?"""
    if is_local(pattern):
        return os.path.isdir(pattern)
    return pattern.endswith("/")


def link_leading_out(path: str, roots: Iterable[str]) -> str | None:
    """Where ``path`` leads when it is a local symbolic link whose target (links resolved) lies
    outside every directory of ``roots``; None for anything else, a link that stays inside
    included. The one rule of a directory input (batch) and a landing directory (streaming):
    such a link is read only with ``--follow-symlinks``, so a link planted among the logs
    (``dl/passwd.jsonl -> /etc/passwd``) never gets a file from elsewhere read and copied into
    ``dead_letter/``."""
    if not is_local(path) or not os.path.islink(path):
        return None
    target = os.path.realpath(path)
    for root in roots:
        real = os.path.realpath(root)
        if target == real or target.startswith(real.rstrip("/") + "/"):
            return None
    return target


def link_refusal(target: str, where: str) -> str:
    """Why a link that leads out of ``where`` (``the directory``, ``the landing directory``) is not read."""
    return (
        f"a symbolic link that leads out of {where} (to {display_path(target)}); "
        "pass --follow-symlinks to read such links"
    )


class LeftOut(NamedTuple):
    """What a directory input does not read, beside its dot-files and ``_``-files."""

    #: Files without a known suffix, by name.
    unknown: list[str]
    #: Subdirectories (local directories only), by name.
    subdirectories: list[str]
    #: A quoted glob that reads the subdirectories' files (``'logs/*/*.jsonl'``), if they hold any.
    glob: str | None
    #: Files refused, each with why (links that lead out, dangling links): warnings, not notes.
    refused: tuple[str, ...] = ()


def _in_directory(
    directory: str, follow_symlinks: bool = False, stats: dict[str, os.stat_result] | None = None
) -> tuple[dict[str, int], LeftOut]:
    """The input files directly in ``directory`` (path -> size) and what is left out.

    Every file with a supported suffix, but dot-files and ``_``-files (hidden, or written by a
    tool: ``_SUCCESS``, ``_convnorm_manifest.json``), in a convnorm output directory its
    summaries, and (without ``follow_symlinks``) symbolic links that lead out of it.
    Subdirectories are not read. ``stats``: each local file's ``stat``, for the plan to keep.
    """
    if not is_local(directory):
        found, unknown = _in_remote_directory(directory)
        return found, LeftOut(unknown, [], None)
    found, unknown, refused, names = _in_local_directory(directory, follow_symlinks, stats)
    subdirectories, glob = _subdirectories(directory, names)
    return found, LeftOut(unknown, subdirectories, glob, tuple(refused))


def _input_name(name: str, own_output: bool) -> bool | None:
    """Is ``name`` an input file's name (``None``: left out silently, ``False``: no known suffix)?"""
    if name.startswith((".", "_")) or (own_output and name in OWN_OUTPUT_FILES):
        return None
    return file_suffix(name) is not None


def _in_local_directory(
    directory: str, follow_symlinks: bool, stats: dict[str, os.stat_result] | None
) -> tuple[dict[str, int], list[str], list[str], list[str]]:
    """``_in_directory`` of a local directory, from one listing: its entries say which are
    links and which are files without a system call each (many small files: one ``stat``
    per file, kept for the plan, instead of five); also its subdirectories' names (not dot-
    or ``_``-ones), which ``_subdirectories`` looks into."""
    with os.scandir(directory) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    own_output = any(e.name == OWN_OUTPUT_FILES[0] for e in entries)
    found, unknown, refused, subdirectories = {}, [], [], []
    for entry in entries:
        if _is_dir(entry):  # said apart (_subdirectories)
            if not entry.name.startswith((".", "_")):
                subdirectories.append(entry.name)
            continue
        kind = _input_name(entry.name, own_output)
        if kind is None:
            continue
        if kind is False:
            unknown.append(entry.name)
            continue
        path = os.path.join(directory, entry.name)
        link = entry.is_symlink()
        why = None if follow_symlinks or not link else _refused_link(path, directory)
        if why is not None:
            refused.append(f"--input {display_path(directory)}: {display_path(path)} is {why}: not read")
            continue
        try:
            info = entry.stat()  # follows a link, as reading does
        except OSError:  # gone since listed, or a link whose target's path fails (ENOENT, ENOTDIR, ELOOP)
            info = None
        if info is None or not stat.S_ISREG(info.st_mode):
            if link and info is None:  # a dangling link: nothing to read, but never a silent skip
                refused.append(f"--input {display_path(directory)}: {display_path(path)} is a link to nothing")
            continue  # a subdirectory (a FIFO or device as ever: not a file)
        found[path] = info.st_size
        if stats is not None:
            stats[path] = info
    return found, unknown, refused, subdirectories


def _is_dir(entry: os.DirEntry) -> bool:
    """``entry.is_dir()``, False for a link whose target's path fails other than by ENOENT
    (ENOTDIR, ELOOP), which ``is_dir`` raises: a link to nothing, not a directory."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _in_remote_directory(directory: str) -> tuple[dict[str, int], list[str]]:
    matched = _match(FileSystems.join(directory.rstrip("/") or "/", "*"))
    names = {path: path.rstrip("/").rsplit("/", 1)[-1] for path in matched}
    own_output = OWN_OUTPUT_FILES[0] in names.values()
    found, unknown = {}, []
    for path, name in sorted(names.items()):
        kind = _input_name(name, own_output)
        if kind is False:
            unknown.append(name)
        elif kind:
            found[path] = matched[path]
    return found, unknown


def _refused_link(path: str, directory: str) -> str | None:
    target = link_leading_out(path, [directory])
    return None if target is None else link_refusal(target, "the directory")


def _subdirectories(directory: str, names: list[str]) -> tuple[list[str], str | None]:
    """A local directory's subdirectories (``names``, from its listing), and a glob that reads
    the first input suffix found one level down in them (``None``: they hold no input file)."""
    for name in names:
        try:
            found = {file_suffix(e.name) for e in os.scandir(os.path.join(directory, name)) if e.is_file()}
        except OSError:
            continue
        suffixes = sorted(suffix for suffix in found if suffix is not None)
        if suffixes:
            return names, f"--input '{os.path.join(display_path(directory), '*', '*' + suffixes[0])}'"
    return names, None


def _left_out_note(directory: str, left_out: LeftOut) -> str | None:
    """The plan's line on what a directory input does not read (``None``: nothing)."""
    parts = []
    if left_out.unknown:
        names = ", ".join(left_out.unknown[:5]) + (" ..." if len(left_out.unknown) > 5 else "")
        parts.append(f"{len(left_out.unknown)} file(s) without a known suffix not read: {names}")
    if left_out.subdirectories:
        count = len(left_out.subdirectories)
        names = ", ".join(f"{name}/" for name in left_out.subdirectories[:5]) + (" ..." if count > 5 else "")
        hint = f" (to read the files in them, quote a glob: {left_out.glob})" if left_out.glob else ""
        parts.append(f"{count} {'subdirectory' if count == 1 else 'subdirectories'} not read: {names}{hint}")
    return f"--input {display_path(directory)}: " + "; ".join(parts) if parts else None


def match_inputs(
    patterns: list[str],
    notes: list[str] | None = None,
    follow_symlinks: bool = False,
    refused: list[str] | None = None,
    stats: dict[str, os.stat_result] | None = None,
) -> dict[str, int]:
    """Every input file the patterns name (path -> size): files, globs and directories.

    What a directory input leaves out is said in a line appended to ``notes`` (the plan's:
    shown once the console is set up for the job), or logged when ``notes`` is ``None``; the
    files it refuses (``link_leading_out``, unless ``follow_symlinks``), one line each, in
    ``refused`` (warnings), or logged as warnings when ``refused`` is ``None``; ``stats``:
    the ``stat`` of each local file a directory listing found.
    """
    files: dict[str, int] = {}
    for pattern in patterns:
        left_out = LeftOut([], [], None)
        try:
            if is_directory(pattern):
                matched, left_out = _in_directory(pattern, follow_symlinks, stats)
                note = _left_out_note(pattern, left_out)
                if note and notes is not None:
                    notes.append(note)
                elif note:
                    LOG.info("%s", note)
                if refused is not None:
                    refused.extend(left_out.refused)
                else:
                    for line in left_out.refused:
                        LOG.warning("%s", line)
            else:
                matched = _match(pattern)
        except Exception as error:  # noqa: BLE001 — filesystems raise their own types
            raise InputError(f"cannot match --input {display_path(pattern)!r}: {error}") from None
        if not matched and is_directory(pattern):
            hint = f"; its subdirectories hold input files: {left_out.glob}" if left_out.glob else ""
            raise InputError(
                f"--input {display_path(pattern)!r} is a directory with no input file directly in it "
                f"(files ending in {', '.join(FILE_KINDS)}; dot-files and subdirectories are not read){hint}"
            )
        if not matched:
            raise InputError(f"no file matches --input {display_path(pattern)!r}")
        files.update(matched)
    return files


def plan_shards(
    patterns: list[str],
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    notes: list[str] | None = None,
    follow_symlinks: bool = False,
    refused: list[str] | None = None,
) -> list[Shard]:
    """Match every pattern and cut the files into shards, in a deterministic order
    (``notes``, ``follow_symlinks``, ``refused``: see ``match_inputs``)."""
    listed: dict[str, os.stat_result] = {}
    files = match_inputs(patterns, notes, follow_symlinks, refused, listed)
    shards: list[Shard] = []
    for path in sorted(files):
        suffix = file_suffix(path)
        if suffix is None:
            raise InputError(
                f"cannot tell the format of {display_path(path)!r} from its name; "
                f"input files end in one of: {', '.join(FILE_KINDS)}"
            )
        info = _refuse_special_file(path, listed.get(path))
        # What the reader compares the file it opens with: size, and locally time and identity.
        size = files[path] if info is None else info.st_size
        whole = Shard(0, path, suffix, 0, None, file_size=size)
        if info is not None:
            whole = whole._replace(mtime_ns=info.st_mtime_ns, inode=info.st_ino, device=info.st_dev)
        # A UTF-16 file is read whole: a byte range could start in the middle of a code unit.
        if FILE_KINDS[suffix][0] == "parquet" and size > shard_bytes:
            for first, end, covered in _parquet_ranges(path, size, shard_bytes):
                shards.append(
                    whole._replace(number=len(shards), start=first, end=end, range_bytes=covered)
                    if (first, end) != (0, None)
                    else whole._replace(number=len(shards))
                )
        elif FILE_KINDS[suffix][2] and size > shard_bytes and not starts_utf16(path):
            # Equal ranges of at most shard_bytes: no small tail shard, so workers that take
            # shards in turn get even work.
            count = -(-size // shard_bytes)
            bounds = [size * k // count for k in range(count + 1)]
            for start, end in zip(bounds, bounds[1:]):
                shards.append(whole._replace(number=len(shards), start=start, end=None if end == size else end))
        else:
            shards.append(whole._replace(number=len(shards)))
    return shards


def _parquet_ranges(path: str, size: int, shard_bytes: int) -> list[tuple[int, int | None, int]]:
    """A big Parquet file's shards: ranges of its rows on row groups' bounds
    (``parquet_rows.row_ranges``), the last one open-ended; ``[(0, None, 0)]`` (the file whole)
    for one range, or where its metadata cannot be read (the reader says why, as a dead letter)."""
    try:
        ranges = row_ranges(path, shard_bytes)
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 — not a Parquet file after all: read whole, dead-lettered there
        return [(0, None, 0)]
    if len(ranges) < 2:
        return [(0, None, 0)]
    # The last range takes the file's other bytes (its footer...): the shards' bytes add up to
    # the file's size, as the file whole would count.
    rest = size - sum(covered for _, _, covered in ranges[:-1])
    return [(first, end, covered) for first, end, covered in ranges[:-1]] + [(ranges[-1][0], None, rest)]


def limit_plan(shards: list[Shard], limit: int, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> list[Shard]:
    """The plan cut to its first ``limit`` records (``--limit``): the shards that hold them,
    in order, each with the number of records to read from it.

    Counts records by reading the shards in plan order until ``limit`` are found, so at most
    ``limit`` records are read here (JSONL lines are not parsed).
    """
    kept: list[Shard] = []
    remaining = limit
    for shard in shards:
        if remaining <= 0:
            break
        records = sum(
            1 for item in read_shard(shard._replace(limit=remaining), max_record_bytes) if not isinstance(item, Blank)
        )
        if records:
            kept.append(shard._replace(number=len(kept), limit=records))
            remaining -= records
    return kept or shards[:1]


def shard_sizes(shards: list[Shard]) -> list[int]:
    """Bytes of each planned shard (its range, or its whole file), by shard number: from the
    sizes planning saw, a file's size looked up only where it is not known."""
    sizes: dict[str, int] = {s.path: s.file_size for s in shards if s.file_size is not None}
    for path in {s.path for s in shards if s.end is None and s.path not in sizes}:
        try:
            sizes[path] = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
        except Exception:  # noqa: BLE001 — only for progress: an unknown size counts 0
            sizes[path] = 0
    return [
        s.range_bytes
        if s.range_bytes is not None
        else (s.end if s.end is not None else max(sizes[s.path], s.start)) - s.start
        for s in shards
    ]


def canonical_path(path: str) -> str:
    """A landed file's path as convnorm names it: absolute for local files (links kept)."""
    return path if not files.is_local(path) else os.path.abspath(path)


def landing_root(pattern: str) -> str:
    """The directory a pattern watches: the part before its first wildcard, up to a ``/``."""
    fixed = pattern
    for i, char in enumerate(pattern):
        if char in "*?[":
            fixed = pattern[:i]
            break
    root = fixed.rsplit("/", 1)[0] if "/" in fixed else "."
    return canonical_path(root or "/")
