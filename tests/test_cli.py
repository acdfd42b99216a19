"""The command line end to end on the bundled sample: golden summary, reruns, accounting."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import output_trees
import pyarrow.parquet as pq
import pytest

from pipeline.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"
GOLDEN = Path(__file__).resolve().parent / "data" / "expected" / "sample_summary.json"


def _run(*argv: str) -> int:
    return main(list(argv))


_files = output_trees.tree


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(directory.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


@pytest.fixture(scope="module")
def sample_out(sample_run):
    """The session's one run of the bundled sample (tests/conftest.py)."""
    assert sample_run.status == 0
    return sample_run.out


def test_summary_matches_the_golden_file(sample_out, capsys):
    summary = json.loads((sample_out / "summary.json").read_text())
    assert summary == json.loads(GOLDEN.read_text())


def test_summary_table_is_printed(sample_run):
    assert sample_run.status == 0
    printed = sample_run.stdout
    assert "convnorm summary" in printed
    assert "records in" in printed and "dead-lettered" in printed and "leading_tool" in printed


def test_every_input_record_ends_in_exactly_one_output(sample_out):
    raw_lines = [line for line in SAMPLE.read_bytes().splitlines() if line.strip()]
    normalized = _lines(sample_out / "normalized")
    dead = _lines(sample_out / "dead_letter")
    drops = _lines(sample_out / "drops")
    assert len(normalized) + len(dead) == len(raw_lines)
    assert [m["id"] for m in drops] == [r["id"] for r in normalized]
    # Every dead letter points back at its line.
    data = SAMPLE.read_bytes()
    for letter in dead:
        line = data[letter["position"] :].split(b"\n", 1)[0]
        assert line.decode()[: len(letter["raw"])] == letter["raw"]
    summary = json.loads((sample_out / "summary.json").read_text())
    assert summary["records_in"] == len(raw_lines)
    assert summary["dropped"] == sum(m["dropped"] for m in drops)


@pytest.mark.slow
def test_rerun_is_byte_identical_even_with_two_workers_and_small_shards(sample_out, tmp_path):
    again = tmp_path / "again"
    assert _run("--input", str(SAMPLE), "--output", str(again)) == 0
    assert _files(again) == _files(sample_out)
    split = tmp_path / "split"
    argv = [
        "--input",
        str(SAMPLE),
        "--output",
        str(split),
        "--shard-bytes=200000",
        "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
    ]
    assert _run(*argv) == 0
    first = _files(split)
    shutil.rmtree(split)
    assert _run(*argv) == 0
    assert _files(split) == first
    assert len(list((split / "normalized").glob("part-*"))) > 1
    # Same records, same order, whatever the sharding.
    assert _lines(split / "normalized") == _lines(sample_out / "normalized")
    assert json.loads((split / "summary.json").read_text()) == json.loads((sample_out / "summary.json").read_text())


