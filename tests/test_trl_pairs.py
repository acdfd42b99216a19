"""trl-dpo pairs across conversations of one prompt (transforms/record/pairs.py,
pipeline/graph/shard_pairs.py): regenerations by thumbs, score differences by ``--pair-by``,
each candidate in exactly one place, only claims and verdicts shuffled, the same bytes on
every runner."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.main import main
from transforms.core.jsontext import dumps_line
from transforms.record.pairs import ChosenIn, PairClaim, PairedWith, Unpaired, decide_pairs

DATA = Path(__file__).parent / "data" / "labels"
REGENERATIONS = DATA / "regenerations.jsonl"


def _claim(n: int, preference: float, text: str, key: str = "k") -> PairClaim:
    answer = dumps_line([{"role": "assistant", "content": text}])
    return PairClaim((n % 2, 0, n), f"c{n}", key, preference, "quality", answer)


def _verdicts(claims: list[PairClaim]) -> dict:
    return {verdict.order: verdict for _, verdict in decide_pairs(claims)}


def test_the_best_is_chosen_against_every_candidate_that_says_less():
    claims = [_claim(0, 0.4, "a"), _claim(1, 0.9, "b"), _claim(2, 0.1, "c")]
    verdicts = _verdicts(claims)
    assert verdicts[claims[0].order] == PairedWith(
        claims[0].order, "c1", claims[1].continuation, "score_difference", "quality"
    )
    assert verdicts[claims[2].order].chosen_id == "c1"
    assert verdicts[claims[1].order] == ChosenIn(claims[1].order, ["c0", "c2"])
    # Every candidate one verdict, each to its own shard.
    assert sorted((shard, v.order) for shard, v in decide_pairs(claims)) == sorted((c.shard, c.order) for c in claims)


def test_thumbs_make_regenerations():
    claims = [_claim(0, 0.0, "bad"), _claim(1, 1.0, "good")]
    assert _verdicts(claims)[claims[0].order].kind == "regeneration"


@pytest.mark.parametrize(
    "claims,reasons",
    [
        ([_claim(0, 1.0, "a")], ["no_pair"]),
        ([_claim(0, 1.0, "a"), _claim(1, 1.0, "b")], ["no_pair", "tie"]),
        ([_claim(0, 1.0, "same"), _claim(1, 0.0, "same")], ["no_pair", "same_continuation"]),
    ],
    ids=["alone", "tie", "same-answer"],
)
def test_candidates_in_no_pair_say_why(claims, reasons):
    verdicts = _verdicts(claims)
    assert all(isinstance(v, Unpaired) for v in verdicts.values())
    assert [verdicts[c.order].reason for c in claims] == reasons


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(directory.glob("part-*")) for line in p.read_text().splitlines()]


def _split_input(tmp_path: Path) -> Path:
    """The regenerations two records a file: pairs across shards."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    lines = REGENERATIONS.read_text().splitlines()
    for n in range(0, len(lines), 2):
        (inputs / f"part{n:02d}.jsonl").write_text("\n".join(lines[n : n + 2]) + "\n")
    return inputs


def _argv(inputs: Path, out: Path, *more: str) -> list[str]:
    return ["--input", str(inputs / "*.jsonl"), "--output", str(out), "--sink", "trl-dpo", "--part-bytes", "0",
            "--quiet", "--no-report", *more]  # fmt: skip


def _pairs(out: Path) -> dict:
    return {
        row["id"]: ([m["content"] for m in row["chosen"]], [m["content"] for m in row["rejected"]])
        for row in _lines(out / "normalized")
    }


@pytest.mark.slow
def test_thumbs_pair_a_regeneration_across_shards(tmp_path):
    out = tmp_path / "thumbs"
    assert main(_argv(_split_input(tmp_path), out)) == 0
    haiku = "White hush on the pines / footprints fill before morning / the world holds its breath"
    assert _pairs(out) == {"g1": ([haiku], ["Snow falls. The end."])}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] and summary["records_in"] == 6 and summary["records_out"] == 1
    assert summary["sink_refusals_by_reason"] == {"chosen_in_pairs": 1, "no_pair": 4}
    assert summary["writer_report"] == {"pairs_from": {"regeneration": 1}}
    (drops,) = _lines(out / "drops")
    assert drops["pair"] == {"kind": "regeneration", "label": "thumb", "chosen": "g1#branch1"}
    assert "_pair_claim" not in drops
    from pipeline.finished.explain import explanation_text, locate

    assert "trl-dpo pair (regeneration, by label thumb): its answer is the rejected side; the chosen one is the " \
        "answer of g1#branch1" in explanation_text(locate(str(out), "g1"), 300)  # fmt: skip
    assert "chosen_in_pairs: its answer is the chosen side of the pairs written as g1" in explanation_text(
        locate(str(out), "g1#branch1"), 300
    )


