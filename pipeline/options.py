"""convnorm's options: flags, YAML presets, and validation before any pipeline is built.

``ConvNormOptions`` declares convnorm's own flags on Beam's ``PipelineOptions``; every other
Beam flag (``--runner``, ``--direct_num_workers``, ``--job_endpoint``, ``--project`` ...)
passes through to Beam. ``--config FILE.yaml`` loads a preset: a mapping of option names
(dashes or underscores) to values, read with ``yaml.safe_load``; an unknown key is an error
that names it; flags on the command line override the file.

``load_job(argv)`` returns a validated ``Job``: the options, the record ``Settings``, and the
planned input shards. Everything that can be checked before the pipeline is built is checked
here, so a typo costs a second, not a failed run.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import math
import os
import re
from dataclasses import dataclass

import yaml
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from pipeline.outputs import OutputError, plan_inputs, skipped_inputs, unreachable_output, unsafe_output
from pipeline.sinks import FILE_FORMATS
from pipeline.sources import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_SHARD_BYTES,
    InputError,
    Shard,
    plan_shards,
)
from transforms.formats import WRITERS
from transforms.records import DEFAULT_RAW_LIMIT, Settings
from transforms.summary import DeadLetterLimit

LOG = logging.getLogger("convnorm")

#: The runner used when none is named: in-process, works offline (the DirectRunner would
#: first try to download the Prism binary).
DEFAULT_RUNNER = "FnApiRunner"


class ConfigError(ValueError):
    """Options that cannot work; the message says which and why."""


class ConvNormOptions(PipelineOptions):
    """convnorm's flags (``convnorm --help`` lists them with Beam's)."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        group = parser.add_argument_group("convnorm")
        group.add_argument("--config", default=None, metavar="CONFIG",
                           help="YAML preset of options (configs/*.yaml); flags on the command line override it")
        group.add_argument("--input", action="append", default=None,
                           metavar="INPUT",
                           help="input file or glob, quoted (repeatable): .jsonl, .jsonl.gz, .jsonl.zst, .json, "
                                ".parquet; local or any Beam filesystem")
        group.add_argument("--output", default=None, metavar="OUTPUT",
                           help="output directory, local (~ expanded) or any Beam filesystem")
        group.add_argument("--format", dest="input_format", default="auto", metavar="FORMAT",
                           help="input format: auto (detect per record) or a reader name (below)")
        group.add_argument("--sink", default="flat", metavar="SINK", help="output record format: a writer name (below)")
        group.add_argument("--output-format", dest="output_format", default="jsonl", metavar="OUTPUT_FORMAT",
                           help="file format of the normalized output: jsonl or parquet (flat sink only)")
        group.add_argument("--profile", default="spec", metavar="PROFILE",
                           help="spec (exactly MEM-5) or lossless (re-key reused ids, re-attach results first)")
        group.add_argument("--model", default=None, metavar="MODEL",
                           help="model name for replay sinks (openai-batch, openai-responses, anthropic); "
                                "when given, it replaces each record's own model")
        group.add_argument("--max-tokens", dest="max_tokens", type=int, default=None, metavar="MAX_TOKENS",
                           help="max_tokens for anthropic request bodies whose record has none "
                                "(the Messages API requires it)")
        group.add_argument("--tools-field", dest="tools_field", default="tools", metavar="TOOLS_FIELD",
                           help="dotted path of a record's tool definitions for the writers (e.g. kwargs.tools)")
        group.add_argument("--messages-field", dest="messages_field", default="messages", metavar="MESSAGES_FIELD",
                           help="field of a record object that holds its message list")
        group.add_argument("--id-field", dest="id_field", default="id", metavar="ID_FIELD",
                           help="field holding the record id; absent: an id derived from the content")
        group.add_argument("--check", action=argparse.BooleanOptionalAction, default=False,
                           help="also count provider sendability violations in the normalized output")
        group.add_argument("--overwrite", action=argparse.BooleanOptionalAction, default=False,
                           help="replace the files an earlier run's manifest lists in the output directory "
                                "(and nothing else; see docs/outputs.md)")
        group.add_argument("--break-stale-lock", dest="break_stale_lock", action=argparse.BooleanOptionalAction,
                           default=False,
                           help="take over the output directory's lock when its holder died on this host, "
                                "deleting the temporary files that run recorded as its own")
        group.add_argument("--job-endpoint-timeout", dest="job_endpoint_timeout", type=float, default=30.0,
                           metavar="JOB_ENDPOINT_TIMEOUT",
                           help="seconds to wait for the job service at --job_endpoint to answer before giving up")
        group.add_argument("--shard-bytes", dest="shard_bytes", type=int, default=DEFAULT_SHARD_BYTES,
                           metavar="SHARD_BYTES",
                           help=f"split uncompressed JSONL inputs into byte ranges of this size "
                                f"({DEFAULT_SHARD_BYTES >> 20} MiB; at least 65536)")
        group.add_argument("--batch-size", dest="batch_size", type=int, default=DEFAULT_BATCH_SIZE,
                           metavar="BATCH_SIZE",
                           help="records per batch between reading and writing (at most)")
        group.add_argument("--batch-bytes", dest="batch_bytes", type=int, default=DEFAULT_BATCH_BYTES,
                           metavar="BATCH_BYTES",
                           help=f"raw input bytes per batch: a batch closes at --batch-size records or at "
                                f"this many bytes, whichever comes first ({DEFAULT_BATCH_BYTES >> 10} KiB)"),
        group.add_argument("--report", action=argparse.BooleanOptionalAction, default=True,
                           help="write report.html (charts; needs the report extra: pip install 'convnorm[report]')")
        group.add_argument("--progress", nargs="?", const="line", default="auto", metavar="PROGRESS",
                           choices=("auto", "line", "log", "off"),
                           help="progress of local runs: auto (a live line on a terminal, else a log line "
                                "every 10 s), line, log or off; a bare --progress means line")
        group.add_argument("--quiet", action=argparse.BooleanOptionalAction, default=False,
                           help="print warnings and errors only (no progress, no summary table)")
        group.add_argument("--dead-letter-raw-limit", dest="raw_limit", type=int, default=DEFAULT_RAW_LIMIT,
                           metavar="DEAD_LETTER_RAW_LIMIT",
                           help="characters of raw input kept in a dead letter")
        group.add_argument("--max-dead-letters", dest="max_dead_letters", default=None, metavar="MAX_DEAD_LETTERS",
                           help="fail the run (exit status 1, outputs still written) when dead letters "
                                "are more than N, or more than P%% of the records read (N or P%%)")
        group.add_argument("--max-record-bytes", dest="max_record_bytes", type=int,
                           default=DEFAULT_MAX_RECORD_BYTES, metavar="MAX_RECORD_BYTES",
                           help="largest record read (a JSONL line, a .json array element or document); a larger one "
                                "is a record_too_large dead letter (default 32 MiB; see docs/input-limits.md)")
        # Streaming mode (Beam's own --streaming turns it on; see docs/streaming.md).
        group.add_argument("--window", default="60s", metavar="WINDOW",
                           help="streaming (Beam's --streaming with --runner PrismRunner, Flink or Dataflow; "
                                "see docs/streaming.md): window of the summaries, e.g. 60s, 5m")
        group.add_argument("--poll-interval", dest="poll_interval", default="2s", metavar="POLL_INTERVAL",
                           help="streaming: how often the --input patterns are matched")
        group.add_argument("--include-existing", dest="include_existing", action=argparse.BooleanOptionalAction,
                           default=False, help="streaming: also read files present at start that have no output yet")
        group.add_argument("--stop-after", dest="stop_after", default=None, metavar="STOP_AFTER",
                           help="streaming: stop watching after this long (e.g. 10m), then drain and exit")
        group.add_argument("--stop-file", dest="stop_file", default=None, metavar="STOP_FILE",
                           help="streaming: stop watching once this file exists, then drain and exit")


