"""Call logs on the landing-directory stream (``pipeline.streaming.assembled``): each landed
file's pieces kept in its committed ``calls.jsonl``; at a window's close every group it touched
assembled from every piece so far, normalized and committed into ``<window>/assembled/``.

The function-level tests drive the steps the DoFns call (one landed file cleaned, one window
closed); the Prism tests run ``convnorm --streaming`` as a user does (tests/streaming_runs.py).
Against a batch ``convnorm run`` over the same files: the same conversations, byte for byte."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paused_runs import kill, start_paused  # noqa: E402
from prism_build import BUILD_TIMEOUT_S, prism_binary  # noqa: E402
from streaming_runs import START_TIMEOUT_S, Streaming, jsonl, land, no_leftovers, outputs_of  # noqa: E402

from pipeline.cli.main import main  # noqa: E402
from pipeline.graph.shard_step import ShardWork  # noqa: E402
from pipeline.io import processed_files as processed  # noqa: E402
from pipeline.streaming import assembled as assembly  # noqa: E402
from pipeline.streaming.clean import CleanPlan, clean_landed_file  # noqa: E402
from pipeline.streaming.piece_lines import PieceLines, piece_line, piece_of_line  # noqa: E402
from pipeline.streaming.watch import Landed  # noqa: E402
from transforms.calllogs.assemble import group_key  # noqa: E402
from transforms.calllogs.calls import Call, Fragment, Rejected, ToolResult  # noqa: E402
from transforms.conversations import NORMALIZE  # noqa: E402
from transforms.core.jsontext import parse_json  # noqa: E402
from transforms.record.record_settings import Settings  # noqa: E402
from transforms.record.record_steps import read_call_log  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
CALL_LOGS = DATA / "calllogs"
LANGFUSE = CALL_LOGS / "langfuse" / "blob-export-rows.jsonl"
OTLP = CALL_LOGS / "otlp" / "handwritten.jsonl"
W1 = "20261201T000000Z-20261201T000100Z"
W2 = "20261201T000100Z-20261201T000200Z"
W3 = "20261201T000200Z-20261201T000300Z"


def _plan(out: Path, run_id: str = "run-1") -> CleanPlan:
    temp = out / f"_convnorm_temp-{run_id}"
    temp.mkdir(parents=True, exist_ok=True)
    work = ShardWork(NORMALIZE, dataclasses.replace(Settings(), calls=True), batch_size=50)
    return CleanPlan(output=str(out), run_id=run_id, run_temp=str(temp), work=work)


def _landed(path: Path) -> Landed:
    info = path.stat()
    return Landed(str(path), info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _land(landing: Path, name: str, data: bytes) -> Path:
    landing.mkdir(exist_ok=True)
    path = landing / name
    path.write_bytes(data)
    return path


def _close(out: Path, window: str, plan: CleanPlan, commit=assembly.move_committing) -> tuple[str, dict]:
    """What the window's close does: assemble, then the summary."""
    done = assembly.assemble_window(str(out), window, plan.work, plan.run_temp, commit)
    return done, processed.write_window_summary(str(out), window, plan.settings, None)


def _batch(out: Path, files: list[Path]) -> Path:
    # One part per landed file (--part-bytes 0), as streaming writes them: compared file by file.
    argv = [*(f"--input={f}" for f in files), f"--output={out}", "--quiet", "--no-report", "--part-bytes=0"]
    assert main(argv) in (0, 1)
    return out


def _batch_assembled(batch: Path, kind: str) -> Path:
    """The batch run's part file of assembled conversations (one bucket, after the input shards)."""
    return sorted((batch / kind).glob("part-*"))[-1]


def _without_pane(drops: list[dict]) -> list[dict]:
    for record in drops:
        record["assembly"].pop("pane")
    return drops


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


# --------------------------------------------------------------------------------------------
# The pieces on disk


def _fixture_pieces():
    settings = dataclasses.replace(Settings(), calls=True)
    for path in sorted(CALL_LOGS.rglob("*.json*")):
        texts = [path.read_bytes()] if path.suffix == ".json" else path.read_bytes().splitlines()
        for position, text in enumerate(texts):
            try:
                read = read_call_log(parse_json(text), settings)
            except Exception:  # noqa: BLE001 — a record that holds nothing, or no call log
                continue
            for piece in read.pieces if read is not None else ():
                yield str(path), position, piece


def test_every_fixture_piece_is_rebuilt_exactly_from_its_line():
    seen = {Call: 0, ToolResult: 0, Rejected: 0, Fragment: 0}
    for source, position, piece in _fixture_pieces():
        back = piece_of_line(piece_line(source, position, piece))
        assert back == (source, position, piece)
        assert type(back[2]) is type(piece)
        seen[type(piece)] += 1
    assert seen[Call] > 20 and seen[ToolResult] > 3 and seen[Rejected] >= 3 and seen[Fragment] > 10, seen


def _growing_rows(group: str, calls: int) -> list[bytes]:
    """Langfuse export rows of one session, each call holding the history so far."""
    rows, history = [], [{"role": "system", "content": "You help."}]
    for n in range(calls):
        history.append({"role": "user", "content": f"{group} question {n}"})
        answer = {"role": "assistant", "content": f"answer {n}"}
        row = {
            "id": f"{group}-obs-{n}",
            "trace_id": f"tr-{group}",
            "type": "GENERATION",
            "parent_observation_id": "",
            "start_time": f"2026-11-30 10:00:0{n}.000000",
            "name": "chat",
            "provided_model_name": "gpt-4o",
            "input": json.dumps(history),
            "output": json.dumps(answer),
            "session_id": group,
        }
        rows.append(json.dumps(row).encode() + b"\n")
        history.append(answer)
    return rows


