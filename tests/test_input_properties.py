"""Random bytes, random JSON, random Parquet rows in random containers, fed to the reader and
record path (many examples) and to the whole job (a few): nothing crashes, every record read
is counted in exactly one output, and every record that is JSON with a message list ends
normalized or dead-lettered with a reason from the closed list.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from pipeline.cli.main import main
from pipeline.io.planning import plan_shards
from pipeline.io.read_shard import read_shard
from pipeline.io.shard import Blank
from transforms.record.record_settings import Settings
from transforms.record.record_steps import DEAD_LETTER_REASONS
from transforms.record.records import normalize_batch

MAX_RECORD_BYTES = 4096  # small, so that some random records are over it

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**19, max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system", "", "robot"])},
        optional={
            "content": st.none() | st.text(max_size=30) | st.integers() | json_values,
            "tool_call_id": st.sampled_from(["c1", "c2", "", 7]),
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {"id": st.sampled_from(["c1", "c2", "c3", ""])},
                    optional={"function": st.fixed_dictionaries({"name": st.text(max_size=5)})},
                ),
                max_size=2,
            ),
        },
    ),
    max_size=6,
)
conversations = st.fixed_dictionaries(
    {"messages": messages},
    optional={
        "id": st.text(max_size=6) | st.integers() | st.integers(min_value=10**30, max_value=10**4000),
        "meta": json_values,
        "pad": st.text(min_size=0, max_size=6000),
    },
)

#: (line bytes, is a JSON object with a message list)
lines = st.one_of(
    conversations.map(lambda c: (json.dumps(c).encode(), True)),
    json_values.map(lambda v: (json.dumps(v).encode(), isinstance(v, dict) and isinstance(v.get("messages"), list))),
    st.binary(max_size=60).map(lambda b: (b.replace(b"\n", b" "), False)),
    st.sampled_from(
        [
            b'{"messages":[],"x":1e400,"y":123456789012345678901}',
            b'{"messages":[],"x":NaN}',
            b'{"messages":[],"n":' + b"9" * 100_001 + b"}",
            b"",
            b"   ",
        ]
    ).map(lambda b: (b, False)),
    st.just((b'{"id":' + b"7" * 5000 + b',"messages":[{"role":"user","content":' + b"8" * 6000 + b"}]}", True)),
)

parquet_rows = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.none() | st.text(max_size=6),
            "messages": st.none()
            | st.lists(
                st.fixed_dictionaries(
                    {
                        "role": st.sampled_from(["user", "assistant", "tool"]),
                        "content": st.none() | st.text(max_size=20),
                    }
                ),
                max_size=4,
            ),
            "score": st.floats(),  # NaN and infinities included
            "day": st.integers(min_value=-800_000, max_value=3_000_000),  # past 9999 too
        }
    ),
    min_size=1,
    max_size=30,
)

PARQUET_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("score", pa.float64()),
        ("day", pa.date32()),
    ]
)

containers = st.sampled_from([".jsonl", ".jsonl.gz", ".jsonl.zst", ".json", ".parquet"])


#: A line ends at LF, CR LF or a CR alone, as the reader reads JSON Lines.
_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)")
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _jsonl_body(lines: list[tuple[bytes, bool]]) -> tuple[bytes, dict[int, bool]]:
    """The JSON Lines file of ``lines``, each ended by an LF, and {position: is JSON with a
    message list} of the records the reader finds in it: a random line holding a CR alone is
    two records (or one and a blank line), and a UTF-8 byte-order mark opening the file is not
    part of its first record. Hypothesis also draws the constants of the modules loaded (a CR,
    the marks), so the examples differ between xdist workers: this must hold for any bytes."""
    if lines and lines[0][0][:2] in UTF16_BOMS:
        lines = [(b"", False), *lines]  # a UTF-16 mark would make the file UTF-16: not modelled
    body = b"".join(line + b"\n" for line, _ in lines)
    expected, position = {}, 0
    for line, has_messages in lines:
        for piece in _LINE.finditer(line + b"\n"):
            start, text = position + piece.start(), piece.group()
            if start == 0 and text.startswith(UTF8_BOM):
                start, text = len(UTF8_BOM), text[len(UTF8_BOM) :]
            if text.strip():
                expected[start] = has_messages
        position += len(line) + 1
    return body, expected


@st.composite
def input_files(draw):
    """[(suffix, file bytes, {position: is JSON with a message list}, trailing garbage?)]"""
    files = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        suffix = draw(containers)
        if suffix == ".parquet":
            rows = draw(parquet_rows)
            table = pa.Table.from_pydict(
                {
                    "id": [r["id"] for r in rows],
                    "messages": [r["messages"] for r in rows],
                    "score": [r["score"] for r in rows],
                    "day": pa.array([r["day"] for r in rows], pa.int32()).cast(pa.date32()),
                },
                schema=PARQUET_SCHEMA,
            )
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink, row_group_size=draw(st.integers(min_value=1, max_value=16)))
            expected = {i: r["messages"] is not None for i, r in enumerate(rows)}
            files.append((suffix, sink.getvalue().to_pybytes(), expected, False))
            continue
        if suffix == ".json":
            values = draw(st.lists(conversations | json_values, max_size=8))
            data = json.dumps(values).encode()
            expected = {i: isinstance(v, dict) and isinstance(v.get("messages"), list) for i, v in enumerate(values)}
            files.append((suffix, data, expected, False))
            continue
        body, expected = _jsonl_body(draw(st.lists(lines, max_size=12)))
        garbage = suffix != ".jsonl" and draw(st.booleans())
        if suffix == ".jsonl.gz":
            data = gzip.compress(body)
        elif suffix == ".jsonl.zst":
            data = zstandard.ZstdCompressor().compress(body)
        else:
            data = body
        files.append((suffix, data + (b"\x00\x01garbage" if garbage else b""), expected, garbage))
    return files


def _write(directory: Path, files) -> dict[str, tuple[dict, bool]]:
    directory.mkdir(parents=True)
    written = {}
    for i, (suffix, data, expected, garbage) in enumerate(files):
        path = directory / f"f{i}{suffix}"
        path.write_bytes(data)
        written[str(path)] = (expected, garbage)
    return written


def _check_outcomes(written, normalized_at: set, letters: list[dict]) -> None:
    dead_at = {(d["source"], d["position"]) for d in letters}
    assert len(dead_at) == len(letters), "two dead letters at one position"
    assert not normalized_at & dead_at, "a record both normalized and dead-lettered"
    assert all(d["reason"] in DEAD_LETTER_REASONS and d["reason"] != "internal_error" for d in letters), letters
    for source, (expected, garbage) in written.items():
        for position, has_messages in expected.items():
            key = (source, position)
            # Every record read ends somewhere; one with a message list may be dead-lettered
            # only with a reason (checked above), never lost.
            assert key in normalized_at or key in dead_at, (key, has_messages)
        extra = {p for s, p in normalized_at | dead_at if s == source} - set(expected)
        unreadable = [d for d in letters if d["source"] == source and d["position"] in extra]
        assert len(extra) == len(unreadable) == (1 if garbage else 0), (source, extra)
        assert all(d["reason"] == "unreadable_file" for d in unreadable)


#: Files whose lines a CR alone cuts, or that open with a byte-order mark: always run, since
#: Hypothesis draws such lines only when the modules loaded happen to make it.
_CUT = _jsonl_body([(UTF8_BOM + b"\rx", False), (b"a\rb", False), (b"{}\r\r", False)])
_UTF16_MARKED = _jsonl_body([(b"\xff\xfe\r", False), (b"\r" + json.dumps({"messages": []}).encode(), True)])
CUT_LINES = [(".jsonl", *_CUT, False), (".jsonl.gz", gzip.compress(_UTF16_MARKED[0]), _UTF16_MARKED[1], False)]


# The suite's profile (tests/conftest.py), fewer examples: each one writes and reads files.
@settings(max_examples=min(60, settings.default.max_examples))
@given(input_files(), st.sampled_from(["auto", "openai", "flat"]))
@example(CUT_LINES, "auto")
def test_reader_and_record_path_account_for_everything(files, input_format):
    directory = Path(tempfile.mkdtemp(prefix="convnorm-prop-"))
    try:
        written = _write(directory / "in", files)
        items = [
            item
            for shard in plan_shards([str(directory / "in" / "*")])
            for item in read_shard(shard, MAX_RECORD_BYTES)
            if not isinstance(item, Blank)
        ]
        result = normalize_batch(items, Settings(input_format=input_format))
        assert len(items) == len(result.records) + len(result.dead_letters)
        _check_outcomes(written, {(m["source"], m["position"]) for m in result.metrics}, result.dead_letters)
        for metrics in result.metrics:
            for count in metrics.get("non_finite_nulled", {}).values():
                assert count >= 1
        for record in result.records:
            json.dumps(record, allow_nan=False)  # nothing non-finite is written
    finally:
        shutil.rmtree(directory)


def _refuse(name: str):
    raise ValueError(f"{name} written")


def _jsonl(directory: Path) -> list[dict]:
    # Split on "\n" only: str.splitlines also splits at U+2028 and U+0085, which JSON text
    # holds unescaped.
    return [
        json.loads(line) for p in sorted(directory.glob("part-*.jsonl")) for line in p.read_bytes().split(b"\n") if line
    ]


# Each example is a whole run (seconds): a few examples (never more than the suite's profile
# allows), no shrinking, the failing example is reported as is.
@pytest.mark.slow
@settings(max_examples=min(6, settings.default.max_examples), phases=[Phase.explicit, Phase.generate])
@given(input_files())
def test_the_job_never_crashes_and_its_files_account_for_every_record(files):
    directory = Path(tempfile.mkdtemp(prefix="convnorm-prop-"))
    try:
        written = _write(directory / "in", files)
        out = directory / "out"
        status = main(
            [
                "--input",
                str(directory / "in" / "*"),
                "--output",
                str(out),
                f"--max-record-bytes={MAX_RECORD_BYTES}",
                "--batch-size=7",
            ]
        )
        summary = json.loads((out / "summary.json").read_text())
        normalized, drops, letters = _jsonl(out / "normalized"), _jsonl(out / "drops"), _jsonl(out / "dead_letter")
        assert status == (0 if summary["records_out"] or not summary["records_in"] else 1)
        assert (
            summary["records_in"] == len(normalized) + len(letters) == summary["records_out"] + summary["dead_letters"]
        )
        assert len(drops) == len(normalized)
        _check_outcomes(written, {(m["source"], m["position"]) for m in drops}, letters)
        for part in (out / "normalized").glob("part-*.jsonl"):
            for record in part.read_bytes().split(b"\n"):
                if record:
                    json.loads(record, parse_constant=_refuse)  # no NaN / Infinity written
    finally:
        shutil.rmtree(directory)
