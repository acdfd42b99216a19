"""``COMMITS``: the one step that makes a streaming output processed (its directory renamed into
place), a landed file's or a window's assembled conversations', shut by the driver once it
stopped taking files."""

from __future__ import annotations

import threading

from pipeline.io import files


class _CommitGate:
    """The one step that makes a file processed (renaming its outputs into place), shut by the
    driver once it has cancelled the job: the workers of a Prism run are threads of this
    process, and no file may land in the outputs after the totals were summed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False

    def rename(self, temp: str, output: str, relative: str) -> bool:
        with self._lock:
            if self._closed:
                return False
            # Below the output never through a symbolic link, never over a name (docs/outputs.md).
            files.make_directories(output, relative.rsplit("/", 1)[0])
            files.move_into(temp, output, relative)
            return True

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def open(self) -> None:
        with self._lock:
            self._closed = False


COMMITS = _CommitGate()