def test_a_calls_history_shared_with_its_groups_last_call_is_written_once_and_read_back_exactly():
    """The Langfuse reader hands a group's calls their earlier messages as the same objects: a
    line keeps only how many it shares with its group's last call in the file, and the file's
    lines read back in order give every piece exactly, the shared messages the same objects
    again (what the assembly's look for a known history needs); a line alone is refused."""
    settings = dataclasses.replace(Settings(), calls=True)
    rows = [row for pair in zip(_growing_rows("a", 4), _growing_rows("b", 4)) for row in pair]  # interleaved
    pieces = [
        ("x.jsonl", n, piece) for n, row in enumerate(rows) for piece in read_call_log(parse_json(row), settings).pieces
    ]
    writer, reader = PieceLines(), PieceLines()
    lines = [writer.line(*piece) for piece in pieces]
    assert [b'"history_from"' in line for line in lines] == [False, False] + [True] * 6
    assert all(len(line) < len(piece_line(*piece)) for line, piece in zip(lines[2:], pieces[2:]))
    back = [reader.read(line) for line in lines]
    assert back == pieces
    for earlier, later in zip(back, back[2:]):  # the same group's last call: two lines before
        before, after = earlier[2].history, later[2].history
        assert all(a is b for a, b in zip(before, after)) and len(after) == len(before) + 2
    with pytest.raises(ValueError, match="shares"):
        PieceLines().read(lines[-1])


