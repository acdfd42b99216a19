"""The facts a streaming output directory holds: which files were processed, and their totals.

No Beam import: the streaming DoFns and the driver (``pipeline.streaming.driver``) call these.

**The record of processed files.** ``OUTPUT/_convnorm_files/<key>.json`` (``key``: a hash of
the landed file's full path) lists the versions of that path convnorm processed, each with
the file's size, modification time and sha256 at that moment, the byte range read and the
directory that holds its outputs (``<window>/<name>``)::

    {"path": "/landing/a.jsonl",
     "versions": [{"version": 1, "size": 300, "mtime_ns": ..., "ctime_ns": ..., "sha256": "…", "start": 0,
                   "end": 300, "dir": "20261201T000000Z-20261201T000100Z/a-1a2b3c4d5e6f7a8b", "run": "…"}],
     "seen": {"size": 300, "mtime_ns": ..., "ctime_ns": ...}}

A version is written here *before* its outputs are renamed into place, and it counts as done
only once its directory holds ``source.json``: the rename is the one step that commits a file,
so a crash at any point leaves a file either done (outputs complete, never read again) or not
(read again at the next start, its leftovers in the dead run's temporary directory). ``seen``
is the last size and time handled without a new version (a file touched but not changed).

**A file that changes after it was processed** (``plan_version``): the new content is hashed.
The same bytes: nothing to do. An uncompressed ``.jsonl`` whose processed bytes are unchanged
and end at a line end has been appended to: the appended bytes are read as the next version
(its records keep their byte offsets in the whole file). Anything else is a rewrite: read
whole as the next version (``--changed-files new-version``, the default) or reported and not
read (``report``).

**Totals from the files on disk.** Each file's outputs directory holds ``source.json`` with the
file's partial summary (``transforms.totals.summary.partial``); a window's ``summary.json`` is the
finalized sum of the partials of the files in its directory, and the output's ``summary.json``
the finalized sum of every file's partial (and of each window's ``assembled/`` conversations of
call logs: ``assembled.json``). Nothing is summed twice and nothing from memory:
after a crash, the next start rebuilds what is missing (``rebuild_windows``) and the totals
are exact.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Iterable, NamedTuple

from apache_beam.io.filesystems import FileSystems

from pipeline.io import files
from pipeline.io.output_names import SUMMARY_FILE
from pipeline.io.shard import FILE_KINDS, Stamp, display_path, file_suffix
from pipeline.io.text_containers import line_feed
from transforms.core.jsontext import document_bytes
from transforms.record.record_settings import Settings
from transforms.totals import summary as summaries

PROCESSED_DIR = "_convnorm_files"
#: The watcher's last view of the landing directory (pending files), replaced every poll.
WATCH_STATUS_FILE = "_convnorm_watch.json"
SOURCE_FILE = "source.json"
#: A landed file's call-log pieces (one JSON line each), in its outputs directory.
CALLS_FILE = "calls.jsonl"
#: ``OUTPUT/<window>/assembled/``: the conversations assembled from call logs when the window
#: closed (no landed file's directory has this name: theirs end in a hash), with
#: ``assembled.json``, its partial summary (the window's and the output's totals add it).
ASSEMBLED_DIR = "assembled"
ASSEMBLED_FILE = "assembled.json"
#: ``OUTPUT/<window>/``: the window's start and end in UTC.
WINDOW_NAME = re.compile(r"^\d{8}T\d{6}Z-\d{8}T\d{6}Z$")
#: Bytes of a landed file's name kept in its outputs directory's name (file systems allow 255).
NAME_BYTES = 80


def _path_bytes(path: str) -> bytes:
    # A name that is not UTF-8 reaches Python as lone surrogates: hash its real bytes.
    return path.encode("utf-8", "surrogateescape")


def path_key(path: str) -> str:
    return hashlib.sha256(_path_bytes(path)).hexdigest()[:32]


def _stem(path: str) -> str:
    """The file's name without its suffix, as a directory name can hold it: valid UTF-8, no
    separators or control characters, at most NAME_BYTES bytes."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    suffix = file_suffix(name)
    if suffix:
        name = name[: -len(suffix)]
    text = "".join("_" if ch in "/\\" or ord(ch) < 32 or ch == "\x7f" else ch for ch in display_path(name))
    cut = text.encode("utf-8")[:NAME_BYTES].decode("utf-8", "ignore")
    return cut.lstrip(".") or "file"


