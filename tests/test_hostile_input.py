"""Real and hostile input: nothing lost or changed silently (the input half).

Each test here pins a hole that was open before: a container that lost its good records, a
value written as something it was not, a record that cost unbounded time or memory.
"""

from __future__ import annotations

import datetime
import gzip
import json
import re
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from pipeline.io.planning import plan_shards
from pipeline.io.read_shard import iter_batches, read_shard
from pipeline.io.shard import Blank
from transforms.core.jsontext import MAX_NUMBER_DIGITS, dumps_line
from transforms.record.inputs import Parsed, RawRecord, Unreadable
from transforms.record.record_settings import Settings
from transforms.record.records import process_record


def _line(i: int, text: str = "hello") -> bytes:
    return json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": f"{text} {i}"}]}).encode()


def _items(path, max_record_bytes=None, shard_bytes=1 << 26):
    kwargs = {} if max_record_bytes is None else {"max_record_bytes": max_record_bytes}
    out = []
    for shard in plan_shards([str(path)], shard_bytes):
        out.extend(item for item in read_shard(shard, **kwargs) if not isinstance(item, Blank))
    return out


def _process(line: bytes, **settings):
    return process_record(RawRecord("f.jsonl", 0, line), Settings(**settings))


# --------------------------------------------------------------------------------------------
# Zstandard like gzip


@pytest.mark.parametrize(
    "suffix, compress",
    [
        (".jsonl.zst", lambda data: zstandard.ZstdCompressor().compress(data)),
        (".jsonl.gz", gzip.compress),
    ],
)
def test_trailing_garbage_keeps_every_record_before_it(tmp_path, suffix, compress):
    lines = [_line(i) for i in range(20_000)]
    path = tmp_path / ("logs" + suffix)
    path.write_bytes(compress(b"\n".join(lines) + b"\n") + b"\x00garbage!")
    items = _items(path)
    assert [i.payload for i in items[:-1]] == [line + b"\n" for line in lines]
    assert isinstance(items[-1].payload, Unreadable) and items[-1].payload.reason == "unreadable_file"


def test_zstd_corrupt_second_frame_keeps_the_first(tmp_path):
    first = b"\n".join(_line(i) for i in range(3000)) + b"\n"
    second = zstandard.ZstdCompressor().compress(b"\n".join(_line(i) for i in range(3000, 6000)) + b"\n")
    corrupt = second[:20] + bytes(b ^ 0x5A for b in second[20:200]) + second[200:]
    path = tmp_path / "logs.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(first) + corrupt)
    items = _items(path)
    # The whole first frame is kept (and perhaps lines of the second decoded before the
    # corrupt block), then one dead letter for the rest.
    assert [i.payload for i in items[:3000]] == [_line(i) + b"\n" for i in range(3000)]
    assert [i.payload.reason for i in items if isinstance(i.payload, Unreadable)] == ["unreadable_file"]
    assert isinstance(items[-1].payload, Unreadable)


@pytest.mark.slow
def test_zstd_bomb_is_decoded_in_bounded_pieces():
    import io

    from pipeline.io.text_containers import _ZstdReader

    bomb = zstandard.ZstdCompressor(level=19).compress(b"\0" * (256 << 20))
    reader = _ZstdReader(io.BytesIO(bomb))
    buffer = bytearray(1 << 20)
    biggest = 0
    total = 0
    while n := reader.readinto(buffer):
        total += n
        biggest = max(biggest, sum(len(p) for p in reader._pending))
    assert total == 256 << 20
    assert biggest <= 40 << 20  # never the whole 256 MiB at once


def _blank_lines_and_items(path, shard_bytes=1 << 26):
    """(blank lines counted, the reader's items that are not records, the records) of a file."""
    blank, runs, records = 0, 0, []
    for shard in plan_shards([str(path)], shard_bytes):
        stats = {"records": 0, "blank_lines": 0}
        for batch in iter_batches(shard, 64, stats):
            records.extend(batch.items)
        blank += stats["blank_lines"]
        runs += sum(1 for item in read_shard(shard) if not isinstance(item, RawRecord))
    return blank, runs, records