@pytest.mark.slow
def test_scores_pair_by_the_label_named_and_the_bytes_are_the_same_on_every_runner(tmp_path):
    inputs = _split_input(tmp_path)
    out = tmp_path / "in-memory"
    assert main(_argv(inputs, out, "--pair-by", "quality")) == 0
    best = ["Cats spend much of the day asleep."]
    assert _pairs(out) == {"s1": (best, ["Cats sleep."]), "s3": (best, ["Cats nap."])}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sink_refusals_by_reason"] == {"chosen_in_pairs": 1, "no_pair": 3}
    assert summary["writer_report"] == {"pairs_from": {"score_difference": 2}}
    others = {"multi": ("--direct_num_workers=2", "--direct_running_mode=multi_processing")}
    try:
        import dask.distributed  # noqa: F401

        others["dask"] = ("--runner", "DaskRunner")
    except ImportError:
        pass
    for name, flags in others.items():
        again = tmp_path / name
        command = [sys.executable, "-m", "pipeline", *_argv(inputs, again, "--pair-by", "quality", *flags)]
        subprocess.run(command, check=True, capture_output=True, timeout=300)
        for folder in ("normalized", "drops", "dead_letter"):
            mine = sorted(p.name for p in (out / folder).iterdir())
            assert mine == sorted(p.name for p in (again / folder).iterdir()), (name, folder)
            for part in mine:
                assert (out / folder / part).read_bytes() == (again / folder / part).read_bytes(), (name, part)
        assert (out / "summary.json").read_bytes() == (again / "summary.json").read_bytes(), name
        shutil.rmtree(again)


def test_the_pairs_shuffle_claims_and_verdicts_not_prompts(tmp_path):
    """What the pairing step shuffles carries each candidate's continuation (what a pair needs
    from another shard) and no prompt: the records stay in their shard's spill file."""
    from pipeline.graph.shard_dataset import write_shaped
    from pipeline.graph.shard_pairs import claimed_prompts, decided
    from pipeline.graph.shard_step import ShardWork, numbered_place, process_batches
    from transforms.conversations import NORMALIZE
    from transforms.record.inputs import Batch, RawRecord
    from transforms.record.pairs import shape_pair
    from transforms.record.record_settings import Settings

    def chat(cid: str, answer: str, thumb: bool) -> bytes:
        messages = [{"role": "user", "content": "SECRET-PROMPT"}, {"role": "assistant", "content": answer}]
        labels = [{"name": "thumb", "value": thumb, "message": 1}]
        return json.dumps({"id": cid, "messages": messages, "metadata": {"labels": labels}}).encode()

    records = [
        RawRecord("in.jsonl", n * 100, line) for n, line in enumerate([chat("a", "no", False), chat("b", "yes", True)])
    ]
    work = ShardWork(NORMALIZE, Settings(sink="trl-dpo", pairs_across=True))
    assert work.holds
    result = process_batches([Batch(0, 0, records)], 0, 0, work, numbered_place(str(tmp_path), 0, 0, "try"))
    assert result.files == {} and result.spill
    elements = list(claimed_prompts(result, 2))
    grouped: dict = {}
    for key, value in elements:
        grouped.setdefault(key, []).append(value)
    outs: dict = {}
    for element in grouped.items():
        for key, value in decided(element):
            outs.setdefault(key, []).append(value)
    for element in (*elements, *outs.items()):
        assert b"SECRET-PROMPT" not in pickle.dumps(element), element[0]
    ((_, values),) = outs.items()
    (shard_result,) = [value for tag, value in values if tag == "result"]
    verdicts = [verdict for tag, value in values if tag == "verdict" for verdict in value]
    written = write_shaped(shard_result, verdicts, work, str(tmp_path), shape_pair)
    (row,) = [json.loads(line) for line in Path(written.files["normalized"].temp).read_text().splitlines()]
    assert (row["id"], row["chosen"][0]["content"], row["rejected"][0]["content"]) == ("a", "yes", "no")
    assert row["prompt"][0]["content"] == "SECRET-PROMPT"


