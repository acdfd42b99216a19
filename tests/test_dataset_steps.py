"""--dedupe and --split: the keys each conversation gets (transforms.dataset.dataset_keys), the graph's
steps as plain functions (transforms.record.dedupe), the options, and whole runs."""

from __future__ import annotations

import hashlib
import json
import shutil
from array import array
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.config.checks import dataset_step_problems
from pipeline.graph.shard_dataset import join_wholes, known_wholes
from transforms.core.jsontext import canonical_json, canonical_lines, dumps_line
from transforms.dataset.dataset_keys import (
    CONTENT_KEYS,
    content_keys,
    group_key,
    parse_splits,
    prefix_keys,
    split_of,
)
from transforms.record.dedupe import (
    Claim,
    Conversation,
    batch_outputs,
    collapse_kept,
    content_claims,
    fingerprint,
    none_known,
    pack,
    pack_flat,
    resolve_content,
    shape,
    shard_outputs,
    sorted_letters,
    spilled_conversations,
    unpack,
)
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record

DATA = Path(__file__).resolve().parent / "data" / "training" / "chats.jsonl"
U = {"role": "user", "content": "q"}
A = {"role": "assistant", "content": "a"}


def test_content_keys_see_messages_and_tools_not_ids_or_other_fields():
    full, prefixes = content_keys([U, A], None, True)
    # a prefix's whole is the longer one's link
    assert prefix_keys(content_keys([U, A, U, A], None, True)[1])[1] == full
    assert content_keys([U, A], [{"name": "f"}], True)[0] != full  # other tools: another example
    assert len(prefix_keys(prefixes)) == 1
    # exact: one hash of the whole, no prefixes; the same content the same key, any change another.
    exact = content_keys([U, A], None, False)
    assert exact[1] == b"" and exact == content_keys([dict(U), dict(A)], None, False)
    assert content_keys([U, A], [{"name": "f"}], False) != exact
    assert content_keys([U, A, U], None, False) != exact and content_keys([A, U], None, False) != exact
    # The tools' text and the messages' cannot run into each other.
    assert content_keys([], [U], False) != content_keys([U], [], False)
    one = process_record(
        RawRecord("s", 0, dumps_line({"id": "x", "m": 1, "messages": [U, A]})), Settings(dedupe="exact")
    )
    two = process_record(
        RawRecord("s", 9, dumps_line({"id": "y", "m": 2, "messages": [U, A]})), Settings(dedupe="exact")
    )
    assert one.metrics[CONTENT_KEYS] == two.metrics[CONTENT_KEYS]


def test_the_split_is_a_function_of_the_group_key_and_the_seed():
    splits = (("eval", 0.2), ("test", 0.1))
    drawn = [split_of(f"user-{n}", 7, splits) for n in range(2000)]
    assert drawn == [split_of(f"user-{n}", 7, splits) for n in range(2000)]  # deterministic
    assert 0.15 < drawn.count("eval") / 2000 < 0.25 and 0.06 < drawn.count("test") / 2000 < 0.14
    assert drawn != [split_of(f"user-{n}", 8, splits) for n in range(2000)]  # the seed matters
    # Adding a split never moves what stays: train shrinks, eval stays eval.
    more = [split_of(f"user-{n}", 7, (*splits, ("dev", 0.1))) for n in range(2000)]
    assert all(m == d for m, d in zip(more, drawn) if d != "train")
    assert group_key({"meta": {"user": "u1"}}, "meta.user", "id") == ("u1", True)
    assert group_key({"meta": {"user": 5}}, "meta.user", "id") == ("5", True)
    assert group_key({}, "meta.user", "id-1") == ("id-1", False)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("eval", "is not NAME=SHARE"),
        ("eval=1.5", "is not NAME=SHARE"),
        ("train=0.1", "none of"),
        ("drops=0.1", "none of"),
        ("eval=0.1,eval=0.2", "names 'eval' twice"),
        ("eval=0.6,test=0.5", "must leave something for train"),
    ],
)
def test_bad_splits_are_refused(text, problem):
    assert any(problem in p for p in parse_splits(text)[1])
    assert parse_splits("eval=0.05,test=0.05") == ((("eval", 0.05), ("test", 0.05)), [])