def test_a_piece_keeps_big_integers_floats_and_text_exactly():
    call = Call(
        "otlp",
        "g\u00e9",
        2**70,
        "c1",
        [{"role": "user", "content": "h\u00e9 \U0001f600"}],
        [{"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "t", "name": "f", "args": {"x": 0.1}}]}],
        None,
        "m",
        {"reasoning": [1, 2]},
    )
    assert piece_of_line(piece_line("/a b.jsonl", 7, call)) == ("/a b.jsonl", 7, call)


@pytest.mark.parametrize(
    "number",
    [
        2**64 - 1,
        2**64,
        -(2**63),
        -(2**63) - 1,
        10**19,
        -(10**30),
        1_796_000_000_123_456_789,
        5e-324,
        2.5e-308,
        1.7976931348623157e308,
        0.1 + 0.2,
        1e-7,
        123456789012345678.0,
        -0.0,
    ],
)
def test_a_line_read_back_gives_every_number_exactly(number):
    """A line is read by orjson unless it holds a run of digits an integer past 64 bits needs
    (orjson would read that integer as a float): each number here comes back equal, and of its
    type (a float as the same double), whether the line has such a run elsewhere or not."""
    for text in ("", "9" * 25):  # a run of digits in a string sends the line to parse_json
        call = Call("otlp", "g", 1, "c1", [], [], None, "m", {"n": number, "text": text})
        back = piece_of_line(piece_line("a.jsonl", 0, call))[2].discarded["n"]
        assert type(back) is type(number) and repr(back) == repr(number)


# --------------------------------------------------------------------------------------------
# One window, and a group touched again later (the steps the DoFns call)


@pytest.mark.slow
def test_one_window_of_call_logs_gives_the_batch_runs_conversations(tmp_path):
    landing, out = tmp_path / "landing", tmp_path / "out"
    files = [_land(landing, "langfuse.jsonl", LANGFUSE.read_bytes()), _land(landing, "otlp.jsonl", OTLP.read_bytes())]
    plan = _plan(out)
    for path in files:
        name = clean_landed_file(_landed(path), W1, plan)
        source = json.loads((out / W1 / name / "source.json").read_text())
        assert source["files"]["calls"]["records"] == len(_lines(out / W1 / name / "calls.jsonl"))
        assert source["partial"]["call_logs"]["records"] > 0  # the records handed on, counted
        assert (out / W1 / name / "normalized.jsonl").read_bytes() == b""  # not a conversation alone
    done, summary = _close(out, W1, plan)
    assert done == "done" and summary["accounted"]
    calls = summary["call_logs"]
    assert (
        summary["records_in"]
        == summary["records_out"] + summary["dead_letters"] + calls["records"] - calls["conversations"]
    )
    assert calls["branches"] >= 1 and calls["prefixes_collapsed"] >= 1 and calls["reopened"] == 0

    batch = _batch(tmp_path / "batch", files)
    streamed = out / W1 / processed.ASSEMBLED_DIR
    assert (streamed / "normalized.jsonl").read_bytes() == _batch_assembled(batch, "normalized").read_bytes()
    drops = _without_pane(jsonl(streamed / "drops.jsonl"))
    assert drops == jsonl(_batch_assembled(batch, "drops"))
    reference = json.loads((batch / "summary.json").read_text())
    assert processed.final_summary(str(out), plan.settings) == reference  # every field
    assert assembly.assemble_window(str(out), W1, plan.work, plan.run_temp, assembly.move_committing) == "already"


@pytest.mark.slow
def test_a_window_with_parts_refused_and_skipped_gives_the_batch_runs_outputs(tmp_path):
    """A trace download with one unreadable observation and span rows of no call: the part's
    dead letter, the skipped counts and the conversations are the batch run's."""
    from test_calllogs_parts import NOISE, TRACE

    landing, out = tmp_path / "landing", tmp_path / "out"
    data = "".join(json.dumps(record) + "\n" for record in [TRACE, *NOISE]).encode()
    files = [_land(landing, "mixed.jsonl", data)]
    plan = _plan(out)
    clean_landed_file(_landed(files[0]), W1, plan)
    done, summary = _close(out, W1, plan)
    assert done == "done" and summary["accounted"]
    batch = _batch(tmp_path / "batch", files)
    streamed = out / W1 / processed.ASSEMBLED_DIR
    assert (streamed / "normalized.jsonl").read_bytes() == _batch_assembled(batch, "normalized").read_bytes()
    assert (streamed / "dead_letter.jsonl").read_bytes() == _batch_assembled(batch, "dead_letter").read_bytes()
    reference = json.loads((batch / "summary.json").read_text())
    assert reference["call_logs"]["parts_refused"] == 1 and reference["call_logs"]["skipped_by_kind"]["http"] == 1
    assert processed.final_summary(str(out), plan.settings) == reference


@pytest.mark.slow
def test_every_export_familys_files_in_one_window_give_the_batch_runs_conversations(tmp_path):
    """The mixed directory of tests/test_calllogs_runs.py (every call-log fixture, beside whole
    conversations), each file landed in one window: the batch run's assembled conversations, drop
    metrics (but the pane) and summary, and each file's own outputs."""
    from engine_outputs import write_call_log_input

    write_call_log_input(tmp_path / "landing")
    files = sorted(p for p in (tmp_path / "landing").iterdir())
    out = tmp_path / "out"
    plan = _plan(out)
    names = [clean_landed_file(_landed(path), W1, plan) for path in files]
    done, summary = _close(out, W1, plan)
    assert done == "done" and summary["accounted"]
    batch = _batch(tmp_path / "batch", files)
    streamed = out / W1 / processed.ASSEMBLED_DIR
    assert (streamed / "normalized.jsonl").read_bytes() == _batch_assembled(batch, "normalized").read_bytes()
    assert _without_pane(jsonl(streamed / "drops.jsonl")) == jsonl(_batch_assembled(batch, "drops"))
    assert len({d["assembly"]["format"] for d in jsonl(streamed / "drops.jsonl")}) >= 5
    letters = batch / "dead_letter" / f"part-{len(files):05d}.jsonl"  # the groups' own, after the files'
    assert (streamed / "dead_letter.jsonl").read_bytes() == (letters.read_bytes() if letters.exists() else b"")
    for index, name in enumerate(names):  # each file's own outputs: its batch part, byte for byte
        for kind in ("normalized", "drops", "dead_letter"):
            part = batch / kind / f"part-{index:05d}.jsonl"
            expected = part.read_bytes() if part.exists() else b""
            assert (out / W1 / name / f"{kind}.jsonl").read_bytes() == expected, (files[index], kind)
    assert processed.final_summary(str(out), plan.settings) == json.loads((batch / "summary.json").read_text())


@pytest.mark.slow
def test_a_call_in_a_later_window_reopens_its_group_whole(tmp_path):
    """The langfuse export's first call lands in one window, its next call and tool result in
    another: the second window emits the group again, whole (the batch run's conversation of
    both files), pane 1, counted reopened; the window in between, with no call of it, does not."""
    rows = _lines(LANGFUSE)  # [obs-2 (s-1, later), tool (s-1), obs-1 (s-1, first), span (no call), obs-9 (tr-2)]
    landing, out = tmp_path / "landing", tmp_path / "out"
    first = _land(landing, "first.jsonl", b"".join(rows[2:]))
    other = _land(landing, "other.jsonl", OTLP.read_bytes())
    later = _land(landing, "later.jsonl", b"".join(rows[:2]))
    plan = _plan(out)
    summaries_by_window = {}
    for window, path in ((W1, first), (W2, other), (W3, later)):
        assert clean_landed_file(_landed(path), window, plan)
        done, summaries_by_window[window] = _close(out, window, plan)
        assert done == "done" and summaries_by_window[window]["accounted"], window

    def made(window: str) -> dict[str, tuple[dict, dict]]:
        directory = out / window / processed.ASSEMBLED_DIR
        pairs = zip(jsonl(directory / "normalized.jsonl"), jsonl(directory / "drops.jsonl"))
        return {record["id"]: (record, drop) for record, drop in pairs}

    one, three = made(W1), made(W3)
    assert sorted(one) == ["s-1", "tr-2"] and sorted(three) == ["s-1"]
    assert "s-1" not in made(W2)
    assert one["s-1"][1]["assembly"]["pane"] == 0 and three["s-1"][1]["assembly"]["pane"] == 1
    assert [c["call"] for c in one["s-1"][1]["assembly"]["calls"]] == ["obs-1"]
    assert [c["call"] for c in three["s-1"][1]["assembly"]["calls"]] == ["obs-1", "obs-2"]
    assert summaries_by_window[W3]["call_logs"]["reopened"] == 1
    assert summaries_by_window[W1]["call_logs"]["reopened"] == 0

    # The re-emission is the conversation a batch run over every file so far gives.
    batch = _batch(tmp_path / "batch", [first, later])
    reference = {r["id"]: r for r in jsonl(_batch_assembled(batch, "normalized"))}
    assert three["s-1"][0] == reference["s-1"]
    line = next(x for x in _lines(out / W3 / processed.ASSEMBLED_DIR / "normalized.jsonl"))
    assert line in _lines(_batch_assembled(batch, "normalized"))  # byte for byte
    total = processed.final_summary(str(out), plan.settings)
    assert total["accounted"] and total["call_logs"]["reopened"] == 1


def _three_windows(root: Path) -> tuple[Path, CleanPlan]:
    """The re-opening scenario's files committed into three windows, none closed yet."""
    rows = _lines(LANGFUSE)
    landing, out = root / "landing", root / "out"
    plan = _plan(out)
    for window, name, data in (
        (W1, "first.jsonl", b"".join(rows[2:])),
        (W2, "other.jsonl", OTLP.read_bytes()),
        (W3, "later.jsonl", b"".join(rows[:2])),
    ):
        assert clean_landed_file(_landed(_land(landing, name, data)), window, plan)
    return out, plan


def _assembled_bytes(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob(f"*/{processed.ASSEMBLED_DIR}/*.jsonl"))}


def test_what_a_window_emits_does_not_depend_on_the_order_windows_close_in(tmp_path):
    """Windows may close in any order on a runner (and a start assembles what a dead run left):
    a window's conversations come from the windows up to it only, its panes from the pieces."""
    in_order, plan = _three_windows(tmp_path / "a")
    for window in (W1, W2, W3):
        _close(in_order, window, plan)
    reversed_, plan = _three_windows(tmp_path / "b")
    for window in (W3, W2, W1):
        _close(reversed_, window, plan)
    first, second = _assembled_bytes(in_order), _assembled_bytes(reversed_)
    assert len(first) == 9 and first.keys() == second.keys()
    for name in first:  # the sources differ by their directory: compare with it taken out
        assert first[name].replace(b"/a/", b"/x/") == second[name].replace(b"/b/", b"/x/"), name


def test_a_kill_after_the_assembly_was_committed_and_before_the_summary(tmp_path):
    """The assembly is in place, the summary is not: a start assembles nothing again and writes
    the summary with the assembly counted."""
    out, plan = _three_windows(tmp_path)
    assert assembly.assemble_window(str(out), W1, plan.work, plan.run_temp, assembly.move_committing) == "done"
    assert assembly.assemble_left_windows(str(out), plan.work, plan.run_temp) == [W2, W3]  # W1: done before
    rebuilt = processed.rebuild_windows(str(out), plan.settings, force=[W2, W3])
    assert rebuilt == [W1, W2, W3]
    for window in (W1, W2, W3):
        summary = json.loads((out / window / "summary.json").read_text())
        made = len(_lines(out / window / processed.ASSEMBLED_DIR / "normalized.jsonl"))
        letters = len(_lines(out / window / processed.ASSEMBLED_DIR / "dead_letter.jsonl"))
        assert summary["accounted"] and summary["call_logs"]["conversations"] == made + letters, window
    assert json.loads((out / W3 / "summary.json").read_text())["call_logs"]["reopened"] == 1


def test_a_window_without_call_logs_assembles_nothing_and_keeps_its_outputs(tmp_path):
    landing, out = tmp_path / "landing", tmp_path / "out"
    path = _land(landing, "chat.jsonl", b'{"id": "a", "messages": [{"role": "user", "content": "hi"}]}\n')
    plan = _plan(out)
    name = clean_landed_file(_landed(path), W1, plan)
    assert sorted(p.name for p in (out / W1 / name).iterdir()) == [
        "dead_letter.jsonl",
        "drops.jsonl",
        "normalized.jsonl",
        "source.json",
    ]
    done, summary = _close(out, W1, plan)
    assert done == "none" and "call_logs" not in summary
    assert not (out / W1 / processed.ASSEMBLED_DIR).exists()


def test_a_close_the_run_refuses_to_commit_is_done_by_the_next_start(tmp_path):
    """A window closing after the run stopped committing (a drain that outlasted
    --drain-timeout) writes nothing; the driver's rebuild assembles it, then rewrites its
    summary with the assembly counted."""
    landing, out = tmp_path / "landing", tmp_path / "out"
    plan = _plan(out)
    clean_landed_file(_landed(_land(landing, "a.jsonl", LANGFUSE.read_bytes())), W1, plan)
    refused = assembly.assemble_window(str(out), W1, plan.work, plan.run_temp, lambda *a: False)
    assert refused == "refused"
    assert not (out / W1 / processed.ASSEMBLED_DIR).exists()
    assert list((Path(plan.run_temp) / "in-flight").iterdir()) == []  # nothing left in flight
    before = processed.write_window_summary(str(out), W1, plan.settings, None)  # as if one were there
    assert before["call_logs"]["conversations"] == 0
    assembled = assembly.assemble_left_windows(str(out), plan.work, plan.run_temp)
    assert assembled == [W1]
    assert processed.rebuild_windows(str(out), plan.settings, force=assembled) == [W1]
    summary = json.loads((out / W1 / "summary.json").read_text())
    assert summary["accounted"] and summary["call_logs"]["conversations"] == 2
    assert assembly.assemble_left_windows(str(out), plan.work, plan.run_temp) == []  # once


def test_the_window_index_is_built_once_and_names_each_groups_directories(tmp_path):
    landing, out = tmp_path / "landing", tmp_path / "out"
    plan = _plan(out)
    a = clean_landed_file(_landed(_land(landing, "a.jsonl", LANGFUSE.read_bytes())), W1, plan)
    b = clean_landed_file(_landed(_land(landing, "b.jsonl", b"".join(_lines(LANGFUSE)[:1]))), W1, plan)
    index = assembly.window_index(str(out), W1, fresh=True)
    assert index.groups == {'["langfuse","s-1"]': sorted([a, b]), '["langfuse","tr-2"]': [a]}
    assert index.files == {a: [str(landing / "a.jsonl"), 1, "new"], b: [str(landing / "b.jsonl"), 1, "new"]}
    assert json.loads((out / W1 / assembly.CALL_INDEX_FILE).read_text())["groups"] == index.groups
    (out / W1 / a / "source.json").unlink()  # the index on disk is read, not rebuilt
    assert assembly.window_index(str(out), W1) == index


def _without_spans(out: Path, window: str) -> None:
    """The window as a run of the previous release left it: no ``call_spans`` in its files'
    source.json, no ``spans`` in its calls_index.json."""
    for path in [*(out / window).glob("*/" + processed.SOURCE_FILE), out / window / assembly.CALL_INDEX_FILE]:
        if path.exists():
            doc = json.loads(path.read_text())
            assert doc.pop("call_spans", None) is not None or doc.pop("spans", None) is not None
            path.write_text(json.dumps(doc))


def test_a_close_parses_its_groups_lines_alone_and_reads_files_without_spans_whole(tmp_path, monkeypatch):
    """A landed file's source.json (and its window's index) says where each group's lines are
    in its calls.jsonl: a close parses those lines alone, the other groups' unparsed. The files a
    run of the previous release left have no spans: read whole, to the same outputs."""
    rows = _lines(LANGFUSE)
    landing = tmp_path / "landing"
    parsed: list[tuple[str, str]] = []

    read = PieceLines.read

    def counted(self, line: bytes):
        got = read(self, line)
        parsed.append(group_key(got[2]))
        return got

    monkeypatch.setattr(PieceLines, "read", counted)
    # Closes in another process than the files' cleaning: every line parsed from disk.
    monkeypatch.setattr(assembly, "JUST_WRITTEN", assembly.JustWritten(limit=0))
    outputs = {}
    for layout in ("spans", "earlier release"):
        out = tmp_path / layout
        plan = _plan(out)
        monkeypatch.setattr(assembly, "INDEXES", assembly._Indexes())
        # Two groups, their lines interleaved: s-1, tr-2, s-1.
        clean_landed_file(_landed(_land(landing, "a.jsonl", rows[0] + rows[4] + rows[2])), W1, plan)
        _close(out, W1, plan)
        source = json.loads(next((out / W1).glob("*/" + processed.SOURCE_FILE)).read_text())
        assert source["call_groups"] == [["langfuse", "s-1"], ["langfuse", "tr-2"]]
        assert source["call_spans"][1][0] == source["call_spans"][0][1]  # tr-2's line between s-1's
        clean_landed_file(_landed(_land(landing, "b.jsonl", rows[1])), W2, plan)  # s-1 again
        if layout == "earlier release":
            _without_spans(out, W1)
            _without_spans(out, W2)
            monkeypatch.setattr(assembly, "INDEXES", assembly._Indexes())  # a new process
        parsed.clear()
        done, summary = _close(out, W2, plan)
        assert done == "done" and summary["accounted"]
        if layout == "spans":
            assert sorted(set(parsed)) == [("langfuse", "s-1")] and len(parsed) == 3
        else:
            assert ("langfuse", "tr-2") in parsed  # every line read
        outputs[layout] = {
            name: (out / W2 / processed.ASSEMBLED_DIR / name).read_bytes()
            for name in ("normalized.jsonl", "drops.jsonl", "dead_letter.jsonl")
        }
    assert outputs["spans"] == outputs["earlier release"]
    assert b'"s-1"' in outputs["spans"]["normalized.jsonl"] + outputs["spans"]["drops.jsonl"]


def test_a_rewritten_file_replaces_its_earlier_pieces_and_an_appended_one_adds_to_them(tmp_path):
    """Found: a landed export rewritten with more rows (read again whole, as version 2) gave
    its group every earlier call twice: listed twice in ``assembly.calls``, counted collapsed."""
    rows = _lines(LANGFUSE)
    landing, out = tmp_path / "landing", tmp_path / "out"
    plan = _plan(out)
    path = _land(landing, "export.jsonl", b"".join(rows[2:]))
    clean_landed_file(_landed(path), W1, plan)
    _close(out, W1, plan)
    path.write_bytes(b"".join(rows))  # rewritten whole: the same rows and the earlier ones first
    assert clean_landed_file(_landed(path), W2, plan).endswith("-v2")
    _, summary = _close(out, W2, plan)
    drops = {d["id"]: d for d in jsonl(out / W2 / processed.ASSEMBLED_DIR / "drops.jsonl")}
    assert [c["call"] for c in drops["s-1"]["assembly"]["calls"]] == ["obs-1", "obs-2"]
    assert drops["s-1"]["assembly"]["collapsed"] == 1 and drops["s-1"]["assembly"]["pane"] == 1
    assert summary["accounted"]

    more = {"role": "user", "content": "And tomorrow?"}
    row = json.loads(rows[0])
    row.update(id="obs-3", start_time="2026-11-30 10:00:09.000000")
    row["input"] = json.dumps([*json.loads(row["input"]), json.loads(row["output"]), more])
    with path.open("ab") as handle:  # appended: version 3 adds its call to version 2's
        handle.write(json.dumps(row).encode() + b"\n")
    assert clean_landed_file(_landed(path), W3, plan).endswith("-v3")
    _close(out, W3, plan)
    drops = {d["id"]: d for d in jsonl(out / W3 / processed.ASSEMBLED_DIR / "drops.jsonl")}
    assert [c["call"] for c in drops["s-1"]["assembly"]["calls"]] == ["obs-1", "obs-2", "obs-3"]


def test_the_totals_check_fails_when_a_committed_windows_pieces_were_not_all_assembled(tmp_path):
    """Found: a restart assembled a window still open, and the files committed into it
    afterwards were never assembled; the final summary said ``accounted: true``. Pieces
    committed after their window's assembly, and a window never assembled, fail the check."""
    rows = _lines(LANGFUSE)
    landing, out = tmp_path / "landing", tmp_path / "out"
    plan = _plan(out)
    clean_landed_file(_landed(_land(landing, "a.jsonl", b"".join(rows[2:]))), W1, plan)
    _close(out, W1, plan)
    assert processed.final_summary(str(out), plan.settings)["accounted"]
    late = clean_landed_file(_landed(_land(landing, "b.jsonl", b"".join(rows[:2]))), W1, plan)
    pieces = len(_lines(out / W1 / late / "calls.jsonl"))
    total = processed.final_summary(str(out), plan.settings)
    assert not total["accounted"]
    assert total[processed.NOT_ASSEMBLED] == {"windows": [W1], "files": 1, "pieces": pieces}
    clean_landed_file(_landed(_land(landing, "c.jsonl", OTLP.read_bytes())), W2, plan)  # W2: no close
    total = processed.final_summary(str(out), plan.settings)
    assert total[processed.NOT_ASSEMBLED]["windows"] == [W1, W2] and not total["accounted"]
    line = processed.not_assembled_line(total)
    assert line is not None and "never assembled" in line and W2 in line
    assert assembly.assemble_window(str(out), W2, plan.work, plan.run_temp, assembly.move_committing) == "done"
    assert processed.final_summary(str(out), plan.settings)[processed.NOT_ASSEMBLED]["windows"] == [W1]


def test_a_close_in_the_cleaning_process_takes_its_files_pieces_and_gives_what_parsing_gives(tmp_path, monkeypatch):
    """A close in the process that cleaned its window's files takes their pieces as kept, not
    parsing its files' lines; the same outputs as a close in another process (every line
    parsed)."""
    rows = _lines(LANGFUSE)
    parsed: list[bytes] = []
    read = PieceLines.read

    def counted(self, line: bytes):
        parsed.append(line)
        return read(self, line)

    monkeypatch.setattr(PieceLines, "read", counted)
    outputs = {}
    for case in ("kept", "another process"):
        out = tmp_path / case
        plan = _plan(out)
        monkeypatch.setattr(assembly, "JUST_WRITTEN", assembly.JustWritten())
        grown = _growing_rows("s-9", 3)
        for window, data in ((W1, rows[2] + rows[4] + grown[0] + grown[1]), (W2, rows[0] + rows[1] + grown[2])):
            name = clean_landed_file(_landed(_land(tmp_path / "landing", f"{case}-{window}.jsonl", data)), window, plan)
            calls = out / window / name / processed.CALLS_FILE
            if case == "another process":
                monkeypatch.setattr(assembly, "JUST_WRITTEN", assembly.JustWritten())
            parsed.clear()
            done, summary = _close(out, window, plan)
            assert done == "done" and summary["accounted"]
            own = len(_lines(calls))
            if case == "kept":
                assert len(parsed) == (0 if window == W1 else 3)  # W2 parses s-1 and s-9's W1 lines
            else:
                assert len(parsed) >= own
        outputs[case] = {
            name: (out / W2 / processed.ASSEMBLED_DIR / name).read_bytes().replace(case.encode(), b"")
            for name in ("normalized.jsonl", "drops.jsonl", "dead_letter.jsonl")
        }
    assert outputs["kept"] == outputs["another process"]
    assert b"s-9" in outputs["kept"]["normalized.jsonl"] + outputs["kept"]["drops.jsonl"]


def test_pieces_kept_are_taken_once_and_only_for_the_bytes_written():
    """A file whose bytes on disk are not those written is parsed; a close tried again parses
    (the pieces a first try took may be the assembly's now); the oldest go past the limit."""
    piece = ("a.jsonl", 0, Call("otlp", "g", 1, "c1", [{"role": "user", "content": "hi"}], []))
    data = piece_line(*piece)
    kept = assembly.Kept(data, [0], [piece])
    written = assembly.JustWritten(limit=3 * len(data))
    written.keep("out/w/a/calls.jsonl", kept)
    assert written.take("out/w/a/calls.jsonl", data.replace(b"hi", b"ho")) is None
    assert written.take("out/w/a/calls.jsonl", data) is None  # forgotten at the first look
    written.keep("out/w/a/calls.jsonl", kept)
    assert list(written.take("out/w/a/calls.jsonl", data).within([0, len(data)])) == [piece]
    assert written.take("out/w/a/calls.jsonl", data) is None
    for name in "abcd":
        written.keep(f"out/w/{name}/calls.jsonl", kept)
    assert written.take("out/w/a/calls.jsonl", data) is None and written.take("out/w/d/calls.jsonl", data)


def test_a_start_assembles_the_closed_windows_left_and_leaves_an_open_one_to_its_close(tmp_path):
    """A dead run left two windows with call logs unassembled: the start assembles the one whose
    end has passed; the open one stays open (files committed into it now are its pieces too) and
    its close assembles it from every piece, once."""
    from pipeline.streaming.driver import open_left_windows, rebuild_windows

    rows = _lines(LANGFUSE)
    landing, out = tmp_path / "landing", tmp_path / "out"
    plan = _plan(out)
    clean_landed_file(_landed(_land(landing, "a.jsonl", OTLP.read_bytes())), W1, plan)
    clean_landed_file(_landed(_land(landing, "b.jsonl", b"".join(rows[2:]))), W2, plan)
    start, end = processed.parse_window(W2)
    assert open_left_windows(str(out), 60, end) == []  # its end passed while no run was alive
    assert open_left_windows(str(out), 30, start + 1) == []  # not a window of this run's length
    left_open = open_left_windows(str(out), 60, start + 30)
    assert left_open == [W2]
    rebuild_windows(str(out), plan, keep_open=left_open)
    assert assembly.left_windows(str(out)) == [W2]
    assert assembly.sealed_until(str(out)) == processed.parse_window(W1)[1]
    late = clean_landed_file(_landed(_land(landing, "c.jsonl", b"".join(rows[:2]))), W2, plan)
    assert _close(out, W2, plan)[0] == "done"
    doc = processed.assembled_result(str(out), W2)
    assert doc is not None and late in doc["window_files"]
    drops = {d["id"]: d for d in jsonl(out / W2 / processed.ASSEMBLED_DIR / "drops.jsonl")}
    assert [c["call"] for c in drops["s-1"]["assembly"]["calls"]] == ["obs-1", "obs-2"]
    assert processed.final_summary(str(out), plan.settings)["accounted"]
    assert assembly.sealed_until(str(out)) == end
    assert rebuild_windows(str(out), plan) == []  # nothing left: assembled once


@pytest.mark.slow
def test_a_window_left_open_closes_in_the_run_with_no_file_of_its_own(tmp_path):
    """``KeepWindowsOpen`` puts one element in each window a dead run left open, so that the
    run's close of it (the window of that name) assembles it though no new file lands in it."""
    import apache_beam as beam

    from pipeline.streaming.commits import COMMITS
    from pipeline.streaming.windows import KeepWindowsOpen, SummarizeWindows

    landing, out = tmp_path / "landing", tmp_path / "out"
    plan = _plan(out)
    clean_landed_file(_landed(_land(landing, "a.jsonl", LANGFUSE.read_bytes())), W2, plan)
    COMMITS.open()
    with beam.Pipeline() as pipeline:
        kept = pipeline | KeepWindowsOpen([W2], 60)
        _ = kept | SummarizeWindows(str(out), plan.settings, plan.work, plan.run_temp)
    assert processed.window_names(str(out)) == [W2]
    doc = processed.assembled_result(str(out), W2)
    assert doc is not None and doc["groups"] == 2
    assert json.loads((out / W2 / "summary.json").read_text())["call_logs"]["conversations"] == 2


# --------------------------------------------------------------------------------------------
# On Prism, as a user runs it


def _prism_argv(landing: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--streaming",
        "--runner=PrismRunner",
        f"--prism_location={prism_binary()}",
        f"--input={landing}/*.jsonl",
        f"--output={out}",
        "--window=4s",
        "--poll-interval=0.3s",
        *extra,
    ]


def _assembled_dirs(out: Path) -> list[Path]:
    return sorted(out.glob(f"*/{processed.ASSEMBLED_DIR}/{processed.ASSEMBLED_FILE}"))


def _newest_by_id(out: Path) -> dict[str, bytes]:
    """Every assembled conversation's line, the newest window's of each id kept (the rule)."""
    kept: dict[str, bytes] = {}
    for path in _assembled_dirs(out):
        for line in _lines(path.parent / "normalized.jsonl"):
            kept[json.loads(line)["id"]] = line
    return kept


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 600)
def test_on_prism_landed_call_logs_give_the_batch_conversations_and_a_late_call_reopens(tmp_path):
    rows = _lines(LANGFUSE)
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    files = {"a-first.jsonl": b"".join(rows[2:]), "b-otlp.jsonl": OTLP.read_bytes()}
    for name, data in files.items():
        land(landing, name, data)
    with Streaming(tmp_path, landing, out, "calls") as run:
        run.wait_started()
        run.wait_for(lambda: len(_assembled_dirs(out)) >= 1, START_TIMEOUT_S, "the first window's assembly")
        land(landing, "c-later.jsonl", b"".join(rows[:2]))
        run.wait_for(lambda: len(_assembled_dirs(out)) >= 2, START_TIMEOUT_S, "the later window's assembly")
        status = run.stop()
    assert status == 0, run.text
    assert not no_leftovers(out), no_leftovers(out)
    for path in out.glob("*/summary.json"):  # accounted per window, each conversation written
        window = json.loads(path.read_text())
        assert window["accounted"], path
        calls = window.get("call_logs", {})
        assembled = path.parent / processed.ASSEMBLED_DIR
        written = sum(len(_lines(assembled / f"{kind}.jsonl")) for kind in ("normalized", "dead_letter"))
        assert calls.get("conversations", 0) == (written if assembled.exists() else 0), path
        assert (calls.get("records", 0) > 0) == assembled.exists(), path
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] and summary["call_logs"]["reopened"] >= 1

    last = json.loads(_assembled_dirs(out)[-1].read_text())
    assert last["reopened_groups"] == 1
    drops = jsonl(_assembled_dirs(out)[-1].parent / "drops.jsonl")
    assert [d["assembly"]["pane"] for d in drops if d["id"] == "s-1"] == [1]

    batch = _batch(tmp_path / "batch", sorted(landing.glob("*.jsonl")))
    reference = {json.loads(line)["id"]: line for line in _lines(_batch_assembled(batch, "normalized"))}
    assert _newest_by_id(out) == reference  # the same ids, the same bytes


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 600)
def test_on_prism_a_kill_in_the_window_close_then_a_restart_assembles_it_once(tmp_path):
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    land(landing, "langfuse.jsonl", LANGFUSE.read_bytes())
    land(landing, "otlp.jsonl", OTLP.read_bytes())
    proc, ready = start_paused(_prism_argv(landing, out), "streaming-assemble", tmp_path)
    kill(proc)  # in the close: the assembly written in the run's temporary directory, not in place
    windows = processed.window_names(str(out))
    assert len(windows) == 1 and not _assembled_dirs(out)
    assert not (out / windows[0] / "summary.json").exists()
    assert len(list(out.glob("*/*/calls.jsonl"))) == 2  # the files were committed

    with Streaming(tmp_path, landing, out, "restarted") as run:
        run.wait_started()
        land(landing, "z-plain.jsonl", b'{"id": "p", "messages": [{"role": "user", "content": "hi"}]}\n')
        run.wait_for(lambda: outputs_of(out, landing / "z-plain.jsonl"), START_TIMEOUT_S, "output of z-plain")
        status = run.stop()
    assert status == 0, run.text
    assert not no_leftovers(out), no_leftovers(out)
    assembled = _assembled_dirs(out)
    assert [p.parent.parent.name for p in assembled] == windows  # the killed window's, once
    summary = json.loads((out / windows[0] / "summary.json").read_text())
    assert summary["accounted"] and summary["progress"].get("rebuilt") is True
    batch = _batch(tmp_path / "batch", [landing / "langfuse.jsonl", landing / "otlp.jsonl"])
    assert (assembled[0].parent / "normalized.jsonl").read_bytes() == _batch_assembled(batch, "normalized").read_bytes()
    total = json.loads((out / "summary.json").read_text())
    reference = json.loads((batch / "summary.json").read_text())
    assert total["call_logs"] == reference["call_logs"] and total["accounted"]
    assert total["records_in"] == reference["records_in"] + 1


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 600)
def test_on_prism_a_close_that_outlasts_the_drain_is_assembled_by_the_runs_end(tmp_path):
    """A stop whose drain outlasts --drain-timeout cancels the job with a window's close in
    flight (paused before its commit): the run's end assembles that window itself, once, and
    its summaries count it."""
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    land(landing, "langfuse.jsonl", LANGFUSE.read_bytes())
    pause = tmp_path / "paused"
    env = {
        "CONVNORM_TEST_PAUSE_AT": "streaming-assemble",
        "CONVNORM_TEST_PAUSE_FILE": str(pause),
        "CONVNORM_TEST_PAUSE_SECONDS": "600",
    }
    with Streaming(tmp_path, landing, out, "outlasted", "--drain-timeout=3s", env=env) as run:
        run.wait_started()
        run.wait_for(pause.exists, START_TIMEOUT_S, "a window's close paused before its commit")
        assert not _assembled_dirs(out)
        status = run.stop(timeout=60)
    assert status == 0, run.text
    assert "cancelling" in run.text
    assert not no_leftovers(out), no_leftovers(out)
    assembled = _assembled_dirs(out)
    assert len(assembled) == 1
    window = json.loads((assembled[0].parent.parent / "summary.json").read_text())
    total = json.loads((out / "summary.json").read_text())
    for doc in (window, total):
        assert doc["accounted"] and doc["call_logs"]["conversations"] == 2 == doc["records_out"]


