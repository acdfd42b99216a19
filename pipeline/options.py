"""convnorm's options: flags, YAML presets, and validation before any pipeline is built.

``ConvNormOptions`` declares convnorm's own flags on Beam's ``PipelineOptions``; every other
Beam flag (``--runner``, ``--direct_num_workers``, ``--job_endpoint``, ``--project`` ...)
passes through to Beam. ``--config FILE.yaml`` loads a preset: a mapping of option names
(dashes or underscores) to values, read with ``yaml.safe_load``; an unknown key, or a value of
the wrong type or shape, is an error that names it; flags on the command line override the file.

How: one parser knows every option (the one Beam builds from every ``PipelineOptions``
subclass, handed out through ``get_all_options(add_extra_args_fn=...)``), with ``None`` for
every default, so that parsing the command line tells which options it sets. The preset's
values, checked and converted, reach ``PipelineOptions(argv, **values)`` for the options the
command line leaves alone (Beam's keyword arguments win over its flags).

``load_job(argv)`` returns a validated ``Job``: the options, the record ``Settings``, and the
planned input shards. Everything that can be checked before the pipeline is built is checked
here, so a typo costs a second, not a failed run.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import math
import os
import re
from dataclasses import dataclass

import yaml
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from pipeline.outputs import OutputError, plan_inputs, skipped_inputs, unreachable_output, unsafe_output
from pipeline.settings import settings_problems
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
from transforms.settings import DEFAULT_RAW_LIMIT, Settings
from transforms.summary import DeadLetterLimit

LOG = logging.getLogger("convnorm")

#: The runner used when none is named: in-process, works offline (the DirectRunner would
#: first try to download the Prism binary).
DEFAULT_RUNNER = "FnApiRunner"


class ConfigError(ValueError):
    """Options that cannot work; the message says which and why."""


class FlagRecorder:
    """Adds flags to a parser (or an argument group) and keeps what it added, by dest.

    ``leave_out`` names dests not to add (``convnorm validate --help`` leaves out the flags only
    normalization uses). The actions are argparse's own return values, so nothing reads a
    parser's private fields to learn what a flag is.
    """

    def __init__(self, target, leave_out: frozenset[str] = frozenset()) -> None:
        self.target = target
        self.leave_out = leave_out
        self.actions: dict[str, argparse.Action] = {}
        #: Dests whose values add up over repeats (``--input``): a preset may give a list.
        self.repeatable: set[str] = set()

    def add(self, *flags: str, dest: str | None = None, **kwargs) -> None:
        dest = dest or flags[0][2:].replace("-", "_")
        if dest in self.leave_out:
            return
        if kwargs.get("action") != argparse.BooleanOptionalAction:
            # --help shows the flag's own name (--format FORMAT, not argparse's INPUT_FORMAT).
            kwargs.setdefault("metavar", flags[0][2:].upper().replace("-", "_"))
        self.actions[dest] = self.target.add_argument(*flags, dest=dest, **kwargs)
        if kwargs.get("action") == "append":
            self.repeatable.add(dest)


def _where_flags(add) -> None:
    add("--config", help="YAML preset of options (configs/*.yaml); flags on the command line override it")
    add(
        "--input",
        action="append",
        help="input file or glob, quoted (repeatable): .jsonl, .jsonl.gz, .jsonl.zst, .json, "
        ".parquet; local or any Beam filesystem",
    )
    add("--output", help="output directory, local (~ expanded) or any Beam filesystem")


def _record_flags(add) -> None:
    """How records are read, normalized and written."""
    add(
        "--format",
        dest="input_format",
        default="auto",
        help="input format: auto (detect per record) or a reader name (below)",
    )
    add("--sink", default="flat", help="output record format: a writer name (below)")
    add(
        "--output-format",
        default="jsonl",
        help="file format of the normalized output: jsonl or parquet (flat sink only)",
    )
    add(
        "--profile",
        default="spec",
        help="spec (exactly MEM-5) or lossless (re-key reused ids, re-attach results first)",
    )
    add(
        "--model",
        help="model name for replay sinks (openai-batch, openai-responses, anthropic); "
        "when given, it replaces each record's own model",
    )
    add(
        "--max-tokens",
        type=int,
        help="max_tokens for anthropic request bodies whose record has none (the Messages API requires it)",
    )
    add(
        "--tools-field",
        default="tools",
        help="dotted path of a record's tool definitions for the writers (e.g. kwargs.tools)",
    )
    add("--messages-field", default="messages", help="field of a record object that holds its message list")
    add(
        "--id-field",
        default="id",
        help="field holding the record id (an OpenAI Batch line without it: its custom_id); "
        "absent: an id derived from the content",
    )
    add(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="also count provider sendability violations in the normalized output",
    )


def _run_flags(add) -> None:
    """The output directory's safety, the job service, and how the input is cut up."""
    add(
        "--overwrite",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="replace the files an earlier run's manifest lists in the output directory "
        "(and nothing else; see docs/outputs.md)",
    )
    add(
        "--break-stale-lock",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="take over the output directory's lock when its holder died on this host, "
        "deleting the temporary files that run recorded as its own",
    )
    add(
        "--job-endpoint-timeout",
        type=float,
        default=30.0,
        help="seconds to wait for the job service at --job_endpoint to answer before giving up",
    )
    add(
        "--shard-bytes",
        type=int,
        default=DEFAULT_SHARD_BYTES,
        help=f"split uncompressed JSONL inputs into byte ranges of this size "
        f"({DEFAULT_SHARD_BYTES >> 20} MiB; at least 65536)",
    )
    add("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="records per batch between reading and writing")
    add(
        "--batch-bytes",
        type=int,
        default=DEFAULT_BATCH_BYTES,
        help=f"raw input bytes per batch: a batch closes at --batch-size records or at this many bytes, "
        f"whichever comes first ({DEFAULT_BATCH_BYTES >> 10} KiB)",
    )


def _console_flags(add) -> None:
    """What the run shows and writes about itself."""
    add(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write report.html (charts; needs the report extra: pip install 'convnorm[report]')",
    )
    add(
        "--progress",
        nargs="?",
        const="line",
        default="auto",
        choices=("auto", "line", "log", "off"),
        help="progress of local runs: auto (a live line on a terminal, else a log line "
        "every 10 s), line, log or off; a bare --progress means line",
    )
    add(
        "--quiet",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="print warnings and errors only (no progress, no summary table)",
    )


def _limit_flags(add) -> None:
    add(
        "--dead-letter-raw-limit",
        dest="raw_limit",
        type=int,
        default=DEFAULT_RAW_LIMIT,
        help="characters of raw input kept in a dead letter",
    )
    add(
        "--max-dead-letters",
        help="fail the run (exit status 1, outputs still written) when dead letters "
        "are more than N, or more than P%% of the records read (N or P%%)",
    )
    add(
        "--max-record-bytes",
        type=int,
        default=DEFAULT_MAX_RECORD_BYTES,
        help="largest record read (a JSONL line, a .json array element or document); a larger one "
        "is a record_too_large dead letter (default 32 MiB; see docs/input-limits.md)",
    )


def _streaming_flags(add) -> None:
    """Streaming mode (Beam's own --streaming turns it on; see docs/streaming.md)."""
    add(
        "--window",
        default="60s",
        help="streaming (Beam's --streaming with --runner PrismRunner, Flink or Dataflow; "
        "see docs/streaming.md): window of the summaries, e.g. 60s, 5m",
    )
    add("--poll-interval", default="2s", help="streaming: how often the --input patterns are matched")
    add(
        "--include-existing",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="streaming: also read files present at start that have no output yet",
    )
    add("--stop-after", help="streaming: stop watching after this long (e.g. 10m), then drain and exit")
    add("--stop-file", help="streaming: stop watching once this file exists, then drain and exit")


def add_convnorm_flags(target, leave_out: frozenset[str] = frozenset()) -> FlagRecorder:
    """Add convnorm's flags, in ``--help`` order, to a parser or argument group."""
    recorder = FlagRecorder(target, leave_out)
    for topic in (_where_flags, _record_flags, _run_flags, _console_flags, _limit_flags, _streaming_flags):
        topic(recorder.add)
    return recorder


class ConvNormOptions(PipelineOptions):
    """convnorm's flags (``convnorm --help`` lists them with Beam's)."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:  # Beam's hook for declaring an options class
        add_convnorm_flags(parser.add_argument_group("convnorm"))


def _our_flags() -> FlagRecorder:
    return add_convnorm_flags(argparse.ArgumentParser(add_help=False))


def _all_options_parser() -> argparse.ArgumentParser:
    """A parser of every registered option (Beam's and ours), whose defaults are all ``None``.

    Beam hands the parser it builds from every ``PipelineOptions`` subclass to
    ``add_extra_args_fn``; kept here, it tells which options a command line sets (those not
    ``None``) and converts a preset's values as the command line would. Errors raise
    ``argparse.ArgumentError`` instead of printing Beam's whole usage and exiting.
    """
    parsers: list[argparse.ArgumentParser] = []
    dests = PipelineOptions([]).get_all_options(drop_default=False, add_extra_args_fn=parsers.append)
    parser = parsers[0]
    parser.exit_on_error = False
    parser.set_defaults(**dict.fromkeys(dests))
    return parser


def _parse(parser: argparse.ArgumentParser, args: list[str]) -> tuple[dict, list[str]]:
    """(options the arguments set, arguments no option takes); raises ConfigError on a bad value."""
    try:
        namespace, unknown = parser.parse_known_args(args)
    except argparse.ArgumentError as error:
        raise ConfigError(str(error)) from None
    return {dest: value for dest, value in vars(namespace).items() if value is not None}, unknown


def read_preset(path: str) -> dict:
    """The mapping a ``--config`` file holds (empty for an empty file). Raises ConfigError."""
    try:
        with FileSystems.open(path) as handle:
            loaded = yaml.safe_load(handle.read())
    except FileNotFoundError:
        raise ConfigError(f"--config {path!r}: no such file") from None
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"--config {path!r}: {error}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"--config {path!r}: expected a mapping of option names to values")
    return loaded


class _WrongShape(Exception):
    """A preset value of the wrong type or shape; the message says what the option expects."""


def _expected(action: argparse.Action, repeatable: bool) -> str:
    """What a preset must give for one of our flags, in words."""
    if isinstance(action, argparse.BooleanOptionalAction):
        return "true or false"
    if action.type is int:
        return "an integer"
    if action.type is float:
        return "a number"
    if action.choices:
        return "one of " + ", ".join(action.choices)
    return "a string or a list of strings" if repeatable else "a string"


def _our_value(action: argparse.Action, repeatable: bool, value):
    """A preset's value for one of our flags, as the flag would set it. Raises _WrongShape."""
    if isinstance(value, bool):
        ok = isinstance(action, argparse.BooleanOptionalAction)
    elif isinstance(action, argparse.BooleanOptionalAction):
        ok = False
    elif action.type in (int, float):
        ok = isinstance(value, int if action.type is int else (int, float))
        value = action.type(value) if ok else value
    else:
        items = value if repeatable and isinstance(value, list) else [value]
        # YAML reads `window: 60` as a number; the flag would have read its text.
        ok = all(isinstance(item, (str, int, float)) and not isinstance(item, bool) for item in items)
        ok = ok and not (action.choices and str(value) not in action.choices)
        value = [str(item) for item in items] if repeatable else str(value)
    if not ok:
        raise _WrongShape(f"expects {_expected(action, repeatable)}")
    return value


def _beam_value(parser: argparse.ArgumentParser, dest: str, value):
    """A preset's value for one of Beam's options, converted as its flag ``--dest`` would be.

    Raises ConfigError (a bad value, in argparse's words) or _WrongShape (a list for an option
    that takes one value, a mapping for one that is not a mapping, true/false for one that is
    not a switch, and the reverse).
    """
    flag = "--" + dest
    if isinstance(value, bool):  # a switch: its flag given alone sets what `true` means
        if not _is_switch(parser, dest):
            raise _WrongShape("takes a value")
        return value  # the option's value, whichever of its flags (--x, --no_x) would set it
    if isinstance(value, list):
        args = [f"{flag}={item}" for item in value]
    elif isinstance(value, dict):
        args = [f"{flag}={json.dumps(value)}"]
    else:
        args = [f"{flag}={value}"]
    if _is_switch(parser, dest):
        raise _WrongShape("expects true or false")
    parsed, unknown = _parse(parser, args)
    if unknown or dest not in parsed:
        raise ConfigError(f"--{dest} cannot be set by a preset (give it on the command line)")
    result = parsed[dest]
    if isinstance(value, list) and not (isinstance(result, list) and len(result) >= len(value)):
        raise _WrongShape("takes one value")
    if isinstance(value, dict) and not isinstance(result, dict):
        raise _WrongShape("takes one value")
    return result


def _is_switch(parser: argparse.ArgumentParser, dest: str) -> bool:
    """Does ``--dest`` alone, without a value, set the option?"""
    try:
        parsed, unknown = _parse(parser, ["--" + dest])
    except ConfigError:  # "expected one argument"
        return False
    return not unknown and isinstance(parsed.get(dest), bool)


def preset_options(path: str, parser: argparse.ArgumentParser) -> dict:
    """A ``--config`` preset as option values by dest, each checked and converted. Raises ConfigError.

    A key may name a flag (``format``, ``max-tokens``) or its dest (``input_format``). Our
    flags' values must have the flag's type; Beam's are converted as their flag would be.
    """
    ours = _our_flags()
    by_flag = {action.option_strings[0][2:].replace("-", "_"): dest for dest, action in ours.actions.items()}
    known = _known_option_names()
    values = {}
    for raw_key, value in read_preset(path).items():
        key = str(raw_key).replace("-", "_")
        dest = by_flag.get(key, key)
        if dest == "config":
            raise ConfigError(f"--config {path!r}: a preset cannot load another preset")
        if dest not in known:
            raise ConfigError(f"--config {path!r}: unknown option {raw_key!r}")
        if value is None:
            continue  # `key:` with nothing after it leaves the option as it was
        try:
            if dest in ours.actions:
                values[dest] = _our_value(ours.actions[dest], dest in ours.repeatable, value)
            else:
                values[dest] = _beam_value(parser, dest, value)
        except _WrongShape as wrong:
            raise ConfigError(f"--config {path!r}: {raw_key!r} {wrong}, not {_shown(value)}") from None
        except ConfigError as error:
            raise ConfigError(f"--config {path!r}: {raw_key!r}: {_argparse_detail(error)}") from None
    return values


def _shown(value) -> str:
    """A preset's value as the error names it: ``the string '500'``, ``a list``, ``true``."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "a mapping"
    return f"the string {value!r}" if isinstance(value, str) else json.dumps(value)


def _argparse_detail(error: ConfigError) -> str:
    """argparse's message without its ``argument --flag:`` prefix (the caller names the key)."""
    return str(error).split(": ", 1)[-1] if str(error).startswith("argument ") else str(error)


def _known_option_names() -> set[str]:
    # Every option of every registered PipelineOptions subclass (Beam's and ours).
    return set(PipelineOptions([]).get_all_options(drop_default=False))


def parse_options(argv: list[str]) -> PipelineOptions:
    """The command line over the ``--config`` preset, as Beam options. Raises ConfigError.

    Flags on the command line win over the preset; for a repeatable option (``--input``) the
    command line's list replaces the preset's. Unknown flags and keys are refused, naming them.
    """
    parser = _all_options_parser()
    given, unknown = _parse(parser, argv)
    if unknown:
        raise ConfigError(f"unrecognized argument {unknown[0]!r}{_suggest(unknown[0])}; see convnorm --help")
    config = given.get("config")
    preset = preset_options(config, parser) if config else {}
    # Beam's keyword arguments win over its flags: give it the preset's values the command line leaves alone.
    return PipelineOptions(argv, **{dest: value for dest, value in preset.items() if dest not in given})


@dataclass(frozen=True)
class Job:
    options: PipelineOptions
    settings: Settings
    shards: list[Shard]
    inputs: list[str]
    #: ``""`` when none was given: only ``validate`` may run so (into a temporary directory).
    output: str
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
            f"with .ci/build-prism), FlinkRunner or DataflowRunner; --runner {runner} runs batch only"
        )
    for flag, value in (
        ("--window", ours.window),
        ("--poll-interval", ours.poll_interval),
        ("--stop-after", ours.stop_after),
    ):
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


#: Runners that run on this machine, where a local temporary directory is visible to workers.
LOCAL_RUNNERS = frozenset(
    {"fnapirunner", "directrunner", "bundlebaseddirectrunner", "switchingdirectrunner", "prismrunner"}
)


def _suggest(argument: str) -> str:
    flags = [action.option_strings[0] for action in _our_flags().actions.values()]
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


def _tidy_paths(ours: ConvNormOptions) -> None:
    """``~`` expanded in --input and --output (also when a preset or quotes kept it), trailing slashes removed."""
    # A quoted '~/x' reaches us unexpanded; a trailing slash would print as 'x//summary.json'.
    # A preset's `output: ~/clean` too, and Beam would make a folder named '~' here (one
    # `rm -rf ~` from disaster): it means the home directory.
    if ours.output:
        ours.output = clean_output_path(ours.output)
    if ours.input:
        ours.input = [os.path.expanduser(pattern) for pattern in ours.input]


def _record_settings(ours: ConvNormOptions) -> Settings:
    return Settings(
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


def _output_problems(output: str | None, output_required: bool) -> list[str]:
    if not output:
        return ["--output is required (a directory)"] if output_required else []
    problems = []
    if "://" not in output and os.path.exists(output) and not os.path.isdir(output):
        problems.append(f"--output {output!r} is a file, not a directory")
    unsafe = unsafe_output(output)
    unreachable = None if unsafe else unreachable_output(output)
    if unsafe:
        problems.append(
            f"--output {output!r} {unsafe}: convnorm writes (and with --overwrite deletes) "
            "there; give it a directory of its own"
        )
    if unreachable:
        problems.append(f"--output {output!r}: Beam cannot use its filesystem ({unreachable})")
    return problems


def _number_problems(ours: ConvNormOptions) -> list[str]:
    """Numbers out of range, and the output file format against the sink."""
    problems = []
    if ours.job_endpoint_timeout <= 0:
        problems.append("--job-endpoint-timeout must be more than 0 seconds")
    if ours.output_format not in FILE_FORMATS:
        problems.append(f"unknown --output-format {ours.output_format!r}; known: {', '.join(FILE_FORMATS)}")
    elif ours.output_format != "jsonl" and ours.sink != "flat":
        problems.append(f"--output-format {ours.output_format} holds flat records only; use --sink flat")
    problems += [
        f"{flag} must be at least 1"
        for flag, value in (("--batch-size", ours.batch_size), ("--batch-bytes", ours.batch_bytes))
        if value < 1
    ]
    if ours.shard_bytes < 1 << 16:
        problems.append("--shard-bytes must be at least 65536")
    if ours.max_record_bytes < 1024:
        problems.append("--max-record-bytes must be at least 1024")
    return problems


def _dead_letter_limit(ours: ConvNormOptions, problems: list[str]) -> DeadLetterLimit | None:
    if ours.max_dead_letters is None:
        return None
    try:
        return DeadLetterLimit.parse(ours.max_dead_letters)
    except ValueError as error:
        problems.append(str(error))
        return None


def _job_problems(options: PipelineOptions, output_required: bool) -> list[str]:
    """Everything wrong with the options but the record settings, in the order users read it."""
    ours = options.view_as(ConvNormOptions)
    standard = options.view_as(StandardOptions)
    problems = []
    placeholders = _placeholders(options)
    if placeholders:
        # Refused here: matching gs://YOUR_BUCKET/... would retry the network for minutes.
        problems.append(
            f"replace the placeholders first ({', '.join(placeholders)}); the preset's comments say what each one is"
        )
    runner_problem = _runner_problem(standard.runner)
    if runner_problem:
        problems.append(runner_problem)
    if not ours.input:
        problems.append("--input is required (a file or glob; repeat it for several)")
    return problems + _output_problems(ours.output, output_required) + _number_problems(ours)


def _plan(ours: ConvNormOptions, streaming: bool) -> list[Shard]:
    try:
        # Streaming: files arrive later; the watcher matches the patterns as it runs.
        shards = [] if streaming else plan_shards(ours.input, ours.shard_bytes)
        skipped = skipped_inputs(shards, ours.output)
        shards = plan_inputs(shards, ours.input, ours.output)
    except (InputError, OutputError) as error:
        raise ConfigError(str(error)) from None
    if skipped:
        LOG.warning(
            "skipping %d input file(s) inside --output %s (convnorm never reads its own outputs): %s",
            len(skipped),
            ours.output,
            ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else ""),
        )
    return shards


def _warn_missing_writer_options(ours: ConvNormOptions) -> None:
    # Not errors: --model only replaces what a record names, and --max-tokens only fills in for
    # a record that has none. A record with no model of its own is an openai-batch dead letter
    # (the other writers leave the model out); one without max_tokens is written without it.
    uses = WRITERS[ours.sink].uses if ours.sink in WRITERS else ()
    if "model" in uses and not ours.model:
        fate = "are unwritable dead letters" if ours.sink == "openai-batch" else "are written without one"
        LOG.warning("--sink %s without --model: records that name no model of their own %s", ours.sink, fate)
    if "max_tokens" in uses and ours.max_tokens is None:
        LOG.warning(
            "--sink %s without --max-tokens: records without max_tokens are written without it, "
            "which the provider requires",
            ours.sink,
        )


def load_job(argv: list[str], *, output_required: bool = True) -> Job:
    """Parse flags and preset, validate everything, plan the input. Raises ConfigError.

    Nothing is written here. What is already in the output directory is checked later, under
    the run's lock (``pipeline.outputs.check_output``); Beam's own checks run when ``main``
    builds the pipeline, also before anything is written.
    """
    options = parse_options(argv)
    ours = options.view_as(ConvNormOptions)
    standard = options.view_as(StandardOptions)
    _tidy_paths(ours)
    if not standard.runner:
        standard.runner = DEFAULT_RUNNER
    settings = _record_settings(ours)
    problems = settings_problems(settings) + _job_problems(options, output_required)
    dead_letter_limit = _dead_letter_limit(ours, problems)
    streaming = bool(standard.streaming)
    if streaming:
        problems += _streaming_problems(ours, standard.runner)
    if problems:
        raise ConfigError("; ".join(problems))
    shards = _plan(ours, streaming)
    _warn_missing_writer_options(ours)
    return Job(
        options,
        settings,
        shards,
        list(ours.input),
        ours.output or "",
        ours.output_format,
        ours.overwrite,
        ours.batch_size,
        ours.break_stale_lock,
        ours.job_endpoint_timeout,
        ours.max_record_bytes,
        dead_letter_limit,
        ours.batch_bytes,
    )