def test_the_dataset_steps_take_a_batch_run_on_every_runner():
    ours = SimpleNamespace(dedupe="exact", split=None)
    assert dataset_step_problems(ours, None, False) == []
    assert "a batch run only" in dataset_step_problems(ours, None, True)[0]
    assert dataset_step_problems(SimpleNamespace(dedupe="exact", split="eval=0.1"), None, False) == []
    dask = dataset_step_problems(SimpleNamespace(dedupe="none", split="eval=0.1"), "DaskRunner", False)
    assert dask == []


def conversation(order: int, cid: str, messages: list, dedupe: str = "prefix", shard: int = 0) -> Conversation:
    metrics = {
        "id": cid,
        "source": "s",
        "position": order * 10,
        CONTENT_KEYS: content_keys(messages, None, dedupe == "prefix"),
    }
    return Conversation(shard, 0, order, metrics, {"id": cid, "messages": messages}, None)


def claim_of(c: Conversation) -> Claim:
    full, prefixes = c.metrics[CONTENT_KEYS]
    return Claim(c.order, c.metrics["id"], full, prefixes)


def run_dedupe(conversations: list[Conversation], settings: Settings, known: set | None = None) -> tuple[list, list]:
    """The shuffles of --dedupe as plain functions, on claims only: by content, resolve, by
    kept one, collapse into verdicts; then each conversation shaped by its verdict. ``known``:
    the whole-content fingerprints the prefixes are looked up in (None: every prefix claimed)."""
    from collections import defaultdict

    grouped: dict = defaultdict(list)
    for c in conversations:
        for key, value in content_claims(claim_of(c), known):
            grouped[key].append(value)
    kept_groups: dict = defaultdict(list)
    for key in sorted(grouped):
        for target, value in resolve_content((key, grouped[key])):
            kept_groups[target].append(value)
    verdicts = {v.order: v for key in sorted(kept_groups) for _, v in collapse_kept((key, kept_groups[key]))}
    out = [shape(c, verdicts.get(c.order), settings) for c in sorted(conversations, key=lambda c: c.order)]
    return [c for kind, c in out if kind == "kept"], [d for kind, d in out if kind == "letters"]


def test_exact_duplicates_collapse_into_the_first_and_the_others_are_dead_letters():
    settings = Settings(dedupe="exact")
    convs = [
        conversation(2, "c", [U, A], "exact"),
        conversation(0, "a", [U, A], "exact"),
        conversation(1, "b", [A], "exact"),
    ]
    kept, letters = run_dedupe(convs, settings)
    assert sorted(c.metrics["id"] for c in kept) == ["a", "b"]
    (a,) = [c for c in kept if c.metrics["id"] == "a"]
    assert a.metrics["duplicates"] == ["c"]
    assert [(d["id"], d["reason"], d["detail"]) for d in letters] == [
        ("c", "duplicate", "--dedupe exact: the same conversation as a")
    ]


def test_a_prefix_collapses_into_the_longest_conversation_it_begins_which_takes_the_first_id():
    settings = Settings(dedupe="prefix")
    short = conversation(0, "short", [U, A])
    longer = conversation(1, "longer", [U, A, U, A])
    longest = conversation(2, "longest", [U, A, U, A, U, A])
    other = conversation(3, "other", [U, A, U, {"role": "assistant", "content": "b"}])  # a branch
    kept, letters = run_dedupe([longest, other, short, longer], settings)
    by_content = {c.item["messages"].__len__(): c for c in kept}
    assert sorted(by_content) == [4, 6]
    survivor = by_content[6]
    assert survivor.metrics["id"] == "short" and survivor.item["id"] == "short"  # the first id
    assert survivor.metrics["duplicates"] == ["longer", "longest"]
    assert by_content[4].metrics["id"] == "other" and "duplicates" not in by_content[4].metrics
    assert sorted(d["id"] for d in letters) == ["longer", "short"]
    assert all("a prefix of the conversation kept as short" in d["detail"] for d in letters)


