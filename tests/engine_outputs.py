"""Inputs and output comparisons shared by the tests that run convnorm on other engines and
graphs (test_flink.py, test_dask.py, test_graphs.py): the same input must give the same bytes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "conversations.jsonl"
FORMAT_SAMPLES = ROOT / "tests" / "data" / "formats"
#: The smallest --shard-bytes convnorm accepts: the multi-file input's big file is cut into ranges.
SHARD_BYTES = 65536
OUTPUTS = ("normalized", "drops", "dead_letter", "summary.json")


def write_multi_input(directory: Path) -> list[str]:
    """The sample's lines over five files of three kinds; one file big enough for several shards."""
    directory.mkdir()
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    n = len(lines)
    big, gz, arr = lines[: n // 2], lines[n // 2 : 3 * n // 4], lines[3 * n // 4 : 7 * n // 8]
    rest = lines[7 * n // 8 :]
    # An invalid line and a blank line in the big file; both must be accounted for.
    (directory / "a.jsonl").write_bytes(
        b"".join(big[:10]) + b'{"id": "broken", "messages": [\n' + b"\n" + b"".join(big[10:])
    )
    (directory / "b.jsonl.gz").write_bytes(gzip.compress(b"".join(gz), mtime=0))
    parsed, unparsed = [], []
    for line in arr:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            unparsed.append(line)  # the sample's malformed lines: kept, in a JSONL file
    (directory / "c.json").write_text(json.dumps(parsed, ensure_ascii=False))
    (directory / "d.jsonl").write_bytes(b"".join(unparsed + rest[: len(rest) // 2]))
    (directory / "e.jsonl").write_bytes(b"".join(rest[len(rest) // 2 :]))
    assert (directory / "a.jsonl").stat().st_size > 3 * SHARD_BYTES
    return [str(directory / "*.jsonl"), str(directory / "*.jsonl.gz"), str(directory / "*.json")]


def write_mixed_input(directory: Path) -> list[str]:
    """``write_multi_input`` plus every other input kind and provider format: the per-format
    samples as one zstd-compressed JSONL file, and ShareGPT records as Parquet rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    patterns = write_multi_input(directory)
    lines = b"".join(
        (FORMAT_SAMPLES / f"{name}.jsonl").read_bytes()
        for name in ("anthropic", "gemini", "openai-responses", "openai")
    )
    (directory / "f.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    rows = [json.loads(line) for line in (FORMAT_SAMPLES / "sharegpt.jsonl").read_text().splitlines() if line.strip()]
    pq.write_table(pa.Table.from_pylist(rows), directory / "g.parquet")
    # And call logs, whose conversations are assembled from their calls (a shuffle).
    write_call_log_input(directory / "calls")
    calls = [str(directory / "calls" / "*.json"), str(directory / "calls" / "*.jsonl")]
    return [*patterns, str(directory / "*.jsonl.zst"), str(directory / "*.parquet"), *calls]


def tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def assert_same_outputs(ours: Path, reference: Path, label: str) -> None:
    for name in OUTPUTS:
        a, b = ours / name, reference / name
        if name.endswith(".json"):
            assert a.read_bytes() == b.read_bytes(), f"{label}: {name} differs from FnApiRunner's"
            continue
        mine, theirs = tree(a), tree(b)
        assert list(mine) == list(theirs), f"{label}: {name}/ holds other files than FnApiRunner's"
        for path in mine:
            assert mine[path] == theirs[path], f"{label}: {name}/{path} differs from FnApiRunner's"


CALL_LOGS = ROOT / "tests" / "data" / "calllogs"
#: Label exports (Langfuse scores, LangSmith feedback, Phoenix annotations) of those call logs.
LABELS = ROOT / "tests" / "data" / "labels"
#: Fixture folders of span attributes as instrumentations assert them, not export records.
ATTRIBUTE_FIXTURES = frozenset({"openinference-genai"})


#: Whole records carrying labels of their own (the TRL sinks' fixtures), beside the label exports.
WHOLE_LABELLED = ("conversations.jsonl", "regenerations.jsonl")


def write_call_log_input(directory: Path) -> list[str]:
    """Every call-log fixture (tests/data/calllogs: each export family's own samples) and label
    export (tests/data/labels) in one directory, beside a file of whole conversations: what a mixed directory of exports gives."""
    directory.mkdir(parents=True)
    for path in sorted(p for p in CALL_LOGS.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")):
        if path.parent.name in ATTRIBUTE_FIXTURES:
            continue
        (directory / f"{path.parent.name}-{path.name}").write_bytes(path.read_bytes())
    for path in sorted(LABELS.glob("*.jsonl")):
        if path.name not in WHOLE_LABELLED:  # label exports only: the call logs' labels
            (directory / f"labels-{path.name}").write_bytes(path.read_bytes())
    (directory / "whole-conversations.jsonl").write_bytes(b"".join(SAMPLE.read_bytes().splitlines(True)[:20]))
    return [str(directory / "*.json"), str(directory / "*.jsonl")]
