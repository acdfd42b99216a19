"""report.html: its numbers are summary.json's, its sections follow the data, it stands alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from report_page import flat, parse, shown

from pipeline import report
from pipeline.main import main

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")


@pytest.fixture(scope="module")
def sample_out(sample_run):
    """The session's one run of the bundled sample (tests/conftest.py), report included."""
    assert sample_run.status == 0
    return sample_run.out


def test_every_number_of_summary_json_is_on_the_page_as_it_is(sample_out):
    summary = json.loads((sample_out / "summary.json").read_text())
    page = parse((sample_out / report.REPORT_FILE).read_text())
    expected = {key: shown(value) for key, value in flat(summary).items()}
    assert {key: page.values.get(key) for key in expected} == expected


def test_the_charts_are_inline_svg_and_the_page_loads_nothing(sample_out):
    text = (sample_out / report.REPORT_FILE).read_text()
    page = parse(text)
    # The sample's records carry a `timestamp` key that coercion discards: the ledger has a chart.
    assert page.charts == {
        "dropped_by_reason": True,
        "dead_letters_by_reason": True,
        "drops_histogram": True,
        "messages": True,
        "discarded_by_name": True,
    }
    assert page.urls == []
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text
    assert "Ledger of discarded fields" in page.headings
    # Opt-in sections are absent when their data is.
    assert not {"Repairs (opt-in profile)", "Windows over time"} & set(page.headings)


def test_the_page_says_how_the_run_was_made(sample_out):
    text = (sample_out / report.REPORT_FILE).read_text()
    for label in (
        "options.profile",
        "options.input",
        "started",
        "run_seconds",
        "versions.apache-beam",
        "versions.python",
    ):
        assert f"<td>{label}</td>" in text, label
    assert "conversations.jsonl" in text.split("<h2>Run</h2>", 1)[1]


def test_worst_sources_and_examples_come_from_drops_and_dead_letters(sample_out):
    text = (sample_out / report.REPORT_FILE).read_text()
    drops = [
        json.loads(line)
        for p in sorted((sample_out / "drops").glob("part-*.jsonl"))
        for line in p.read_text().splitlines()
    ]
    first_orphan = next(m for m in drops if m["drops"].get("orphan_result"))
    assert f">{first_orphan['id']}<" in text
    assert "30.3%" in text  # (87 conversations with drops + 6 dead letters) / 307 records of the one file


def test_scans_rank_sources_and_keep_the_first_examples_per_reason():
    details = report.RunDetails()
    metrics = [
        {
            "id": f"a{i}",
            "source": "a.jsonl",
            "position": i,
            "dropped": 1,
            "drops": {"orphan_result": 1},
            "healed": 0,
            "messages_in": 3,
            "messages_out": 2,
        }
        for i in range(5)
    ] + [
        {
            "id": "b0",
            "source": "b.jsonl",
            "position": 0,
            "dropped": 0,
            "drops": {},
            "healed": 1,
            "messages_in": 2,
            "messages_out": 3,
        },
        {
            "id": "b1",
            "source": "b.jsonl",
            "position": 9,
            "dropped": 2,
            "drops": {"leading_tool": 2},
            "healed": 0,
            "messages_in": 4,
            "messages_out": 2,
        },
    ]
    report.scan_drops(metrics, details, examples=2)
    report.scan_dead_letters(
        [
            {"source": "b.jsonl", "position": 20, "reason": "invalid_json", "detail": "x"},
            {"source": "c.jsonl", "position": 0, "reason": "invalid_json", "detail": "y"},
        ],
        details,
    )
    assert [m["id"] for m in details.drop_examples["orphan_result"]] == ["a0", "a1"]
    assert [m["id"] for m in details.drop_examples["leading_tool"]] == ["b1"]
    ranked = [(path, s.records, s.affected_rate) for path, s in report.worst_sources(details)]
    assert ranked == [("a.jsonl", 5, 1.0), ("c.jsonl", 1, 1.0), ("b.jsonl", 3, pytest.approx(2 / 3))]


def _fake_run(directory: Path, summary: dict, drops: list[dict] = ()) -> Path:
    (directory / "drops").mkdir(parents=True)
    (directory / "summary.json").write_text(json.dumps(summary))
    (directory / "drops" / "part-00000.jsonl").write_text("".join(json.dumps(m) + "\n" for m in drops))
    return directory


SMALL = {
    "records_in": 1,
    "records_out": 1,
    "dead_letters": 0,
    "dead_letters_by_reason": {"invalid_json": 0},
    "blank_lines": 0,
    "messages_in": 3,
    "messages_out": 2,
    "dropped": 1,
    "dropped_by_reason": {"no_role": 1},
    "healed": 0,
    "conversations_with_drops": 1,
    "drops_histogram": {"0": 0, "1": 1},
    "profile": "spec",
    "accounted": True,
}


