"""Beam FileSystems calls on one path, never on a pattern.

Beam's ``FileSystems.match`` and ``LocalFileSystem.delete`` take their argument as a glob, so
``out[1]/normalized/part-00000.jsonl`` means ``out1/normalized/part-00000.jsonl`` to them: the
sizes of a run's own files came back missing, its lock stayed, and ``--overwrite`` deleted a
neighbour's file. Every path convnorm sizes or deletes in its output directory goes through
here instead. (On object stores Beam's delete still matches: a ``gs://`` output path holding
``*?[`` is not supported.)
"""

from __future__ import annotations

import os
import shutil

from apache_beam.io.filesystems import FileSystems


def is_local(path: str) -> bool:
    return "://" not in path


def size(path: str) -> int | None:
    """The size in bytes of the file at ``path``, or None if there is none."""
    try:
        return FileSystems.get_filesystem(path).metadata(path).size_in_bytes
    except Exception:  # noqa: BLE001 — filesystems raise their own types for "not found"
        return None


def sizes_in(directory: str, *, sizes: bool = True) -> dict[str, int]:
    """Every entry directly in ``directory``, as full path -> size in bytes (-1: not a regular
    file, e.g. a directory or a symbolic link; every entry -1 without ``sizes``, which saves a
    local ``lstat`` per entry); {} if there is none. One listing, however many files (the
    object stores: one paginated list call)."""
    if is_local(directory):
        try:
            with os.scandir(directory) as entries:
                return {
                    os.path.join(directory, e.name): e.stat(follow_symlinks=False).st_size
                    if sizes and e.is_file(follow_symlinks=False)
                    else -1
                    for e in entries
                }
        except (FileNotFoundError, NotADirectoryError):
            return {}
    try:
        matched = FileSystems.match([FileSystems.join(directory, "*")])[0].metadata_list
    except Exception:  # noqa: BLE001 — nothing there
        return {}
    return {m.path: m.size_in_bytes for m in matched}


def delete(path: str, *, tree: bool = False) -> None:
    """Delete the file (or symbolic link) at ``path``; a directory and all it holds only with
    ``tree`` (a run's temporary directory), never by mistake for a file of ours."""
    if not is_local(path):
        if FileSystems.exists(path):
            FileSystems.delete([path])
    elif os.path.isdir(path) and not os.path.islink(path):
        if not tree:
            raise IsADirectoryError(f"{path} is a directory, not a file convnorm wrote: not deleted")
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def remove_if_empty(directory: str) -> None:
    """Remove a local directory only if it is empty: a file of anyone's in it keeps it."""
    if is_local(directory):
        try:
            os.rmdir(directory)
        except OSError:
            pass