def test_trl_dpo_is_refused_where_it_cannot_pair():
    from types import SimpleNamespace

    from pipeline.config.checks import dataset_step_problems
    from transforms.record.record_settings import Settings, problems

    streaming = dataset_step_problems(SimpleNamespace(sink="trl-dpo", dedupe="none", split=None), None, True)
    assert streaming == [
        "--sink trl-dpo (pairs across conversations) shape a whole dataset: a batch run only (not --streaming)"
    ]
    assert any("without dedupe" in p for p in problems(Settings(sink="trl-dpo", pairs_across=True, dedupe="exact")))
    assert problems(Settings(sink="hf", pair_by="x")) == ["pair_by is for sink trl-dpo, not hf"]


def test_with_a_split_only_conversations_of_one_split_pair():
    from transforms.dataset.dataset_keys import PAIR_CLAIM
    from transforms.record.pairs import batch_pair_claims

    answer = b'[{"role":"assistant","content":"x"}]'
    metrics = [
        {"id": "a", PAIR_CLAIM: ("k", 1.0, "thumb", answer)},
        {"id": "b", "split": "eval", PAIR_CLAIM: ("k", 0.0, "thumb", answer)},
        {"id": "c", "split": "train", PAIR_CLAIM: ("k", 0.0, "thumb", answer)},
        {"id": "d"},  # a pair of its own: no claim
    ]
    claims = [PairClaim(*fields) for fields in batch_pair_claims(3, 10, metrics)]
    assert [(c.id, c.order) for c in claims] == [("a", (3, 10, 0)), ("b", (3, 10, 1)), ("c", (3, 10, 2))]
    assert claims[0].key == claims[2].key != claims[1].key


def test_the_chosen_side_of_pairs_is_a_choice_not_a_failure_past_the_dead_letter_limits():
    from transforms.totals.summary import DeadLetterLimit, dead_letter_warning, run_failures

    doc = {
        "records_in": 10,
        "records_out": 6,
        "accounted": True,
        "dead_letters": 4,
        "dead_letters_by_reason": {"unwritable": 4},
        "sink_refusals_by_reason": {"chosen_in_pairs": 3, "no_pair": 1},
    }
    assert run_failures(doc, DeadLetterLimit.parse("1")) == []
    assert run_failures(doc, DeadLetterLimit.parse("0")) != []  # the one no_pair is a failure
    warning = dead_letter_warning(doc, DeadLetterLimit.parse("0"))
    assert warning is not None and warning.startswith("1 of 10 records read (10.0%) are dead letters")
    assert warning.endswith("; 3 chosen sides of pairs written by trl-dpo not counted")


def test_a_call_log_groups_conversations_are_paired_among_themselves():
    from transforms.dataset.dataset_keys import PAIR_CLAIM
    from transforms.record.pairs import batch_pair_claims, decide_routed

    def answer(text: str) -> bytes:
        return dumps_line([{"role": "assistant", "content": text}])

    assembly = {"calls": 1}
    metrics = [
        # A group: its conversation and a regeneration of its first answer (one prompt), and a
        # branch whose judged answer continues another history.
        {"id": "g", "assembly": assembly, PAIR_CLAIM: ("p1", 1.0, "thumb", answer("good"))},
        {"id": "g#branch1", "assembly": assembly, PAIR_CLAIM: ("p1", 0.0, "thumb", answer("bad"))},
        {"id": "g#branch2", "assembly": assembly, PAIR_CLAIM: ("p2", 0.0, "thumb", answer("other"))},
        # A whole record with the group's prompt: decided apart from the group.
        {"id": "w", PAIR_CLAIM: ("p1", 0.0, "thumb", answer("whole"))},
    ]
    claims = [PairClaim(*fields) for fields in batch_pair_claims(0, 0, metrics)]
    assert {c.route for c in claims[:3]} == {"train\0group\0g"} and claims[3].route == claims[3].key
    verdicts = {v.order: v for _, v in decide_routed(claims[:3])}
    assert isinstance(verdicts[(0, 0, 1)], PairedWith) and verdicts[(0, 0, 1)].chosen_id == "g"
    assert verdicts[(0, 0, 0)] == ChosenIn((0, 0, 0), ["g#branch1"])
    assert verdicts[(0, 0, 2)].reason == "prompts_differ"
    ((_, alone),) = decide_routed(claims[3:])
    assert alone.reason == "no_pair"