def source_id(path: str, version: int = 1) -> str:
    """The name of a landed file's outputs directory: its name without the suffix, 16 hex digits
    of a hash of its full path, and ``-v<n>`` from its second version on. (8 digits, 32 bits,
    collided among some 77,000 files of one name, and two in one window failed the job.)"""
    name = f"{_stem(path)}-{hashlib.sha1(_path_bytes(path)).hexdigest()[:16]}"
    return name if version == 1 else f"{name}-v{version}"


# --------------------------------------------------------------------------------------------
# Small file operations on convnorm's own files (never a pattern: ``out[1]`` is a name)


def read_json(path: str) -> dict | None:
    try:
        doc = json.loads(files.read_own(path))
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 — absent on a remote filesystem, or unreadable
        if not FileSystems.exists(path):
            return None
        raise
    return doc if isinstance(doc, dict) else None


def _under(output: str | None, path: str) -> str | None:
    prefix = (output or "").rstrip("/") + "/"
    return path[len(prefix) :] if output and path.startswith(prefix) else None


def write_json(path: str, doc: dict, output: str | None = None) -> None:
    """Replace ``path`` with ``doc`` in one step (written beside it, then renamed over it),
    never through a symbolic link: at no name below ``output`` when given (docs/outputs.md)."""
    relative = _under(output, path)
    if output is not None and relative is not None:
        files.write_file(output, relative, document_bytes(doc), replace=True, mime_type="application/json")
    else:
        files.write_in_place(path, document_bytes(doc), replace=True)


def make_dirs(path: str, output: str | None = None) -> None:
    """``path`` and its parents, made if missing; below ``output`` (when given) never through a link."""
    relative = _under(output, path)
    if output is not None and relative is not None:
        files.make_directories(output, relative)
    elif files.is_local(path):
        os.makedirs(path, exist_ok=True)
    elif not FileSystems.exists(path):
        FileSystems.mkdirs(path)


def _exists(path: str) -> bool:
    return os.path.exists(path) if files.is_local(path) else FileSystems.exists(path)


# --------------------------------------------------------------------------------------------
# The record of processed files


def record_path(output: str, path: str) -> str:
    return FileSystems.join(output, PROCESSED_DIR, path_key(path) + ".json")


def read_record(output: str, path: str) -> dict:
    record = read_json(record_path(output, path))
    if record is None:
        return {"path": display_path(path), "versions": []}
    return record


def write_record(output: str, path: str, record: dict) -> None:
    make_dirs(FileSystems.join(output, PROCESSED_DIR), output)
    write_json(record_path(output, path), record, output)


def is_done(output: str, version: dict) -> bool:
    """A version is done once its outputs directory is in place (it holds source.json)."""
    return _exists(FileSystems.join(output, *version["dir"].split("/"), SOURCE_FILE))


def done_versions(output: str, record: dict) -> list[dict]:
    return [v for v in record["versions"] if is_done(output, v)]


def _stamp(entry: dict, now: Stamp) -> Stamp:
    # A record of a convnorm that kept no ctime: its size and time alone.
    return Stamp(entry["size"], entry["mtime_ns"], entry.get("ctime_ns", now.ctime_ns))


def handled(output: str, record: dict, stamp: Stamp) -> bool:
    """Whether this stamp of the path was handled: a done version, or ``seen``."""
    seen = record.get("seen")
    if seen and _stamp(seen, stamp) == stamp:
        return True
    return any(_stamp(v, stamp) == stamp for v in done_versions(output, record))


