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
here, so a typo costs a second, not a failed run: first what needs no Beam
(``pipeline.config.precheck.check_args``, which the command line runs before Beam's import and
hands on: once per run), then Beam's own values, the output directory's filesystem and the
input files. The command line is parsed once with Beam's parser, and the preset read once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions, StandardOptions

from pipeline.config.checks import (
    dead_letter_limits,
    parse_duration,
    record_settings,
    runner_problem,
    streaming_problems,
    token_settings,
    unknown_argument,
)
from pipeline.config.dask_flags import (
    DASK_FLAGS,
    DASK_RUNNER_NAME,
    dask_problem,
    insecure_scheduler_problem,
    is_dask_runner,
    register_options,
    use_dask,
)
from pipeline.config.flags import DEFAULT_RUNNER, ConfigError, add_convnorm_flags, our_flags
from pipeline.config.precheck import CheckedArgs, check_args, parse_known
from pipeline.config.presets import (
    WrongShape,
    argparse_detail,
    our_preset_value,
    preset_entries,
    read_preset,
    shown_value,
)
from pipeline.io.file_formats import FILE_FORMATS, PARQUET_SINKS
from pipeline.io.input_sample import first_shards, holds_call_logs, sample_readers
from pipeline.io.object_store import access_problem, use_options
from pipeline.io.ownership import OutputError, is_under, plan_inputs, unreachable_output, unsafe_output
from pipeline.io.parts import DEFAULT_PART_BYTES
from pipeline.io.planning import InputError, limit_plan, plan_shards
from pipeline.io.shard import FILE_KINDS, Shard
from transforms.calllogs.readers import CALL_LOG_READERS
from transforms.formats import WRITERS
from transforms.record.inputs import DEFAULT_BATCH_BYTES, DEFAULT_MAX_RECORD_BYTES
from transforms.record.record_settings import Settings
from transforms.totals.summary import DeadLetterLimit

LOG = logging.getLogger("convnorm")

__all__ = ["DEFAULT_RUNNER", "ConfigError", "ConvNormOptions", "Job", "load_job", "parse_duration", "parse_options"]


