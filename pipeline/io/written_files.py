"""The files a writer reports: each part file's temporary name, records, bytes and sha256
(``WrittenFile``), their final names, and the lists of them kept in the run's temporary
directory for finalize (``write_reports``, ``report_path``)."""

from __future__ import annotations

from typing import NamedTuple

from apache_beam.io.filesystems import FileSystems

from pipeline.io import files
from pipeline.io.object_store import WorkerFilesystems
from transforms.core.jsontext import document_bytes


def temp_name(shard: int, start: int, attempt: str) -> str:
    """A part file's temporary name: its shard, first byte offset and a name unique per attempt."""
    return f"{shard:05d}-{start:015d}-{attempt}"


class WrittenFile(NamedTuple):
    """A file a writer reports: its shard, first byte offset, temporary path, and its measure
    taken while writing (records, bytes, sha256), which finalize checks and the manifest keeps."""

    shard: int
    start: int
    temp: str
    records: int
    size: int
    sha256: str


def final_names(written: list[WrittenFile], directory: str, extension: str) -> list[tuple[WrittenFile, str]]:
    """(file, final path) pairs: ``part-<shard>`` or, if a shard spans files, ``part-<shard>-<start>``."""
    by_shard: dict[int, list[WrittenFile]] = {}
    for file in written:
        by_shard.setdefault(file.shard, []).append(file)
    # The directory's prefix, joined once: a filesystem lookup per file cost seconds at 100,000.
    prefix = FileSystems.join(directory, "")
    moves = []
    for shard in sorted(by_shard):
        parts = sorted(by_shard[shard], key=lambda f: f.start)
        for file in parts:
            name = f"part-{shard:05d}" if len(parts) == 1 else f"part-{shard:05d}-{file.start:015d}"
            moves.append((file, prefix + name + extension))
    return moves


def report_path(temp_root: str, name: str) -> str:
    """Where the run lists the files it wrote for output ``name``."""
    return FileSystems.join(temp_root, name + ".files.json")


def write_report(written: list, path: str) -> int:
    # Runs once all files of this output are written; rewriting it on a retry is harmless.
    rows = sorted((WrittenFile(*w)._asdict() for w in written), key=lambda r: (r["shard"], r["start"]))
    files.write_in_place(path, document_bytes(rows, indent=1, ascii_only=True, rows=True), replace=True)
    return len(rows)


def write_reports(
    written: list[tuple[str, WrittenFile]],
    temp_root: str,
    names: tuple[str, ...],
    filesystems: WorkerFilesystems | None = None,
) -> int:
    """Each output's list of the files written for it (``write_report``), an empty one for an
    output that wrote none; the number of files. ``filesystems``: the driver's, for a worker."""
    if filesystems is not None:
        filesystems.apply()
    by_name: dict[str, list[WrittenFile]] = {name: [] for name in names}
    for name, file in written:
        by_name[name].append(file)
    for name, files_written in by_name.items():
        write_report(files_written, report_path(temp_root, name))
    return len(written)


def write_summary(summary: dict, path: str, filesystems: WorkerFilesystems | None = None) -> dict:
    if filesystems is not None:
        filesystems.apply()
    files.write_in_place(path, document_bytes(summary), replace=True)
    return summary
