"""A pause point for tests that kill a run at a chosen moment (read, reading, write, finalize).

With ``CONVNORM_TEST_PAUSE_AT=<point>`` and ``CONVNORM_TEST_PAUSE_FILE=<path>`` in the
environment, the first process that reaches ``pause_point(<point>)`` creates ``<path>`` and
sleeps (``CONVNORM_TEST_PAUSE_SECONDS``, default 120), so a test can wait for the file and then
``kill -9`` the run at exactly that point (tests/test_outputs.py), let a stop outlast it, or
change the output directory under it and delete the file to let it go on at once
(tests/test_ownership.py), or change an input while a shard of it is being read (``reading``:
its file open, a batch handed on; tests/test_changing_inputs.py). Without the variables it
does nothing. Worker processes inherit the environment, so the points inside DoFns work in
multi-process mode too.
"""

from __future__ import annotations

import os
import time

PAUSE_AT = "CONVNORM_TEST_PAUSE_AT"
PAUSE_FILE = "CONVNORM_TEST_PAUSE_FILE"
#: Seconds to pause (default PAUSE_SECONDS).
PAUSE_SECONDS_ENV = "CONVNORM_TEST_PAUSE_SECONDS"
#: A paused run resumes after this long if nobody killed it (a test that forgot it).
PAUSE_SECONDS = 120


#: Points this process paused at already: a resumed run goes on without pausing again.
_PAUSED: set[str] = set()


def pause_point(point: str) -> None:
    if os.environ.get(PAUSE_AT) != point or point in _PAUSED:
        return
    path = os.environ.get(PAUSE_FILE)
    if not path:
        return
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # only the first one pauses
    except FileExistsError:
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    _PAUSED.add(point)
    deadline = time.monotonic() + float(os.environ.get(PAUSE_SECONDS_ENV) or PAUSE_SECONDS)
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