def _long_window(margin_s: float = 900) -> int:
    """A --window whose current window has at least ``margin_s`` left: the runs below start,
    die and start again inside it (what they check holds either way; this makes them check
    the open window)."""
    now = time.time()
    return next(size for size in range(1800, 7200, 60) if size - now % size >= margin_s)


def _killpg(run: Streaming) -> None:
    """SIGKILL of the run's process group (Prism, in a session of its own, follows its parent)."""
    os.killpg(run.proc.pid, signal.SIGKILL)
    run.proc.wait()


def _when_committed(run: Streaming, out: Path, *paths: Path) -> None:
    run.wait_for(lambda: all(outputs_of(out, p) for p in paths), START_TIMEOUT_S, "outputs of the files landed")


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 900)
def test_on_prism_kills_and_restarts_inside_an_open_window_lose_no_call_log(tmp_path):
    """Found: a restart inside a window still open assembled it at once from the files the dead
    run had committed, and the files committed into it afterwards were never assembled (13 of
    574 conversations not written) while the run said ``accounted: true``. Killed (SIGKILL of the
    process group) twice with files landing in between, and a third time inside the drain's
    close of that window: the window is assembled once, after its close, from every piece, and
    gives the batch run's conversations and summary."""
    from engine_outputs import write_call_log_input

    rows = _lines(LANGFUSE)
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    extra = (f"--input={landing}/*.json", f"--window={_long_window()}s")
    land(landing, "a-first.jsonl", b"".join(rows[2:]))
    land(landing, "b-otlp.jsonl", OTLP.read_bytes())
    with Streaming(tmp_path, landing, out, "one", *extra) as run:
        run.wait_started()
        _when_committed(run, out, landing / "a-first.jsonl", landing / "b-otlp.jsonl")
        _killpg(run)
    window = processed.window_names(str(out))
    assert len(window) == 1 and not _assembled_dirs(out)
    with Streaming(tmp_path, landing, out, "two", *extra) as run:
        run.wait_started()
        land(landing, "c-later.jsonl", rows[0])
        _when_committed(run, out, landing / "c-later.jsonl")
        assert not _assembled_dirs(out), "a start assembled a window still open"
        _killpg(run)
    pause = tmp_path / "paused"
    env = {"CONVNORM_TEST_PAUSE_AT": "streaming-assemble", "CONVNORM_TEST_PAUSE_FILE": str(pause)}
    with Streaming(tmp_path, landing, out, "three", *extra, env=env) as run:
        run.wait_started()
        land(landing, "d-tool.jsonl", rows[1])
        write_call_log_input(tmp_path / "mixed")  # every export family's samples
        for path in sorted((tmp_path / "mixed").iterdir()):
            land(landing, path.name, path.read_bytes())
        _when_committed(run, out, *sorted(landing.iterdir()))
        run.proc.send_signal(signal.SIGTERM)  # the drain closes the window: killed in its close
        run.wait_for(pause.exists, START_TIMEOUT_S, "the window's close paused before its commit")
        _killpg(run)
    assert not _assembled_dirs(out)
    with Streaming(tmp_path, landing, out, "four", *extra) as run:
        run.wait_started()
        land(landing, "e-plain.jsonl", b'{"id": "p", "messages": [{"role": "user", "content": "hi"}]}\n')
        _when_committed(run, out, landing / "e-plain.jsonl")
        status = run.stop()
    assert status == 0, run.text
    assert not no_leftovers(out), no_leftovers(out)
    assert processed.window_names(str(out)) == window  # every file in the one window
    assert [p.parent.parent.name for p in _assembled_dirs(out)] == window  # assembled once
    files = sorted(landing.iterdir())
    batch = _batch(tmp_path / "batch", files)
    directory = _assembled_dirs(out)[0].parent
    assert (directory / "normalized.jsonl").read_bytes() == _batch_assembled(batch, "normalized").read_bytes()
    summary, reference = (json.loads((d / "summary.json").read_text()) for d in (out, batch))
    assert summary == reference and summary["accounted"]


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 600)
def test_on_prism_files_landing_after_a_drained_stop_inside_its_window_go_to_the_next(tmp_path):
    """A drained stop closes the window it was in before its end (and assembles it): a start
    inside that window admits its files into the next one, never into a window assembled
    already, so their calls are assembled there and the newest record of each id is the batch
    run's."""
    rows = _lines(LANGFUSE)
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    extra = (f"--window={_long_window()}s",)
    land(landing, "a-first.jsonl", b"".join(rows[2:]))
    land(landing, "b-otlp.jsonl", OTLP.read_bytes())
    with Streaming(tmp_path, landing, out, "one", *extra) as run:
        run.wait_started()
        _when_committed(run, out, landing / "a-first.jsonl", landing / "b-otlp.jsonl")
        assert run.stop() == 0, run.text
    first = processed.window_names(str(out))
    assert [p.parent.parent.name for p in _assembled_dirs(out)] == first
    with Streaming(tmp_path, landing, out, "two", *extra) as run:
        run.wait_started()
        land(landing, "c-later.jsonl", b"".join(rows[:2]))
        _when_committed(run, out, landing / "c-later.jsonl")
        status = run.stop()
    assert status == 0, run.text
    windows = processed.window_names(str(out))
    assert len(windows) == 2 and windows[0] == first[0]
    assert outputs_of(out, landing / "c-later.jsonl")[0].parent.name == windows[1]
    assert processed.parse_window(windows[1])[0] == processed.parse_window(first[0])[1]
    assert len(_assembled_dirs(out)) == 2
    batch = _batch(tmp_path / "batch", sorted(landing.glob("*.jsonl")))
    reference = {json.loads(line)["id"]: line for line in _lines(_batch_assembled(batch, "normalized"))}
    assert _newest_by_id(out) == reference
    assert json.loads((out / "summary.json").read_text())["accounted"]


