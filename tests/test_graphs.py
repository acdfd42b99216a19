"""The job's graph, the one every runner runs: every sink and validate account for every
record; DaskRunner's options; --graph, deprecated, accepted and ignored."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from engine_outputs import SHARD_BYTES, tree, write_mixed_input

from pipeline.cli.main import main
from pipeline.config.options import load_job
from pipeline.io.output_names import SUCCESS_FILE
from transforms.formats import WRITERS

SINKS = sorted(WRITERS)


@pytest.fixture(scope="module")
def mixed_input(tmp_path_factory) -> list[str]:
    return write_mixed_input(tmp_path_factory.mktemp("graphs") / "input")


def _args(patterns: list[str], *extra: str) -> list[str]:
    inputs = [arg for pattern in patterns for arg in ("--input", pattern)]
    return [*inputs, f"--shard-bytes={SHARD_BYTES}", "--batch-size=32", "--quiet", "--no-report", *extra]


def _run(out: Path, args: list[str], command: list[str] = ()) -> Path:
    status = main([*command, *args, "--output", str(out)])
    assert status in (0, 1), f"exit status {status}"
    assert (out / SUCCESS_FILE).exists()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sink", SINKS)
def test_every_sink_accounts_for_every_record_in_several_files(sink, tmp_path, mixed_input):
    out = _run(tmp_path / "out", _args(mixed_input, "--sink", sink, "--model", "m", "--max-tokens", "64"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accounted"] and summary["records_in"] > 300
    if sink in ("trl-dpo", "trl-kto"):
        # Rows from labels only, which this input holds few of: the others are counted refusals.
        assert sum(summary["sink_refusals_by_reason"].values()) > 300
        return
    files = len(tree(out / "normalized"))
    # Several shards, several files; openai-finetune's split is one file (finalize joins its parts).
    assert files == 1 if sink == "openai-finetune" else files > 5


@pytest.mark.slow
def test_validate_writes_violations_and_dead_letters(tmp_path, mixed_input):
    out = _run(tmp_path / "out", _args(mixed_input), ["validate"])
    for name in ("violations", "dead_letter"):
        assert tree(out / name) != {}


def test_graph_is_accepted_does_nothing_and_says_so_in_one_line(tmp_path, mixed_input, caplog):
    # A preset or a script that names --graph keeps working; the one graph runs whatever it says.
    out = ["--output", str(tmp_path / "out")]
    for value in ("auto", "tagged-outputs", "per-shard"):
        caplog.clear()
        load_job(_args(mixed_input, *out, "--graph", value))
        warned = [r.getMessage() for r in caplog.records if "--graph" in r.getMessage()]
        assert warned == [f"--graph {value} is deprecated and does nothing: one graph runs on every runner"]
    caplog.clear()
    load_job(_args(mixed_input, *out))
    assert not [r for r in caplog.records if "--graph" in r.getMessage()]
    preset = tmp_path / "old.yaml"
    preset.write_text("graph: tagged-outputs\n")
    caplog.clear()
    load_job(_args(mixed_input, *out, "--config", str(preset)))
    assert any("--graph tagged-outputs is deprecated" in r.getMessage() for r in caplog.records)


def test_dask_runner_gets_a_partition_per_shard(tmp_path, mixed_input):
    out = ["--output", str(tmp_path / "out")]
    pytest.importorskip("dask.distributed", reason="the dask extra is not installed (pip install -e '.[dask]')")
    job = load_job(_args(mixed_input, *out, "--runner", "DaskRunner"))
    assert job.options.get_all_options()["runner"] == "apache_beam.runners.dask.dask_runner.DaskRunner"
    # One Dask partition per shard (Beam would put 128 shards in one), at most 4 per worker thread.
    from pipeline.runners.dask_cluster import default_partitions

    assert len(job.shards) > 5
    default_partitions(job.options, len(job.shards), threads=64)
    assert job.options.get_all_options()["npartitions"] == len(job.shards)
    few = load_job(_args(mixed_input, *out, "--runner", "DaskRunner"))
    default_partitions(few.options, len(few.shards), threads=1)
    assert few.options.get_all_options()["npartitions"] == 4
    given = load_job(_args(mixed_input, *out, "--runner", "DaskRunner", "--dask_npartitions", "3"))
    default_partitions(given.options, len(given.shards), threads=64)
    assert given.options.get_all_options()["npartitions"] == 3


def test_convnorm_knows_beams_dask_flags_and_takes_them_before_and_after_beams_import(tmp_path, mixed_input):
    pytest.importorskip("dask.distributed", reason="the dask extra is not installed (pip install -e '.[dask]')")
    import argparse

    from apache_beam.runners.dask.dask_runner import DaskOptions

    from pipeline.config.dask_flags import DASK_FLAGS
    from pipeline.config.precheck import precheck

    parser = argparse.ArgumentParser()
    DaskOptions._add_argparse_args(parser)
    beams = {option: action.dest for action in parser._actions for option in action.option_strings if option != "-h"}
    beams.pop("--help", None)
    assert beams == DASK_FLAGS
    out = ["--output", str(tmp_path / "out")]
    flags = ["--runner", "DaskRunner", "--dask_scheduler_file", str(tmp_path / "s.json"), "--dask_npartitions", "3"]
    precheck(_args(mixed_input, *out, *flags))  # the check before Beam's import knows them
    job = load_job(_args(mixed_input, *out, *flags))
    assert job.options.get_all_options()["scheduler_file"] == str(tmp_path / "s.json")
    preset = tmp_path / "dask.yaml"
    preset.write_text(f"runner: DaskRunner\ndask_scheduler_file: {tmp_path / 'p.json'}\ndask_npartitions: 5\n")
    job = load_job(_args(mixed_input, *out, "--config", str(preset)))
    options = job.options.get_all_options()
    assert (options["scheduler_file"], options["npartitions"]) == (str(tmp_path / "p.json"), 5)


@pytest.mark.parametrize(
    ("address", "plain_remote"),
    [
        ("tcp://10.0.0.5:8786", True),
        ("10.0.0.5:8786", True),  # no protocol: Dask's default, TCP
        ("tcp://dask-head:8786", True),  # a host name is not looked up: not known to be loopback
        ("ws://10.0.0.5:8786", True),
        ("tcp://127.0.0.1:8786", False),
        ("tcp://127.0.0.2:8786", False),
        ("tcp://[::1]:8786", False),
        ("tcp://localhost:8786", False),
        ("tls://10.0.0.5:8786", False),
        ("wss://10.0.0.5:8786", False),
    ],
)
def test_which_scheduler_addresses_are_plain_tcp_beyond_loopback(address, plain_remote):
    from pipeline.config.dask_flags import is_plain_remote

    assert is_plain_remote(address) is plain_remote


def test_a_scheduler_without_tls_beyond_loopback_is_refused_unless_accepted(tmp_path, mixed_input, capsys):
    # Found: a scheduler of the user's on tcp:// got one warning and the run; anyone on the
    # network could then run code on its workers (and read their AWS_SECRET_ACCESS_KEY).
    pytest.importorskip("dask.distributed", reason="the dask extra is not installed (pip install -e '.[dask]')")
    scheduler_file = tmp_path / "scheduler.json"
    scheduler_file.write_text(json.dumps({"address": "tcp://192.168.1.4:8786"}))
    for flag, named in [
        (["--dask_client_address", "tcp://10.0.0.5:8786"], "--dask_client_address: the Dask scheduler tcp://10.0.0.5"),
        (["--dask_scheduler_file", str(scheduler_file)], f"--dask_scheduler_file {scheduler_file}: the Dask scheduler"),
    ]:
        out = tmp_path / "out"
        assert main(_args(mixed_input, "--output", str(out), "--runner", "DaskRunner", *flag)) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("convnorm: error:")]
        assert len(errors) == 1 and named in errors[0], errors
        assert "without TLS" in errors[0] and errors[0].endswith("or accept the risk with --insecure-dask-scheduler")
        assert not out.exists()
        # Accepted in so many words, or on loopback, or with TLS: the run is built (not run here).
        out_args = ["--output", str(out), "--runner", "DaskRunner"]
        load_job(_args(mixed_input, *out_args, *flag, "--insecure-dask-scheduler"))
    for address in ("tcp://127.0.0.1:8786", "tls://10.0.0.5:8786"):
        load_job(
            _args(
                mixed_input, "--output", str(tmp_path / "o"), "--runner", "DaskRunner", "--dask_client_address", address
            )
        )


def test_the_dask_install_hint_is_the_checkouts(monkeypatch):
    # Found: the hint said pip install 'convnorm[dask]', which asks a package index for a
    # "convnorm" (not where this one comes from: its checkout, as the README installs it).
    from pipeline.config import dask_flags

    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails: dask absent
    problem = dask_flags.dask_problem()
    assert problem is not None and problem.endswith(
        "install the dask extra: pip install -e '.[dask]' in convnorm's checkout"
    )
