"""The two graphs of a job give the same bytes: --graph tagged-outputs (NormalizeConversation's
tagged outputs, each with its writer) and --graph per-shard (each shard read, processed and
written in one step, the graph DaskRunner runs), on every sink, on Parquet output and on
validate; and --graph auto picks by runner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from engine_outputs import SHARD_BYTES, assert_same_outputs, tree, write_mixed_input

from pipeline.cli.main import main
from pipeline.config.flags import PER_SHARD, TAGGED_OUTPUTS
from pipeline.config.options import ConfigError, load_job
from pipeline.io.output_names import MANIFEST_FILE, SUCCESS_FILE
from transforms.formats import WRITERS

SINKS = sorted(WRITERS)


@pytest.fixture(scope="module")
def mixed_input(tmp_path_factory) -> list[str]:
    return write_mixed_input(tmp_path_factory.mktemp("graphs") / "input")


def _args(patterns: list[str], *extra: str) -> list[str]:
    inputs = [arg for pattern in patterns for arg in ("--input", pattern)]
    return [*inputs, f"--shard-bytes={SHARD_BYTES}", "--batch-size=32", "--quiet", "--no-report", *extra]


def _both(tmp_path: Path, args: list[str], command: list[str] = ()) -> tuple[Path, Path]:
    outs = []
    for graph in (TAGGED_OUTPUTS, PER_SHARD):
        out = tmp_path / graph
        status = main([*command, *args, "--output", str(out), "--graph", graph])
        assert status in (0, 1), f"{graph}: exit status {status}"
        assert (out / SUCCESS_FILE).exists(), graph
        outs.append(out)
    return outs[0], outs[1]


def _same_manifest_files(a: Path, b: Path) -> None:
    files = [json.loads((out / MANIFEST_FILE).read_text())["files"] for out in (a, b)]
    assert files[0] == files[1]


@pytest.mark.slow
@pytest.mark.parametrize("sink", SINKS)
def test_both_graphs_write_the_same_bytes_on_every_sink(sink, tmp_path, mixed_input):
    tagged, per_shard = _both(tmp_path, _args(mixed_input, "--sink", sink, "--model", "m", "--max-tokens", "64"))
    assert_same_outputs(per_shard, tagged, f"per-shard, sink {sink}")
    _same_manifest_files(tagged, per_shard)
    summary = json.loads((per_shard / "summary.json").read_text())
    assert summary["accounted"] and summary["records_in"] > 300
    assert len(tree(per_shard / "normalized")) > 5  # several shards, several files


@pytest.mark.slow
def test_both_graphs_write_the_same_parquet_files(tmp_path, mixed_input):
    tagged, per_shard = _both(tmp_path, _args(mixed_input, "--output-format", "parquet"))
    assert_same_outputs(per_shard, tagged, "per-shard, Parquet")
    _same_manifest_files(tagged, per_shard)


@pytest.mark.slow
def test_both_graphs_validate_alike(tmp_path, mixed_input):
    tagged, per_shard = _both(tmp_path, _args(mixed_input), ["validate"])
    for name in ("violations", "dead_letter"):
        assert tree(per_shard / name) == tree(tagged / name) != {}
    assert (per_shard / "validation.json").read_bytes() == (tagged / "validation.json").read_bytes()
    _same_manifest_files(tagged, per_shard)


def test_auto_picks_per_shard_on_every_runner(tmp_path, mixed_input):
    out = ["--output", str(tmp_path / "out")]
    assert load_job(_args(mixed_input, *out)).graph == PER_SHARD
    assert load_job(_args(mixed_input, *out, "--graph", "per-shard")).graph == PER_SHARD
    pytest.importorskip("dask.distributed", reason="the dask extra is not installed (pip install -e '.[dask]')")
    job = load_job(_args(mixed_input, *out, "--runner", "DaskRunner"))
    assert job.graph == PER_SHARD
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
    with pytest.raises(ConfigError, match="tagged-outputs cannot run on DaskRunner"):
        load_job(_args(mixed_input, *out, "--runner", "DaskRunner", "--graph", "tagged-outputs"))


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
    assert (options["scheduler_file"], options["npartitions"], job.graph) == (str(tmp_path / "p.json"), 5, PER_SHARD)


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
