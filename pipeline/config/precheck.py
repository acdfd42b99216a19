"""The check of a command line before Beam's import: ``precheck(argv)``.

Importing Apache Beam takes seconds; a mistyped option must answer at once. ``precheck``
parses convnorm's flags with a fast parser, reads the ``--config`` preset, and checks both
against convnorm's own rules (``pipeline.config.checks``) and against Beam's flags as
``pipeline.config.beam_flags`` lists them. No Beam import.

The command line checks once per run: ``check_args`` keeps what it read (``CheckedArgs``: the
values and the preset) and the command line hands it on to the private network's check and to
``pipeline.config.options.load_job``, which parse nothing and read no preset again."""

from __future__ import annotations

import argparse
from typing import NamedTuple

from pipeline.config import beam_flags
from pipeline.config.checks import batch_problems, negative_duration_problems, own_problems, unknown_argument
from pipeline.config.dask_flags import DASK_FLAGS
from pipeline.config.flags import DEFAULT_RUNNER, ConfigError, add_convnorm_flags, our_flags
from pipeline.config.presets import our_preset_value, preset_entries, read_preset


def _fast_parser(beam_known: bool) -> argparse.ArgumentParser:
    """Our flags (every default ``None``, so parsing tells what the command line sets) and,
    when the table is current, Beam's flags as ``pipeline.config.beam_flags`` lists them."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    ours = add_convnorm_flags(parser)
    parser.set_defaults(**dict.fromkeys(ours.actions))
    if beam_known:
        taken = {option for action in ours.actions.values() for option in action.option_strings}
        beam = parser.add_argument_group("beam")
        for option, nargs in {**beam_flags.FLAGS, **dict.fromkeys(DASK_FLAGS, None)}.items():
            if option in taken:
                continue
            if nargs == 0:
                beam.add_argument(option, action="store_const", const=True, default=None)
            else:
                beam.add_argument(option, nargs=nargs, default=None)
    return parser


def parse_known(parser: argparse.ArgumentParser, args: list[str]) -> tuple[dict, list[str]]:
    """(options the arguments set, arguments no option takes); raises ConfigError on a bad value."""
    try:
        namespace, unknown = parser.parse_known_args(args)
    except argparse.ArgumentError as error:
        raise ConfigError(str(error)) from None
    return {dest: value for dest, value in vars(namespace).items() if value is not None}, unknown


#: Beam's flags ``precheck`` also hands on (as ``namespace.beam``): whether a run starts Prism.
PRECHECKED_BEAM = ("runner", "job_endpoint")


class CheckedArgs(NamedTuple):
    """A command line as ``check_args`` found it, handed on so that it is checked once per run:
    to ``pipeline.runners.private_network.isolate_prism_run`` and ``pipeline.config.options.load_job``."""

    argv: list[str]
    #: Our options' values (``precheck``'s namespace, with ``.beam``).
    values: argparse.Namespace
    #: The local ``--config`` preset as read (None: no preset, or one on another filesystem,
    #: read after Beam's import).
    preset: dict | None


def precheck(argv: list[str], *, output_required: bool = True) -> argparse.Namespace:
    """Check a command line and its local ``--config`` preset without Beam. Raises ConfigError.

    Returns our options' values (defaults, then the preset, then the command line), and as
    ``.beam`` those of Beam's flags in ``PRECHECKED_BEAM`` that the preset or the command line
    set. Refuses
    unknown flags and preset keys (when ``pipeline.config.beam_flags`` matches the installed Beam),
    and every value of ours that cannot work; ``pipeline.config.options.load_job`` checks the rest.
    """
    return check_args(argv, output_required=output_required).values


def check_args(argv: list[str], *, output_required: bool = True) -> CheckedArgs:
    """``precheck``, keeping what it read: the command line, our values and the preset."""
    negative = negative_duration_problems(argv)
    if negative:  # before argparse, which would take the value for a flag
        raise ConfigError("; ".join(negative))
    beam_known = beam_flags.table_is_current()
    parser = _fast_parser(beam_known)
    given, unknown = parse_known(parser, argv)
    if unknown and beam_known:
        raise ConfigError(unknown_argument(unknown, argv))
    ours = our_flags()
    values = {dest: action.default for dest, action in ours.actions.items()}
    set_by = {dest: "" for dest in given}  # where each of our options was set: "" the command line
    preset_streaming = preset_runner = None
    preset_beam: dict = {}
    config = given.get("config")
    preset = None
    if config and "://" not in config:  # a preset on another filesystem is read after Beam's import
        known = (beam_flags.DESTS | ours.actions.keys() | set(DASK_FLAGS.values())) if beam_known else None
        preset = read_preset(config)
        for raw_key, dest, value in preset_entries(config, preset, known):
            if dest in ours.actions:
                values[dest] = our_preset_value(config, raw_key, ours, dest, value)
                set_by.setdefault(dest, config)
            elif dest == "streaming":
                preset_streaming = value
            elif dest == "runner":
                preset_runner = value
            if dest in PRECHECKED_BEAM:
                preset_beam[dest] = value
    values.update({dest: value for dest, value in given.items() if dest in ours.actions})
    namespace = argparse.Namespace(**values)
    # The Beam flags that decide, before Beam's import, whether the run starts Prism itself.
    namespace.beam = {**preset_beam, **{dest: given[dest] for dest in PRECHECKED_BEAM if dest in given}}
    # Without the table of Beam's flags, --streaming is one of the arguments left over.
    streaming = bool(given.get("streaming", "--streaming" in unknown or preset_streaming is True))
    runner = given.get("runner") or (preset_runner if isinstance(preset_runner, str) else None) or DEFAULT_RUNNER
    problems = own_problems(
        namespace,
        output_required=output_required,
        streaming=streaming,
        runner=runner,
        runners=beam_flags.RUNNERS if beam_known else None,
    )
    if not streaming:
        problems += batch_problems(set_by)
    if problems:
        raise ConfigError("; ".join(problems))
    return CheckedArgs(list(argv), namespace, preset)
