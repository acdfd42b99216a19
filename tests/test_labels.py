"""Labels beside call logs: each tool's label records read, joined to the conversation holding
what they judge, kept in its metadata; conversations keep their context; --split-by reaches it;
--min-score / --max-score keep conversations by their scores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.cli.main import main
from transforms.calllogs.calls import Label, detect_call_log
from transforms.calllogs.context import METADATA_KEYS, conversation_metadata, iso_time, merge_context
from transforms.calllogs.labels import Target, attach, entry_of, read_langfuse_score, resolve, scores_of
from transforms.calllogs.readers import CALL_LOG_READERS
from transforms.formats import READERS
from transforms.formats._labels import LABEL_KEYS
from transforms.formats.base import FormatError
from transforms.record.score_filter import parse_bound, score_refusal

DATA = Path(__file__).resolve().parent / "data"
LABELS = DATA / "labels"
#: The fixtures of LABELS that are whole conversation records (the TRL sinks' tests read them).
WHOLE_RECORDS = ("conversations.jsonl", "regenerations.jsonl")
CALL_LOGS = DATA / "calllogs"


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("part-*")) for line in part.read_bytes().splitlines()]


def _run(inputs: list[Path], out: Path, *extra: str) -> dict:
    argv = [arg for path in inputs for arg in ("--input", str(path))]
    assert main([*argv, "--output", str(out), "--quiet", "--no-report", *extra]) in (0, 1)
    return json.loads((out / "summary.json").read_text())


def _score(**fields) -> dict:
    row = {
        "id": "sc",
        "trace_id": "t",
        "observation_id": None,
        "name": "n",
        "value": 1,
        "data_type": "NUMERIC",
        "string_value": None,
        "updated_at": "2026-11-30 14:00:00.000000",
    }
    return {**row, **fields}


# --------------------------------------------------------------------------------------------
# Readers


@pytest.mark.parametrize(
    "fields, value",
    [
        ({"value": 0.75}, 0.75),
        ({"value": 3.0}, 3),  # a whole number as an int: the same score, the same bytes
        ({"data_type": "BOOLEAN", "value": 1, "string_value": "True"}, True),
        ({"data_type": "BOOLEAN", "value": 0, "string_value": "False"}, False),
        ({"data_type": "CATEGORICAL", "value": 2, "string_value": "friendly"}, "friendly"),
        ({"data_type": "TEXT", "value": 0, "string_value": "a remark"}, "a remark"),
    ],
)
def test_a_langfuse_score_of_each_data_type_is_read(fields, value):
    (label,) = read_langfuse_score(_score(**fields))
    assert label.value == value and type(label.value) is type(value)
    assert (label.source, label.trace_id, label.call_id, label.group) == ("langfuse", "t", "", "t")


def test_a_langfuse_score_row_is_a_label_record_not_an_unknown_format():
    row = json.loads((LABELS / "langfuse-scores.jsonl").read_text().splitlines()[0])
    reader = detect_call_log(row)
    assert reader is not None and reader.name == "langfuse-scores"
    # Each label export's rows are read by its reader.
    for name, expected in (
        ("langsmith-feedback.jsonl", "langsmith-feedback"),
        ("phoenix-annotations.jsonl", "phoenix-annotations"),
    ):
        for line in (LABELS / name).read_text().splitlines():
            assert detect_call_log(json.loads(line)).name == expected
    assert "langfuse-scores" in CALL_LOG_READERS


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({"value": "high"}, "bad_label_value"),
        ({"value": float("nan")}, "bad_label_value"),
        ({"data_type": "BOOLEAN", "value": 3, "string_value": None}, "bad_label_value"),
        ({"name": ""}, "missing_name"),
        ({"trace_id": None}, "no_trace"),  # a session-level score judges no trace
    ],
)
def test_a_langfuse_score_that_cannot_be_read_is_refused_with_a_reason(fields, reason):
    with pytest.raises(FormatError) as error:
        read_langfuse_score(_score(**fields))
    assert error.value.reason == reason


# --------------------------------------------------------------------------------------------
# The join and the scores rule


def _label(label_id: str, call_id: str = "", start: int = 0, name: str = "q", value=1, trace: str = "t") -> Label:
    return Label("x", trace or call_id, start, call_id, "langfuse", label_id, name, value, trace)


def test_the_latest_version_of_a_label_is_kept_and_the_others_counted():
    stale, latest, again = _label("a", start=1, value=0), _label("a", start=2, value=1), _label("a", start=2, value=1)
    joined, counts = resolve([latest, stale, again], [Target("f", "g", ("c1",))])
    assert [j.label.value for j in joined] == [1]
    assert counts == {"superseded": 2}
    # The order the rows arrive in changes nothing.
    assert resolve([again, stale, latest], [Target("f", "g", ("c1",))]) == (joined, counts)


def test_a_label_joins_the_group_of_its_call_else_of_its_trace_else_is_unmatched():
    targets = [Target("f", "g2", ("c2",)), Target("f", "g1", ("c1", "c0"))]
    joined, counts = resolve([_label("a", "c2"), _label("b", "c9"), _label("c")], targets)
    placed = sorted((j.label.label_id, j.group, j.call) for j in joined)
    assert placed == [("a", "g2", True), ("b", "g1", False), ("c", "g1", False)]
    joined, counts = resolve([_label("d", "c1")], [])
    assert joined == [] and counts == {"label_unmatched": {"langfuse": 1}}


def test_scores_rule_whole_conversation_first_then_latest_message_then_latest_update():
    whole_old, whole_new = _label("a", start=1, value=0.1), _label("b", start=2, value=0.2)
    on_3, on_1_later = _label("c", start=9, value=0.3), _label("d", start=10, value=0.4)
    assert scores_of([(on_3, 3), (whole_old, None), (on_1_later, 1), (whole_new, None)]) == {"q": 0.2}
    assert scores_of([(on_1_later, 1), (on_3, 3)]) == {"q": 0.3}
    record = attach({"id": "x", "messages": []}, [(on_3, 3), (whole_old, None)])
    assert record["metadata"]["labels"] == [
        {"name": "q", "value": 0.1, "source": "langfuse"},
        {"name": "q", "value": 0.3, "source": "langfuse", "message": 3},
    ]


def test_conversation_metadata_and_merge_context():
    contexts = [
        (2_000_000_000, {"user_id": "u1", "trace_id": "t2", "tags": ["b"]}),
        (1_000_000_001, {"user_id": "u0", "trace_id": "t1", "tags": ["a", "b"], "environment": "prod"}),
    ]
    metadata = conversation_metadata(contexts, "m")
    assert metadata == {
        "user_id": "u0",  # the last call's (in call order): the caller orders them
        "trace_ids": ["t1", "t2"],
        "tags": ["a", "b"],
        "model": "m",
        "environment": "prod",
        "first_call_at": "1970-01-01T00:00:01.000000001Z",
        "last_call_at": "1970-01-01T00:00:02Z",
    }
    assert iso_time(1796032800123456789) == "2026-11-30T10:00:00.123456789Z"
    later = {"user_id": "u9", "trace_ids": ["t0"], "first_call_at": "1970-01-01T00:00:03Z", "scores": {"q": 1}}
    merged = merge_context(metadata, later)
    assert merged["user_id"] == "u9" and merged["trace_ids"] == ["t0", "t1", "t2"]
    assert merged["first_call_at"] == "1970-01-01T00:00:01.000000001Z" and merged["scores"] == {"q": 1}
    assert merge_context(None, None) == {}


# --------------------------------------------------------------------------------------------
# A run


@pytest.fixture(scope="module")
def labelled_input(tmp_path_factory) -> Path:
    """The label exports beside the call logs they judge, and a Helicone export with ratings
    (not the whole records labelled in their own metadata that share the fixtures' folder)."""
    directory = tmp_path_factory.mktemp("labelled")
    for path in LABELS.glob("*.jsonl"):
        if path.name not in WHOLE_RECORDS:
            shutil.copy(path, directory / path.name)
    shutil.copy(CALL_LOGS / "langsmith" / "langchain-runs.jsonl", directory / "langsmith-runs.jsonl")
    shutil.copy(CALL_LOGS / "otlp" / "span-rows.jsonl", directory / "phoenix-spans.jsonl")
    rows = [json.loads(line) for line in (CALL_LOGS / "helicone" / "export-rows.jsonl").read_text().splitlines()]
    rows[0]["feedback"] = {"id": "hf-1", "rating": True}
    rows[2]["feedback_rating"] = False
    (directory / "helicone.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return directory


@pytest.fixture(scope="module")
def labelled_run(tmp_path_factory, labelled_input) -> Path:
    out = tmp_path_factory.mktemp("labelled-run") / "out"
    _run([labelled_input], out)
    return out


def _by_id(out: Path, name: str = "normalized") -> dict[str, dict]:
    return {record["id"]: record for record in _lines(out / name)}


def test_every_label_is_joined_superseded_or_counted_unmatched(labelled_run):
    summary = json.loads((labelled_run / "summary.json").read_text())
    labels = summary["labels"]
    rows = sum(len((LABELS / name).read_text().splitlines()) for name in ("langfuse-scores.jsonl",))
    rows += sum(
        len((LABELS / name).read_text().splitlines())
        for name in ("langsmith-feedback.jsonl", "phoenix-annotations.jsonl")
    )
    assert labels["read"] == rows + 2  # and the two Helicone ratings
    assert labels["read"] == labels["joined"] + labels["superseded"] + sum(labels["label_unmatched"].values())
    # The unknown trace's score and the feedback on an unknown run.
    assert labels["label_unmatched"] == {"langfuse": 1, "langsmith": 1} and labels["superseded"] == 2
    assert summary["accounted"]
    # The whole records beside them carry labels of their own (read with them, not joined).
    whole = {
        json.loads(line)["id"]
        for name in ("conversations.jsonl", "regenerations.jsonl")
        for line in (LABELS / name).read_text().splitlines()
    }
    written = sum(
        len(r.get("metadata", {}).get("labels", ()))
        for r in _lines(labelled_run / "normalized")
        if r["id"] not in whole
    )
    assert written == labels["joined"]


def test_a_conversation_carries_its_context_and_its_labels(labelled_run):
    records = _by_id(labelled_run)
    first = records["ses-1"]
    assert first["metadata"] == {
        "user_id": "user-1",
        "session_id": "ses-1",
        "trace_ids": ["trace-1"],
        "tags": ["beta", "web"],
        "model": "gpt-4o-mini",
        "environment": "prod",
        "release": "v1.2",
        "first_call_at": "2026-11-30T10:00:00Z",
        "last_call_at": "2026-11-30T10:00:05Z",
        # The trace's score wins over its first call's; the latest version of the thumbs.
        "scores": {"quality": 0.9, "thumbs": True},
        "labels": [
            {"name": "quality", "value": 0.9, "source": "langfuse", "comment": "clear and right"},
            {"name": "quality", "value": 0.1, "source": "langfuse", "message": 1},
            {"name": "thumbs", "value": True, "source": "langfuse", "message": 3},
        ],
    }
    for label in first["metadata"]["labels"]:
        if "message" in label:
            assert first["messages"][label["message"]]["role"] == "assistant"
    # A score of one branch's call goes on that branch.
    assert records["ses-4#branch1"]["metadata"]["scores"] == {"quality": 0.2}
    assert "scores" not in records["ses-4"]["metadata"]
    assert records["ses-3"]["metadata"]["scores"] == {"note": "a good one", "tone": "friendly"}


def test_langsmith_phoenix_and_helicone_labels_are_joined(labelled_run):
    records = _by_id(labelled_run)
    thread = records["thread-42"]["metadata"]
    assert thread["scores"] == {"correctness": 1, "edit": True, "user_rating": "great"}
    edit = next(label for label in thread["labels"] if label["name"] == "edit")
    assert edit["correction"] == [{"role": "assistant", "content": "It is rainy in Paris."}]
    assert records["thread-42"]["messages"][edit["message"]]["role"] == "assistant"
    phoenix = records["5b8e"]["metadata"]
    assert phoenix["scores"] == {"correctness": 1, "helpfulness": "helpful"}
    assert records["sess-9"]["metadata"]["scores"] == {"feedback": True}
    assert records["req-3"]["metadata"]["scores"] == {"feedback": False}


def test_the_order_files_are_read_in_changes_no_label(tmp_path, labelled_input, labelled_run):
    """Inputs named in the other order: the same bytes (labels of one id arrive in another order)."""
    names = sorted(p.name for p in labelled_input.glob("*.jsonl"))
    reordered = tmp_path / "in"
    reordered.mkdir()
    for n, name in enumerate(reversed(names)):
        shutil.copy(labelled_input / name, reordered / f"{n:02d}-{name}")
    out = tmp_path / "out"
    _run([reordered], out)
    assert sorted(map(json.dumps, _lines(out / "normalized"))) == sorted(
        map(json.dumps, _lines(labelled_run / "normalized"))
    )
    assert (
        json.loads((out / "summary.json").read_text())["labels"]
        == json.loads((labelled_run / "summary.json").read_text())["labels"]
    )


# --------------------------------------------------------------------------------------------
# --split-by on call logs


def _sessions_of_users(directory: Path, users: int = 12, sessions: int = 4) -> Path:
    """Langfuse observation rows: each user's sessions, each session two calls of one growing
    history and a third call that branches."""
    rows = []
    for u in range(users):
        for s in range(sessions):
            session, trace = f"u{u}-s{s}", f"u{u}-t{s}"
            ask = {"role": "user", "content": f"question {u}.{s}"}
            answer = {"role": "assistant", "content": f"answer {u}.{s}"}
            more = {"role": "user", "content": "and then?"}
            other = {"role": "user", "content": f"another question {u}.{s}"}
            for n, (history, output) in enumerate(
                (
                    ([ask], answer),
                    ([ask, answer, more], {"role": "assistant", "content": "then this"}),
                    ([other], answer),
                )
            ):
                rows.append(
                    {
                        "id": f"{session}-g{n}",
                        "trace_id": trace,
                        "type": "GENERATION",
                        "parent_observation_id": "",
                        "start_time": f"2026-11-30 10:{s:02d}:{n:02d}.000000",
                        "input": json.dumps(history),
                        "output": json.dumps(output),
                        "user_id": f"user-{u}",
                        "session_id": session,
                    }
                )
    path = directory / "observations.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _sides(out: Path) -> dict[str, list[tuple[str, str]]]:
    sides: dict[str, list[tuple[str, str]]] = {}
    for side in ("normalized", "eval"):
        for record in _lines(out / side):
            sides.setdefault(record["metadata"]["user_id"], []).append((side, record["id"]))
    return sides


def test_split_by_user_keeps_each_user_on_one_side(tmp_path):
    path = _sessions_of_users(tmp_path)
    out = tmp_path / "out"
    summary = _run([path], out, "--split", "eval=0.4", "--split-by", "metadata.user_id")
    sides = _sides(out)
    assert len(sides) == 12 and all(len(ids) == 8 for ids in sides.values())  # 4 sessions, each with a branch
    assert all(len({side for side, _ in ids}) == 1 for ids in sides.values()), sides
    assert {side for ids in sides.values() for side, _ in ids} == {"normalized", "eval"}
    assert summary.get("training", {}).get("split_key_missing", 0) == 0


def test_without_split_by_a_branch_lands_on_its_conversations_side(tmp_path):
    path = _sessions_of_users(tmp_path)
    out = tmp_path / "out"
    _run([path], out, "--split", "eval=0.5")
    side_of = {}
    for side in ("normalized", "eval"):
        for record in _lines(out / side):
            side_of[record["id"]] = side
    groups = {rid.split("#")[0] for rid in side_of}
    assert len(groups) == 48 and set(side_of.values()) == {"normalized", "eval"}
    for group in groups:
        assert side_of[f"{group}#branch1"] == side_of[group]


# --------------------------------------------------------------------------------------------
# --min-score / --max-score


def test_parse_bound():
    assert parse_bound("quality=0.5") == ("quality", 0.5)
    assert parse_bound(" thumbs = true ") == ("thumbs", True)
    assert parse_bound("n=3") == ("n", 3)
    for bad in ("quality", "quality=", "=1", "q=high", "q=nan", "q=inf"):
        assert parse_bound(bad) is None


def test_score_refusal_is_exact_at_the_bounds():
    record = {"metadata": {"scores": {"q": 0.5, "thumbs": False, "tone": "kind"}}}
    assert score_refusal(record, (("q", 0.5),), (("q", 0.5),)) is None
    assert score_refusal(record, (("q", 0.5000001),), ())[0] == "score_below_min"
    assert score_refusal(record, (), (("q", 0.4999999),))[0] == "score_above_max"
    assert score_refusal(record, (("thumbs", True),), ())[0] == "score_below_min"
    assert score_refusal(record, (("absent", 0),), ())[0] == "score_missing"
    assert score_refusal(record, (("tone", 0),), ())[0] == "score_missing"  # a category has no order
    assert score_refusal({"id": "x"}, (("q", 0),), ())[0] == "score_missing"


@pytest.mark.slow
def test_min_score_keeps_exactly_the_conversations_at_or_above_it(tmp_path, labelled_input):
    out = tmp_path / "out"
    summary = _run([labelled_input], out, "--min-score", "quality=0.4")
    kept = {r["id"]: r["metadata"]["scores"]["quality"] for r in _lines(out / "normalized")}
    assert kept == {"ses-1": 0.9, "ses-2": 0.4}
    reasons = summary["dead_letters_by_reason"]
    assert reasons["score_below_min"] == 1  # ses-4#branch1, 0.2
    letters = [letter for letter in _lines(out / "dead_letter") if letter["reason"].startswith("score_")]
    assert len(letters) == reasons["score_below_min"] + reasons["score_missing"]
    assert summary["accounted"]


@pytest.mark.slow
def test_a_label_readers_metadata_is_filled_not_replaced_and_its_scores_filter(tmp_path):
    # A Braintrust row's scores and labels are in the metadata its reader makes; its own tags
    # and trace fill that metadata, they do not replace it (nor hide its scores from the filter).
    def row(rid: str, factuality: float) -> dict:
        return {
            "id": rid,
            "input": [{"role": "user", "content": "What is 2+2?"}],
            "output": "5",
            "expected": "4",
            "scores": {"Factuality": factuality},
            "metadata": {"model": "m"},
            "tags": ["math"],
            "trace_id": f"t-{rid}",
            "root_span_id": f"t-{rid}",
        }

    path = tmp_path / "braintrust.jsonl"
    path.write_text("".join(json.dumps(row(rid, f)) + "\n" for rid, f in (("low", 0.0), ("high", 1.0))))
    out = tmp_path / "out"
    summary = _run([path], out, "--min-score", "Factuality=0.5")
    (kept,) = _lines(out / "normalized")
    assert kept["id"] == "high"
    assert kept["metadata"]["scores"] == {"Factuality": 1.0}
    assert kept["metadata"]["tags"] == ["math"] and kept["metadata"]["trace_ids"] == ["t-high"]
    assert [label["name"] for label in kept["metadata"]["labels"]] == ["Factuality", "expected"]
    assert {k: v for k, v in summary["dead_letters_by_reason"].items() if v} == {"score_below_min": 1}


def test_a_bound_that_does_not_parse_is_one_line_and_exit_2(tmp_path, capsys):
    status = main(["--input", str(LABELS), "--output", str(tmp_path / "out"), "--min-score", "quality"])
    err = capsys.readouterr().err
    assert status == 2
    assert "--min-score 'quality' is not NAME=VALUE" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------
# --redact


def test_redact_covers_the_context_and_the_labels(tmp_path):
    rows = [json.loads(line) for line in (LABELS / "langfuse-observations.jsonl").read_text().splitlines()]
    for row in rows:
        row["user_id"] = "jane.doe@example.com"
        row["tags"] = ["owner:jane.doe@example.com"]
    scores = [json.loads(line) for line in (LABELS / "langfuse-scores.jsonl").read_text().splitlines()]
    scores[0]["comment"] = "ask jane.doe@example.com"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "obs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "in" / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))
    out = tmp_path / "out"
    _run([tmp_path / "in"], out, "--redact", "emails", "--split", "eval=0.5", "--split-by", "metadata.user_id")
    for path in out.rglob("*"):
        if path.is_file():
            assert b"jane.doe@example.com" not in path.read_bytes(), path
    records = _lines(out / "normalized") + _lines(out / "eval")
    assert records and all("REDACTED" in r["metadata"]["user_id"] for r in records)
    assert any("REDACTED" in label.get("comment", "") for r in records for label in r["metadata"].get("labels", ()))


# --------------------------------------------------------------------------------------------
# In a Beam pipeline of one's own


@pytest.mark.slow
def test_the_library_composite_joins_labels_as_the_run_does(labelled_input, labelled_run):
    """``NormalizeConversationBatches`` (a Beam pipeline of one's own): the same labelled
    conversations as ``convnorm run``."""
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from pipeline.graph.conversation_batches import NormalizeConversationBatches
    from transforms.conversations import Unbatch
    from transforms.record.inputs import Batch, RawRecord
    from transforms.record.record_settings import Settings

    raws = []
    for path in sorted(labelled_input.glob("*.jsonl")):
        offset = 0
        for line in path.read_bytes().splitlines(keepends=True):
            raws.append(RawRecord(path.name, offset, line))
            offset += len(line)
    expected = {r["id"]: r["metadata"].get("scores") for r in _lines(labelled_run / "normalized") if "metadata" in r}
    with TestPipeline() as p:
        out = p | beam.Create([Batch(0, 0, raws)]) | NormalizeConversationBatches(Settings())
        scores = out.records | Unbatch() | beam.Map(lambda r: (r["id"], r.get("metadata", {}).get("scores")))
        assert_that(scores, equal_to(sorted(expected.items())))


def test_explain_shows_a_conversations_labels(labelled_run, capsys):
    assert main(["explain", str(labelled_run), "--id", "thread-42"]) == 0
    shown = capsys.readouterr().out
    assert "scores: correctness 1, edit true, user_rating great" in shown
    assert "label correctness = 1 (langsmith), on message 4; comment: right city" in shown
    assert "label edit = true (langsmith), on message 4; a correction of 1 message(s)" in shown
    assert "label user_rating = great (langsmith), on the whole conversation" in shown


def test_the_report_shows_scores_per_split(tmp_path, labelled_input):
    out = tmp_path / "out"
    assert main(["--input", str(labelled_input), "--output", str(out), "--quiet", "--split", "eval=0.5"]) in (0, 1)
    page = (out / "report.html").read_text()
    assert "Labels joined to their conversations" in page
    assert page.count("<h4>Scores (their labels") == 2  # one table a split
    assert "least 0.2" in page or "greatest 0.9" in page


def test_a_whole_record_fills_its_metadata_from_its_own_fields():
    from transforms.calllogs.context import record_metadata

    assert record_metadata({"id": "a", "messages": []}) is None
    assert record_metadata({"user": "alice", "tags": ["b", "a", "b"]}) == {"user_id": "alice", "tags": ["a", "b"]}
    # Keys its metadata has are kept as they are; its other keys too.
    own = {"session_id": "s9", "metadata": {"user_id": "bob", "src": "x"}, "user": "alice"}
    assert record_metadata(own) == {"session_id": "s9", "user_id": "bob", "src": "x"}
    assert record_metadata({"user_id": "u", "metadata": "not an object"}) is None


def test_split_by_user_on_whole_records_and_call_logs_alike(tmp_path):
    """Whole records carrying their user at the top level, beside call logs: --split-by
    metadata.user_id keeps each user on one side, whichever kind its conversations are."""
    path = _sessions_of_users(tmp_path, users=8, sessions=2)
    whole = [
        {
            "id": f"w{u}-{n}",
            "user": f"user-{u}",
            "messages": [{"role": "user", "content": f"hi {u} {n}"}, {"role": "assistant", "content": "hello"}],
        }
        for u in range(8)
        for n in range(3)
    ]
    (tmp_path / "whole.jsonl").write_text("".join(json.dumps(r) + "\n" for r in whole))
    out = tmp_path / "out"
    _run([path, tmp_path / "whole.jsonl"], out, "--split", "eval=0.5", "--split-by", "metadata.user_id")
    sides = _sides(out)
    assert len(sides) == 8 and all(len(ids) == 2 * 2 + 3 for ids in sides.values())
    assert all(len({side for side, _ in ids}) == 1 for ids in sides.values()), sides


# --------------------------------------------------------------------------------------------
# On a stream (the landing-directory driver)


def _stream_close(tmp_path: Path, windows: list[list[Path]]) -> Path:
    """Each list of files landed in its window, each window closed in turn: the output."""
    import dataclasses

    from pipeline.graph.shard_step import ShardWork
    from pipeline.io import processed_files as processed
    from pipeline.streaming import assembled as assembly
    from pipeline.streaming.clean import CleanPlan, clean_landed_file
    from pipeline.streaming.watch import Landed
    from transforms.conversations import NORMALIZE
    from transforms.record.record_settings import Settings

    out = tmp_path / "stream"
    temp = out / "_convnorm_temp-run-1"
    temp.mkdir(parents=True)
    work = ShardWork(NORMALIZE, dataclasses.replace(Settings(), calls=True), batch_size=50)
    plan = CleanPlan(output=str(out), run_id="run-1", run_temp=str(temp), work=work)
    for n, paths in enumerate(windows):
        window = f"20261201T00{n:02d}00Z-20261201T00{n + 1:02d}00Z"
        for path in paths:
            info = path.stat()
            clean_landed_file(Landed(str(path), info.st_size, info.st_mtime_ns, info.st_ctime_ns), window, plan)
        assert assembly.assemble_window(str(out), window, work, plan.run_temp, assembly.move_committing) == "done"
        processed.write_window_summary(str(out), window, plan.settings, None)
    return out


def _newest(out: Path) -> dict[str, dict]:
    newest: dict[str, dict] = {}
    for window in sorted(p for p in out.iterdir() if p.is_dir() and p.name[0].isdigit()):
        path = window / "assembled" / "normalized.jsonl"
        for line in path.read_bytes().splitlines() if path.exists() else ():
            record = json.loads(line)
            newest[record["id"]] = record
    return newest


@pytest.mark.slow
def test_on_a_stream_labels_of_a_later_window_reopen_their_conversations(tmp_path):
    """The observations land in one window, their scores in the next: the scores' window emits
    the conversations they judge again, with their labels: the newest emission of each id is
    the batch run's conversation."""
    landing = tmp_path / "landing"
    landing.mkdir()
    observations = shutil.copy(LABELS / "langfuse-observations.jsonl", landing / "a-observations.jsonl")
    scores = shutil.copy(LABELS / "langfuse-scores.jsonl", landing / "b-scores.jsonl")
    out = _stream_close(tmp_path, [[Path(observations)], [Path(scores)]])
    batch = tmp_path / "batch"
    _run([Path(observations), Path(scores)], batch)
    expected = {record["id"]: record for record in _lines(batch / "normalized")}
    assert _newest(out) == expected
    second = json.loads(next(out.glob("*0100Z-*/summary.json")).read_text())
    assert second["labels"]["joined"] == 7 and second["labels"]["label_unmatched"] == {"langfuse": 1}
    assert second["accounted"]


@pytest.mark.slow
def test_on_a_stream_labels_of_an_earlier_window_join_their_conversations(tmp_path):
    """The scores land first (unmatched in their window: no conversation yet), the
    observations next: their window's conversations carry the earlier scores."""
    landing = tmp_path / "landing"
    landing.mkdir()
    scores = shutil.copy(LABELS / "langfuse-scores.jsonl", landing / "a-scores.jsonl")
    observations = shutil.copy(LABELS / "langfuse-observations.jsonl", landing / "b-observations.jsonl")
    out = _stream_close(tmp_path, [[Path(scores)], [Path(observations)]])
    batch = tmp_path / "batch"
    _run([Path(observations), Path(scores)], batch)
    assert _newest(out) == {record["id"]: record for record in _lines(batch / "normalized")}
    first, second = (json.loads(p.read_text()) for p in sorted(out.glob("2026*/summary.json")))
    assert first["labels"]["label_unmatched"] == {"langfuse": 8} and first["accounted"]
    assert second["labels"]["joined"] == 7 and second["accounted"]


def test_a_group_offers_one_target_a_trace_and_call_ids_where_labels_name_calls_alone():
    from transforms.calllogs.labels import targets_of

    calls = [("c1", "t1"), ("c2", "t1"), ("c3", None)]
    assert targets_of(("langfuse", "g"), calls) == [("t1", Target("langfuse", "g", ("c1", "c2")))]
    spans = targets_of(("span-rows", "g"), calls)
    assert [join_id for join_id, _ in spans] == ["c1", "c2", "c3", "t1"]


def test_a_labels_message_is_its_index_in_the_messages_written(tmp_path):
    """MEM-5 drops an orphan tool result ahead of the judged answer: the label's index follows
    its message into the conversation as written."""
    orphan = {"role": "tool", "tool_call_id": "nobody", "content": "stale"}
    history = [orphan, {"role": "user", "content": "Hi"}]
    row = {
        "id": "g1",
        "trace_id": "tr",
        "type": "GENERATION",
        "parent_observation_id": "",
        "start_time": "2026-11-30 10:00:00.000000",
        "input": json.dumps(history),
        "output": json.dumps({"role": "assistant", "content": "Hello"}),
    }
    score = _score(id="s1", trace_id="tr", observation_id="g1", name="q", value=0.5)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "rows.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(score) + "\n")
    _run([tmp_path / "in"], tmp_path / "out")
    (record,) = _lines(tmp_path / "out" / "normalized")
    (label,) = record["metadata"]["labels"]
    assert [m["role"] for m in record["messages"]] == ["user", "assistant"]
    assert label["message"] == 1 and record["messages"][1]["content"] == "Hello"


@pytest.mark.slow
@pytest.mark.parametrize(
    "label, extra",
    [
        ("two processes", ("--direct_num_workers=2", "--direct_running_mode=multi_processing")),
        ("DaskRunner", ("--runner", "DaskRunner")),
    ],
)
def test_labels_give_the_same_bytes_on_every_runner(tmp_path, labelled_input, labelled_run, label, extra):
    """The label join is in the one graph: two processes and DaskRunner (convnorm's own
    cluster, on loopback) write FnApiRunner's bytes."""
    import subprocess
    import sys

    from engine_outputs import assert_same_outputs

    if "DaskRunner" in extra:
        pytest.importorskip("dask.distributed", reason="the dask extra is not installed")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "pipeline", "--input", str(labelled_input), "--output", str(out), "--quiet"]
    done = subprocess.run([*argv, "--no-report", *extra], capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert_same_outputs(out, labelled_run, label)


def test_langsmith_feedback_stats_are_labels_of_their_run(tmp_path):
    """A run's feedback_stats (a bulk export's JSON text too): the average of numeric feedback,
    the most frequent value of string feedback, on the run's answer."""
    runs = [json.loads(line) for line in (CALL_LOGS / "langsmith" / "langchain-runs.jsonl").read_text().splitlines()]
    stats = {"correctness": {"n": 4, "avg": 0.75}, "vibe": {"n": 3, "avg": None, "values": {"good": 2, "bad": 1}}}
    for run in runs:
        if run.get("id") == "run-2":
            run["feedback_stats"] = json.dumps(stats)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "runs.jsonl").write_text("".join(json.dumps(run) + "\n" for run in runs))
    summary = _run([tmp_path / "in"], tmp_path / "out")
    records = _by_id(tmp_path / "out")
    metadata = records["thread-42"]["metadata"]
    assert metadata["scores"] == {"correctness": 0.75, "vibe": "good"}
    assert {label["comment"] for label in metadata["labels"]} == {
        "feedback_stats: 4 feedback(s)",
        "feedback_stats: 3 feedback(s)",
    }
    assert all(
        records["thread-42"]["messages"][label["message"]]["role"] == "assistant" for label in metadata["labels"]
    )
    assert summary["labels"] == {"read": 2, "joined": 2, "superseded": 0, "label_unmatched": {}}


def test_evaluations_a_span_export_carries_are_labels_of_the_span(tmp_path):
    """Phoenix's spans with their evaluations (``eval.<name>.score`` / ``.label`` /
    ``.explanation`` beside the attributes; Arize's ``annotation.<name>.*`` in them)."""
    rows = [json.loads(line) for line in (CALL_LOGS / "otlp" / "span-rows.jsonl").read_text().splitlines()]
    llm = rows[0]
    llm["eval.correctness.score"] = 1.0
    llm["eval.correctness.label"] = "correct"
    llm["eval.correctness.explanation"] = "matches the tool"
    llm["attributes"]["annotation.tone.label"] = "friendly"
    rows[2]["eval.helpfulness.label"] = "helpful"  # on the AGENT span: the trace's conversation
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "spans.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    summary = _run([tmp_path / "in"], tmp_path / "out")
    metadata = _by_id(tmp_path / "out")["5b8e"]["metadata"]
    assert metadata["scores"] == {"correctness": 1, "helpfulness": "helpful", "tone": "friendly"}
    correctness = next(label for label in metadata["labels"] if label["name"] == "correctness")
    assert correctness["comment"] == "matches the tool" and "message" in correctness
    assert summary["labels"]["joined"] == 3


# --------------------------------------------------------------------------------------------
# The metadata contract: one list in the docs, the same names in the code


def _contract_tables() -> list[list[str]]:
    """The keys (first column) of each table of docs/fine-tuning.md's "The metadata contract"."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "fine-tuning.md").read_text(encoding="utf-8")
    section = page.split("## The metadata contract\n", 1)[1].split("\n## ", 1)[0]
    tables: list[list[str]] = []
    in_table = False
    for line in section.splitlines():
        if line.startswith("|") and not in_table:
            tables.append([])
        in_table = line.startswith("|")
        if line.startswith("| `"):
            tables[-1].append(line.split("`")[1])
    return tables


def test_the_documented_metadata_and_label_keys_are_the_codes():
    metadata, label = _contract_tables()
    assert metadata == [*METADATA_KEYS, "scores", "labels"]
    assert label == list(LABEL_KEYS)


def test_the_label_makers_use_only_the_contracts_keys():
    # The call-log labels (every key set), Braintrust's and OpenPipe's.
    joined = Label("langfuse-scores", "t", 0, "o", "langfuse", "id", "q", 1, "t", "why", [{"role": "assistant"}])
    entries = [entry_of(joined, 2)]
    braintrust = {"input": "q", "output": "a", "expected": "b", "scores": {"s": 1}, "span_id": "x"}
    entries += READERS["braintrust"].read(braintrust, "messages").fields["metadata"]["labels"]
    openpipe = {"messages": [{"role": "assistant", "content": "a"}], "rejected_message": {"role": "assistant"}}
    entries += READERS["openpipe-dataset"].read(openpipe, "messages").fields["metadata"]["labels"]
    for entry in entries:
        assert set(entry) <= set(LABEL_KEYS), entry
    assert {key for entry in entries for key in entry} == set(LABEL_KEYS) - {"message_dropped"}