@pytest.mark.slow
def test_existing_outputs_need_overwrite(sample_out, tmp_path, capsys):
    out = tmp_path / "o"
    assert _run("--input", str(SAMPLE), "--output", str(out)) == 0
    assert _run("--input", str(SAMPLE), "--output", str(out)) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert _run("--input", str(SAMPLE), "--output", str(out), "--overwrite") == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--output", "x"], "--input is required"),
        (["--input", "nothing-here-*.jsonl", "--output", "x"], "no file matches"),
        (["--input", str(SAMPLE)], "--output is required"),
        (["--input", str(SAMPLE), "--output", "x", "--sink", "nope"], "unknown --sink 'nope'"),
        (["--input", str(SAMPLE), "--output", "x", "--profile", "nope"], "unknown --profile 'nope'"),
        (["--input", str(SAMPLE), "--output", "x", "--format", "nope"], "unknown --format 'nope'"),
        (["--input", str(SAMPLE), "--output", "x", "--output-format", "csv"], "unknown --output-format"),
        (["--input", str(SAMPLE), "--output", "x", "--max-tokens", "0"], "--max-tokens must be at least 1"),
        (
            ["--input", str(SAMPLE), "--output", "x", "--profle", "lossless"],
            "unrecognized argument '--profle' (did you mean --profile?)",
        ),
        (["--input", str(SAMPLE), "--output", "x", "stray"], "unrecognized argument 'stray'"),
        (["valdate", "--input", str(SAMPLE)], "unknown command 'valdate' (did you mean validate?)"),
        (["--input", str(SAMPLE), "--output", "x", "--runner", "NoSuchRunner"], "unknown --runner 'NoSuchRunner'"),
        (["--input", str(SAMPLE), "--output", "x", "--id-field", "messages"], "must differ"),
        (
            ["--input", str(SAMPLE), "--output", "x", "--sink", "anthropic", "--output-format", "parquet"],
            "of --sink flat, hf, trl-dpo, trl-kto or trl-prompts only",
        ),
    ],
)
def test_bad_options_fail_before_any_pipeline(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _run(*argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_config_presets_and_overrides(tmp_path, capsys):
    preset = tmp_path / "p.yaml"
    preset.write_text(f"input: [{SAMPLE}]\noutput: {tmp_path / 'from-preset'}\nprofile: lossless\n")
    override = tmp_path / "from-flag"
    assert _run("--config", str(preset), "--output", str(override)) == 0
    assert not (tmp_path / "from-preset").exists()
    summary = json.loads((override / "summary.json").read_text())
    assert summary["profile"] == "lossless" and "repairs" in summary

    preset.write_text("input: [x]\nouptut: y\n")
    assert _run("--config", str(preset)) == 2
    assert "unknown option 'ouptut'" in capsys.readouterr().err
    preset.write_text("- just\n- a list\n")
    assert _run("--config", str(preset)) == 2
    assert "expected a mapping" in capsys.readouterr().err
    assert _run("--config", str(tmp_path / "missing.yaml")) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("preset", sorted(p.name for p in (ROOT / "configs").glob("*.yaml")))
def test_bundled_presets_load(preset, tmp_path, monkeypatch):
    from pipeline.config.options import ConfigError, load_job

    monkeypatch.chdir(ROOT)  # presets name the bundled samples by relative path
    argv = ["--config", str(ROOT / "configs" / preset), "--output", str(tmp_path / "out")]
    if preset == "dataflow.yaml":
        # Placeholders still to fill in: refused before anything touches gs://.
        with pytest.raises(ConfigError, match="gs://YOUR_BUCKET"):
            load_job(argv)
        return
    if preset == "dask.yaml":
        try:
            import dask.distributed  # noqa: F401
        except ImportError:  # without the extra, one line saying what to install
            with pytest.raises(ConfigError, match=r"convnorm\[dask\]"):
                load_job(argv)
            return
    job = load_job(argv)
    if preset == "streaming.yaml":  # files arrive later: nothing is planned up front
        assert job.options.get_all_options()["streaming"] and not job.shards
        return
    assert job.shards and job.output == str(tmp_path / "out")


def test_output_that_is_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert _run("--input", str(SAMPLE), "--output", str(target)) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_validate_output_needs_overwrite_and_overwrite_clears_stale_reports(tmp_path, capsys):
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"messages": [{"role": "tool", "content": "r", "tool_call_id": "c"}]}\nnot json\n')
    out = tmp_path / "v"
    assert _run("validate", "--input", str(broken), "--output", str(out)) == 1
    assert list((out / "dead_letter").glob("part-*"))
    assert _run("validate", "--input", str(broken), "--output", str(out)) == 2
    assert "--overwrite" in capsys.readouterr().err
    clean = tmp_path / "c.jsonl"
    clean.write_text('{"messages": [{"role": "user", "content": "q"}]}\n')
    assert _run("validate", "--input", str(clean), "--output", str(out), "--overwrite") == 0
    letters = list((out / "dead_letter").glob("part-*"))
    assert letters and all(p.read_bytes() == b"" for p in letters)  # no stale dead letters beside a clean report


def test_preset_input_is_replaced_by_the_command_line(tmp_path):
    from pipeline.config.options import load_job

    other = tmp_path / "other.jsonl"
    other.write_text('{"messages": []}\n')
    preset = tmp_path / "p.yaml"
    preset.write_text(f"input: {SAMPLE}\n")  # a scalar, not a list
    job = load_job(["--config", str(preset), "--input", str(other), "--output", str(tmp_path / "o")])
    assert job.inputs == [str(other)]


@pytest.mark.slow
def test_parquet_output_is_read_by_pyarrow(tmp_path):
    out = tmp_path / "pq"
    assert _run("--input", str(SAMPLE), "--output", str(out), "--output-format", "parquet") == 0
    tables = [pq.read_table(p) for p in sorted((out / "normalized").glob("part-*.parquet"))]
    rows = [row for t in tables for row in t.to_pylist()]
    flat = _lines_from_jsonl_run(tmp_path)
    assert [r["id"] for r in rows] == [r["id"] for r in flat]
    first_with_call = next(r for r in flat for m in r["messages"] if "tool_calls" in m)
    row = next(r for r in rows if r["id"] == first_with_call["id"])
    for got, want in zip(row["messages"], first_with_call["messages"]):
        assert (got["role"], got["content"]) == (want["role"], want["content"])
        if "tool_calls" in want:
            # A string argument stays that string, a JSON value is its JSON text (args_kind says which).
            assert [c["args"] if c["args_kind"] == "string" else json.loads(c["args"]) for c in got["tool_calls"]] == [
                c.get("args") for c in want["tool_calls"]
            ]
    assert json.loads(row["fields"])["tools"] == first_with_call["tools"]


def _lines_from_jsonl_run(tmp_path):
    out = tmp_path / "jsonl"
    assert _run("--input", str(SAMPLE), "--output", str(out)) == 0
    return _lines(out / "normalized")


def test_check_counts_violations_in_the_output(tmp_path):
    out = tmp_path / "checked"
    assert _run("--input", str(SAMPLE), "--output", str(out), "--check", "--profile", "lossless") == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["conversations_with_violations"] == 0
    assert set(summary["violations"].values()) == {0}


@pytest.mark.slow
def test_validate_fails_on_broken_input_and_passes_on_lossless_output(tmp_path, capsys):
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "id": "a",
                    "messages": [
                        {"role": "tool", "content": "r", "tool_call_id": "c1"},
                        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "s"}]},
                    ],
                },
                {"id": "b", "messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "late"}]},
                {"id": "c", "messages": [{"role": "user", "content": "fine"}]},
            ]
        )
        + "\n"
    )
    assert _run("validate", "--input", str(broken)) == 1
    printed = capsys.readouterr().out
    assert "NOT sendable" in printed and "leading_tool" in printed and "system_not_first" in printed
    assert "a (" in printed and "b (" in printed

    out = tmp_path / "out"
    assert _run("--input", str(broken), "--output", str(out), "--profile", "lossless") == 0
    capsys.readouterr()
    assert _run("validate", "--input", str(out / "normalized" / "*.jsonl"), "--output", str(tmp_path / "v")) == 0
    assert "verdict: sendable" in capsys.readouterr().out
    report = json.loads((tmp_path / "v" / "validation.json").read_text())
    assert report["conversations_checked"] == 3 and report["conversations_with_violations"] == 0