EXPECTED = DATA / "expected" / "calllogs_conversations.jsonl"


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 600)
def test_on_prism_a_mixed_directory_of_exports_gives_the_expected_conversations(tmp_path):
    """The call-log assembly on a stream: every export family's samples, auto-detected, give
    the conversations pinned in tests/data/expected (as tests/test_calllogs_runs.py pins them for
    batch), byte-identical to a batch run's."""
    from engine_outputs import write_call_log_input

    landing, out = tmp_path / "landing", tmp_path / "out"
    write_call_log_input(landing)
    files = sorted(landing.iterdir())
    with Streaming(tmp_path, landing, out, "mixed", f"--input={landing}/*.json", "--window=60s") as run:
        run.wait_started()
        run.wait_for(lambda: len(list(out.glob("*/*/source.json"))) == len(files), START_TIMEOUT_S, "every file")
        status = run.stop()
    assert status == 0, run.text
    assembled = _assembled_dirs(out)
    assert len(assembled) == 1, "one window: one assembly"
    directory = assembled[0].parent
    records = jsonl(directory / "normalized.jsonl")
    metrics = {d["id"]: d for d in jsonl(directory / "drops.jsonl")}
    shapes = [
        {
            "id": r["id"],
            "roles": [m["role"] + ("+calls" if m.get("tool_calls") else "") for m in r["messages"]],
            "format": metrics[r["id"]]["assembly"]["format"],
            "calls": [c["call"] for c in metrics[r["id"]]["assembly"]["calls"]],
            "collapsed": metrics[r["id"]]["assembly"]["collapsed"],
        }
        for r in records
    ]
    assert "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in shapes) == EXPECTED.read_text()
    batch = _batch(tmp_path / "batch", files)
    assert (directory / "normalized.jsonl").read_bytes() == _batch_assembled(batch, "normalized").read_bytes()
    summary, reference = (json.loads((d / "summary.json").read_text()) for d in (out, batch))
    assert summary == reference


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 600)
def test_on_prism_calls_of_a_group_each_give_each_conversation_once(tmp_path):
    """LiteLLM without a session id and openai-v2 without a parent span (a group per call): a
    window's close chains its groups, so each conversation comes out once, whole, as in batch."""
    chained = CALL_LOGS / "chained"
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    for name in ("litellm-no-session.jsonl", "openai-v2-no-parent.jsonl"):
        land(landing, name, (chained / name).read_bytes())
    with Streaming(tmp_path, landing, out, "chained") as run:
        run.wait_started()
        run.wait_for(lambda: len(_newest_by_id(out)) >= 4, START_TIMEOUT_S, "the assembly of both files")
        status = run.stop()
    assert status == 0, run.text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] and summary["call_logs"]["chained_across_groups"] == 8
    batch = _batch(tmp_path / "batch", sorted(landing.glob("*.jsonl")))
    reference = {json.loads(line)["id"]: line for line in _lines(_batch_assembled(batch, "normalized"))}
    assert len(reference) == 4 and _newest_by_id(out) == reference
