"""Beam FileSystems calls on one path, never on a pattern, and writes that never follow a link.

Beam's ``FileSystems.match`` and ``LocalFileSystem.delete`` take their argument as a glob, so
``out[1]/normalized/part-00000.jsonl`` means ``out1/normalized/part-00000.jsonl`` to them: the
sizes of a run's own files came back missing, its lock stayed, and ``--overwrite`` deleted a
neighbour's file. Every path convnorm sizes or deletes in its output directory goes through
here instead. (On object stores Beam's delete still matches: a ``gs://`` output path holding
``*?[`` is not supported.)

Beam's ``FileSystems.create`` opens a local path as ``open(path, "wb")``, which follows a
symbolic link: ``out/report.html -> ~/notes.txt`` replaced the user's notes, a dangling
``out/_convnorm_manifest.json`` link made the manifest outside. So every file convnorm creates
or replaces in a local directory is written by ``write_file`` (or ``create`` for a file
written as it goes): the directories below the one the user named are opened without
following a link (``O_NOFOLLOW``), the content goes to a fresh temporary name
(``O_CREAT | O_EXCL | O_NOFOLLOW``) and is then hard-linked to its name (which fails if
anything, a dangling link included, is there) or renamed over the file it replaces (after
checking that is a plain file). The directory the user named (``--output``) is theirs to be a
link. Object stores (``gs://``, ``s3://``) have no links: Beam's FileSystems write there.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import os
import shutil
import stat
import uuid
import warnings
from typing import BinaryIO, Callable

from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.io import object_store

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: Errors of a filesystem that cannot hard-link (some FUSE and SMB mounts): create in place.
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV}


class NotFollowed(OSError):
    """A name convnorm writes is a symbolic link (or not a plain file or directory): refused."""


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
        # An object store has no directories: a "directory" is the objects under its prefix.
        below = objects_below(path) if tree else []
        if below:
            FileSystems.delete(below)
        if FileSystems.exists(path):
            FileSystems.delete([path])
    elif os.path.isdir(path) and not os.path.islink(path):
        if not tree:
            raise IsADirectoryError(f"{path} is a directory, not a file convnorm wrote: not deleted")
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def delete_below(root: str, relative: str, *, size: int | None = None) -> bool:
    """Delete the file ``root/relative`` (a file convnorm proved its own), never through a link
    below ``root``: its folders are opened without following one (NotFollowed), and the name
    itself is unlinked, a link there removed rather than followed. With ``size``, only a plain
    file of that size is deleted (NotFollowed otherwise: it changed since it was proved ours).
    False when nothing is there."""
    parts = _parts(relative)
    if not is_local(root):
        path = FileSystems.join(root, *parts)
        if not FileSystems.exists(path):
            return False
        FileSystems.delete([path])
        return True
    *directories, name = parts
    shown = os.path.join(root, *parts)
    try:
        directory = _open_directory(root, directories)
    except FileNotFoundError:
        return False
    try:
        try:
            found = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(found.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{shown} is a directory, not a file convnorm wrote: not deleted")
        if size is not None and (not stat.S_ISREG(found.st_mode) or found.st_size != size):
            raise NotFollowed(errno.EEXIST, f"{shown} changed since convnorm proved it its own: not deleted")
        os.unlink(name, dir_fd=directory)
        return True
    finally:
        os.close(directory)


def objects_below(prefix: str) -> list[str]:
    """Every object under ``prefix/`` of an object store (taken literally), sorted; [] if none."""
    with warnings.catch_warnings():  # fnmatch warns about the "[[]" of an escaped "["
        warnings.simplefilter("ignore", FutureWarning)
        try:
            found = FileSystems.match([FileSystems.join(escape_glob(prefix.rstrip("/")), "**")])[0].metadata_list
        except Exception:  # noqa: BLE001 — nothing there
            return []
    return sorted(meta.path for meta in found)


def remove_if_empty(directory: str) -> None:
    """Remove a local directory only if it is empty: a file of anyone's in it keeps it."""
    if is_local(directory):
        try:
            os.rmdir(directory)
        except OSError:
            pass