def test_prefixes_that_are_no_conversation_are_not_claimed_and_the_decisions_are_the_same():
    # Most prefixes (one per message) are no conversation's whole content: claimed, they were
    # most of what --dedupe prefix shuffled, and decided nothing.
    settings = Settings(dedupe="prefix")
    convs = [
        conversation(0, "short", [U, A]),
        conversation(1, "longer", [U, A, U, A]),
        conversation(2, "longest", [U, A, U, A, U, A]),
        conversation(3, "other", [U, A, U, {"role": "assistant", "content": "b"}]),
    ]
    known = {fingerprint(c.metrics[CONTENT_KEYS][0]) for c in convs}
    extends = [v for c in convs for _, v in content_claims(claim_of(c)) if v[0] == "extends"]
    kept_extends = [v for c in convs for _, v in content_claims(claim_of(c), known) if v[0] == "extends"]
    assert len(extends) == 1 + 3 + 5 + 3  # a prefix per message but the last
    assert len(kept_extends) == 3 + 1  # short begins the three others, longer begins longest
    assert run_dedupe(convs, settings, known) == run_dedupe(convs, settings)
    # Joined from the shards' bytes, looked up as a set; the same set again for the next shard.
    parts = [array("Q", sorted(known)[:2]).tobytes(), array("Q", sorted(known)[1:]).tobytes()]
    assert known_wholes(join_wholes(parts)) == known
    assert known_wholes(join_wholes(parts)) is known_wholes(join_wholes(parts))


def test_prefix_links_hold_for_messages_orjson_refuses():
    # A number past 64 bits: orjson refuses it, canonical_json's exact text is used for that
    # conversation's messages, and its prefixes are still found.
    big = {"role": "user", "content": "q", "n": 2**70}
    lines = canonical_lines([U, big])
    assert lines == [canonical_json(U) + b"\n", canonical_json(big) + b"\n"]
    assert canonical_lines([U, A]) == [canonical_json(U) + b"\n", canonical_json(A) + b"\n"]
    full = content_keys([big, A], None, True)[0]
    assert prefix_keys(content_keys([big, A, U], None, True)[1]) == [content_keys([big], None, True)[0], full]


def test_prefix_keys_are_the_running_hash_of_the_tools_and_each_message_text():
    # The keys' values are compared across runs: the hash of b"tools\0", the tools' text and a
    # newline, then each message's canonical text and a newline; a link the digest so far.
    tools = [{"name": "f"}]
    texts = [b"tools\0" + canonical_json(tools) + b"\n"] + [canonical_json(m) + b"\n" for m in (U, A, U)]
    digests = [hashlib.sha256(b"".join(texts[: n + 1])).digest() for n in range(1, 4)]
    full, links = content_keys([U, A, U], tools, True)
    assert full == digests[-1][:16].hex() == "4e8fad0caa5e71f87a3a6529d1029567"
    assert links == digests[0] + digests[1]
    assert links.hex().startswith("8f4d460b0915be6eb5f92a0ac90e6c16")
    # One message: no link; no message: the tools alone.
    assert content_keys([U], None, True) == ["1262567e481537fdbe65499a1ef2fee6", b""]
    assert content_keys([], None, True) == ["d45f91fbf262e9be3991b689975ca2d6", b""]


def test_claims_packed_flat_read_back_as_packed():
    # --dedupe's claims are pickled without the memo: an object met twice is written twice,
    # and what is read back is what ``pack`` gives.
    full = "ab" * 16
    claims = [((0, 0, at), f"id-{at}", full, b"") for at in range(3)] + [(full, ("whole", ((0, 0, 0), "x", full)))]
    assert unpack(pack_flat(claims)) == claims == unpack(pack(claims))
    assert pack_flat(claims) == pack_flat(list(claims))  # the same values, the same bytes


