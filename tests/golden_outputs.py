"""The golden outputs of the sample and the format samples, for every sink (see test_golden_outputs).

The outputs are about 10 MB, so the repository keeps their SHA-256 digests (``GOLDEN_FILE``);
``python tests/golden_outputs.py`` rewrites it from the code as it is (do that only for a
deliberate change of output, and say so in the commit), and ``--dump DIR`` writes the outputs
themselves, to diff the outputs of two commits.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from transforms.core.jsontext import dumps_line  # noqa: E402
from transforms.formats import WRITERS  # noqa: E402
from transforms.record.inputs import RawRecord  # noqa: E402
from transforms.record.record_settings import Settings  # noqa: E402
from transforms.record.records import normalize_batch  # noqa: E402

GOLDEN_FILE = HERE / "data" / "expected" / "golden_outputs.sha256"
#: The bundled sample and one sample per input format (copies of samples/ in tests/data/).
INPUTS = [
    ROOT / "samples" / "conversations.jsonl",
    *sorted((ROOT / "samples" / "formats").glob("*.jsonl")),
    *sorted((HERE / "data" / "formats").glob("*.jsonl")),
]


def raw_records(path: Path) -> list:
    records, offset = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        if line.strip():
            records.append(RawRecord(path.name, offset, line))
        offset += len(line)
    return records


def settings_for(sink: str) -> Settings:
    # --trailing keep: the outputs before the training sinks trimmed by default (tests/test_training.py).
    return Settings(sink=sink, model="golden-model", max_tokens=512, trailing="keep")


def render(path: Path, sink: str, file_format: str = "jsonl") -> bytes:
    """The normalized file (as the job's file writer writes it), then drops and dead letters."""
    from pipeline.io.file_formats import FILE_FORMATS

    result = normalize_batch(raw_records(path), settings_for(sink), taken={})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / ("part" + FILE_FORMATS[file_format].extension)
        writer = FILE_FORMATS[file_format].open(str(out), "id", "messages")
        # As the job writes: the records with the lines processing made (when it made them).
        takes_lines = FILE_FORMATS[file_format].takes_lines and result.lines is not None
        writer.write(result.records, *([result.lines] if takes_lines else []))
        writer.close()
        written = out.read_bytes()
        if file_format == "jsonl":
            # Writing the records alone (a batch without lines) must give the same bytes.
            again = FILE_FORMATS[file_format].open(str(out) + ".2", "id", "messages")
            again.write(result.records)
            again.close()
            if Path(str(out) + ".2").read_bytes() != written:
                raise AssertionError(f"{path.name} / {sink}: the lines and the records give different files")
    if file_format != "jsonl":
        # Parquet files carry writer metadata: compare the rows read back, as flat records.
        import io

        import pyarrow.parquet as pq

        from transforms.record.flat_rows import flat_record

        rows = pq.read_table(io.BytesIO(written)).to_pylist()
        written = b"".join(dumps_line(flat_record(row)) + b"\n" for row in rows)
    drops = b"".join(dumps_line(m) + b"\n" for m in result.metrics)
    letters = b"".join(dumps_line(d) + b"\n" for d in result.dead_letters)
    return b"## normalized\n" + written + b"## drops\n" + drops + b"## dead_letter\n" + letters


def cases() -> list[tuple[Path, str, str]]:
    found = [(path, sink, "jsonl") for path in INPUTS for sink in sorted(WRITERS)]
    found += [(path, "flat", "parquet") for path in INPUTS]
    return found


def case_name(path: Path, sink: str, file_format: str) -> str:
    return f"{path.relative_to(ROOT).as_posix()}:{sink}:{file_format}"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def golden() -> dict[str, str]:
    """Case name -> SHA-256 of its output, as recorded."""
    found = {}
    for line in GOLDEN_FILE.read_text().splitlines():
        sha, name = line.split("  ", 1)
        found[name] = sha
    return found


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", help="also write each output to this directory")
    args = parser.parse_args()
    lines = []
    for path, sink, file_format in cases():
        data = render(path, sink, file_format)
        name = case_name(path, sink, file_format)
        lines.append(f"{digest(data)}  {name}\n")
        if args.dump:
            Path(args.dump).mkdir(parents=True, exist_ok=True)
            (Path(args.dump) / name.replace("/", "_").replace(":", ".")).write_bytes(data)
    GOLDEN_FILE.write_text("".join(lines))
    print(f"{len(lines)} cases -> {GOLDEN_FILE}")