def escape_glob(path: str) -> str:
    """``path`` as a pattern that matches only itself: ``out[1]`` is ``out[[]1]`` (Beam's
    ``FileSystems.match`` takes a glob, locally and on object stores alike)."""
    return glob.escape(path)


def matching(directory: str, *patterns: str) -> list[str]:
    """What lies under ``directory`` (taken literally: ``out[1]`` is not ``out1``) at the
    names ``patterns`` match, one pattern per level (``matching(out, "*", "summary.json")``);
    sorted, [] when nothing (or no directory) is there."""
    if not is_local(directory):
        with warnings.catch_warnings():  # fnmatch warns about the "[[]" of an escaped "["
            warnings.simplefilter("ignore", FutureWarning)
            try:
                found = FileSystems.match([FileSystems.join(escape_glob(directory), *patterns)])[0].metadata_list
            except Exception:  # noqa: BLE001 — a missing directory matches nothing
                return []
        return sorted(meta.path for meta in found)
    level = [directory]
    for pattern in patterns:
        below = []
        for parent in level:
            try:
                names = os.listdir(parent)
            except OSError:
                continue
            below += [os.path.join(parent, name) for name in names if fnmatch.fnmatchcase(name, pattern)]
        level = below
    return sorted(level)


def read_own(path: str) -> bytes:
    """The bytes of one of convnorm's own small files (a lock, manifest, marker, record,
    summary): locally never through a link at its name and never from a FIFO, device or socket,
    whose opening or reading would wait for ever (NotFollowed); FileNotFoundError when absent.
    Object stores: Beam's FileSystems."""
    if not is_local(path):
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            return handle.read()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise NotFollowed(error.errno, f"{path} is a symbolic link; convnorm does not read through it") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotFollowed(errno.EINVAL, f"{path} is not a plain file (a FIFO, device or socket?); not read")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)


def open_input(path: str) -> BinaryIO:
    """An input file (a landed file, a batch input), opened to read its bytes as they are: a
    local one only if it is a regular file when opened. A FIFO, device or socket put at the
    name after it was looked at raises OSError instead of making the reader wait for ever
    (opening a FIFO waits for a writer; the non-blocking open does not, and is dropped after)."""
    if not is_local(path):
        return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file (a FIFO, device or socket); not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def is_link(path: str) -> bool:
    """A local path that is a symbolic link (dangling or not); never true on object stores."""
    return is_local(path) and os.path.islink(path)


# --------------------------------------------------------------------------------------------
# Writing without following links


def _parts(relative: str) -> list[str]:
    parts = relative.split("/")
    if not relative or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{relative!r} is not a plain relative path")
    return parts