def test_a_batch_s_links_are_tested_against_the_wholes_at_once():
    # A batch of links none of which is a whole needs no claim per link; one that begins a
    # conversation in the run is found among the batch's others.
    short, longer, other = ([U, A], [U, A, U, A], [A, U, A])
    links = b"".join(content_keys(m, None, True)[1] for m in (longer, other))
    wholes = {fingerprint(content_keys(m, None, True)[0]) for m in (longer, other)}
    assert none_known(links, wholes)
    assert not none_known(links, wholes | {fingerprint(content_keys(short, None, True)[0])})
    assert none_known(b"", wholes)
    # The batch test reads the fingerprint content_claims reads link by link.
    with_short = wholes | {fingerprint(content_keys(short, None, True)[0])}
    claim = Claim((0, 0, 0), "longer", content_keys(longer, None, True)[0], content_keys(longer, None, True)[1])
    assert [v[0] for _, v in content_claims(claim, with_short)] == ["whole", "extends"]


def test_a_conversation_kept_with_nothing_collapsed_into_it_goes_no_further():
    # Only duplicates go through the second shuffle: a run of unique conversations sends nothing.
    unique = [conversation(n, f"c{n}", [U, {"role": "assistant", "content": str(n)}], "exact") for n in range(5)]
    for c in unique:
        ((key, value),) = content_claims(claim_of(c))
        assert list(resolve_content((key, [value]))) == []
    twins = [conversation(n, f"t{n}", [U, A], "exact") for n in range(3)]
    ((key, _),) = content_claims(claim_of(twins[0]))
    resolved = list(resolve_content((key, [next(content_claims(claim_of(c)))[1] for c in twins])))
    assert [(target, value[1][1]) for target, value in resolved] == [(key, "t1"), (key, "t2")]
    verdicts = [v for _, v in collapse_kept((key, [value for _, value in resolved]))]
    assert [type(v).__name__ for v in verdicts] == ["KeptAs", "DuplicateOf", "DuplicateOf"]
    assert verdicts[0].duplicates == ["t1", "t2"] and verdicts[1].first_id == "t0"


@pytest.mark.parametrize("lines", [True, False], ids=["lines", "records"])
def test_a_batch_without_verdicts_gives_what_its_conversations_would(lines):
    # The write step's short way for a spilled batch of conversations all kept as they are.
    metrics = [{"id": f"c{n}", "split": "eval" if n % 3 == 1 else "train"} for n in range(6)]
    items = [{"id": f"c{n}"} for n in range(6)]
    its_lines = [dumps_line(item) for item in items] if lines else None
    kept = spilled_conversations(4, 700, metrics, items, its_lines)
    names = ("train", "eval", "test")
    assert list(batch_outputs(4, 700, metrics, items, its_lines, names)) == list(shard_outputs(4, kept, names))
    alone = [{"id": "c0"}, {"id": "c1"}]  # no --split: every one to train
    assert list(batch_outputs(4, 7, alone, items[:2], None, ("train",))) == list(
        shard_outputs(4, spilled_conversations(4, 7, alone, items[:2], None), ("train",))
    )


def test_a_shards_outputs_are_one_batch_each_in_input_order_without_the_private_keys():
    convs = [conversation(n, f"c{n}", [U, A]) for n in (1, 2, 3)]
    convs = [c._replace(metrics={**c.metrics, "split": "eval" if c.offset == 2 else "train"}) for c in convs]
    letters = [{"position": 5, "reason": "duplicate"}, {"position": 1, "reason": "invalid_json"}]
    batches = dict(shard_outputs(0, convs, ("train", "eval")))
    assert [m["id"] for m in batches["drops"].items] == ["c1", "c2", "c3"]
    assert all(CONTENT_KEYS not in m for m in batches["drops"].items)
    assert [r["id"] for r in batches["train"].items] == ["c1", "c3"]
    assert [r["id"] for r in batches["eval"].items] == ["c2"]
    assert [d["position"] for d in sorted_letters(letters)] == [1, 5]


def _run(tmp_path: Path, name: str, *extra: str) -> Path:
    from pipeline.cli.main import main

    out = tmp_path / name
    argv = ["--input", str(DATA), "--output", str(out), "--quiet", "--no-report", *extra]
    assert main(argv) == 0
    return out


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(directory.glob("part-*")) for line in p.read_text().splitlines()]


