"""Planning and reading input files: every record read exactly once, with its position."""

from __future__ import annotations

import gzip
import json
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from pipeline.io.planning import InputError, plan_shards
from pipeline.io.read_shard import iter_batches, read_shard
from pipeline.io.shard import BLANK, Blank
from pipeline.io.text_containers import _array_elements
from transforms.record.inputs import Parsed, Unreadable


def _lines(n):
    return [
        json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": "x" * (i % 37)}]}).encode()
        for i in range(n)
    ]


def _records(shards):
    out = []
    for shard in shards:
        out.extend(item for item in read_shard(shard) if not isinstance(item, Blank))
    return out


def test_no_match_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no file matches"):
        plan_shards([str(tmp_path / "*.jsonl")])


def test_unknown_suffix_is_an_error(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="cannot tell the format"):
        plan_shards([str(tmp_path / "*")])


def test_shards_are_sorted_deduplicated_and_numbered(tmp_path):
    for name in ("b.jsonl", "a.jsonl"):
        (tmp_path / name).write_bytes(b"{}\n")
    shards = plan_shards([str(tmp_path / "*.jsonl"), str(tmp_path / "a.jsonl")])
    assert [s.path.rsplit("/", 1)[-1] for s in shards] == ["a.jsonl", "b.jsonl"]
    assert [s.number for s in shards] == [0, 1]


@pytest.mark.parametrize("shard_bytes", [1 << 16, 70001, 99991])
def test_split_jsonl_reads_every_line_exactly_once_in_order(tmp_path, shard_bytes):
    lines = _lines(6000)
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    shards = plan_shards([str(path)], shard_bytes)
    assert len(shards) > 3
    size = path.stat().st_size
    lengths = [(s.end if s.end is not None else size) - s.start for s in shards]
    assert max(lengths) <= shard_bytes and max(lengths) - min(lengths) <= 1  # even shards
    records = _records(shards)
    assert [r.payload.rstrip(b"\n") for r in records] == lines
    # Positions are byte offsets of each line.
    data = path.read_bytes()
    assert all(data[r.position :].startswith(r.payload) for r in records)


def test_last_line_without_newline_and_blank_lines(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":1}\n\n   \n{"b":2}')
    items = list(read_shard(plan_shards([str(path)])[0]))
    assert [i if isinstance(i, Blank) else i.payload for i in items] == [b'{"a":1}\n', BLANK, BLANK, b'{"b":2}']
    stats = {"records": 0, "blank_lines": 0}
    batches = list(iter_batches(plan_shards([str(path)])[0], 1, stats))
    assert stats == {"records": 2, "blank_lines": 2}
    assert [(b.shard, b.start, len(b.items)) for b in batches] == [(0, 0, 1), (0, 13, 1)]


def test_gzip_and_zstd_inputs(tmp_path):
    lines = _lines(50)
    body = b"\n".join(lines) + b"\n"
    # Concatenated gzip members and zstd frames are one stream each.
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(body[:100]) + gzip.compress(body[100:]))
    zstd = zstandard.ZstdCompressor()
    (tmp_path / "b.jsonl.zst").write_bytes(zstd.compress(body[:100]) + zstd.compress(body[100:]))
    shards = plan_shards([str(tmp_path / "*")], 1 << 16)
    assert [s.suffix for s in shards] == [".jsonl.gz", ".jsonl.zst"]
    records = _records(shards)
    assert [r.payload.rstrip(b"\n") for r in records] == lines + lines


