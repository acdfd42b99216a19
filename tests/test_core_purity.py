"""The normalization core is pure Python: importing it must not pull in Apache Beam.

Checked in a fresh interpreter, because this test process may already have imported Beam
through other test modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
{imports}
loaded = sorted(m for m in sys.modules if m == "apache_beam" or m.startswith("apache_beam."))
print(json.dumps({{"loaded": loaded, "normalize": "transforms.normalize" in sys.modules}}))
"""


def _probe(imports: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE.format(imports=imports)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_importing_the_core_does_not_import_apache_beam():
    report = _probe("import transforms.normalize\nfrom transforms.normalize import normalize_conversation\n"
                    "normalize_conversation([{'role': 'user', 'content': {'a': 1}}])")
    assert report["normalize"] is True
    assert report["loaded"] == []


def test_the_probe_would_see_apache_beam():
    # Control: the same probe does report Beam when something imports it, so the check above
    # cannot pass vacuously.
    report = _probe("import apache_beam")
    assert "apache_beam" in report["loaded"]