def test_help_lists_formats_and_profiles(capsys):
    assert _run("--help") == 0
    text = capsys.readouterr().out
    assert "--input" in text and "--profile" in text and "lossless" in text and "flat" in text


def test_pipeline_totals_equal_a_plain_python_count(sample_out):
    """The golden file is not just self-consistent: a loop without Beam gives the same totals."""
    from pipeline.io.planning import plan_shards
    from pipeline.io.read_shard import read_shard
    from pipeline.io.shard import Blank
    from transforms.record.record_settings import Settings
    from transforms.record.records import process_record
    from transforms.totals import summary as summaries

    total: dict = {}
    for item in read_shard(plan_shards([str(SAMPLE)])[0]):
        if isinstance(item, Blank):
            total = summaries.merge(total, summaries.partial(blank_lines=item.lines))
            continue
        outcome = process_record(item, Settings())
        metrics = [outcome.metrics] if outcome.metrics else []
        letters = [outcome.dead_letter] if outcome.dead_letter else []
        total = summaries.merge(total, summaries.partial(1, metrics, letters))
    assert summaries.finalize(total) == json.loads((sample_out / "summary.json").read_text())


@pytest.mark.slow
def test_hundreds_of_input_files_under_a_low_open_file_limit(tmp_path):
    """One output file open at a time: 400 inputs under a 200-handle limit."""
    import resource
    import subprocess
    import sys

    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(400):
        (inputs / f"f{i:03d}.jsonl").write_text(
            json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": "x"}]}) + "\n"
        )

    def limit_handles():
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    out = tmp_path / "out"
    done = subprocess.run(
        # One part per input file (--part-bytes 0): hundreds of files written, one open at a time.
        [sys.executable, "-m", "pipeline", "--input", str(inputs / "*.jsonl"), "--output", str(out), "--part-bytes=0"],
        cwd=ROOT,
        preexec_fn=limit_handles,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(list((out / "normalized").glob("part-*.jsonl"))) == 400
    assert json.loads((out / "summary.json").read_text())["records_out"] == 400
    letters = list((out / "dead_letter").iterdir())  # a part's file in every output, empty here
    assert len(letters) == 400 and all(p.read_bytes() == b"" for p in letters)