@pytest.mark.parametrize(
    "suffix, compress",
    [
        (".jsonl.gz", gzip.compress),
        (".jsonl.zst", lambda data: zstandard.ZstdCompressor().compress(data)),
    ],
)
def test_truncated_archive_yields_an_unreadable_record(tmp_path, suffix, compress):
    good = compress(b"\n".join(_lines(2000)) + b"\n")
    (tmp_path / ("bad" + suffix)).write_bytes(good[: len(good) // 2])
    records = _records(plan_shards([str(tmp_path / ("bad" + suffix))]))
    assert isinstance(records[-1].payload, Unreadable)
    assert records[-1].payload.reason == "unreadable_file"
    assert all(isinstance(r.payload, bytes) for r in records[:-1])


def test_json_array_object_and_invalid(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps([{"messages": []}, "str", {"messages": [1]}]))
    (tmp_path / "b.json").write_text(json.dumps({"messages": []}))
    (tmp_path / "c.json").write_text("[{]")
    records = _records(plan_shards([str(tmp_path / "*.json")]))
    assert [(r.path if hasattr(r, "path") else r.source.rsplit("/", 1)[-1], r.position) for r in records] == [
        ("a.json", 0),
        ("a.json", 1),
        ("a.json", 2),
        ("b.json", 0),
        ("c.json", 0),
    ]
    assert records[1].payload == Parsed("str")
    assert records[3].payload == Parsed({"messages": []})
    assert records[4].payload.reason == "invalid_json"


def test_parquet_rows(tmp_path):
    table = pa.Table.from_pylist(
        [
            {"id": "p1", "messages": [{"role": "user", "content": "hi", "tool_call_id": None}]},
            {"id": "p2", "messages": []},
        ]
    )
    pq.write_table(table, tmp_path / "t.parquet")
    records = _records(plan_shards([str(tmp_path / "t.parquet")]))
    assert [r.position for r in records] == [0, 1]
    assert records[0].payload.value["messages"][0]["content"] == "hi"


def test_corrupt_parquet_is_unreadable(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    records = _records(plan_shards([str(tmp_path / "bad.parquet")]))
    assert len(records) == 1 and records[0].payload.reason == "unreadable_file"


def test_parquet_arrow_only_types_become_json_text(tmp_path):
    import datetime
    from decimal import Decimal

    table = pa.table(
        {
            "id": ["p1"],
            "messages": [[{"role": "user", "content": "hi"}]],
            "blob": pa.array([b"\xff\x00"], pa.binary()),
            "text_blob": pa.array([b"caf\xc3\xa9"], pa.binary()),
            "price": pa.array([Decimal("12.50")], pa.decimal128(6, 2)),
            "day": pa.array([datetime.date(2026, 11, 30)]),
            "at": pa.array([datetime.datetime(2026, 11, 30, 12, 0, 1)]),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    (record,) = _records(plan_shards([str(tmp_path / "t.parquet")]))
    value = record.payload.value
    assert value["blob"] == "/wA=" and value["text_blob"] == "café"
    assert value["price"] == "12.50"
    assert value["day"] == "2026-11-30" and value["at"] == "2026-11-30T12:00:01"
    json.dumps(value)  # all of it JSON


def test_a_file_gone_between_planning_and_reading_is_unreadable(tmp_path):
    for name in ("gone.jsonl", "gone.json", "gone.parquet"):
        path = tmp_path / name
        path.write_bytes(b"{}\n")
        (shard,) = plan_shards([str(path)])
        path.unlink()
        (record,) = _records([shard])
        assert isinstance(record.payload, Unreadable) and record.payload.reason == "unreadable_file"


def test_utf8_byte_order_mark_is_skipped(tmp_path):
    (tmp_path / "bom.jsonl").write_bytes(b'\xef\xbb\xbf{"messages": []}\n{"messages": []}\n')
    (tmp_path / "bom.json").write_bytes(b'\xef\xbb\xbf[{"messages": []}]')
    records = _records(plan_shards([str(tmp_path / "bom.*")]))
    assert [r.position for r in records] == [0, 3, 20]
    assert records[1].payload == b'{"messages": []}\n'


def test_json_lines_in_a_json_file_get_a_hint(tmp_path):
    (tmp_path / "x.json").write_text('{"messages": []}\n{"messages": []}\n')
    (record,) = _records(plan_shards([str(tmp_path / "x.json")]))
    assert record.payload.reason == "invalid_json" and "name the file .jsonl" in record.payload.detail


class _Trickle:
    """A file that hands out 1 to 7 bytes a read: element ends, strings and escapes fall across chunks."""

    def __init__(self, data: bytes, rng: random.Random) -> None:
        self.data, self.position, self.rng = data, 0, rng

    def read(self, size: int) -> bytes:
        piece = self.data[self.position : self.position + min(size, self.rng.randint(1, 7))]
        self.position += len(piece)
        return piece


def _json_value(rng: random.Random, depth: int = 0):
    if depth > 2 or rng.random() < 0.4:
        return rng.choice([1, -2.5, None, True, "plain", 'quote " inside', "back\\slash\\", "]},[{", "é ☃"])
    if rng.random() < 0.5:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}": _json_value(rng, depth + 1) for i in range(rng.randint(0, 3))}


def test_a_big_json_array_gives_the_same_elements_wherever_its_chunks_end():
    rng = random.Random(10)
    for _ in range(300):
        elements = [_json_value(rng) for _ in range(rng.randint(0, 5))]
        texts = [json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode() for e in elements]
        body = b",".join(texts) + b"] \n"  # what follows the array's "[": white space may end it
        limit = rng.choice([12, 40, 1 << 20])
        cut = rng.randint(0, len(body))  # the bytes already read with the "["
        got = list(_array_elements(_Trickle(body[cut:], rng), body[:cut], limit))
        assert len(got) == len(elements)
        for element, text, item in zip(elements, texts, got):
            if len(text) > limit:
                assert isinstance(item, Unreadable) and item.reason == "record_too_large"
            else:
                assert json.loads(item) == element


def test_a_big_json_array_with_a_stray_brace_or_no_end_is_invalid():
    rng = random.Random(3)
    for body, detail in [(b'1,{"a":"}"}},2]', "unbalanced '}'"), (b'1,["x"', "not closed"), (b"1] 2", "after the end")]:
        got = list(_array_elements(_Trickle(body, rng), b"", 1 << 20))
        assert isinstance(got[-1], Unreadable) and got[-1].reason == "invalid_json" and detail in got[-1].detail


# --------------------------------------------------------------------------------------------
# Record boundaries: UTF-16 files and lines that end in a carriage return alone


THREE = [{"id": f"r{i}", "messages": [{"role": "user", "content": f"héllo {i} 𝄞"}]} for i in range(3)]


@pytest.mark.parametrize("encoding, bom", [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")])
@pytest.mark.parametrize("newline", ["\r\n", "\n"])
def test_a_utf16_jsonl_file_is_decoded_and_counted_record_by_record(tmp_path, encoding, bom, newline):
    # Found: a UTF-16 file (Windows tools write them, with a byte-order mark) was one
    # invalid_json dead letter: records_in 1 for a file of many records.
    lines = [json.dumps(r, ensure_ascii=False) + newline for r in THREE]
    (tmp_path / "u16.jsonl").write_bytes(bom + "".join(lines).encode(encoding))
    records = _records(plan_shards([str(tmp_path / "u16.jsonl")], shard_bytes=1 << 16))
    assert [json.loads(r.payload) for r in records] == THREE
    # Positions are byte offsets in the file, as for any JSON Lines file.
    offsets = [len(bom)]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line.encode(encoding)))
    assert [r.position for r in records] == offsets


def test_a_utf16_file_is_never_cut_into_byte_ranges(tmp_path):
    records = [{"id": f"r{i}", "messages": [{"role": "user", "content": "x" * 200}]} for i in range(400)]
    text = "".join(json.dumps(r) + "\n" for r in records)
    (tmp_path / "big.jsonl").write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    shards = plan_shards([str(tmp_path / "big.jsonl")], shard_bytes=1 << 16)
    assert len(shards) == 1  # byte ranges would cut code units in two
    assert [json.loads(r.payload)["id"] for r in _records(shards)] == [r["id"] for r in records]


def test_a_utf16_json_document_is_decoded(tmp_path):
    (tmp_path / "u16.json").write_bytes(b"\xff\xfe" + json.dumps(THREE, ensure_ascii=False).encode("utf-16-le"))
    records = _records(plan_shards([str(tmp_path / "u16.json")]))
    assert [r.payload.value for r in records] == THREE


@pytest.mark.parametrize("shard_bytes", [1 << 16, 1 << 26])
def test_a_carriage_return_alone_ends_a_line(tmp_path, shard_bytes):
    # Found: a file whose lines end in CR alone (classic Mac tools) was one record.
    lines = [json.dumps(r) for r in THREE] * 200
    data = ("\r".join(lines) + "\r").encode()
    (tmp_path / "cr.jsonl").write_bytes(data)
    records = _records(plan_shards([str(tmp_path / "cr.jsonl")], shard_bytes=shard_bytes))
    assert [json.loads(r.payload) for r in records] == THREE * 200
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    assert [r.position for r in records] == starts


@pytest.mark.parametrize("shard_bytes", [1 << 12, 1 << 26])
def test_a_carriage_return_file_longer_than_the_record_limit_is_counted_record_by_record(tmp_path, shard_bytes):
    # Found: lines ending in CR alone were split only within what one read of a line gave, at
    # most --max-record-bytes: a CR-only file longer than that (32 MiB by default) was one
    # record_too_large dead letter. One record over the limit in it is its own dead letter.
    limit = 1024
    lines = [json.dumps(r).encode() for r in THREE] * 100
    big = json.dumps({"id": "big", "messages": [{"role": "user", "content": "x" * 3000}]}).encode()
    lines[150:150] = [big]
    for ending in (b"\r", b"\r\n"):
        data = ending.join(lines) + ending
        (tmp_path / "cr.jsonl").write_bytes(data)
        shards = plan_shards([str(tmp_path / "cr.jsonl")], shard_bytes=shard_bytes)
        records = [item for shard in shards for item in read_shard(shard, limit) if not isinstance(item, Blank)]
        assert [r.position for r in records] == [sum(len(x) + len(ending) for x in lines[:i]) for i in range(301)]
        assert isinstance(records[150].payload, Unreadable) and records[150].payload.reason == "record_too_large"
        assert [json.loads(r.payload) for r in records[:150] + records[151:]] == THREE * 100


def test_mixed_line_ends_each_end_a_line(tmp_path):
    a, b, c, d = (json.dumps(r).encode() for r in [*THREE, {"id": "r3", "messages": []}])
    (tmp_path / "mixed.jsonl").write_bytes(a + b"\r\n" + b + b"\r" + c + b"\n\r\n" + d)
    items = [item for shard in plan_shards([str(tmp_path / "mixed.jsonl")]) for item in read_shard(shard)]
    records = [item for item in items if not isinstance(item, Blank)]
    assert [json.loads(r.payload)["id"] for r in records] == ["r0", "r1", "r2", "r3"]
    assert [r.position for r in records] == [0, len(a) + 2, len(a) + 2 + len(b) + 1, len(a + b + c) + 6]
    assert items.count(BLANK) == 1  # the empty line between \n and \r\n


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet", ".jsonl.gz"])
def test_a_file_swapped_for_a_fifo_after_it_was_planned_is_unreadable_not_waited_on(tmp_path, suffix):
    # Found: a landed file replaced by a FIFO between the watcher's look and the read (or a
    # batch input between planning and reading) made the reader wait for ever on its opening.
    import signal

    from pipeline.io.processed_files import content_digest
    from pipeline.io.shard import Shard

    fifo = tmp_path / f"swapped{suffix}"
    os.mkfifo(fifo)

    class Hung(BaseException):  # no handler of the reader's catches it
        pass

    def hung(signum, frame):
        raise Hung("the reader waited on the FIFO")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        items = list(read_shard(Shard(0, str(fifo), suffix, 0, None)))
        with pytest.raises(OSError, match="not a regular file"):
            content_digest(str(fifo), None)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert [item.payload.reason for item in items] == ["unreadable_file"]
    assert "not a regular file" in items[0].payload.detail