@pytest.mark.slow
def test_a_deduplicated_split_run_on_two_runners(tmp_path):
    flags = ("--sink", "hf", "--dedupe", "prefix", "--split", "eval=0.25", "--split-by", "metadata.user")
    out = _run(tmp_path, "in-memory", *flags)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] and summary["records_in"] == 15
    assert summary["dedupe"] == {"mode": "prefix", "kept_with_duplicates": 2, "duplicates_collapsed": 2}
    assert summary["dead_letters_by_reason"]["duplicate"] == 2
    train, evaluation = _lines(out / "normalized"), _lines(out / "eval")
    assert summary["splits"] == {"train": len(train), "eval": len(evaluation)} and evaluation
    assert summary["records_out"] == len(train) + len(evaluation) == 13
    drops = {m["id"]: m for m in _lines(out / "drops")}
    assert drops["t-001"]["duplicates"] == ["t-002"] and drops["t-004"]["duplicates"] == ["t-005"]
    # Group-disjoint: every user's conversations are on one side.
    users = {r["id"]: r["metadata"]["user"] for r in map(json.loads, DATA.read_text().splitlines())}
    sides: dict = {}
    for m in drops.values():
        sides.setdefault(users[m["id"]], set()).add(m["split"])
    assert all(len(s) == 1 for s in sides.values())
    # explain finds each of them: the kept one says what it holds, a duplicate what it is.
    from pipeline.finished.explain import explanation_text, locate

    kept = explanation_text(locate(str(out), "t-004"), 200)
    assert "--dedupe: kept under this id; collapsed into it: t-005" in kept
    assert "kept under this id" in explanation_text(locate(str(out), "t-005"), 200)
    assert "dead-lettered (duplicate): --dedupe prefix: the same conversation as t-001" in explanation_text(
        locate(str(out), "t-002"), 200
    )
    # The same bytes with workers in other processes.
    again = _run(tmp_path, "multi", *flags, "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    for name in ("normalized", "eval", "drops", "dead_letter"):
        assert sorted(p.name for p in (out / name).iterdir()) == sorted(p.name for p in (again / name).iterdir())
        for part in (out / name).iterdir():
            assert part.read_bytes() == (again / name / part.name).read_bytes(), part
    assert (out / "summary.json").read_bytes() == (again / "summary.json").read_bytes()
    shutil.rmtree(again)


def test_duplicates_are_a_choice_not_failures_past_the_dead_letter_limits():
    from transforms.totals.summary import DeadLetterLimit, dead_letter_warning, run_failures

    doc = {
        "accounted": True,
        "records_in": 10,
        "records_out": 6,
        "dead_letters": 4,
        "dead_letters_by_reason": {"duplicate": 4},
    }
    limit = DeadLetterLimit.parse("0")
    assert run_failures(doc, limit) == [] and dead_letter_warning(doc, limit) is None
    failing = {**doc, "dead_letters": 5, "dead_letters_by_reason": {"duplicate": 4, "invalid_json": 1}}
    assert run_failures(failing, limit) and dead_letter_warning(failing, limit)


def test_the_dead_letter_warning_counts_failures_only_and_names_the_duplicates_apart():
    from transforms.totals.summary import DeadLetterLimit, dead_letter_warning

    doc = {
        "records_in": 53,
        "dead_letters": 10,
        "dead_letters_by_reason": {"invalid_json": 4, "unknown_format": 3, "duplicate": 3},
    }
    warning = dead_letter_warning(doc, DeadLetterLimit.parse("1%"))
    assert warning is not None
    assert warning.startswith("7 of 53 records read (13.2%) are dead letters")
    assert "invalid_json 4, unknown_format 3" in warning and "duplicate 3" not in warning
    assert warning.endswith("; 3 duplicates are collapsed by --dedupe and not counted")


def _tree(out: Path) -> dict[str, bytes]:
    """Every output file of a run (its lock and report aside), by its path in the output."""
    skip = {"report.html", "_MANIFEST.json"}
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name not in skip and not p.name.startswith(".")
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags",
    [
        ("--dedupe", "prefix", "--split", "eval=0.25", "--split-by", "metadata.user"),
        ("--dedupe", "exact"),
        ("--split", "eval=0.3,test=0.2"),
    ],
    ids=["dedupe-prefix-split", "dedupe-exact", "split-only"],
)
def test_the_dataset_steps_work_across_shards(tmp_path, flags):
    """The dataset steps across shards (one input file each, duplicates in different files)."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    lines = DATA.read_text().splitlines()
    # t-001 alone: it and its duplicate t-002 are in different files (shards), as are others.
    for n, chunk in enumerate([lines[:1]] + [lines[i : i + 4] for i in range(1, len(lines), 4)]):
        (inputs / f"chats-{n}.jsonl").write_text("\n".join(chunk) + "\n")
    run = _tree(_run_in(tmp_path, "run", "--input", str(inputs), "--part-bytes", "0", "--sink", "hf", *flags))
    summary = json.loads(run["summary.json"])
    assert summary["accounted"] and summary["records_in"] == 15
    if "--dedupe" in flags:
        assert summary["dead_letters_by_reason"]["duplicate"] >= 1
        assert any(json.loads(line).get("duplicates") for line in run["drops/part-00000.jsonl"].splitlines())
    if "--split" in flags:
        assert sum(summary["splits"].values()) == summary["records_out"] and len(summary["splits"]) > 1


def _run_in(tmp_path: Path, name: str, *argv: str) -> Path:
    from pipeline.cli.main import main

    out = tmp_path / name
    assert main(["--output", str(out), "--quiet", "--no-report", *argv]) == 0
    return out


@pytest.mark.slow
def test_conversations_assembled_from_call_logs_are_deduplicated(tmp_path):
    """The step holds the assembled conversations' outputs too, for the dataset steps."""
    calls = str(Path(__file__).resolve().parent / "data" / "calllogs" / "*" / "*.jsonl")
    run = _tree(_run_in(tmp_path, "run", "--input", calls, "--dedupe", "prefix", "--split", "eval=0.3"))
    summary = json.loads(run["summary.json"])
    assert summary["accounted"] and summary["call_logs"]["conversations"] > 0
    assert summary["dedupe"]["duplicates_collapsed"] > 0 and summary["splits"]["eval"] > 0


