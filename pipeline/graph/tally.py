"""The workers' running counts, for the progress line of a local run.

The DoFns that read shards and write outputs keep a ``Tally`` each and now and then replace a
small JSON file with their running counts, in the directory named by ``CONVNORM_PROGRESS_DIR``
(set by ``pipeline.cli.progress.ProgressMonitor`` for local runs; without it a tally does
nothing). The monitor sums the files. No Beam import."""

from __future__ import annotations

import json
import os
import time

ENV = "CONVNORM_PROGRESS_DIR"
#: Seconds between two writes of a tally file.
FLUSH_EVERY = 0.5


class Tally:
    """Running counts of one DoFn instance, written now and then to the progress directory.

    A no-op unless ``CONVNORM_PROGRESS_DIR`` is set (local runs started by ``convnorm``).
    """

    def __init__(self, kind: str) -> None:
        directory = os.environ.get(ENV)
        self._path = os.path.join(directory, f"{kind}-{os.getpid()}-{id(self):x}.json") if directory else None
        self.counts: dict[str, int] = {}
        self.offsets: dict[int, int] = {}  # shard -> bytes read so far (shards being read)
        self.done: list[int] = []  # shards read to the end
        self._last = 0.0

    @property
    def enabled(self) -> bool:
        return self._path is not None

    def add(self, name: str, n: int = 1) -> None:
        if self._path:
            self.counts[name] = self.counts.get(name, 0) + n
            self.flush(force=False)

    def at(self, shard: int, offset: int) -> None:
        if self._path:
            self.offsets[shard] = offset
            self.flush(force=False)

    def shard_done(self, shard: int) -> None:
        if self._path:
            self.offsets.pop(shard, None)
            self.done.append(shard)
            self.flush()

    def flush(self, force: bool = True) -> None:
        if not self._path:
            return
        now = time.monotonic()
        if not force and now - self._last < FLUSH_EVERY:
            return
        self._last = now
        document = {"counts": self.counts, "offsets": self.offsets, "done": self.done}
        try:
            temp = self._path + ".tmp"
            with open(temp, "w") as handle:
                json.dump(document, handle)
            os.replace(temp, self._path)  # the monitor never reads half a file
        except OSError:
            self._path = None  # the run ended (directory gone) or the disk is full: stop trying