class ConvNormOptions(PipelineOptions):
    """convnorm's flags (``convnorm --help`` lists them with Beam's; ``pipeline.config.flags`` declares them)."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:  # Beam's hook for declaring an options class
        add_convnorm_flags(parser.add_argument_group("convnorm"))


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


def _beam_value(parser: argparse.ArgumentParser, dest: str, value):
    """A preset's value for one of Beam's options, converted as its flag ``--dest`` would be.

    Raises ConfigError (a bad value, in argparse's words) or WrongShape (a list for an option
    that takes one value, a mapping for one that is not a mapping, true/false for one that is
    not a switch, and the reverse).
    """
    flag = _DASK_FLAG_OF.get(dest, "--" + dest)
    if isinstance(value, bool):  # a switch: its flag given alone sets what `true` means
        if not _is_switch(parser, dest):
            raise WrongShape("takes a value")
        return value  # the option's value, whichever of its flags (--x, --no_x) would set it
    if isinstance(value, list):
        args = [f"{flag}={item}" for item in value]
    elif isinstance(value, dict):
        args = [f"{flag}={json.dumps(value)}"]
    else:
        args = [f"{flag}={value}"]
    if _is_switch(parser, dest):
        raise WrongShape("expects true or false")
    parsed, unknown = parse_known(parser, args)
    if unknown or dest not in parsed:
        raise ConfigError(f"{flag} cannot be set by a preset (give it on the command line)")
    result = parsed[dest]
    if isinstance(value, list) and not (isinstance(result, list) and len(result) >= len(value)):
        raise WrongShape("takes one value")
    if isinstance(value, dict) and not isinstance(result, dict):
        raise WrongShape("takes one value")
    return result


#: Beam's Dask options are set by flags that are not ``--<dest>``.
_DASK_FLAG_OF = {dest: flag for flag, dest in DASK_FLAGS.items()}


def _is_switch(parser: argparse.ArgumentParser, dest: str) -> bool:
    """Does ``--dest`` alone, without a value, set the option?"""
    try:
        parsed, unknown = parse_known(parser, [_DASK_FLAG_OF.get(dest, "--" + dest)])
    except ConfigError:  # "expected one argument"
        return False
    return not unknown and isinstance(parsed.get(dest), bool)


def preset_options(path: str, preset: dict, parser: argparse.ArgumentParser) -> dict:
    """The ``--config`` preset ``preset`` (read from ``path``) as option values by dest, each
    checked and converted. Raises ConfigError.

    A key may name a flag (``format``, ``max-tokens``) or its dest (``input_format``). Our
    flags' values must have the flag's type; Beam's are converted as their flag would be.
    """
    ours = our_flags()
    values = {}
    for raw_key, dest, value in preset_entries(path, preset, _known_option_names()):
        if dest in ours.actions:
            values[dest] = our_preset_value(path, raw_key, ours, dest, value)
            continue
        try:
            values[dest] = _beam_value(parser, dest, value)
        except WrongShape as wrong:
            raise ConfigError(f"--config {path!r}: {raw_key!r} {wrong}, not {shown_value(value)}") from None
        except ConfigError as error:
            raise ConfigError(f"--config {path!r}: {raw_key!r}: {argparse_detail(error)}") from None
    return values


def _known_option_names() -> frozenset[str]:
    # Every option of every registered PipelineOptions subclass (Beam's and ours).
    return frozenset(PipelineOptions([]).get_all_options(drop_default=False))


def parse_options(argv: list[str], checked: CheckedArgs | None = None) -> PipelineOptions:
    """The command line over the ``--config`` preset, as Beam options. Raises ConfigError.

    Flags on the command line win over the preset; for a repeatable option (``--input``) the
    command line's list replaces the preset's. Unknown flags and keys are refused, naming them.
    ``checked``: the check before Beam's import (``check_args``), with the preset it read; one
    on another filesystem is read here, once. Beam's parser parses the command line once, with
    the flags of the runner the command line or the preset names (Dask's) registered first.
    """
    if checked is None:
        checked = check_args(argv, output_required=False)
    config = checked.values.config
    preset, unreadable = checked.preset, None
    if config and preset is None:
        try:
            preset = read_preset(config, FileSystems.open)
        except ConfigError as error:
            unreadable = error  # said after the command line's own errors, as before
    _register_runner_options([*argv, *_preset_words(preset or {})])
    parser = _all_options_parser()
    given, unknown = parse_known(parser, argv)
    if unknown:
        raise ConfigError(unknown_argument(unknown, argv))
    if unreadable is not None:
        raise unreadable
    values = preset_options(config, preset or {}, parser) if config else {}
    # Beam's keyword arguments win over its flags: give it the preset's values the command line leaves alone.
    return PipelineOptions(argv, **{dest: value for dest, value in values.items() if dest not in given})


def _preset_words(preset: dict) -> list[str]:
    """A preset's keys and string values (whether they name a runner whose flags Beam adds)."""
    return [str(w) for key, value in preset.items() for w in (key, value) if isinstance(w, str)]


def _register_runner_options(words: list[str]) -> bool:
    """Beam's Dask flags exist once its DaskRunner module is imported (``pipeline.runners.dask_cluster``):
    imported when ``words`` name Dask. True if it was imported now."""
    try:
        return register_options(words)
    except ValueError as error:  # dask not installed: say what to install
        raise ConfigError(str(error)) from None


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
    #: ``--warn-dead-letters``: past it, a warning on the console and a banner in the report.
    warn_dead_letters: DeadLetterLimit | None = None
    #: ``--dry-run``: plan and say what would happen; write nothing.
    dry_run: bool = False
    #: ``--limit``: only the first N records of the plan (the shards say how many each gives).
    limit: int | None = None
    #: What the plan leaves out of a directory input (files without a known suffix,
    #: subdirectories), one line per directory: said once the console is set up for the job.
    notes: tuple[str, ...] = ()
    #: The command's arguments as given: a run that cannot finish says the command that recovers.
    argv: tuple[str, ...] = ()
    #: ``--output`` as given (``~`` expanded): what messages show, where ``output`` is absolute.
    given_output: str = ""
    #: ``--part-bytes``: input bytes per output part (``pipeline.io.parts``); 0: a part per shard.
    part_bytes: int = DEFAULT_PART_BYTES
    #: Whether the graph assembles conversations from call-log records (``--call-logs``:
    #: ``transforms.record.assembled_calls``); ``settings.calls_sampled_out`` when ``auto`` left it out.
    call_logs: bool = True

    @property
    def shown_output(self) -> str:
        """The output directory as messages name it: as the user gave it."""
        return self.given_output or self.output


#: Runners that run on this machine, where a local temporary directory is visible to workers.
LOCAL_RUNNERS = frozenset(
    {"fnapirunner", "directrunner", "bundlebaseddirectrunner", "switchingdirectrunner", "prismrunner"}
)


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


def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def _resolve_local_paths(ours: ConvNormOptions, shards: list[Shard]) -> list[Shard]:
    """Every local path a worker opens made absolute, against the launcher's working directory.

    A cluster's workers run in working directories of their own: a relative --input opened
    there is another file or none, a relative --output another folder. Planning and the
    checks before it use the paths as given (their messages say what the user typed); from here
    on the options (which travel to the workers), the job and the plan hold absolute paths, and
    each shard keeps the path it was matched as for what the outputs name. A preset's relative
    paths are relative to the working directory too, as on the command line.
    """
    if ours.input:
        ours.input = [_absolute(pattern) for pattern in ours.input]
    if ours.output:
        ours.output = _absolute(ours.output)
    if ours.stop_file:
        ours.stop_file = _absolute(ours.stop_file)
    resolved = []
    for shard in shards:
        path = _absolute(shard.path)
        resolved.append(shard if path == shard.path else shard._replace(path=path, source=shard.path))
    return resolved


def _beam_runner_problem(runner: str) -> str | None:
    if is_dask_runner(runner):
        return dask_problem()
    known = tuple(path.rsplit(".", 1)[-1] for path in StandardOptions.ALL_KNOWN_RUNNERS)
    return runner_problem(runner, (*known, DASK_RUNNER_NAME))


def _output_problems(output: str | None) -> list[str]:
    if not output:
        return []
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


def _output_format_problems(ours: ConvNormOptions) -> list[str]:
    """The output file format against the file formats and the sink."""
    if ours.output_format not in FILE_FORMATS:
        return [f"unknown --output-format {ours.output_format!r}; known: {', '.join(FILE_FORMATS)}"]
    if ours.output_format != "jsonl" and ours.sink not in PARQUET_SINKS:
        sinks = ", ".join(PARQUET_SINKS[:-1]) + " or " + PARQUET_SINKS[-1]
        return [f"--output-format {ours.output_format} holds the records of --sink {sinks} only"]
    return []


def _job_problems(options: PipelineOptions) -> list[str]:
    """What ``precheck`` cannot see without Beam, in the order users read it."""
    ours = options.view_as(ConvNormOptions)
    standard = options.view_as(StandardOptions)
    problems = []
    placeholders = _placeholders(options)
    if placeholders:
        # Refused here: matching gs://YOUR_BUCKET/... would retry the network for minutes.
        problems.append(
            f"replace the placeholders first ({', '.join(placeholders)}); the preset's comments say what each one is"
        )
    problem = _beam_runner_problem(standard.runner)
    if problem:
        problems.append(problem)
    elif is_dask_runner(standard.runner):
        found = options.get_all_options()
        problem = insecure_scheduler_problem(
            found.get("address"), found.get("scheduler_file"), ours.insecure_dask_scheduler
        )
        if problem:
            problems.append(problem)
    # Before anything asks a bucket through Beam, which retries a missing key for minutes (an
    # output refused on its name alone, a bucket's root, is said as such first).
    offline = placeholders or (ours.output and unsafe_output(ours.output))
    unusable = None if offline else access_problem([*ours.input, *([ours.output] if ours.output else [])])
    if unusable:
        return [*problems, unusable]
    problems += _output_problems(ours.output) + _output_format_problems(ours)
    if standard.streaming:
        problems += _streaming_problems(ours, standard.runner, options.view_as(PortableOptions))
    return problems


def _streaming_problems(ours: ConvNormOptions, runner: str, portable: PortableOptions) -> list[str]:
    problems = streaming_problems(ours, runner, FileSystems.exists)  # a stop file on any filesystem
    # The commit gate reaches the workers only as threads of this process (pipeline.config.flags,
    # STREAMING_RUNNERS): a Prism of the user's, or workers of another environment, cannot hold it.
    if portable.job_endpoint:
        problems.append("--streaming starts its own Prism: drop --job_endpoint")
    if (portable.environment_type or "LOOPBACK").upper() != "LOOPBACK":
        problems.append(
            f"--streaming runs its workers in this process: drop --environment_type {portable.environment_type}"
        )
    if ours.output:
        from pipeline.io.planning import landing_root

        # Every file it could match would be convnorm's own, ignored: the run would read nothing.
        problems += [
            f"--input {pattern!r} watches {landing_root(pattern)!r}, inside --output {ours.output!r}; convnorm "
            "never reads its own output directory: land files elsewhere"
            for pattern in ours.input
            if is_under(landing_root(pattern), ours.output)
        ]
    return problems


def _plan(ours: ConvNormOptions, streaming: bool, notes: list[str]) -> list[Shard]:
    refused: list[str] = []
    try:
        # Streaming: files arrive later; the watcher matches the patterns as it runs.
        shards = [] if streaming else plan_shards(ours.input, ours.shard_bytes, notes, ours.follow_symlinks, refused)
        skipped: list[str] = []
        shards = plan_inputs(shards, ours.input, ours.output, skipped)
        if ours.limit is not None:
            shards = limit_plan(shards, ours.limit, ours.max_record_bytes)
    except (InputError, OutputError) as error:
        raise ConfigError(str(error)) from None
    finally:
        for line in refused:  # a link a directory input does not follow: a warning, even with --quiet
            LOG.warning("%s", line)
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


def _warn_graph(ours: ConvNormOptions) -> None:
    # Accepted, doing nothing, so that a preset or script that names it keeps working.
    if getattr(ours, "graph", None) is not None:
        LOG.warning("--graph %s is deprecated and does nothing: one graph runs on every runner", ours.graph)


def call_logs_possible(input_format: str) -> bool:
    """Whether records read by ``--format`` may be call logs: auto-detected, or a call-log reader."""
    return input_format == "auto" or input_format in CALL_LOG_READERS


#: Input files whose first records ``--call-logs auto`` reads before the run; with more, the
#: assembly's steps are built whatever they hold (reading thousands of small files twice costs
#: more than the steps do when empty).
AUTO_SAMPLED_FILES = 64


def _assembles_call_logs(
    mode: str, settings: Settings, shards: list[Shard], max_record_bytes: int, streaming: bool
) -> bool:
    """Whether the run's graph assembles conversations from call logs (``--call-logs``): ``auto``
    builds the steps only when the first records of an input file hold a call log (the sample
    ``--dry-run`` shows), as they cost a run with none (DaskRunner most: a shuffle's tasks for
    each of them); files that land later (streaming) are not known, nor files past
    ``AUTO_SAMPLED_FILES``, nor a .json or Parquet file's."""
    if mode == "off" or not call_logs_possible(settings.input_format):
        return False
    if mode == "on" or streaming or settings.input_format != "auto":
        return True
    firsts = first_shards(shards)
    # Only JSON Lines is sampled: its first records are read line by line (each bounded by
    # --max-record-bytes), where a .json document or a Parquet row group would be read whole in
    # this process before the run (a 200 MB row under a memory cap failed the run).
    if len(firsts) > AUTO_SAMPLED_FILES or any(FILE_KINDS[shard.suffix][0] != "jsonl" for shard in firsts):
        return True
    try:
        # The sample --dry-run shows, read the same way: the two never disagree.
        return holds_call_logs({s.path: sample_readers(s, settings, max_record_bytes) for s in firsts})
    except Exception:  # noqa: BLE001 — a file the plan cannot sample is read, and its error told, by the run
        return True


def load_job(argv: list[str], *, output_required: bool = True, checked: CheckedArgs | None = None) -> Job:
    """Parse flags and preset, validate everything, plan the input. Raises ConfigError.

    ``checked``: the command line's check before Beam's import (``check_args``), handed on by
    the command line so that nothing is checked or read twice; without it, it is made here
    (the same errors as before Beam's import).

    Nothing is written here. What is already in the output directory is checked later, under
    the run's lock (``pipeline.io.ownership.check_output``); Beam's own checks run when the
    pipeline is built, also before anything is written.
    """
    if checked is None:  # our own values: the same errors as before Beam's import
        checked = check_args(argv, output_required=output_required)
    options = parse_options(argv, checked)
    # Beam's filesystems are made from the options Beam was last given (its S3 filesystem
    # refuses to exist without them: --s3_endpoint_url, the keys); the checks and the plan
    # below touch --input and --output before any Pipeline would give them.
    use_options(options)
    ours = options.view_as(ConvNormOptions)
    standard = options.view_as(StandardOptions)
    _tidy_paths(ours)
    if not standard.runner:
        standard.runner = DEFAULT_RUNNER
    problems = _job_problems(options)
    max_dead_letters, warn_dead_letters = dead_letter_limits(ours, problems)
    settings = record_settings(ours, token_settings(ours, problems))
    if problems:
        raise ConfigError("; ".join(problems))
    notes: list[str] = []
    shards = _plan(ours, bool(standard.streaming), notes)
    given_output = ours.output or ""
    shards = _resolve_local_paths(ours, shards)
    if is_dask_runner(standard.runner):
        use_dask(options)
    _warn_missing_writer_options(ours)
    _warn_graph(ours)
    mode = getattr(ours, "call_logs", "auto")
    call_logs = _assembles_call_logs(mode, settings, shards, ours.max_record_bytes, bool(standard.streaming))
    if mode == "auto" and not call_logs and call_logs_possible(settings.input_format):
        settings = dataclasses.replace(settings, calls_sampled_out=True)
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
        max_dead_letters,
        ours.batch_bytes,
        warn_dead_letters,
        ours.dry_run,
        ours.limit,
        tuple(notes),
        tuple(argv),
        given_output,
        ours.part_bytes,
        call_logs,
    )