def _open_directory(root: str, parts: list[str]) -> int:
    """A descriptor of ``root/parts...``: ``root`` as the user named it, every part below it
    opened without following a link. Raises NotFollowed for a link or a non-directory."""
    fd = os.open(root, _DIRECTORY_FLAGS)
    try:
        for part in parts:
            try:
                below = os.open(part, _DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotFollowed(
                        error.errno,
                        f"{os.path.join(root, *parts)}: {part!r} is a symbolic link or not a directory; "
                        "convnorm does not write through it",
                    ) from None
                raise
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _plain_file_or_absent(directory_fd: int, name: str, shown: str) -> None:
    try:
        found = os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(found.st_mode):
        raise NotFollowed(errno.EEXIST, f"{shown} is not a plain file (a symbolic link?); convnorm does not replace it")


def write_file(
    root: str,
    relative: str,
    data: bytes,
    *,
    replace: bool = False,
    mime_type: str = "application/octet-stream",
    before_placing: Callable[[int], None] | None = None,
    keep_open: bool = False,
) -> int | None:
    """Write ``data`` as ``root/relative``, never through a symbolic link.

    Without ``replace`` the name must be free: ``FileExistsError`` if anything is there (a
    file, a dangling link). With ``replace`` a plain file there is replaced in one rename; a
    link or directory raises ``NotFollowed``. A reader sees the old content or the new, never
    half. ``before_placing(fd)`` runs on the written file before it takes its name (the lock
    takes its OS lock there); ``keep_open`` returns the file's descriptor (local paths only).
    """
    parts = _parts(relative)
    if not is_local(root):
        path = FileSystems.join(root, *parts)
        if not replace and FileSystems.exists(path):
            raise FileExistsError(errno.EEXIST, f"{path} exists")
        if object_store.needs_put_empty(path, data):
            object_store.put_empty(path)
            return None
        with FileSystems.create(path, mime_type=mime_type, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            handle.write(data)
        return None
    *directories, name = parts
    shown = os.path.join(root, *parts)
    directory = _open_directory(root, directories)
    try:
        temp = f".{name}.{uuid.uuid4().hex}.tmp"
        fd = os.open(temp, _NEW_FILE_FLAGS, 0o666, dir_fd=directory)
        try:
            _write_all(fd, data)
            if before_placing is not None:
                before_placing(fd)
            if replace:
                _plain_file_or_absent(directory, name, shown)
                os.rename(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
            else:
                fd = _link_new(directory, temp, name, fd, data, before_placing, shown)
        except BaseException:
            os.close(fd)
            _unlink_quietly(temp, directory)
            raise
        if keep_open:
            return fd
        os.close(fd)
        return None
    finally:
        os.close(directory)


def _link_new(directory: int, temp: str, name: str, fd: int, data: bytes, before_placing, shown: str) -> int:
    """Give the written temp file its name if the name is free; the descriptor of the file."""
    try:
        os.link(temp, name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, f"{shown} exists (a file or a link convnorm did not write)") from None
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise
        # No hard links here: create the name itself, exclusively and without following.
        placed = os.open(name, _NEW_FILE_FLAGS, 0o666, dir_fd=directory)
        try:
            if before_placing is not None:
                before_placing(placed)
            _write_all(placed, data)
        except BaseException:
            os.close(placed)
            raise
        os.close(fd)
        fd = placed
    _unlink_quietly(temp, directory)
    return fd


def _unlink_quietly(name: str, directory: int) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        pass


def make_directory(root: str, relative: str) -> None:
    """Create ``root/relative`` (one new directory, its parents existing), without following
    a link at any name below ``root``; an existing directory is fine, anything else raises."""
    parts = _parts(relative)
    if not is_local(root):
        FileSystems.mkdirs(FileSystems.join(root, *parts))
        return
    *parents, name = parts
    directory = _open_directory(root, parents)
    try:
        os.mkdir(name, dir_fd=directory)
    except FileExistsError:
        os.close(_open_directory(root, parts))  # a directory already, not a link
    finally:
        os.close(directory)


def make_directories(root: str, relative: str) -> None:
    """``make_directory`` for each missing level of ``relative`` under ``root`` (``root``, the
    user's path, made too if missing)."""
    parts = _parts(relative)
    if is_local(root):
        os.makedirs(root, exist_ok=True)
    for depth in range(1, len(parts) + 1):
        make_directory(root, "/".join(parts[:depth]))


def move_into(source: str, root: str, relative: str) -> None:
    """Move ``source`` (a run's temporary file, or directory) to ``root/relative``, never over
    an existing name and never through a link below ``root``; FileExistsError if it is taken."""
    parts = _parts(relative)
    if not is_local(root):
        FileSystems.rename([source], [FileSystems.join(root, *parts)])
        return
    *directories, name = parts
    directory = _open_directory(root, directories)
    try:
        if os.path.isdir(source) and not os.path.islink(source):
            if os.path.lexists(os.path.join(root, *parts)):
                raise FileExistsError(errno.EEXIST, f"{os.path.join(root, *parts)} exists")
            os.rename(source, name, dst_dir_fd=directory)
            return
        _link_into(directory, source, name, os.path.join(root, *parts))
    finally:
        os.close(directory)


def _link_into(directory: int, source: str, name: str, shown: str) -> None:
    """A file moved to ``name`` in the open ``directory``: hard-linked (which fails if anything
    is at the name, a dangling link included), then unlinked from where it was."""
    try:
        os.link(source, name, dst_dir_fd=directory, follow_symlinks=False)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, f"{shown} exists (a file or a link convnorm did not write)") from None
    except OSError as error:
        if error.errno not in _NO_HARD_LINKS:
            raise
        _plain_file_or_absent(directory, name, shown)
        if os.path.lexists(shown):
            raise FileExistsError(errno.EEXIST, f"{shown} exists") from None
        os.rename(source, name, dst_dir_fd=directory)
        return
    os.unlink(source)


#: Files per ``FileSystems.rename`` call when moving many into an object store.
MOVE_BATCH = 1000


def move_many(moves: list[tuple[str, str]], root: str, after_first: Callable[[], None] | None = None) -> dict:
    """``move_into`` for many files, ``(source, relative)`` each: every directory below
    ``root`` opened once (local), or one ``FileSystems.rename`` call per ``MOVE_BATCH`` files
    (object stores); never over an existing name (FileExistsError at once) and never through a
    link. Returns the moves that could not be made, relative -> error (a source that is gone).
    ``after_first`` is called after the first directory's (or batch's) files moved."""
    failed: dict = {}
    if not is_local(root):
        for start in range(0, len(moves), MOVE_BATCH):
            batch = moves[start : start + MOVE_BATCH]
            targets = [FileSystems.join(root, *_parts(relative)) for _, relative in batch]
            try:
                FileSystems.rename([source for source, _ in batch], targets)
            except BeamIOError as error:
                by_target = dict(zip(targets, (relative for _, relative in batch)))
                for (_, target), reason in (error.exception_details or {}).items():
                    failed[by_target.get(target, target)] = reason
            if start == 0 and after_first:
                after_first()
        return failed
    by_directory: dict[tuple[str, ...], list[tuple[str, str, str]]] = {}
    for source, relative in moves:
        *directories, name = _parts(relative)
        by_directory.setdefault(tuple(directories), []).append((source, relative, name))
    for number, (folder, group) in enumerate(by_directory.items()):
        directory = _open_directory(root, list(folder))
        try:
            for source, relative, name in group:
                try:
                    _link_into(directory, source, name, os.path.join(root, relative))
                except FileExistsError:
                    raise
                except FileNotFoundError as error:
                    failed[relative] = error
        finally:
            os.close(directory)
        if number == 0 and after_first:
            after_first()
    return failed


def write_in_place(path: str, data: bytes, *, replace: bool = False, mime_type: str = "application/json") -> None:
    """``write_file`` for a file of a directory convnorm made for itself (a run's temporary
    directory, made here if need be): the directory is taken as it is, the name never followed."""
    root, name = path.rsplit("/", 1)
    if is_local(root):
        os.makedirs(root, exist_ok=True)
    write_file(root, name, data, replace=replace, mime_type=mime_type)


def create(path: str, mime_type: str = "application/octet-stream") -> BinaryIO:
    """A new file at ``path`` to write as it goes (a writer's temporary file): the name must
    be free and is never followed as a link (local paths; Beam's FileSystems elsewhere)."""
    if not is_local(path):
        return FileSystems.create(path, mime_type=mime_type, compression_type=CompressionTypes.UNCOMPRESSED)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    return os.fdopen(os.open(path, _NEW_FILE_FLAGS, 0o666), "wb")