@pytest.mark.parametrize(
    "suffix, compress",
    [
        (".jsonl.gz", gzip.compress),
        (".jsonl.zst", lambda data: zstandard.ZstdCompressor().compress(data)),
        (".jsonl", lambda data: data),
    ],
)
def test_runs_of_blank_lines_are_counted_exactly_in_bulk(tmp_path, suffix, compress):
    # Found: a 915 KB gzip of 200 MB of newlines took minutes of CPU, one blank line at a time
    # through the record path. A run of them is one item now, its lines counted exactly.
    a, b, c = _line(0), _line(1), _line(2)
    parts = [a, b"\n", b"\n" * 1_000_000, b"\r\n" * 1000, b" \t\n" * 5, b"\r" * 1000, b, b"\n\r\n \n", c, b"\n" * 3]
    data = b"".join(parts)
    path = tmp_path / ("blank" + suffix)
    path.write_bytes(compress(data))
    blank, runs, records = _blank_lines_and_items(path, shard_bytes=1 << 16)
    # Each CR alone before b ends an empty line; each line end after b and c ends one more.
    assert blank == 1_000_000 + 1000 + 5 + 1000 + 2 + 2
    assert [r.payload.strip() for r in records] == [a, b, c]
    assert [r.position for r in records] == [0, data.index(b), data.index(c)]
    assert runs < 200  # a plain file is cut into byte ranges, each with a run or two


@pytest.mark.parametrize("suffix, compress", [(".jsonl", lambda data: data), (".jsonl.gz", gzip.compress)])
def test_a_cr_lf_cut_by_the_streams_buffer_is_one_line_end(tmp_path, suffix, compress):
    # The reader's buffer holds 8 KB: the CR at offset 8191 is the last byte it holds.
    data = b"\n" * 8191 + b"\r\n" * 10 + _line(0)
    path = tmp_path / ("a" + suffix)
    path.write_bytes(compress(data))
    blank, _runs, records = _blank_lines_and_items(path)
    assert (blank, [r.position for r in records]) == (8191 + 10, [len(data) - len(_line(0))])


def _lines_as_written(data: bytes) -> tuple[int, list]:
    """(blank lines, (position, bytes) of each record) of JSONL bytes, one line at a time: lines
    end at LF, CR LF or a CR alone."""
    blank, records, start = 0, [], 0
    for match in re.finditer(rb"[^\r\n]*(?:\r\n|\r|\n|$)", data):
        line = match.group()
        if not line:
            continue
        if line.strip():
            records.append((match.start(), line))
        else:
            blank += 1
        start = match.end()
    assert start == len(data)
    return blank, records


