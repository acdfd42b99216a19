"""An output directory's files as bytes, for comparing runs (tests/test_outputs.py, test_cli.py).

``report.html`` says when the run was made, so it differs between runs, and with it its entry
in the manifest (size and sha256): both are left out, everything else must be byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.io.output_names import MANIFEST_FILE, REPORT_FILE


def tree(directory: Path) -> dict[str, bytes]:
    found = {}
    for path in sorted(directory.rglob("*")):
        name = str(path.relative_to(directory))
        if not path.is_file() or name == REPORT_FILE:
            continue
        data = path.read_bytes()
        if name == MANIFEST_FILE:
            manifest = json.loads(data)
            manifest["files"] = [e for e in manifest["files"] if e["path"] != REPORT_FILE]
            data = json.dumps(manifest, indent=1).encode()
        found[name] = data
    return found
