"""report.html: its numbers are summary.json's, its sections follow the data, it stands alone."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from report_page import flat, parse, shown

from pipeline.cli import output_commands
from pipeline.cli.main import main
from pipeline.finished import report, report_data, report_opt_in, report_sections

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


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
        "messages": True,
        "dropped_by_reason": True,
        "dead_letters_by_reason": True,
        "drops_histogram": True,
        "discarded_by_name": True,
    }
    assert page.urls == []
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text and "<script" not in text
    assert "Ledger of discarded fields" in page.headings
    # Opt-in sections are absent when their data is.
    assert not {"Repairs (opt-in profile)", "Windows over time"} & set(page.headings)


def _chart(text: str, name: str) -> str:
    return text.split(f'data-chart="{name}">', 1)[1].split("</figure>", 1)[0]


def test_every_chart_has_a_title_and_both_axis_titles_and_no_zero_rows(sample_out):
    text = (sample_out / report.REPORT_FILE).read_text()
    letters = _chart(text, "dead_letters_by_reason")
    assert "<title>Dead letters, by reason</title>" in letters
    assert ">records</text>" in letters and ">reason</text>" in letters
    # 4 of the 13 dead-letter reasons occurred: only they are bars; the others are named in a line.
    assert letters.count("<rect") == 4 and "unreadable_file" not in letters
    assert "none for: unreadable_file" in text
    histogram = _chart(text, "drops_histogram")
    assert ">conversations</text>" in histogram and ">drops in the conversation</text>" in histogram
    # Whole numbers on count axes.
    assert ">0.5<" not in letters


def test_the_tiles_add_up_as_they_are_read(sample_out):
    """Found: the tiles read 6,785 messages in, 6,828 out, 166 dropped, 177 added, which does
    not add up (166 is MEM-5's count, calls included): the message tiles are in, dropped,
    added, out, in that order, and MEM-5's count has a tile of its own after them."""
    text = (sample_out / report.REPORT_FILE).read_text()
    tiles = re.findall(
        r'<div class="tile[^"]*"[^>]*><div class="v"[^>]*>([^<]*)</div><div class="l">([^<]*)</div>', text
    )
    shown = {html.unescape(label): int(value.replace(",", "")) for value, label in tiles}
    labels = list(shown)
    flow = ["messages in", "messages dropped", "results added (healed)", "messages out"]
    start = labels.index("messages in")
    assert labels[start : start + 4] == flow
    assert shown["messages in"] - shown["messages dropped"] + shown["results added (healed)"] == shown["messages out"]
    assert labels[start + 4] == "dropped, MEM-5's count" and shown["dropped, MEM-5's count"] == 166


def test_the_messages_add_up_on_the_page(sample_out):
    """6,785 in - 134 messages dropped + 177 results added = 6,828 out; the 32 calls dropped
    from turns that stayed make MEM-5's count of 166, which stays as the spec defines it."""
    summary = json.loads((sample_out / "summary.json").read_text())
    assert report_sections.reconciliation(summary) == {
        "messages in": 6785,
        "messages dropped": 134,
        "results added (healed)": 177,
        "messages out": 6828,
        "calls dropped from turns that stayed": 32,
        "MEM-5 drop count": 166,
    }
    page = parse((sample_out / report.REPORT_FILE).read_text())
    assert page.values["derived.messages_dropped"] == "134" and page.values["derived.calls_dropped"] == "32"
    assert "DOES NOT ADD UP" not in (sample_out / report.REPORT_FILE).read_text()


def test_the_page_says_how_the_run_was_made(sample_out):
    text = (sample_out / report.REPORT_FILE).read_text()
    run = text.split("<h2>Run</h2>", 1)[1]
    for label in ("command", "options.input", "versions.convnorm", "versions.apache_beam", "versions.python"):
        assert f"<td>{label}</td>" in run, label
    assert "conversations.jsonl" in run
    assert re.search(r"<footer[^>]*>The run took \d+\.\d s\. Report generated ", text)


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


def test_examples_are_shown_once_with_line_numbers_and_their_repairs_explained(sample_out):
    text = (sample_out / report.REPORT_FILE).read_text()
    examples = re.findall(r'<div class="example"><div class="head"><span class="mono id">([^<]+)</span>', text)
    assert examples and len(examples) == len(set(examples))  # one conversation, one example
    lines = SAMPLE.read_bytes().split(b"\n")
    for where in re.findall(r'<span class="where">([^<]+)</span>', text):
        line, byte = re.search(r"line ([\d,]+) \(byte ([\d,]+)\)", where).groups()
        line, byte = int(line.replace(",", "")), int(byte.replace(",", ""))
        assert len(b"\n".join(lines[: line - 1])) + (1 if line > 1 else 0) == byte  # the line starts at that byte
    # Each example opens on its conversation before and after, each repair marked.
    assert text.count("<summary>before and after, each repair marked</summary>") == len(examples)
    # The dataset section's sample of clean conversations opens on theirs too.
    samples = text.count('<div class="example sample">')
    assert samples and text.count('<table class="explain">') == len(examples) + samples
    for reason in ("orphan_result", "leading_tool", "not_an_object"):
        assert f'<span class="mark dropped" title="DROPPED {reason}' in text, reason
    assert '<span class="mark healed"' in text


def test_dead_letter_details_are_whole(sample_out):
    text = (sample_out / report.REPORT_FILE).read_text()
    letters = [
        json.loads(line)
        for p in sorted((sample_out / "dead_letter").glob("part-*.jsonl"))
        for line in p.read_text().splitlines()
    ]
    for letter in letters:
        detail = html.escape(letter["detail"], quote=True)
        assert f'<td class="detail">{detail}' in text, letter["detail"]


def test_scans_rank_sources_and_keep_the_first_examples_per_reason():
    details = report_data.RunDetails()
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
    report_data.scan_drops(metrics, details, examples=2)
    report_data.scan_dead_letters(
        [
            {"source": "b.jsonl", "position": 20, "reason": "invalid_json", "detail": "x"},
            {"source": "c.jsonl", "position": 0, "reason": "invalid_json", "detail": "y"},
        ],
        details,
    )
    assert [m["id"] for m in details.drop_examples["orphan_result"]] == ["a0", "a1"]
    assert [m["id"] for m in details.drop_examples["leading_tool"]] == ["b1"]
    ranked = [(path, s.records, s.affected_rate) for path, s in report_data.worst_sources(details)]
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
    assert output_commands.report_command([str(out)]) == 0
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
    monkeypatch.setattr(report_opt_in, "GENERIC_ROWS", 3)
    windows = {f"00:0{i}": {"records_in": i, "dead_letters": 0} for i in range(5)}
    out = _fake_run(tmp_path / "o", dict(SMALL, windows=windows))
    assert output_commands.report_command([str(out)]) == 0
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
    assert output_commands.report_command([str(out)]) == 0
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
    assert main(["report", str(out)]) == 0
    # No manifest here: nothing proves the page convnorm's now (a page of the user's may carry
    # the same title), so it is written where nothing is, and never replaced.
    assert main(["report", str(out)]) == 1
    assert "no _convnorm_manifest.json" in capsys.readouterr().err


def _without_footer(page: str) -> str:
    return re.sub(r"<footer.*?</footer>", "", page)


def test_report_command_rebuilds_the_page_of_a_finished_run(sample_out, tmp_path, capsys):
    """The page `convnorm report` rebuilds is the page the run wrote, byte for byte but its
    footer (when it was made, how long the run took): it reads the manifest by its real name."""
    out = tmp_path / "copy"
    out.mkdir()
    for name in ("summary.json", "drops", "dead_letter", "_convnorm_manifest.json"):
        source = sample_out / name
        if source.is_dir():
            (out / name).mkdir()
            for part in source.iterdir():
                (out / name / part.name).write_bytes(part.read_bytes())
        else:
            (out / name).write_bytes(source.read_bytes())
    assert main(["report", str(out) + "/"]) == 0
    assert capsys.readouterr().out.strip() == f"report: {out}/{report.REPORT_FILE}"
    rebuilt = (out / report.REPORT_FILE).read_text()
    original = (sample_out / report.REPORT_FILE).read_text()
    assert _without_footer(rebuilt).replace(str(out), "OUT") == _without_footer(original).replace(
        str(sample_out), "OUT"
    )
    assert "No manifest" not in rebuilt and "<td>options.input</td>" in rebuilt


def test_no_report_flag_writes_none(tmp_path):
    out = tmp_path / "o"
    assert main(["--input", str(SAMPLE), "--output", str(out), "--no-report"]) == 0
    assert not (out / report.REPORT_FILE).exists()


def test_the_warning_banner_follows_the_runs_threshold(tmp_path):
    summary = dict(SMALL, records_in=100, records_out=98, dead_letters=2, dead_letters_by_reason={"invalid_json": 2})
    out = _fake_run(tmp_path / "o", summary)
    assert output_commands.report_command([str(out)]) == 0
    assert "Warning: 2 of 100 records read (2.0%) are dead letters" in (out / report.REPORT_FILE).read_text()
    manifest = {"format": "convnorm-manifest/1", "options": {"warn_dead_letters": "5%"}, "versions": {}}
    (out / "_convnorm_manifest.json").write_text(json.dumps(manifest))
    (out / report.REPORT_FILE).unlink()  # this manifest does not list the page: it would be refused
    assert output_commands.report_command([str(out)]) == 0
    assert "Warning:" not in (out / report.REPORT_FILE).read_text()


def _window(name: str, records: int, dropped: int, dead: int, progress: dict | None = None) -> dict:
    doc = dict(
        SMALL,
        records_in=records,
        records_out=records - dead,
        dead_letters=dead,
        dead_letters_by_reason={"invalid_json": dead},
        dropped=dropped,
        dropped_by_reason={"no_role": dropped},
        conversations_with_drops=min(dropped, records),
    )
    if progress is not None:
        doc["progress"] = progress
    return doc


def test_a_streaming_output_shows_its_windows_over_time_and_agrees_with_itself(tmp_path):
    out = tmp_path / "stream"
    windows = {
        "20261130T120000Z-20261130T120100Z": _window(
            "a", 10, 3, 1, {"rows_per_s": 5.5, "files_done": 2, "files_pending": 1, "oldest_pending_age_s": 4}
        ),
        "20261130T120100Z-20261130T120200Z": _window(
            "b", 20, 0, 0, {"rows_per_s": 9.0, "files_done": 5, "files_pending": 0, "oldest_pending_age_s": 0}
        ),
    }
    (out / "20261130T120000Z-20261130T120100Z" / "f-1").mkdir(parents=True)
    for name, doc in windows.items():
        (out / name).mkdir(exist_ok=True)
        (out / name / "summary.json").write_text(json.dumps(doc))
    metrics = {
        "id": "x1",
        "source": "gone.jsonl",
        "position": 0,
        "dropped": 3,
        "drops": {"no_role": 3},
        "healed": 0,
        "messages_in": 5,
        "messages_out": 2,
    }
    (out / "20261130T120000Z-20261130T120100Z" / "f-1" / "drops.jsonl").write_text(json.dumps(metrics) + "\n")
    letter = {"source": "gone.jsonl", "position": 9, "reason": "invalid_json", "detail": "bad", "raw": "{"}
    (out / "20261130T120000Z-20261130T120100Z" / "f-1" / "dead_letter.jsonl").write_text(json.dumps(letter) + "\n")
    (out / "_convnorm_streaming.json").write_text('{"format": "convnorm-streaming/1"}')
    total = _window("t", 30, 3, 1)
    total.update(conversations_with_drops=1, messages_in=6, messages_out=4)  # the two windows' sums
    (out / "summary.json").write_text(json.dumps(total))
    assert output_commands.report_command([str(out)]) == 0
    text = (out / report.REPORT_FILE).read_text()
    page = parse(text)
    assert "Windows over time" in page.headings and page.charts["windows"] and page.charts["progress"]
    windows_chart = _chart(text, "windows")
    assert ">window start (UTC)</text>" in windows_chart and "11-30 12:00:00" in windows_chart
    for legend in ("records", "drops", "dead letters"):
        assert f">{legend}</text>" in windows_chart
    assert ">records/s</text>" in _chart(text, "progress")
    assert "their totals are summary.json's" in text and "do not add up" not in text
    # Tiles and text agree: the drops in the windows' files are found (not "No file lost a message").
    assert "No file lost a message" not in text and ">x1<" in text and "gone.jsonl" in text
    # A window summary that disagrees with the total is said, not hidden.
    total["records_in"] = 31
    (out / "summary.json").write_text(json.dumps(total))
    assert output_commands.report_command([str(out)]) == 0
    assert (
        "The windows do not add up to summary.json for records_in (30 vs 31)" in (out / report.REPORT_FILE).read_text()
    )


def test_a_report_that_cannot_be_written_does_not_fail_the_run(tmp_path, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(report, "collect", broken)
    out = tmp_path / "o"
    assert main(["--input", str(SAMPLE), "--output", str(out)]) == 0
    assert (out / "_SUCCESS").exists() and not (out / report.REPORT_FILE).exists()
    err = capsys.readouterr().err
    assert "report skipped: OSError: disk full" in err and f"convnorm report {out} tries again" in err