def in_flight_elsewhere(output: str, record: dict, run_id: str) -> bool:
    """A version of this run not done yet: another attempt of this run is reading it."""
    return any(v.get("run") == run_id and not is_done(output, v) for v in record["versions"])


class Plan(NamedTuple):
    """What to do with the content a landed path has now."""

    #: "read", "unchanged" (these bytes were processed: nothing to do), "report" (rewritten,
    #: not read: ``--changed-files report``).
    action: str
    #: "new", "appended", "rewritten" or "unchanged".
    why: str
    version: int
    start: int
    size: int
    sha256: str


def content_digest(path: str, prefix: int | None) -> tuple[int, str, str | None, bool]:
    """(size, sha256 of the whole file, sha256 of its first ``prefix`` bytes or None when it is
    shorter, whether those bytes end with a line feed: in the file's encoding, UTF-16 by its
    byte-order mark), in one pass over the file."""
    digest = hashlib.sha256()
    size, head, previous = 0, b"", b""
    prefix_digest, tail = None, b""
    with files.open_input(path) as handle:
        while True:
            chunk = handle.read(1 << 20)
            if not chunk:
                break
            head = head or chunk[:2]
            if prefix is not None and prefix_digest is None and size + len(chunk) >= prefix:
                cut = prefix - size
                digest.update(chunk[:cut])
                prefix_digest = digest.hexdigest()
                tail = (previous + chunk[max(0, cut - 2) : cut])[-2:]
                digest.update(chunk[cut:])
            else:
                digest.update(chunk)
            previous = (previous + chunk[-2:])[-2:]
            size += len(chunk)
    if prefix is not None and prefix_digest is None and prefix == size:  # an empty file
        prefix_digest, tail = digest.hexdigest(), previous
    return size, digest.hexdigest(), prefix_digest, bool(tail) and tail.endswith(line_feed(head))


def _appendable(path: str) -> bool:
    # Only an uncompressed JSON Lines file can be read from a byte offset.
    suffix = file_suffix(path)
    return suffix is not None and FILE_KINDS[suffix] == ("jsonl", None, True)


def plan_version(output: str, path: str, record: dict, changed_files: str = "new-version") -> Plan:
    """Hash the file and compare it with its last processed version (see the module docstring)."""
    done = done_versions(output, record)
    last = done[-1] if done else None
    size, sha, prefix_sha, line_end = content_digest(path, last["end"] if last else None)
    if last is None:
        return Plan("read", "new", 1, 0, size, sha)
    version = max(v["version"] for v in done) + 1
    if sha == last["sha256"] and size == last["end"]:
        return Plan("unchanged", "unchanged", last["version"], last["end"], size, sha)
    if _appendable(path) and size > last["end"] and prefix_sha == last["sha256"] and line_end:
        return Plan("read", "appended", version, last["end"], size, sha)
    if changed_files == "report":
        return Plan("report", "rewritten", version, 0, size, sha)
    return Plan("read", "rewritten", version, 0, size, sha)


def unreadable_plan(record: dict, size: int) -> Plan:
    """The next version of a file that cannot be opened: read anyway, so that the reader's
    ``unreadable_file`` dead letter says why (no hash: it could not be read)."""
    versions = [v["version"] for v in record["versions"]]
    return Plan("read", "unreadable", max(versions, default=0) + 1, 0, size, "")


# --------------------------------------------------------------------------------------------
# Totals from the files on disk


