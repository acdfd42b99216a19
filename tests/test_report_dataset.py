"""The report's dataset sections (pipeline.finished.report_dataset): one per split with what it
holds, the training-set counts under their own titles, and worst sources that count call-log
records as read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_page import flat, parse, shown

from pipeline.cli.main import main
from pipeline.finished import report_data
from pipeline.finished.report_dataset import CLUSTERS_SHOWN, SAMPLE_SIZE, DatasetStats, clusters_of, sample_of
from pipeline.io.output_names import REPORT_FILE

ROOT = Path(__file__).resolve().parent.parent
CHATS = ROOT / "samples" / "training" / "chats.jsonl"


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("*.jsonl")) for line in part.read_text().splitlines()]


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    out = tmp_path_factory.mktemp("dataset") / "out"
    argv = ["--input", str(CHATS), "--output", str(out), "--sink", "openai-finetune", "--quiet"]
    argv += ["--split", "eval=0.3", "--dedupe", "prefix", "--tokens", "o200k_base"]
    assert main(argv) == 0
    return out


@pytest.mark.slow
def test_each_split_has_a_section_with_what_it_holds(shaped):
    summary = json.loads((shaped / "summary.json").read_text())
    text = (shaped / REPORT_FILE).read_text()
    page = parse(text)
    # Every number of summary.json is on the page: the training-set keys are laid out, not dumped
    # (the --tokens section shows its own selection, tests/test_tokens.py).
    expected = {key: shown(value) for key, value in flat(summary).items() if not key.startswith("tokens.")}
    assert page.values["tokens.splits.eval.tokens_per_epoch"] == shown(
        summary["tokens"]["splits"]["eval"]["tokens_per_epoch"]
    )
    assert {key: page.values.get(key) for key in expected} == expected
    assert "The dataset, by split" in page.headings and "Training set" in page.headings
    assert not {"training", "dedupe", "splits"} & set(page.headings)  # no raw key as a title
    drops = _lines(shaped / "drops")
    for name in summary["splits"]:
        mine = [d for d in drops if d["split"] == name]
        assert page.values[f"splits.{name}"] == f"{len(mine):,}"
        assert page.values[f"dataset.{name}.messages"] == f"{sum(d['messages_out'] for d in mine):,}"
        assert page.values[f"dataset.{name}.tool_calls"] == f"{sum(d['tool_calls'] for d in mine):,}"
        assert page.values[f"dataset.{name}.tokens"] == f"{sum(d['tokens'] for d in mine):,}"
        assert page.charts[f"split_tokens_{name}"]
        # The sample: clean conversations of this split, each shown with its conversation.
        section = text.split(f'data-split="{name}"', 1)[1].split("<h3", 1)[0]
        sampled = [d["id"] for d in mine if not d["dropped"] and f'<span class="mono id">{d["id"]}</span>' in section]
        assert 0 < len(sampled) <= SAMPLE_SIZE
    # The largest cluster is named with what collapsed into it.
    kept = max((d for d in drops if d.get("duplicates")), key=lambda d: len(d["duplicates"]))
    assert f'<td class="mono">{kept["id"]}</td>' in text


@pytest.mark.slow
def test_a_split_key_that_is_missing_says_the_split_fell_back_to_ids(tmp_path):
    out = tmp_path / "out"
    argv = ["--input", str(CHATS), "--output", str(out), "--sink", "openai-finetune", "--quiet"]
    assert main([*argv, "--split", "eval=0.3", "--split-by", "metadata.user_id"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    missing = summary["training"]["split_key_missing"]
    assert missing > 0
    text = (out / REPORT_FILE).read_text()
    assert f"{missing:,} conversation(s) had no value at <code>metadata.user_id</code>" in text
    assert "split was drawn from its own id instead" in text


def _metrics(rid: str, split: str = "train", dropped: int = 0, **extra) -> dict:
    return {
        "id": rid,
        "source": "a.jsonl",
        "position": 0,
        "dropped": dropped,
        "messages_out": 3,
        "split": split,
        **extra,
    }


def test_the_sample_is_seeded_clean_and_bounded():
    lines = [_metrics(f"c{i}", dropped=i % 3 == 0) for i in range(500)]
    first, again, other = DatasetStats(seed=0), DatasetStats(seed=0), DatasetStats(seed=7)
    for m in lines:
        first.add(m)
        other.add(m)
    for m in reversed(lines):
        again.add(m)
    split = first.splits["train"]
    drawn = [m["id"] for m in sample_of(split)]
    assert len(drawn) == SAMPLE_SIZE and all(not m["dropped"] for m in sample_of(split))
    assert drawn == [m["id"] for m in sample_of(again.splits["train"])]  # the order read does not matter
    assert drawn != [m["id"] for m in sample_of(other.splits["train"])]  # the seed does
    assert len(split.sample) <= 2 * SAMPLE_SIZE + 1  # bounded, whatever the dataset


def test_the_largest_clusters_first_bounded():
    stats = DatasetStats()
    for i in range(40):
        stats.add(_metrics(f"k{i:02d}", duplicates=[f"d{i}-{j}" for j in range(i % 7)]))
    clusters = clusters_of(stats.splits["train"])
    assert [(n, rid) for n, rid, _ in clusters] == [(6, "k06"), (6, "k13"), (6, "k20"), (6, "k27"), (6, "k34")]
    assert len(clusters) == CLUSTERS_SHOWN and len(stats.splits["train"].clusters) <= 2 * CLUSTERS_SHOWN + 1
    assert stats.splits["train"].duplicates_collapsed == sum(i % 7 for i in range(40))


def test_worst_sources_count_call_log_records_once_each_in_their_own_file():
    # One conversation assembled from three records of calls.jsonl (one of them a tool result
    # that went unused), a second from one record already counted, and a whole record elsewhere.
    calls = [{"source": "calls.jsonl", "position": p, "call": f"c{p}"} for p in (0, 120)]
    lines = [
        {
            **_metrics("s-1", dropped=1, drops={"orphan_result": 1}),
            "source": "calls.jsonl",
            "assembly": {"calls": calls, "tool_results_unused": [{"source": "calls.jsonl", "position": 60}]},
        },
        {**_metrics("s-1#branch1"), "source": "calls.jsonl", "assembly": {"calls": calls[1:]}},
        _metrics("w", dropped=1, drops={"orphan_result": 1}),
    ]
    details = report_data.RunDetails()
    report_data.scan_drops(lines, details)
    assert details.sources["calls.jsonl"].records == 3
    assert details.sources["a.jsonl"].records == 1


def test_the_trl_sinks_rows_and_refusals_are_shown_in_words():
    from pipeline.finished.report_dataset import labelled_sets_html, training_html

    summary = {
        "writer_report": {"pairs_from": {"regeneration": 2, "correction": 1}},
        "sink_refusals_by_reason": {"chosen_in_pairs": 1, "no_pair": 4},
    }
    page = training_html(summary, None)
    assert "Preference, KTO and prompt rows" in page
    assert 'data-key="writer_report.pairs_from.correction">1<' in page
    assert 'data-key="writer_report.pairs_from.regeneration">2<' in page
    assert 'data-key="sink_refusals_by_reason.no_pair">4<' in page and "refused: <code>chosen_in_pairs</code>" in page
    # Another sink's writer report is not a labelled set.
    assert labelled_sets_html({"writer_report": {"developer_as_system": 3}}) == ""