@given(
    st.lists(st.sampled_from([b"\n", b"\r", b"\r\n", b" ", b"\t", b"\x0c", b"{}", b"[1]"]), max_size=80),
    st.sampled_from([1, 3, 300]),  # past 8 KB the runs cross the stream's buffer
    st.one_of(st.integers(min_value=1, max_value=40), st.sampled_from([4096, 8191, 1 << 20])),
    st.booleans(),
)
def test_blank_runs_match_reading_line_by_line_across_any_boundary(tmp_path_factory, pieces, repeat, shard_bytes, gz):
    data = b"".join(pieces) * repeat
    if shard_bytes < 4096:
        data = data[:4000]  # a shard per few bytes: keep the example quick
    path = tmp_path_factory.mktemp("blank") / ("a.jsonl.gz" if gz else "a.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    blank, _runs, records = _blank_lines_and_items(path, shard_bytes=shard_bytes) if data else (0, 0, [])
    assert (blank, [(r.position, r.payload) for r in records]) == _lines_as_written(data)


# --------------------------------------------------------------------------------------------
# Parquet row by row


def test_parquet_value_python_cannot_hold_dead_letters_its_row_only(tmp_path):
    days_past_9999 = (datetime.date(9999, 12, 31) - datetime.date(1970, 1, 1)).days + 10
    rows = 3000
    table = pa.table(
        {
            "id": [f"p{i}" for i in range(rows)],
            "messages": [[{"role": "user", "content": f"hi {i}"}] for i in range(rows)],
            "day": pa.array([days_past_9999 if i in (5, 2500) else 0 for i in range(rows)], pa.date32()),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=1000)
    items = _items(tmp_path / "t.parquet")
    assert [i.position for i in items] == list(range(rows))
    bad = {i.position: i.payload for i in items if isinstance(i.payload, Unreadable)}
    assert sorted(bad) == [5, 2500]
    assert all(p.reason == "unconvertible_value" and "'day'" in p.detail for p in bad.values())
    assert items[6].payload.value["id"] == "p6" and items[2999].payload.value["day"] == "1970-01-01"
    # The dead letter names the reason and the column.
    outcome = process_record(items[5], Settings())
    assert outcome.dead_letter["reason"] == "unconvertible_value"
    assert "'day'" in outcome.dead_letter["detail"] and "p5" in outcome.dead_letter["raw"]


def test_parquet_duplicate_column_names_dead_letter_every_row_naming_the_column(tmp_path):
    # Found: a file with two columns named `meta` read each row with the second one only (a
    # dict keeps one value per key): the first column's values were lost, silently.
    table = pa.Table.from_arrays(
        [
            pa.array(["a", "b"]),
            pa.array([[{"role": "user", "content": "hi"}]] * 2),
            pa.array(["first-1", "first-2"]),
            pa.array(["second-1", "second-2"]),
        ],
        names=["id", "messages", "meta", "meta"],
    )
    pq.write_table(table, tmp_path / "dup.parquet")
    items = _items(tmp_path / "dup.parquet")
    assert [i.position for i in items] == [0, 1]
    assert all(isinstance(i.payload, Unreadable) and i.payload.reason == "unconvertible_value" for i in items)
    assert all("'meta'" in i.payload.detail and "2 columns" in i.payload.detail for i in items)
    assert "first-1" in items[0].payload.raw and "second-1" in items[0].payload.raw
    outcome = process_record(items[0], Settings())
    assert outcome.dead_letter["reason"] == "unconvertible_value"


def test_parquet_non_finite_floats_are_null_and_counted_by_column(tmp_path):
    table = pa.table(
        {
            "id": ["a", "b"],
            "messages": [[{"role": "user", "content": "hi"}]] * 2,
            "score": [float("nan"), 1.5],
            "weights": [[float("inf"), float("-inf"), 0.5], [1.0]],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    first, second = _items(tmp_path / "t.parquet")
    assert first.payload == Parsed(
        {"id": "a", "messages": [{"role": "user", "content": "hi"}], "score": None, "weights": [None, None, 0.5]},
        {"score": 1, "weights": 2},
    )
    assert second.payload.nulled is None
    outcome = process_record(first, Settings())
    assert outcome.metrics["non_finite_nulled"] == {"score": 1, "weights": 2}
    assert b"Infinity" not in dumps_line(outcome.record) and b"NaN" not in dumps_line(outcome.record)
    assert "non_finite_nulled" not in process_record(second, Settings()).metrics


_MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
_SCHEMA = pa.schema([("id", pa.string()), ("messages", _MESSAGES)])


def _conversations(ids, content=lambda i: f"hi {i}"):
    return pa.table(
        {"id": [f"p{i}" for i in ids], "messages": [[{"role": "user", "content": content(i)}] for i in ids]},
        schema=_SCHEMA,
    )


def _write_row_groups(path, *tables, compression="snappy"):
    with pq.ParquetWriter(path, _SCHEMA, compression=compression) as writer:
        for table in tables:
            writer.write_table(table)  # one row group each


def _decoded_row_groups(monkeypatch) -> list:
    """The row groups the reader asks pyarrow to decode, in order."""
    asked: list = []
    original = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        asked.append(tuple(kwargs.get("row_groups") or ()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    return asked


def test_parquet_row_group_of_one_row_over_the_limit_is_a_dead_letter_never_decoded(tmp_path, monkeypatch):
    # Found: the limit did not apply to Parquet; a 7 KB file holding one 200 MB string cost
    # 1.6 GB and crashed a run under a memory cap. Its size is in the file's metadata.
    path = tmp_path / "t.parquet"
    _write_row_groups(path, _conversations([0], lambda i: "x" * 5000), _conversations(range(1, 4)))
    asked = _decoded_row_groups(monkeypatch)
    items = _items(path, max_record_bytes=1024)
    assert [i.position for i in items] == [0, 1, 2, 3]
    letter = items[0].payload
    assert isinstance(letter, Unreadable) and letter.reason == "record_too_large"
    assert "row group 0" in letter.detail and "--max-record-bytes 1,024" in letter.detail
    assert [i.payload.value["id"] for i in items[1:]] == ["p1", "p2", "p3"]
    assert 0 not in {group for groups in asked for group in groups}


def test_parquet_row_over_the_limit_among_small_ones_is_its_own_dead_letter(tmp_path):
    path = tmp_path / "t.parquet"
    _write_row_groups(path, _conversations(range(100), lambda i: "y" * 5000 if i == 37 else f"hi {i}"))
    items = _items(path, max_record_bytes=1024)
    assert [i.position for i in items] == list(range(100))
    letters = {i.position: i.payload for i in items if isinstance(i.payload, Unreadable)}
    assert list(letters) == [37] and letters[37].reason == "record_too_large"
    assert "p37" in letters[37].raw  # the row's first bytes, for the dead letter
    assert [i.payload.value["messages"][0]["content"] for i in items if i.position != 37] == [
        f"hi {i}" for i in range(100) if i != 37
    ]
    # Under a limit it fits, the same row is read.
    assert len(_items(path, max_record_bytes=1 << 20)[37].payload.value["messages"][0]["content"]) == 5000


def test_parquet_batches_are_cut_to_the_limit():
    from pipeline.io.parquet_rows import parquet_batch_rows

    assert parquet_batch_rows(rows=100_000, uncompressed=100_000 * 100, limit=32 << 20) == 1024
    assert parquet_batch_rows(rows=1000, uncompressed=1000 * 10_000, limit=100_000) == 10
    assert parquet_batch_rows(rows=2, uncompressed=400 << 20, limit=32 << 20) == 1
    assert parquet_batch_rows(rows=5, uncompressed=0, limit=1024) == 1024


def test_parquet_out_of_memory_is_a_dead_letter_for_its_row_group(tmp_path, monkeypatch):
    path = tmp_path / "t.parquet"
    _write_row_groups(path, _conversations(range(3)), _conversations(range(3, 6)), _conversations(range(6, 9)))
    original = pq.ParquetFile.iter_batches

    def failing(self, *args, **kwargs):
        if kwargs.get("row_groups") == [1]:
            raise pa.ArrowMemoryError("malloc of size 209715264 failed")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", failing)
    items = _items(path)
    assert [i.position for i in items] == [0, 1, 2, 3, 6, 7, 8]
    letter = items[3].payload
    assert letter.reason == "record_too_large" and "out of memory" in letter.detail
    assert "rows 3-5" in letter.detail and "row group 1" in letter.detail


@pytest.mark.slow
def test_a_huge_parquet_row_under_a_memory_cap_is_a_dead_letter_not_a_crash(tmp_path):
    # A 7 KB file whose first row group is one 200 MB string (zstd compresses it 30,000 to 1):
    # under a 1.5 GB address-space cap the run died of std::bad_alloc, its lock left behind.
    import resource
    import subprocess
    import sys

    path = tmp_path / "in" / "rows.parquet"
    path.parent.mkdir()
    big = _conversations([0], lambda i: "x" * (200 << 20))
    _write_row_groups(path, big, _conversations([1]), compression="zstd")
    del big
    assert path.stat().st_size < 64 << 10
    cap = 3 << 29  # 1.5 GiB of address space

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "--input", str(path), "--output", str(out), "--quiet", "--no-report"],
        preexec_fn=capped,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["records_in"], summary["records_out"], summary["dead_letters"]) == (2, 1, 1)
    letters = [json.loads(line) for f in (out / "dead_letter").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert [(d["position"], d["reason"]) for d in letters] == [(0, "record_too_large")]
    assert (out / "_SUCCESS").exists() and not (out / "_convnorm.lock").exists()


# --------------------------------------------------------------------------------------------
# Values from JSON


@pytest.mark.parametrize(
    "extra",
    [
        b'"x":NaN,"y":12345678901234567890',
        b'"x":Infinity,"y":12345678901234567890',
        b'"x":NaN',
    ],
)
def test_nan_and_infinity_are_invalid_json_whatever_else_the_line_holds(extra):
    outcome = _process(b'{"id":1,"messages":[{"role":"user","content":"a"}],' + extra + b"}")
    assert outcome.dead_letter is not None and outcome.dead_letter["reason"] == "invalid_json"


@pytest.mark.parametrize(
    "extra",
    [
        b'"x":1e400',
        b'"x":1e400,"y":12345678901234567890',  # the big integer used to route it to a lenient parser
        b'"x":-1e999,"y":-1234567890123456789',
        b'"x":1e-400',  # Found: read as 0.0
        b'"x":0.123456789012345678901234567890',  # Found: rounded
        b'"x":[{"y":0.123456789012345678901234567890}],"z":12345678901234567890',
    ],
)
def test_a_number_a_double_cannot_hold_makes_the_record_number_too_large(extra):
    # One rule for every number JSON carries and a double cannot hold (docs/json-text.md): the
    # record is a dead letter, never a silently changed value.
    outcome = _process(b'{"id":1,"messages":[{"role":"user","content":"a"}],' + extra + b"}")
    assert outcome.dead_letter is not None and outcome.dead_letter["reason"] == "number_too_large"
    assert "double" in outcome.dead_letter["detail"]


def test_five_thousand_digit_integers_work_as_id_content_and_field():
    big = "7" * 5000
    line = ('{"id":%s,"messages":[{"role":"user","content":%s}],"n":-%s}' % (big, big, big)).encode()
    outcome = _process(line)
    assert outcome.dead_letter is None
    assert outcome.metrics["id"] == big
    assert outcome.record["messages"][0]["content"] == big
    assert dumps_line(outcome.record).endswith(b'"n":-' + big.encode() + b"}")


def test_record_without_id_holding_a_huge_integer_gets_a_derived_id():
    line = b'{"messages":[{"role":"user","content":"a"}],"n":' + b"9" * 5000 + b"}"
    outcome = _process(line)
    assert outcome.dead_letter is None and outcome.metrics["id"].startswith("sha256:")
    assert _process(line).metrics["id"] == outcome.metrics["id"]


def test_integer_at_the_digit_limit_is_exact_past_it_is_number_too_large():
    at_limit = b"8" * MAX_NUMBER_DIGITS
    ok = _process(b'{"messages":[{"role":"user","content":"a"}],"n":' + at_limit + b"}")
    assert ok.dead_letter is None and dumps_line(ok.record).endswith(at_limit + b"}")
    over = _process(b'{"messages":[{"role":"user","content":"a"}],"n":' + at_limit + b"8}")
    assert over.dead_letter["reason"] == "number_too_large"


def test_a_million_digit_integer_is_refused_without_converting_it():
    # Converting it took 27 s (quadratic); refusing it reads the digits once. The bound is
    # loose on purpose: this guards the complexity, it is not a speed target. CPU time, which
    # other work on the machine hardly stretches (wall time under load is not a verdict).
    line = b'{"messages":[{"role":"user","content":"a"}],"n":' + b"1" * 1_000_000 + b"}"
    started = time.process_time()
    outcome = _process(line)
    assert time.process_time() - started < 10
    assert outcome.dead_letter["reason"] == "number_too_large"


def test_long_digit_runs_inside_strings_are_not_numbers():
    line = b'{"messages":[{"role":"user","content":"' + b"5" * (MAX_NUMBER_DIGITS + 10) + b'"}]}'
    outcome = _process(line)
    assert outcome.dead_letter is None
    assert len(outcome.record["messages"][0]["content"]) == MAX_NUMBER_DIGITS + 10


def test_json_document_with_a_huge_number_is_number_too_large(tmp_path):
    (tmp_path / "a.json").write_bytes(b'[{"messages":[],"n":' + b"1" * (MAX_NUMBER_DIGITS + 1) + b'},{"messages":[]}]')
    huge, fine = (process_record(item, Settings()) for item in _items(tmp_path / "a.json"))
    assert huge.dead_letter["reason"] == "number_too_large"
    assert fine.record == {"id": fine.metrics["id"], "messages": []}


# --------------------------------------------------------------------------------------------
# Bounded memory per record


@pytest.mark.parametrize(
    "suffix, compress",
    [
        (".jsonl", lambda data: data),
        (".jsonl.gz", gzip.compress),
        (".jsonl.zst", lambda data: zstandard.ZstdCompressor().compress(data)),
    ],
)
def test_record_over_the_limit_is_read_past_and_the_next_one_is_read(tmp_path, suffix, compress):
    huge = _line(1, "x" * 3_000_000)
    body = _line(0) + b"\n" + huge + b"\n" + _line(2) + b"\n"
    path = tmp_path / ("big" + suffix)
    path.write_bytes(compress(body))
    items = _items(path, max_record_bytes=1 << 20)
    assert [i.position for i in items] == [0, len(_line(0)) + 1, len(_line(0)) + len(huge) + 2]
    assert items[0].payload == _line(0) + b"\n" and items[2].payload == _line(2) + b"\n"
    letter = items[1].payload
    assert letter.reason == "record_too_large" and f"{len(huge) + 1:,} bytes" in letter.detail
    assert letter.raw.startswith('{"id": "r1"') and len(letter.raw) < 20_000
    outcome = process_record(items[1], Settings(raw_limit=50))
    assert outcome.dead_letter["reason"] == "record_too_large"
    assert outcome.dead_letter["raw"] == letter.raw[:50]


def test_record_at_the_limit_is_read(tmp_path):
    line = _line(0, "y" * 1000)
    (tmp_path / "a.jsonl").write_bytes(line + b"\n" + line)  # the last one without a newline
    assert [i.payload for i in _items(tmp_path / "a.jsonl", max_record_bytes=len(line))] == [line + b"\n", line]
    letters = _items(tmp_path / "a.jsonl", max_record_bytes=len(line) - 1)
    assert [i.payload.reason for i in letters] == ["record_too_large"] * 2


def test_huge_line_across_byte_range_shards_is_one_dead_letter(tmp_path):
    lines = [_line(i) for i in range(2000)]
    lines[700] = _line(700, "z" * 400_000)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    shards = plan_shards([str(path)], 1 << 16)
    assert len(shards) > 5
    items = []
    for shard in shards:
        stats = {"records": 0, "blank_lines": 0}
        for batch in iter_batches(shard, 64, stats, max_record_bytes=1 << 17):
            items.extend(batch.items)
    assert len(items) == 2000
    assert [i for i, item in enumerate(items) if isinstance(item.payload, Unreadable)] == [700]
    assert [item.payload for item in items if isinstance(item.payload, bytes)] == [
        line + b"\n" for i, line in enumerate(lines) if i != 700
    ]


def test_json_array_over_the_limit_is_read_element_by_element(tmp_path):
    values = [
        {"id": f"j{i}", "messages": [{"role": "user", "content": "c" * (i % 50)}], "odd": 'a,]}"[{' * (i % 3)}
        for i in range(3000)
    ]
    values[1234]["pad"] = "p" * 300_000  # one element over the limit
    values[5] = "not a record"
    (tmp_path / "a.json").write_bytes(b"\xef\xbb\xbf \n" + json.dumps(values, indent=1).encode() + b"\n")
    items = _items(tmp_path / "a.json", max_record_bytes=100_000)
    assert [i.position for i in items] == list(range(3000))
    assert items[1234].payload.reason == "record_too_large"
    whole = _items(tmp_path / "a.json", max_record_bytes=1 << 24)  # parsed whole, as before
    assert [p.payload.value for p in whole] == values
    outcomes = [process_record(item, Settings()) for item in items]
    expected = [process_record(item, Settings()) for item in whole]
    for i, (got, want) in enumerate(zip(outcomes, expected)):
        if i == 1234:
            assert got.dead_letter["reason"] == "record_too_large"
        else:
            assert (got.record, got.metrics) == (want.record, want.metrics)
            assert (got.dead_letter or {}).get("reason") == (want.dead_letter or {}).get("reason")


@pytest.mark.parametrize(
    "text, reasons",
    [
        (b"[1,2,", ["invalid_json"]),  # not closed
        (b"[1,2] trailing", ["invalid_json"]),  # content after the array
        (b"[1,,2]", ["invalid_json"]),  # an empty element
        (b"[1,2}", ["invalid_json"]),  # unbalanced
    ],
)
def test_json_array_read_in_pieces_reports_its_syntax_errors(tmp_path, text, reasons):
    padded = text.replace(b"[1", b'["' + b"s" * 2000 + b'",1', 1)
    (tmp_path / "a.json").write_bytes(padded)
    items = _items(tmp_path / "a.json", max_record_bytes=1024)
    letters = [process_record(i, Settings()).dead_letter for i in items]
    assert [d["reason"] for d in letters if d and d["reason"] != "not_a_record"][-1:] == reasons
    assert letters[0]["reason"] == "record_too_large"


@pytest.mark.parametrize("bad", [b"NaN", b"1e400", b"-Infinity", b'"\\ud800"'])
def test_json_array_under_the_limit_with_one_bad_element_keeps_the_others(tmp_path, bad):
    # Parsed whole, one value JSON cannot carry used to make the whole file one dead letter
    # (the good records in it lost), while the same file over --max-record-bytes loses only
    # that element: the outcome must not depend on the file's size.
    values = [{"id": f"j{i}", "messages": [{"role": "user", "content": f"c{i}"}], "pad": "p" * 500} for i in range(5)]
    text = json.dumps(values).encode().replace(b'"c3"', bad, 1)
    (tmp_path / "a.json").write_bytes(text)
    assert 1024 < len(text) < 1 << 20
    small = _items(tmp_path / "a.json", max_record_bytes=1 << 20)  # parsed whole
    pieces = _items(tmp_path / "a.json", max_record_bytes=1024)  # read element by element
    assert [i.position for i in small] == [i.position for i in pieces] == list(range(5))
    got = [process_record(i, Settings()) for i in small]
    want = [process_record(i, Settings()) for i in pieces]
    assert [o.record for o in got] == [o.record for o in want]
    reason = "number_too_large" if bad == b"1e400" else "invalid_json"
    assert [o.dead_letter and o.dead_letter["reason"] for o in got] == [None, None, None, reason, None]


def test_json_object_document_over_the_limit_is_one_record_too_large(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"messages": [], "pad": "p" * 5000}))
    (item,) = _items(tmp_path / "a.json", max_record_bytes=1024)
    assert item.payload.reason == "record_too_large" and ".jsonl" in item.payload.detail


def test_finite_floats_beside_a_big_integer_stay_as_they_are():
    # The exact parser refuses only what JSON cannot carry: a large finite float is kept.
    ok = _process(b'{"messages":[{"role":"user","content":"a"}],"x":1e300,"y":12345678901234567890}')
    assert ok.record["x"] == 1e300 and ok.record["y"] == 12345678901234567890
