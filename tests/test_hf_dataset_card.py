"""An hf run's whole multi-part output loads plainly: ``datasets.load_dataset(<output>)``.

``load_dataset("json", data_files=<parts>)`` infers the columns from the first part (its first
10 MB) and casts the others to them, so parts whose call arguments have other keys fail (or
come back changed). The run writes a dataset card, ``README.md`` (``pipeline.io.dataset_card``):
each split's files and the features of every part, arguments and tools as ``json``. Loading the
folder reads it, and every part loads as one dataset with its arguments decoded to objects.

The outputs here are real runs (``--sink hf --part-bytes 0``, a part per input file) whose
first part's calls all have one key set, ``{"city"}``, and whose later parts' do not.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from pipeline.io.dataset_card import dataset_card
from transforms.dataset.chat_template import TemplateSettings, render
from transforms.formats import WRITERS
from transforms.formats.datasets import datasets_features, yaml_features

datasets = pytest.importorskip("datasets")


def _conversation(n: int, function: str, arguments: dict, tools: list | None = None) -> dict:
    call = {"id": f"call_{n}", "type": "function", "function": {"name": function, "arguments": json.dumps(arguments)}}
    record = {
        "id": f"c{n}",
        "messages": [
            {"role": "user", "content": f"question {n}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": "ok"},
            {"role": "assistant", "content": f"answer {n}"},
        ],
    }
    return {**record, "tools": tools} if tools else record


COUNT_TOOL = {
    "type": "function",
    "function": {"name": "count", "description": "Count", "parameters": {"type": "object", "properties": {}}},
}
#: One input file per part: the first part's arguments all have the keys {"city"}.
INPUTS = {
    "a.jsonl": [_conversation(1, "weather", {"city": "Paris"}), _conversation(2, "weather", {"city": "Rome"})],
    "b.jsonl": [
        _conversation(3, "count", {"n": 3, "deep": {"x": [1, 2]}}, [COUNT_TOOL]),
        _conversation(4, "weather", {"city": "Oslo", "units": "metric"}),
    ],
    "c.jsonl": [_conversation(5, "weather", {"city": 7}), _conversation(6, "weather", {})],
}
ARGUMENTS = {
    "c1": {"city": "Paris"},
    "c2": {"city": "Rome"},
    "c3": {"n": 3, "deep": {"x": [1, 2]}},
    "c4": {"city": "Oslo", "units": "metric"},
    "c5": {"city": 7},
    "c6": {},
}


def _run(work: Path, name: str, *extra: str) -> Path:
    from pipeline.cli.main import main

    inputs = work / "inputs"
    if not inputs.exists():
        inputs.mkdir()
        for file, records in INPUTS.items():
            (inputs / file).write_text("".join(json.dumps(r) + "\n" for r in records))
    out = work / name
    argv = ["--input", str(inputs), "--output", str(out), "--sink", "hf", "--part-bytes", "0", "--quiet", "--no-report"]
    assert main([*argv, *extra]) == 0
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("hf-card")
    return {
        "jsonl": _run(work, "jsonl"),
        "parquet": _run(work, "parquet", "--output-format", "parquet"),
        "split": _run(work, "split", "--split", "eval=0.4", "--split-seed", "3"),
    }


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(folder.glob("part-*.jsonl")) for line in part.read_text().splitlines()]


def _arguments(rows) -> dict:
    return {r["id"]: c["function"]["arguments"] for r in rows for m in r["messages"] for c in m["tool_calls"] or ()}


def _load(path, tmp_path: Path, **kwargs):
    datasets.disable_progress_bars()
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
    return datasets.load_dataset(str(path), cache_dir=str(tmp_path / "cache"), **kwargs)


@pytest.mark.slow
def test_a_multi_part_output_loads_from_its_folder_with_nothing_given(runs, tmp_path):
    out = runs["jsonl"]
    parts = sorted((out / "normalized").glob("part-*.jsonl"))
    assert [p.name for p in parts] == ["part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"]
    first = _arguments(_records(out / "normalized")[:2])
    assert {frozenset(a) for a in first.values()} == {frozenset({"city"})}  # the case a plain JSON load fails on
    written = _records(out / "normalized")

    loaded = _load(out, tmp_path)
    assert list(loaded) == ["train"]
    assert list(loaded["train"]) == written  # every row, every key, nulls as nulls
    assert _arguments(loaded["train"]) == ARGUMENTS  # objects with their own keys and value types
    assert loaded["train"][2]["tools"] == [COUNT_TOOL]
    # Read as a mapping, as chat templates read them.
    template = TemplateSettings(
        "inline",
        "{% for m in messages %}{% for c in m.tool_calls or [] %}"
        "{{ c.function.name }}({% for k, v in c.function.arguments.items() %}{{ k }}={{ v | tojson }};{% endfor %})"
        "{% endfor %}{% endfor %}",
    )
    assert [render(row, template) for row in loaded["train"]][2:5] == [
        'count(n=3;deep={"x": [1, 2]};)',
        'weather(city="Oslo";units="metric";)',
        "weather(city=7;)",
    ]
    # The manifest lists the card like the run's other files.
    manifest = json.loads((out / "_convnorm_manifest.json").read_text())
    entry = next(e for e in manifest["files"] if e["path"] == "README.md")
    assert entry["bytes"] == (out / "README.md").stat().st_size


@pytest.mark.slow
def test_a_plain_json_load_of_the_parts_holds_only_when_the_first_part_shows_the_keys_differ(runs, tmp_path):
    # What docs/formats.md says of datasets' own JSON loader (no card, no features), on the
    # same parts: part-00000's arguments all have one key set, part-00001's two differ.
    parts = [str(p) for p in sorted((runs["jsonl"] / "normalized").glob("part-*.jsonl"))]
    datasets.disable_progress_bars()
    with pytest.raises(datasets.exceptions.DatasetGenerationError):
        datasets.load_dataset("json", data_files=parts, split="train", cache_dir=str(tmp_path / "a"))
    reordered = [parts[1], parts[0], parts[2]]
    loaded = datasets.load_dataset("json", data_files=reordered, split="train", cache_dir=str(tmp_path / "b"))
    assert _arguments(loaded) == ARGUMENTS


@pytest.mark.slow
def test_parquet_parts_load_from_their_folder_as_the_same_rows(runs, tmp_path):
    loaded = _load(runs["parquet"], tmp_path, split="train")
    assert list(loaded) == _records(runs["jsonl"] / "normalized")
    assert "path: normalized/part-*.parquet" in (runs["parquet"] / "README.md").read_text()


@pytest.mark.slow
def test_every_split_with_records_is_a_split_of_the_card(runs, tmp_path):
    out = runs["split"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["splits"] == {"train": 3, "eval": 3}
    loaded = _load(out, tmp_path)
    assert {name: len(split) for name, split in loaded.items()} == summary["splits"]
    assert list(loaded["eval"]) == _records(out / "eval")
    assert _arguments([*loaded["train"], *loaded["eval"]]) == ARGUMENTS


def test_the_card_names_only_the_splits_that_have_records():
    card = dataset_card("hf", "key", ".jsonl", ("normalized", "eval", "test"), {"normalized": 3, "eval": 0, "test": 1})
    assert card is not None
    header = yaml.safe_load(card.decode().split("---\n")[1])
    assert header["configs"] == [
        {
            "config_name": "default",
            "data_files": [
                {"split": "train", "path": "normalized/part-*.jsonl"},
                {"split": "test", "path": "test/part-*.jsonl"},
            ],
        }
    ]
    assert header["dataset_info"]["features"][0] == {"name": "key", "dtype": "string"}
    features = datasets.Features._from_yaml_list(header["dataset_info"]["features"])
    assert features == datasets.Features.from_dict(datasets_features("hf", "key"))
    assert dataset_card("hf", "id", ".jsonl", ("normalized",), {"normalized": 0, "drops": 2}) is None


def test_the_cards_features_are_spelled_as_datasets_spells_them():
    for sink, writer in WRITERS.items():
        if writer.schema is None:
            continue
        features = datasets.Features.from_dict(datasets_features(sink, "key"))
        assert yaml_features(sink, "key") == features._to_yaml_list(), sink


@pytest.mark.slow
def test_the_plan_of_an_hf_run_lists_the_card_and_a_readme_convnorm_did_not_write_stays(tmp_path, capsys):
    """A README.md that is not convnorm's (a cloned dataset repository's) is kept as it is: the
    run writes its outputs beside it, no card, and says so."""
    from pipeline.cli.main import main

    (tmp_path / "in.jsonl").write_text(json.dumps(INPUTS["a.jsonl"][0]) + "\n")
    out = tmp_path / "out"
    argv = ["--input", str(tmp_path / "in.jsonl"), "--output", str(out), "--sink", "hf", "--no-report"]
    assert main([*argv, "--dry-run"]) == 0
    assert f"{out}/summary.json, {out}/README.md, " in capsys.readouterr().out
    out.mkdir()
    (out / "README.md").write_text("mine")
    assert main([*argv, "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert "holds a README.md convnorm did not write: it stays" in plan
    assert f"{out}/README.md" not in plan.split("the run would write:")[1]
    assert main([*argv, "--quiet"]) == 0
    assert "README.md convnorm did not write" in capsys.readouterr().err
    assert (out / "README.md").read_text() == "mine"
    manifest = json.loads((out / "_convnorm_manifest.json").read_text())
    assert "README.md" not in [e["path"] for e in manifest["files"]]
    # A rerun with --overwrite leaves it too: the manifest never listed it.
    assert main([*argv, "--quiet", "--overwrite"]) == 0
    assert (out / "README.md").read_text() == "mine"


@pytest.mark.slow
def test_the_runs_last_lines_say_to_load_the_folder_only_when_the_card_is_there(tmp_path, capsys):
    from pipeline.cli.main import main

    (tmp_path / "in.jsonl").write_text(json.dumps(INPUTS["a.jsonl"][0]) + "\n")
    out = tmp_path / "out"
    argv = ["--input", str(tmp_path / "in.jsonl"), "--output", str(out), "--sink", "hf", "--no-report"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f'load:    datasets.load_dataset("{out}") loads every split' in printed
    assert "Load the folder, not the part\nfiles" in (out / "README.md").read_text()
    # No card of convnorm's (a README.md of the user's is there): nothing to point to.
    other = tmp_path / "other"
    other.mkdir()
    (other / "README.md").write_text("mine")
    assert main([*argv[:3], str(other), *argv[4:]]) == 0
    assert "load:" not in capsys.readouterr().out


@pytest.mark.slow
def test_overwrite_replaces_the_card_and_another_sink_leaves_none(runs, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(runs["jsonl"], out)
    _run(tmp_path, "out", "--overwrite", "--split", "eval=0.4", "--split-seed", "3")
    assert "split: eval" in (out / "README.md").read_text()
    _run(tmp_path, "out", "--overwrite", "--sink", "openai-finetune")
    assert not (out / "README.md").exists()
    manifest = json.loads((out / "_convnorm_manifest.json").read_text())
    assert "README.md" not in [e["path"] for e in manifest["files"]]