def _our_flags() -> dict[str, tuple[str, bool]]:
    """dest -> (flag, is a --x/--no-x toggle), read off ConvNormOptions' own parser."""
    parser = argparse.ArgumentParser(add_help=False)
    ConvNormOptions._add_argparse_args(parser)
    return {
        action.dest: (action.option_strings[0], isinstance(action, argparse.BooleanOptionalAction))
        for action in parser._actions
        if action.option_strings
    }


#: Options that may be given several times (their values add up).
_REPEATABLE = {"input", "experiments"}


def _known_option_names() -> set[str]:
    # Every option of every registered PipelineOptions subclass (Beam's and ours).
    return set(PipelineOptions([]).get_all_options(drop_default=False))


def config_flags(path: str, argv: list[str]) -> list[str]:
    """Turn a YAML preset into flags placed before ``argv`` (so ``argv`` wins)."""
    try:
        with FileSystems.open(path) as handle:
            loaded = yaml.safe_load(handle.read())
    except FileNotFoundError:
        raise ConfigError(f"--config {path!r}: no such file") from None
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"--config {path!r}: {error}") from None
    if loaded is None:
        return []
    if not isinstance(loaded, dict):
        raise ConfigError(f"--config {path!r}: expected a mapping of option names to values")
    ours = _our_flags()
    by_flag = {flag[2:].replace("-", "_"): dest for dest, (flag, _) in ours.items()}
    known = _known_option_names()
    flags: list[str] = []
    for raw_key, value in loaded.items():
        key = str(raw_key).replace("-", "_")
        dest = by_flag.get(key, key)  # a preset may name a flag (format) or its dest (input_format)
        if dest == "config":
            raise ConfigError(f"--config {path!r}: a preset cannot load another preset")
        if dest not in known:
            raise ConfigError(f"--config {path!r}: unknown option {raw_key!r}")
        flag, toggle = ours.get(dest, ("--" + dest, False))
        if isinstance(value, list) or dest in _REPEATABLE:
            if any(a == flag or a.startswith(flag + "=") for a in argv):
                continue  # the command line's list replaces the preset's
            flags += [f"{flag}={item}" for item in (value if isinstance(value, list) else [value])]
        elif isinstance(value, bool):
            if toggle:
                flags.append(flag if value else "--no-" + flag[2:])
            elif value:
                flags.append(flag)
        elif value is not None:
            flags.append(f"{flag}={value}")
    return flags