def window_names(output: str) -> list[str]:
    """The window directories of a streaming output, in time order."""
    if files.is_local(output):
        try:
            names = os.listdir(output)
        except OSError:
            return []
        return sorted(n for n in names if WINDOW_NAME.match(n) and os.path.isdir(os.path.join(output, n)))
    pattern = FileSystems.join(_escape(output), "*", SUMMARY_FILE)
    found = {m.path.rsplit("/", 2)[-2] for m in FileSystems.match([pattern])[0].metadata_list}
    pattern = FileSystems.join(_escape(output), "*", "*", SOURCE_FILE)
    found |= {m.path.rsplit("/", 3)[-3] for m in FileSystems.match([pattern])[0].metadata_list}
    return sorted(n for n in found if WINDOW_NAME.match(n))


def _escape(path: str) -> str:
    # Beam matches a path as a pattern: a literal [ * ? must be a one-character class.
    return re.sub(r"([[*?])", r"[\1]", path)


def local_directories_holding(output: str, window: str, name: str) -> list[str]:
    """The directories of a local output's window that hold a file ``name`` (``SOURCE_FILE``:
    a landed file's outputs; ``CALLS_FILE``: its call-log pieces), by name."""
    directory = os.path.join(output, window)
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [n for n in names if os.path.isfile(os.path.join(directory, n, name))]


def file_count(output: str, window: str) -> int:
    """How many files a window's directory holds outputs of."""
    if files.is_local(output):
        return len(local_directories_holding(output, window, SOURCE_FILE))
    return len(file_results(output, window))


def file_results(output: str, window: str) -> list[tuple[str, dict]]:
    """(outputs directory name, source.json) of every file done in a window, by name."""
    directory = FileSystems.join(output, window)
    if files.is_local(output):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return []
        paths = [(n, os.path.join(directory, n, SOURCE_FILE)) for n in names if not n.startswith(".")]
    else:
        pattern = FileSystems.join(_escape(directory), "*", SOURCE_FILE)
        metas = FileSystems.match([pattern])[0].metadata_list
        paths = sorted((m.path.rsplit("/", 2)[-2], m.path) for m in metas)
    results = []
    for name, path in paths:
        doc = read_json(path)
        if doc is not None:
            results.append((name, doc))
    return results


def assembled_result(output: str, window: str) -> dict | None:
    """``assembled.json`` of a window's conversations assembled from call logs, if it has them."""
    return read_json(FileSystems.join(output, window, ASSEMBLED_DIR, ASSEMBLED_FILE))


def window_partial(output: str, window: str) -> tuple[dict, int]:
    """The sum of the partial summaries of a window's files (and of its assembled
    conversations), and how many files."""
    total, results, _ = _window_totals(output, window)
    return total, len(results)


def _window_totals(output: str, window: str) -> tuple[dict, list[tuple[str, dict]], dict | None]:
    """A window's summed partial summaries, with its files' results and its ``assembled.json``
    (None without one), which they were summed from."""
    total: dict = {}
    results = file_results(output, window)
    for _, doc in results:
        total = summaries.merge_into(total, doc["partial"])
    assembled = assembled_result(output, window)
    if assembled is not None:
        total = summaries.merge_into(total, assembled["partial"])
    return total, results, assembled


def assembled_from(doc: dict, window: str) -> set[str]:
    """The window's own outputs directories whose pieces its assembly read (``assembled.json``:
    ``window_files``; before it was written, the window's entries of ``read_from``)."""
    if "window_files" in doc:
        return set(doc["window_files"])
    prefix = window + "/"
    return {d[len(prefix) :] for d in doc.get("read_from", ()) if d.startswith(prefix)}


def not_assembled(window: str, results: list[tuple[str, dict]], assembled: dict | None) -> tuple[int, int]:
    """(files, pieces) of a window's committed call-log pieces that no assembly of it read: a
    window assembled before they were committed, or never."""
    read = assembled_from(assembled, window) if assembled is not None else set()
    left = [doc for name, doc in results if doc.get("call_groups") and name not in read]
    return len(left), sum(doc.get("files", {}).get("calls", {}).get("records", 0) for doc in left)


#: The final summary's key for call-log pieces that reached no output (absent when none).
NOT_ASSEMBLED = "call_log_pieces_not_assembled"


