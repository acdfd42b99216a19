"""The core is pure Python: importing it must not pull in Apache Beam; importing any
convnorm module changes no global state (root logger, GC).

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
print(json.dumps({{"loaded": loaded, "normalize": "transforms.core.normalize" in sys.modules}}))
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
    report = _probe(
        "import transforms.core.normalize\nfrom transforms.core.normalize import normalize_conversation\n"
        "normalize_conversation([{'role': 'user', 'content': {'a': 1}}])"
    )
    assert report["normalize"] is True
    assert report["loaded"] == []


#: The modules that may import Beam: the DoFns and composites, the job around them. Every
#: other module of ``transforms`` (found on disk, so a new one is covered as it is added) and
#: the command line's import-time helpers must not.
BEAM_MODULES = {"transforms.conversations"}
PURE_PIPELINE_MODULES = [
    "pipeline",
    "pipeline.console",
    "pipeline.testhooks",
    "pipeline.cli",
    "pipeline.cli.main",
    "pipeline.cli.help",
    "pipeline.config",
    "pipeline.config.flags",
    "pipeline.config.presets",
    "pipeline.config.checks",
    "pipeline.config.precheck",
    "pipeline.config.beam_flags",
    "pipeline.config.dask_flags",
    "pipeline.execution.interrupts",
    "pipeline.runners",
    "pipeline.runners.private_network",
    "pipeline.runners.sdk_worker",
]


def _module_names(package: str) -> list[str]:
    names = []
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _pure_modules() -> list[str]:
    return [m for m in _module_names("transforms") if m not in BEAM_MODULES] + PURE_PIPELINE_MODULES


def test_every_pure_module_is_found():
    found = _pure_modules()
    for name in (
        "transforms.core.normalize",
        "transforms.core.ledger",
        "transforms.core.validate",
        "transforms.repairs.profiles",
        "transforms.record.records",
        "transforms.core.jsontext",
        "transforms.record.inputs",
        "transforms.record.record_settings",
        "transforms.record.output_records",
        "transforms.record.record_steps",
        "transforms.record.validate_step",
        "transforms.core.tool_blocks",
        "transforms.formats.openai",
        "pipeline.console",
        "pipeline.config.checks",
    ):
        assert name in found


def test_no_module_that_must_stay_pure_imports_apache_beam():
    report = _probe("".join(f"import {name}\n" for name in _pure_modules()))
    assert report["loaded"] == []


_STATE_PROBE = """
import gc, json, logging, sys
import apache_beam  # Beam's own import-time changes are not ours: taken before the snapshot
def state():
    root = logging.getLogger()
    return [repr(root.filters), repr(root.handlers), root.level, gc.isenabled(), gc.get_freeze_count(),
            gc.get_threshold(), sorted(n for n, lg in logging.Logger.manager.loggerDict.items()
                                       if isinstance(lg, logging.Logger) and (lg.filters or lg.handlers))]
before = state()
{imports}
print(json.dumps({{"before": before, "after": state()}}))
"""


def test_importing_convnorm_modules_changes_no_global_state():
    modules = _module_names("transforms") + _module_names("pipeline")
    modules = [m for m in modules if m != "pipeline.__main__"]  # running it is the command line
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    completed = subprocess.run(
        [sys.executable, "-c", _STATE_PROBE.format(imports="".join(f"import {m}\n" for m in modules))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["after"] == report["before"]


def test_the_probe_would_see_apache_beam():
    # Control: the same probe does report Beam when something imports it, so the check above
    # cannot pass vacuously.
    report = _probe("import apache_beam")
    assert "apache_beam" in report["loaded"]


#: Calls that reach the filesystem. The pure parts of ``transforms`` take what they read from
#: the driver (``--chat-template``'s files: ``pipeline.config.chat_template_files``).
FILE_CALLS = frozenset({"open", "fdopen", "stat", "lstat", "listdir", "scandir", "read_text", "read_bytes"})


def _file_calls(source: str) -> list[str]:
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in FILE_CALLS:
                found.append(f"{name}() at line {node.lineno}")
    return found


def test_the_pure_parts_of_transforms_open_no_file():
    assert _file_calls("import os\nos.stat('x')\nwith open('y') as f: pass\n") == [
        "stat() at line 2",
        "open() at line 3",
    ]
    pure = [
        path
        for path in sorted((ROOT / "transforms").rglob("*.py"))
        if ".".join(path.relative_to(ROOT).with_suffix("").parts) not in BEAM_MODULES
    ]
    assert len(pure) > 50
    found = {str(p.relative_to(ROOT)): _file_calls(p.read_text()) for p in pure}
    assert {path: calls for path, calls in found.items() if calls} == {}