@dataclass(frozen=True)
class Job:
    options: PipelineOptions
    settings: Settings
    shards: list[Shard]
    inputs: list[str]
    output: str | None
    output_format: str
    overwrite: bool
    batch_size: int
    break_stale_lock: bool = False
    job_endpoint_timeout: float = 30.0
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    max_dead_letters: DeadLetterLimit | None = None
    batch_bytes: int = DEFAULT_BATCH_BYTES


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``2h`` -> seconds. Raises ValueError."""
    value = str(text).strip().lower()
    unit = value[-1:] if value[-1:] in _DURATION_UNITS else ""
    seconds = float(value[: len(value) - len(unit)]) * _DURATION_UNITS.get(unit, 1)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds


#: Runners that can run the streaming job (lower case, as --runner may spell them).
STREAMING_RUNNERS = frozenset({"prismrunner", "flinkrunner", "dataflowrunner", "portablerunner"})


def _streaming_problems(ours, runner: str) -> list[str]:
    problems = []
    name = runner.lower()
    if name not in STREAMING_RUNNERS and name + "runner" not in STREAMING_RUNNERS:
        problems.append(
            f"--streaming needs a runner that can stream: PrismRunner (Beam's local runner; build it "
            f"with .ci/build-prism), FlinkRunner or DataflowRunner; --runner {runner} runs batch only")
    for flag, value in (("--window", ours.window), ("--poll-interval", ours.poll_interval),
                        ("--stop-after", ours.stop_after)):
        if value is None:
            continue
        try:
            parse_duration(value)
        except ValueError:
            problems.append(f"{flag} {value!r}: expected a duration such as 90, 90s, 5m or 1h")
    if ours.output_format != "jsonl":
        problems.append("--streaming writes JSON Lines only (--output-format jsonl)")
    if ours.stop_file and FileSystems.exists(ours.stop_file):
        problems.append(f"--stop-file {ours.stop_file!r} exists already: remove it first")
    return problems


def _config_path(argv: list[str]) -> str | None:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    return known.config


#: Runners that run on this machine, where a local temporary directory is visible to workers.
LOCAL_RUNNERS = frozenset({"fnapirunner", "directrunner", "bundlebaseddirectrunner", "switchingdirectrunner",
                           "prismrunner"})


def _unknown_arguments(flags: list[str]) -> list[str]:
    """Arguments no registered option takes (Beam's parser would drop them with a warning)."""
    from apache_beam.options.pipeline_options import _BeamArgumentParser  # Beam's own parser class

    parser = _BeamArgumentParser(allow_abbrev=False)
    for cls in {str(c): c for c in PipelineOptions.__subclasses__()}.values():
        cls._add_argparse_args(parser)
    _, unknown = parser.parse_known_args(flags)
    return unknown


def _suggest(argument: str) -> str:
    flags = [flag for dest, (flag, _) in _our_flags().items()]
    close = difflib.get_close_matches(argument.split("=", 1)[0], flags, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _runner_problem(runner: str) -> str | None:
    known = {path.rsplit(".", 1)[-1].lower() for path in StandardOptions.ALL_KNOWN_RUNNERS}
    name = runner.lower()
    if "." in runner or name in known or name + "runner" in known:
        return None
    short = sorted(path.rsplit(".", 1)[-1] for path in StandardOptions.ALL_KNOWN_RUNNERS)
    return f"unknown --runner {runner!r}; known: {', '.join(short)}"


def clean_output_path(path: str) -> str:
    """``~`` expanded (local paths), trailing slashes removed (but ``/`` and ``gs://b/`` keep one)."""
    if "://" not in path:
        path = os.path.expanduser(path)
    stripped = path.rstrip("/")
    return stripped if stripped and not stripped.endswith(":/") and not stripped.endswith(":") else path


#: A value a preset asks the user to replace (configs/dataflow.yaml: YOUR_PROJECT, YOUR_BUCKET ...).
_PLACEHOLDER = re.compile(r"\bYOUR_[A-Z]+\b")


def _placeholders(options: PipelineOptions) -> list[str]:
    """``--name=value`` of every option whose value still holds a preset's placeholder."""
    found = []
    for name, value in sorted(options.get_all_options(drop_default=True).items()):
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and _PLACEHOLDER.search(item):
                found.append(f"--{name}={item}")
    return found


def is_local_runner(options: PipelineOptions) -> bool:
    runner = (options.view_as(StandardOptions).runner or DEFAULT_RUNNER).lower()
    return runner in LOCAL_RUNNERS or runner + "runner" in LOCAL_RUNNERS


def load_job(argv: list[str], *, output_required: bool = True) -> Job:
    """Parse flags and preset, validate everything, plan the input. Raises ConfigError.

    Nothing is written here. What is already in the output directory is checked later, under
    the run's lock (``pipeline.outputs.check_output``); Beam's own checks run when ``main``
    builds the pipeline, also before anything is written.
    """
    config = _config_path(argv)
    flags = (config_flags(config, argv) if config else []) + list(argv)
    unknown = _unknown_arguments(flags)
    if unknown:
        raise ConfigError(f"unrecognized argument {unknown[0]!r}{_suggest(unknown[0])}; see convnorm --help")
    options = PipelineOptions(flags)
    ours = options.view_as(ConvNormOptions)
    standard = options.view_as(StandardOptions)
    # A quoted '~/x' reaches us unexpanded; a trailing slash would print as 'x//summary.json'.
    if ours.output:
        ours.output = clean_output_path(ours.output)
    if ours.input:
        ours.input = [os.path.expanduser(pattern) for pattern in ours.input]
    if not standard.runner:
        standard.runner = DEFAULT_RUNNER
    if ours.output and "://" not in ours.output:
        # A preset's `output: ~/clean` reaches us unexpanded, and Beam would make a folder
        # named '~' here (one `rm -rf ~` from disaster): it means the home directory.
        ours.output = os.path.expanduser(ours.output)

    settings = Settings(
        messages_field=ours.messages_field,
        id_field=ours.id_field,
        input_format=ours.input_format,
        profile=ours.profile,
        sink=ours.sink,
        model=ours.model,
        max_tokens=ours.max_tokens,
        tools_field=ours.tools_field,
        check=ours.check,
        raw_limit=ours.raw_limit,
    )
    problems = settings.problems()
    placeholders = _placeholders(options)
    if placeholders:
        # Refused here: matching gs://YOUR_BUCKET/... would retry the network for minutes.
        problems.append(f"replace the placeholders first ({', '.join(placeholders)}); the preset's "
                        "comments say what each one is")
    runner_problem = _runner_problem(standard.runner)
    if runner_problem:
        problems.append(runner_problem)
    if not ours.input:
        problems.append("--input is required (a file or glob; repeat it for several)")
    if output_required and not ours.output:
        problems.append("--output is required (a directory)")
    if ours.output and "://" not in ours.output and os.path.exists(ours.output) and not os.path.isdir(ours.output):
        problems.append(f"--output {ours.output!r} is a file, not a directory")
    unsafe = unsafe_output(ours.output) if ours.output else None
    if unsafe:
        problems.append(f"--output {ours.output!r} {unsafe}: convnorm writes (and with --overwrite deletes) "
                        "there; give it a directory of its own")
    unreachable = unreachable_output(ours.output) if ours.output and not unsafe else None
    if unreachable:
        problems.append(f"--output {ours.output!r}: Beam cannot use its filesystem ({unreachable})")
    if ours.job_endpoint_timeout <= 0:
        problems.append("--job-endpoint-timeout must be more than 0 seconds")
    if ours.output_format not in FILE_FORMATS:
        problems.append(f"unknown --output-format {ours.output_format!r}; known: {', '.join(FILE_FORMATS)}")
    elif ours.output_format != "jsonl" and ours.sink != "flat":
        problems.append(f"--output-format {ours.output_format} holds flat records only; use --sink flat")
    problems += [f"{flag} must be at least 1" for flag, value in
                 (("--batch-size", ours.batch_size), ("--batch-bytes", ours.batch_bytes)) if value < 1]
    if ours.shard_bytes < 1 << 16:
        problems.append("--shard-bytes must be at least 65536")
    if ours.max_record_bytes < 1024:
        problems.append("--max-record-bytes must be at least 1024")
    dead_letter_limit = None
    if ours.max_dead_letters is not None:
        try:
            dead_letter_limit = DeadLetterLimit.parse(ours.max_dead_letters)
        except ValueError as error:
            problems.append(str(error))
    streaming = bool(standard.streaming)
    if streaming:
        problems += _streaming_problems(ours, standard.runner)
    if problems:
        raise ConfigError("; ".join(problems))

    try:
        # Streaming: files arrive later; the watcher matches the patterns as it runs.
        shards = [] if streaming else plan_shards(ours.input, ours.shard_bytes)
        skipped = skipped_inputs(shards, ours.output)
        shards = plan_inputs(shards, ours.input, ours.output)
    except (InputError, OutputError) as error:
        raise ConfigError(str(error)) from None
    if skipped:
        LOG.warning("skipping %d input file(s) inside --output %s (convnorm never reads its own outputs): %s",
                    len(skipped), ours.output, ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else ""))

    # A writer falls back to --model / --max-tokens when a record has none of its own, so a
    # missing flag is not an error; records lacking both are dead-lettered (or, for
    # max_tokens, written without it), saying why.
    uses = WRITERS[ours.sink].uses if ours.sink in WRITERS else ()
    if "model" in uses and not ours.model:
        LOG.warning("--sink %s without --model: every record must name its own model", ours.sink)
    if "max_tokens" in uses and ours.max_tokens is None:
        LOG.warning("--sink %s without --max-tokens: records without max_tokens are written without it, "
                    "which the provider requires", ours.sink)

    return Job(options, settings, shards, list(ours.input), ours.output, ours.output_format,
               ours.overwrite, ours.batch_size, ours.break_stale_lock, ours.job_endpoint_timeout,
               ours.max_record_bytes, dead_letter_limit, ours.batch_bytes)