def final_summary(output: str, settings: Settings) -> dict:
    """``summary.json`` of a streaming output: every processed file's partial, summed, finalized.

    Not ``accounted`` when a window holds call-log pieces its assembly did not read (or has no
    assembly): those records are counted as handed on to a conversation that was never written
    (``NOT_ASSEMBLED`` says how many, in which windows)."""
    total: dict = {}
    left_windows: list[str] = []
    left_files = left_pieces = 0
    for window in window_names(output):
        partial, results, assembled = _window_totals(output, window)
        total = summaries.merge_into(total, partial)
        left, pieces = not_assembled(window, results, assembled)
        if left:
            left_windows.append(window)
            left_files += left
            left_pieces += pieces
    doc = summaries.finalize_run(total, settings)
    if left_files:
        doc[NOT_ASSEMBLED] = {"windows": left_windows, "files": left_files, "pieces": left_pieces}
        doc["accounted"] = False
    return doc


def not_assembled_line(doc: dict) -> str | None:
    """The error line for a final summary whose call-log pieces were not all assembled."""
    missing = doc.get(NOT_ASSEMBLED)
    if not missing:
        return None
    windows = missing["windows"]
    return (
        f"{missing['pieces']:,} call-log piece(s) of {missing['files']:,} file(s) were committed but never "
        f"assembled into a conversation (window(s) {', '.join(windows[:3])}{' ...' if len(windows) > 3 else ''}): "
        "not accounted for"
    )


def parse_window(window: str) -> tuple[float, float]:
    """A window's start and end, in seconds since the epoch."""
    import datetime

    def seconds(text: str) -> float:
        moment = datetime.datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        return moment.timestamp()

    start, end = window.split("-")
    return seconds(start), seconds(end)


def read_watch_status(output: str) -> dict | None:
    return read_json(FileSystems.join(output, WATCH_STATUS_FILE))


def window_progress(window: str, records_in: int, files_done: int, status: dict | None) -> dict:
    """A window's progress: records per second of the window, files done in it, and the
    watcher's files pending (and the age of the oldest) when the window's summary was written."""
    start, end = parse_window(window)
    return {
        "rows_per_s": round(records_in / max(end - start, 1e-9), 3),
        "files_done": files_done,
        "files_pending": int(status["files_pending"]) if status else 0,
        "oldest_pending_age_s": float(status["oldest_pending_age_s"]) if status else 0.0,
    }


def window_summary(output: str, window: str, settings: Settings, status: dict | None, **extra) -> dict:
    """``OUTPUT/<window>/summary.json``: the window's files' totals, its name and progress."""
    partial, count = window_partial(output, window)
    doc = summaries.finalize_run(partial, settings)
    doc["window"] = window
    doc["progress"] = {**window_progress(window, doc["records_in"], count, status), **extra}
    return doc


def write_window_summary(output: str, window: str, settings: Settings, status: dict | None, **extra) -> dict:
    doc = window_summary(output, window, settings, status, **extra)
    write_json(FileSystems.join(output, window, SUMMARY_FILE), doc, output)
    return doc


def rebuild_windows(output: str, settings: Settings, force: Iterable[str] = ()) -> list[str]:
    """Rewrite the summary of every window whose summary is missing or does not count all of
    its files (a run stopped before the window closed), and of the windows ``force`` names
    (their conversations were assembled just now); the windows rewritten."""
    status = read_watch_status(output)
    forced = set(force)
    rebuilt = []
    for window in window_names(output):
        doc = read_json(FileSystems.join(output, window, SUMMARY_FILE))
        count = file_count(output, window)
        if doc is not None and doc.get("progress", {}).get("files_done") == count and window not in forced:
            continue
        kept = doc["progress"] if doc and "progress" in doc else status
        write_window_summary(output, window, settings, kept, rebuilt=True)
        rebuilt.append(window)
    return rebuilt