def test_sections_appear_when_their_data_does(tmp_path):
    summary = dict(
        SMALL,
        ledger={"metadata": 7, "name": 2},
        windows=[
            {"window": "00:00", "records_in": 3, "dropped": 1},
            {"window": "00:01", "records_in": 5, "dropped": 0},
        ],
        something_new={"a": [1, 2]},
    )
    out = _fake_run(tmp_path / "o", summary)
    assert report.report_command([str(out)]) == 0
    page = parse((out / report.REPORT_FILE).read_text())
    assert {"Ledger of discarded fields", "Windows over time", "something_new"} <= set(page.headings)
    assert page.values["ledger.metadata"] == "7"
    assert page.values["windows.1.records_in"] == "5"
    assert page.charts["ledger"] and page.charts["windows"]
    # All-zero counts say so in words instead of drawing an empty chart.
    assert (
        "dead_letters_by_reason" not in page.charts
        and "No record was dead-lettered." in (out / report.REPORT_FILE).read_text()
    )


def test_windows_keyed_by_time_are_rows_and_long_tables_are_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "GENERIC_ROWS", 3)
    windows = {f"00:0{i}": {"records_in": i, "dead_letters": 0} for i in range(5)}
    out = _fake_run(tmp_path / "o", dict(SMALL, windows=windows))
    assert report.report_command([str(out)]) == 0
    text = (out / report.REPORT_FILE).read_text()
    page = parse(text)
    assert page.charts["windows"] and text.count('data-chart="windows') == 1  # one chart, not one per window
    assert page.values["windows.2.key"] == "00:02" and page.values["windows.2.records_in"] == "2"
    assert "windows.3.key" not in page.values and "The first 3 of 5 rows" in text


def test_data_is_escaped(tmp_path):
    hostile = "<script>alert(1)</script>"
    out = _fake_run(
        tmp_path / "o",
        SMALL,
        [
            {
                "id": hostile,
                "source": "<b>x",
                "position": 0,
                "dropped": 1,
                "drops": {"no_role": 1},
                "healed": 0,
                "messages_in": 3,
                "messages_out": 2,
            }
        ],
    )
    assert report.report_command([str(out)]) == 0
    text = (out / report.REPORT_FILE).read_text()
    assert hostile not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<b>x" not in text


def test_report_command_without_a_run_says_so(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 1
    assert "no summary.json" in capsys.readouterr().err
    assert not (tmp_path / report.REPORT_FILE).exists()


def test_report_command_never_replaces_a_page_it_did_not_write(tmp_path, capsys):
    out = _fake_run(tmp_path / "o", SMALL)
    theirs = out / report.REPORT_FILE
    theirs.write_text("<html><title>my own notes</title></html>")
    assert main(["report", str(out)]) == 1
    assert "did not write it" in capsys.readouterr().err
    assert theirs.read_text() == "<html><title>my own notes</title></html>"
    theirs.unlink()
    assert main(["report", str(out)]) == 0 and main(["report", str(out)]) == 0  # its own page: replaced


def test_report_command_rebuilds_the_page_of_a_finished_run(sample_out, tmp_path, capsys):
    out = tmp_path / "copy"
    out.mkdir()
    for name in ("summary.json", "drops", "dead_letter"):
        source = sample_out / name
        if source.is_dir():
            (out / name).mkdir()
            for part in source.iterdir():
                (out / name / part.name).write_bytes(part.read_bytes())
        else:
            (out / name).write_bytes(source.read_bytes())
    assert main(["report", str(out) + "/"]) == 0
    assert capsys.readouterr().out.strip() == f"report: {out}/{report.REPORT_FILE}"
    rebuilt = parse((out / report.REPORT_FILE).read_text())
    original = parse((sample_out / report.REPORT_FILE).read_text())
    assert rebuilt.values == original.values


def test_without_matplotlib_the_run_succeeds_and_says_the_report_was_skipped(tmp_path, monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    out = tmp_path / "o"
    assert main(["--input", str(SAMPLE), "--output", str(out)]) == 0
    assert (out / "summary.json").exists() and not (out / report.REPORT_FILE).exists()
    captured = capsys.readouterr()
    assert "report skipped" in captured.err and "convnorm[report]" in captured.err
    assert "report.html" not in captured.out


def test_no_report_flag_writes_none(tmp_path):
    out = tmp_path / "o"
    assert main(["--input", str(SAMPLE), "--output", str(out), "--no-report"]) == 0
    assert not (out / report.REPORT_FILE).exists()
