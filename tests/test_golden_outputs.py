"""Byte-for-byte guard for refactors: every sink and profile over the bundled samples.

The expected files in ``tests/data/golden`` were generated from the code before a refactor
that must not change behaviour (one concept, one home). Every input line of
``samples/conversations.jsonl`` and ``samples/formats/*.jsonl`` goes through the per-record
path with each writer and each profile (with the sendability check on) and through the
validate step; the outputs, metrics and dead letters are compared as bytes. The bundled sample
is also run through the command line and its output files compared.

Regenerate only on purpose, when a change is meant to alter outputs:
``CONVNORM_REGEN_GOLDEN=1 python -m pytest tests/test_golden_outputs.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from transforms.core.jsontext import dumps_line
from transforms.formats import WRITERS
from transforms.record import records
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.validate_step import check_record
from transforms.repairs.profiles import PROFILES

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "data" / "golden"
SAMPLE = ROOT / "samples" / "conversations.jsonl"
FORMAT_SAMPLES = sorted((ROOT / "samples" / "formats").glob("*.jsonl"))
#: The MEM-5 vectors' inputs as flat records: the tool-block edge cases, in both profiles.
VECTORS = Path(__file__).resolve().parent / "data" / "spec" / "vectors.jsonl"
REGEN = os.environ.get("CONVNORM_REGEN_GOLDEN") == "1"
#: The per-record entry point: renamed once, so found by either name.
BATCH = records.normalize_batch


def _raw_records(path: Path) -> list:
    data = path.read_bytes()
    if path == VECTORS:
        vectors = [json.loads(line) for line in data.splitlines() if line.strip()]
        data = b"".join(dumps_line({"id": v["name"], "messages": v["input"]}) + b"\n" for v in vectors)
    found, offset = [], 0
    for line in data.splitlines(keepends=True):
        if line.strip():
            found.append(RawRecord(path.name, offset, line))
        offset += len(line)
    return found


def _section(title: str, result) -> bytes:
    parts = [f"## {title}\n".encode()]
    for name, rows in (("output", result.records), ("metrics", result.metrics), ("dead_letter", result.dead_letters)):
        parts.extend(name.encode() + b" " + dumps_line(row) + b"\n" for row in rows)
    return b"".join(parts)


def _record_path_bytes(path: Path) -> bytes:
    raws = _raw_records(path)
    parts = []
    for sink in sorted(WRITERS):
        for profile in PROFILES:
            # --trailing keep: the outputs as they were before the training sinks trimmed by
            # default (tests/test_training.py holds the trimming).
            settings = Settings(sink=sink, profile=profile, model="golden-model", check=True, trailing="keep")
            parts.append(_section(f"sink={sink} profile={profile}", records.normalize_batch(raws, settings, taken={})))
    parts.append(_section("validate", records.normalize_batch(raws, Settings(), check_record)))
    return b"".join(parts)


def _compare(name: str, actual: bytes) -> None:
    expected_path = GOLDEN / name
    if REGEN:
        expected_path.parent.mkdir(parents=True, exist_ok=True)
        expected_path.write_bytes(actual)
    assert expected_path.exists(), f"no golden file {name}: generate it from the code before the change"
    expected = expected_path.read_bytes()
    if actual != expected:
        for number, (a, e) in enumerate(zip(actual.splitlines(), expected.splitlines()), 1):
            assert a == e, f"{name} line {number} differs"
        assert actual == expected, f"{name}: different number of lines"


def _digests(data: bytes) -> bytes:
    """One digest per section and per kind of row (the full text runs to megabytes)."""
    digests = {}
    for block in data.split(b"\n## "):
        title, _, body = block.removeprefix(b"## ").partition(b"\n")
        for kind in ("output", "metrics", "dead_letter"):
            rows = [line for line in body.splitlines() if line.startswith(kind.encode() + b" ")]
            digests[f"{title.decode()} {kind} ({len(rows)})"] = hashlib.sha256(b"\n".join(rows)).hexdigest()
    return json.dumps(digests, indent=1, sort_keys=True).encode() + b"\n"


@pytest.mark.parametrize("path", [*FORMAT_SAMPLES, SAMPLE, VECTORS], ids=lambda p: p.stem)
def test_record_path_outputs_are_unchanged(path):
    _compare(f"{path.stem}.record_digests.json", _digests(_record_path_bytes(path)))


def test_bundled_sample_cli_outputs_are_unchanged(tmp_path, monkeypatch):
    from pipeline.cli.main import main

    # A relative input: records name their source file, and the checkout's place must not matter.
    monkeypatch.chdir(SAMPLE.parent.parent)
    out = tmp_path / "out"
    assert main(["--input", f"{SAMPLE.parent.name}/{SAMPLE.name}", "--output", str(out), "--check"]) == 0
    digests = {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        # The manifest names tmp paths; report.html says when the run was made.
        if p.is_file() and p.name not in ("_convnorm_manifest.json", "report.html")
    }
    _compare("sample_cli_digests.json", json.dumps(digests, indent=1, sort_keys=True).encode() + b"\n")