@pytest.mark.slow
def test_validate_with_a_split_keeps_its_violations(tmp_path):
    """--split shapes a run's records, not validate's violations: the per-shard step once wrote them
    nowhere (split by drop metrics a check has none of), and the run was not accounted."""
    from pipeline.cli.main import main

    out = tmp_path / "out"
    main(["validate", "--input", str(DATA), "--output", str(out), "--split", "eval=0.3", "--quiet", "--no-report"])
    validation = json.loads((out / "validation.json").read_text())
    assert validation["accounted"] and (out / "_SUCCESS").exists()
    assert _tree(out / "violations") != {}


@pytest.mark.slow
def test_a_split_orders_a_parts_dead_letters_by_position(tmp_path):
    """Two small files in one part, each with a dead letter: --split alone writes them by
    position, not as they came."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    lines = DATA.read_text().splitlines()
    (inputs / "a.jsonl").write_text("\n".join([*lines[:2], "not json a"]) + "\n")
    (inputs / "b.jsonl").write_text("\n".join(["not json b", lines[2]]) + "\n")
    run = _tree(_run_in(tmp_path, "run", "--input", str(inputs), "--sink", "hf", "--split", "eval=0.4"))
    letters = [json.loads(line) for line in run["dead_letter/part-00000.jsonl"].splitlines()]
    assert [d["raw"] for d in letters] == ["not json b", "not json a"]


def _shuffled(elements: list) -> list:
    """A GroupByKey as a plain function: ``(key, [values])`` in key order."""
    from collections import defaultdict

    grouped: dict = defaultdict(list)
    for key, value in elements:
        grouped[key].append(value)
    return sorted(grouped.items(), key=lambda kv: repr(kv[0]))


@pytest.mark.slow
def test_a_dedupe_run_shuffles_claims_and_verdicts_not_records(tmp_path):
    """What the dataset steps shuffle (a shard's result, its claims, the verdicts) carries no
    record text: the records stay in the shard's files, written first, which the writing step
    rewrites when a verdict touches the shard."""
    import pickle

    from pipeline.graph.shard_dataset import claimed, collapsed, resolved, rewrite_touched
    from pipeline.graph.shard_step import ShardWork, numbered_place, process_batches
    from transforms.conversations import NORMALIZE
    from transforms.record.inputs import Batch

    def chat(cid: str, text: str, turns: int) -> bytes:
        messages = [{"role": "user", "content": text}, {"role": "assistant", "content": text + " answered"}] * turns
        return dumps_line({"id": cid, "messages": messages})

    lines = [chat("a", "SECRET-ONE", 1), chat("b", "SECRET-TWO", 1), chat("c", "SECRET-ONE", 2), b"{bad"]
    records = [RawRecord("in.jsonl", n * 100, line) for n, line in enumerate(lines)]
    work = ShardWork(NORMALIZE, Settings(dedupe="prefix"))
    assert work.writes_first
    place = numbered_place(str(tmp_path), 0, 0, "try")
    result = process_batches([Batch(0, 0, records[:2]), Batch(0, 200, records[2:])], 0, 0, work, place)
    assert result.spill is None and result.shaped is not None
    first = [json.loads(line)["id"] for line in Path(result.files["normalized"].temp).read_text().splitlines()]
    assert first == ["a", "b", "c"]
    from transforms.record.dedupe import unpack_claims

    assert [c.id for c in unpack_claims(result.claims)] == ["a", "b", "c"]

    contents = _shuffled(list(claimed(result, 3)))
    kept = _shuffled([e for element in contents for e in resolved(element, 3)])
    outs = _shuffled([e for element in kept for e in collapsed(element)])
    for element in (*contents, *kept, *outs):
        assert b"SECRET" not in pickle.dumps(element), element

    (element,) = outs
    values = element[1]
    (shard_result,) = [value for tag, value in values if tag == "result"]
    verdicts = [verdict for tag, value in values if tag == "verdict" for verdict in value]
    written = rewrite_touched(shard_result, verdicts, work, str(tmp_path))
    assert written.files["normalized"].temp != result.files["normalized"].temp  # rewritten
    kept_lines = Path(written.files["normalized"].temp).read_text().splitlines()
    # a is a prefix of c: c is kept, in its place, with a's id (the first).
    assert [json.loads(line)["id"] for line in kept_lines] == ["b", "a"]
    assert "SECRET-ONE" in kept_lines[1]
    letters = [json.loads(line) for line in Path(written.files["dead_letter"].temp).read_text().splitlines()]
    assert [(d.get("id"), d["reason"]) for d in letters] == [("a", "duplicate"), (None, "invalid_json")]
    assert "SECRET-ONE" in letters[0]["raw"] and letters[1]["raw"] == "{bad"
    assert written.shaped is None and written.batches == b"" and written.partial != shard_result.partial


@pytest.mark.slow
def test_a_shard_no_verdict_touches_keeps_the_files_it_wrote_first(tmp_path):
    """No copy for a shard without a duplicate: its files are the ones it wrote, its summary
    that of its drop metrics and dead letters added."""
    from pipeline.graph.shard_dataset import rewrite_touched
    from pipeline.graph.shard_step import ShardWork, numbered_place, process_batches
    from transforms.conversations import NORMALIZE
    from transforms.record.inputs import Batch
    from transforms.totals import summary as summaries

    lines = [dumps_line({"id": "a", "messages": [U, A]}), b"{bad"]
    records = [RawRecord("in.jsonl", n * 100, line) for n, line in enumerate(lines)]
    work = ShardWork(NORMALIZE, Settings(dedupe="exact"))
    result = process_batches([Batch(0, 0, records)], 0, 0, work, numbered_place(str(tmp_path), 0, 0, "try"))
    written = rewrite_touched(result, [], work, str(tmp_path))
    assert written.files == result.files
    assert written.partial == summaries.merge(result.partial, result.shaped) != result.partial


def _dedupe_written(batches: list, work, temp: Path) -> dict:
    """A shard's batches through the per-shard step and the dataset steps (plain functions):
    each output's file (bytes, start, records), and the summary's partial."""
    from pipeline.graph.shard_dataset import _WriteShaped, claimed, collapsed, join_wholes, resolved
    from pipeline.graph.shard_step import numbered_place, process_batches

    temp.mkdir()
    result = process_batches(batches, 0, 0, work, numbered_place(str(temp), 0, 0, "try"))
    contents = _shuffled(list(claimed(result, 3, join_wholes([result.wholes]))))
    kept = _shuffled([e for element in contents for e in resolved(element, 3)])
    outs = _shuffled([e for element in kept for e in collapsed(element)])
    (element,) = [e for e in outs if e[0][0] == "out"]
    (written,) = _WriteShaped(work, str(temp)).process(element)
    files = {
        name: (Path(f.temp).read_bytes(), f.start, f.records, f.size, f.sha256) for name, f in written.files.items()
    }
    return {"files": files, "partial": written.partial}


@pytest.mark.slow
def test_written_first_and_rewritten_gives_the_bytes_the_spill_gave(tmp_path, monkeypatch):
    """--dedupe prefix --split: the files written first and rewritten (a shard with verdicts)
    hold the bytes, starts and summary that writing them from a spill gave, dead letters at
    one position in two batches included (in the spill's order)."""
    from pipeline.graph.shard_step import ShardWork
    from transforms.conversations import NORMALIZE
    from transforms.record.inputs import Batch

    def chat(cid: str, turns: int, text: str = "hello") -> bytes:
        return dumps_line({"id": cid, "messages": [{"role": "user", "content": text}, A] * turns})

    first = [
        RawRecord("a.jsonl", 60, chat("short", 1)),  # a prefix of "long", in a later batch
        RawRecord("a.jsonl", 70, chat("alone", 1, "other")),
        RawRecord("a.jsonl", 80, chat("same", 2, "twice")),
    ]
    second = [
        RawRecord("b.jsonl", 60, b"{bad"),  # the same position as "short", another file
        RawRecord("b.jsonl", 90, chat("long", 3)),
        RawRecord("b.jsonl", 95, chat("again", 2, "twice")),  # the same as "same"
    ]
    batches = [Batch(0, 0, first), Batch(0, 500, second)]
    settings = Settings(dedupe="prefix", splits=(("eval", 0.5),), split_by="id")
    work = ShardWork(NORMALIZE, settings)
    assert work.writes_first
    new = _dedupe_written(batches, work, tmp_path / "first")
    monkeypatch.setattr(ShardWork, "writes_first", property(lambda self: False))
    old = _dedupe_written(batches, work, tmp_path / "spill")
    assert new == old
    letters = [json.loads(line) for line in new["files"]["dead_letter"][0].splitlines()]
    assert [(d["position"], d["reason"]) for d in letters] == [
        (60, "duplicate"),
        (60, "invalid_json"),
        (95, "duplicate"),
    ]
    assert set(new["files"]) == {"normalized", "eval", "drops", "dead_letter"}


def test_a_split_counts_the_tool_calls_of_dict_messages_only():
    from transforms.record.records import _tool_calls

    call = {"role": "assistant", "tool_calls": [{"id": "1"}, {"id": "2"}]}
    assert _tool_calls([U, call, A, call]) == 4
    assert _tool_calls([U, {"role": "assistant", "tool_calls": None}, {"tool_calls": "x"}]) == 0
    # Odd messages (no dict) count nothing, whatever text or items they hold.
    assert _tool_calls(["tool_calls", call, ["tool_calls"], 3, None]) == 2
    assert _tool_calls(["text", call]) == 2 and _tool_calls([]) == 0


def test_a_key_claimed_once_decides_nothing():
    # The resolve step passes over such keys without resolving them.
    (whole,) = [v for _, v in content_claims(claim_of(conversation(0, "a", [U, A], "exact")))]
    assert list(resolve_content(("k", [whole]))) == []
    assert list(resolve_content(("k", [("extends", (3, (0, 0, 1), "f", "b"))]))) == []
