"""From a Langfuse export to the sets TRL trains on: observations where a user regenerated an
answer (two calls with one history: the assembly's ``ses-fruit`` and ``ses-fruit#branch1``),
and ``scores/`` rows judging each answer. The scores join to the branches' messages; ``trl-dpo``
pairs the two answers, the scores deciding; ``trl-kto`` writes each thumb; TRL's own
``trl.data_utils`` takes both (the walk of docs/fine-tuning.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.finished.explain import explanation_text, locate

DATA = Path(__file__).parent / "data"
EXPORT = DATA / "langfuse-regeneration"
TEMPLATE = DATA / "chat_template" / "chatml.jinja"

PROMPT = [
    ("system", "Answer in one short sentence."),
    ("user", "Which fruit is richest in vitamin C?"),
]
KIWI = [("assistant", "Kiwi has more than an orange.")]
BANANAS = [("assistant", "Bananas, definitely.")]


def _lines(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]


def _texts(messages: list[dict]) -> list[tuple]:
    return [(m["role"], m["content"]) for m in messages]


def _run(export: Path, out: Path, *extra: str) -> dict:
    assert main(["--input", str(export), "--output", str(out), "--quiet", "--no-report", *extra]) == 0
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("langfuse-trl")
    return {
        name: (root / name, _run(EXPORT, root / name, *extra))
        for name, extra in (
            ("normalized", ()),
            ("trl-dpo", ("--sink", "trl-dpo", "--pair-by", "quality")),
            ("trl-dpo-thumbs", ("--sink", "trl-dpo")),
            ("trl-kto", ("--sink", "trl-kto")),
        )
    }


@pytest.mark.slow
def test_the_scores_join_the_regenerated_branches_on_their_answers(runs):
    out, summary = runs["normalized"]
    by_id = {r["id"]: r for r in _lines(out / "normalized")}
    assert sorted(by_id) == ["ses-fruit", "ses-fruit#branch1"]
    assert summary["labels"] == {"read": 4, "joined": 4, "superseded": 0, "label_unmatched": {}}
    for rid, thumb, quality in (("ses-fruit", True, 0.9), ("ses-fruit#branch1", False, 0.2)):
        metadata = by_id[rid]["metadata"]
        assert metadata["scores"] == {"quality": quality, "thumbs": thumb}
        assert {(label["name"], label["message"]) for label in metadata["labels"]} == {("quality", 2), ("thumbs", 2)}
        assert metadata["user_id"] == "user-7" and metadata["session_id"] == "ses-fruit"


@pytest.mark.slow
@pytest.mark.parametrize("run, kind", [("trl-dpo", "score_difference"), ("trl-dpo-thumbs", "regeneration")])
def test_the_regeneration_is_one_pair_the_labels_choose(runs, run, kind):
    out, summary = runs[run]
    (row,) = _lines(out / "normalized")
    assert row["id"] == "ses-fruit#branch1"  # a pair is written under the rejected side's id
    assert _texts(row["prompt"]) == PROMPT
    assert _texts(row["chosen"]) == KIWI and _texts(row["rejected"]) == BANANAS
    assert summary["writer_report"] == {"pairs_from": {kind: 1}}
    (letter,) = _lines(out / "dead_letter")
    assert letter["detail"].startswith("trl-dpo: chosen_in_pairs:") and summary["accounted"]


@pytest.mark.slow
def test_the_scores_not_the_order_choose(tmp_path):
    # The same export with the quality scores swapped: the pair turns round.
    export = tmp_path / "export"
    shutil.copytree(EXPORT, export)
    rows = [json.loads(line) for line in (export / "scores.jsonl").read_text().splitlines()]
    for row in rows:
        if row["name"] == "quality":
            row["value"] = 1.1 - row["value"]
    (export / "scores.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    _run(export, tmp_path / "out", "--sink", "trl-dpo", "--pair-by", "quality")
    (row,) = _lines(tmp_path / "out" / "normalized")
    assert row["id"] == "ses-fruit"
    assert _texts(row["chosen"]) == BANANAS and _texts(row["rejected"]) == KIWI


@pytest.mark.slow
def test_the_thumbs_are_kto_rows(runs):
    out, summary = runs["trl-kto"]
    rows = {r["id"]: r for r in _lines(out / "normalized")}
    assert {rid: row["label"] for rid, row in rows.items()} == {"ses-fruit": True, "ses-fruit#branch1": False}
    assert _texts(rows["ses-fruit"]["completion"]) == KIWI and _texts(rows["ses-fruit"]["prompt"]) == PROMPT
    assert summary["writer_report"] == {"labels_written": {"false": 1, "true": 1}}


def _tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    tokenizer.chat_template = TEMPLATE.read_text(encoding="utf-8")
    return tokenizer


@pytest.mark.slow
@pytest.mark.parametrize("run", ["trl-dpo", "trl-kto"])
def test_trl_takes_them_as_they_are(runs, run):
    data_utils = pytest.importorskip("trl.data_utils", reason="trl is not installed (the test extra installs it)")
    import datasets

    datasets.disable_progress_bars()
    out, _ = runs[run]
    rows = datasets.load_dataset(str(out), split="train", cache_dir=str(out / ".cache"))
    tokenizer = _tokenizer()
    for example in rows:
        assert data_utils.is_conversational(example)
        text = data_utils.maybe_apply_chat_template(example, tokenizer, tools=example["tools"])
        assert text["prompt"].startswith("<|im_start|>system") and "vitamin C?\n<|im_end|>" in text["prompt"]
        if run == "trl-dpo":
            assert text["chosen"].startswith("<|im_start|>assistant\nKiwi")
            assert text["rejected"].startswith("<|im_start|>assistant\nBananas")
        else:
            assert text["completion"].startswith("<|im_start|>assistant\n")
            assert ("Kiwi" in text["completion"]) is example["label"]


@pytest.mark.slow
def test_explain_shows_both_sides_of_the_pair(runs):
    # The chosen side is a dead letter (chosen_in_pairs): it keeps its calls, so both
    # conversations of the group are assembled again.
    out, _ = runs["trl-dpo"]
    chosen = explanation_text(locate(str(out), "ses-fruit"), 300)
    assert "assembled from 2 langfuse call(s) of group 'ses-fruit'" in chosen
    assert "chosen_in_pairs: its answer is the chosen side of the pairs written as ses-fruit#branch1" in chosen
    rejected = explanation_text(locate(str(out), "ses-fruit#branch1"), 300)
    assert "branch 1 of 1" in rejected and "label quality = 0.2 (langfuse), on message 2" in rejected
    assert "its answer is the rejected side; the chosen one is the answer of ses-fruit" in rejected


@pytest.mark.slow
def test_the_same_bytes_on_two_processes_and_dask(runs, tmp_path):
    import subprocess
    import sys

    out, _ = runs["trl-dpo"]
    others = {"multi": ("--direct_num_workers=2", "--direct_running_mode=multi_processing")}
    try:
        import dask.distributed  # noqa: F401

        others["dask"] = ("--runner", "DaskRunner")
    except ImportError:
        pass
    for name, flags in others.items():
        again = tmp_path / name
        argv = ["--input", str(EXPORT), "--output", str(again), "--quiet", "--no-report"]
        argv += ["--sink", "trl-dpo", "--pair-by", "quality", *flags]
        subprocess.run([sys.executable, "-m", "pipeline", *argv], check=True, capture_output=True, timeout=300)
        for folder in ("normalized", "drops", "dead_letter"):
            mine = sorted(p.name for p in (out / folder).iterdir())
            assert mine == sorted(p.name for p in (again / folder).iterdir()), (name, folder)
            for part in mine:
                assert (out / folder / part).read_bytes() == (again / folder / part).read_bytes(), (name, part)
        assert (out / "summary.json").read_bytes() == (again / "summary.json").read_bytes(), name
