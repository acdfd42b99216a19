"""Every check of convnorm's values that needs no Beam, each naming the flag it is about.

``settings_problems``: the record settings' rules (``transforms.record.record_settings.problems``) in the
words of the command line's flags, and the rules of ``--tokens`` (which name options that are
not record settings, and load the tokenizer). ``own_problems``: the values of the other flags
(ranges, numbers, durations, the streaming rules, the runner). ``record_settings``,
``token_settings``, ``dead_letter_limits``: the settings a command line makes.
``pipeline.config.precheck`` runs them before Beam's import, ``pipeline.config.options.load_job``
after it."""

from __future__ import annotations

import argparse
import difflib
import math
import os
import re

from pipeline.config.chat_template_files import load_template
from pipeline.config.dask_flags import DASK_RUNNER_NAME
from pipeline.config.flags import (
    STREAMING_RUNNERS,
    FlagRecorder,
    _streaming_flags,
    our_flags,
)
from transforms.dataset.dataset_keys import parse_splits
from transforms.dataset.redact import parse_kinds
from transforms.formats import WRITERS
from transforms.record.record_settings import Settings, TokenSettings, problems
from transforms.record.score_filter import parse_bound
from transforms.record.tokens import ENCODINGS, FINE_TUNING_LIMITS, parse_limit, sink_view, unavailable
from transforms.repairs.roles import parse_map_role
from transforms.totals.summary import DeadLetterLimit

#: Settings whose flag is not the field's name with dashes.
_FLAGS = {
    "input_format": "--format",
    "raw_limit": "--dead-letter-raw-limit",
    "drop_roles": "--drop-role",
    "map_roles": "--map-role",
    "splits": "--split",
    "min_scores": "--min-score",
    "max_scores": "--max-score",
}


def flag_name(field: str) -> str:
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


def settings_problems(settings: Settings) -> list[str]:
    """Every setting that cannot work, as sentences naming the flags: the record settings'
    rules (``transforms.record.record_settings.problems``), then ``--tokens``'."""
    found = problems(settings, flag_name)
    if settings.tokens is not None:
        found += token_problems(settings.tokens, settings)
    return found


def token_problems(tokens: TokenSettings, settings: Settings) -> list[str]:
    """What cannot work in ``--tokens`` and its options; last, whether the tokenizer loads
    (the tokens extra installed: a missing extra is one line here, not a failed run)."""
    found = []
    if tokens.encoding not in ENCODINGS:
        return [f"unknown --tokens {tokens.encoding!r}; known: {', '.join(ENCODINGS)}"]
    if settings.sink in WRITERS and sink_view(settings.sink, settings.messages_field, settings.tools_field) is None:
        found.append(
            f"--tokens cannot count --sink {settings.sink}: it has no token view (transforms/record/tokens.py)"
        )
    model = tokens.limit_model
    if model is not None and FINE_TUNING_LIMITS[model].encoding != tokens.encoding:
        found.append(
            f"--max-example-tokens {model} counts in {FINE_TUNING_LIMITS[model].encoding}, "
            f"not --tokens {tokens.encoding}"
        )
    if tokens.epochs is not None and tokens.epochs < 1:
        found.append("--epochs must be at least 1")
    if tokens.price_per_mtok is not None and not (0 <= tokens.price_per_mtok < float("inf")):
        found.append("--price-per-mtok must be a price, 0 or more")
    missing = unavailable(tokens.encoding)
    if missing:
        found.append(missing)
    return found


def suggest(argument: str) -> str:
    """`` (did you mean --profile?)`` for a mistyped flag of ours, else ``""``."""
    flags = [action.option_strings[0] for action in our_flags().actions.values()]
    close = difflib.get_close_matches(argument.split("=", 1)[0], flags, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _input_run(argument: str, argv: list[str]) -> int:
    """How many values the ``--input`` that ``argument`` trails has (0: it trails none).

    ``--input logs/*.jsonl`` unquoted reaches us as ``--input logs/a.jsonl logs/b.jsonl``.
    """
    if argument not in argv:
        return 0
    start = argv.index(argument)
    while start > 0 and not argv[start - 1].startswith("-"):
        start -= 1
    if start == 0 or not (argv[start - 1] == "--input" or argv[start - 1].startswith("--input=")):
        return 0
    end = start
    while end < len(argv) and not argv[end].startswith("-"):
        end += 1
    return end - start + (1 if argv[start - 1].startswith("--input=") else 0)


def unknown_argument(unknown: list[str], argv: list[str]) -> str:
    """The error for arguments no option takes, with a hint where one helps."""
    first = unknown[0]
    if not first.startswith("-"):
        files = _input_run(first, argv)
        if files > 1 and os.path.lexists(first):
            return (
                f"unrecognized argument {first!r}: the shell expanded an unquoted --input pattern into "
                f"{files} files; quote the pattern (--input 'logs/*.jsonl') or give --input before each file"
            )
    return f"unrecognized argument {first!r}{suggest(first)}; see convnorm --help"


def runner_problem(runner: str, known: tuple[str, ...]) -> str | None:
    """An unknown ``--runner`` (``known``: the short names of the runners Beam knows)."""
    names = {name.lower() for name in known}
    name = runner.lower()
    if "." in runner or name in names or name + "runner" in names:
        return None
    return f"unknown --runner {runner!r}; known: {', '.join(sorted(known))}"


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``2h`` -> seconds: more than 0, at most ``MAX_DURATION_S``.
    Raises DurationError."""
    value = str(text).strip().lower()
    unit = value[-1:] if value[-1:] in _DURATION_UNITS else ""
    try:
        seconds = float(value[: len(value) - len(unit)]) * _DURATION_UNITS.get(unit, 1)
    except ValueError:
        raise DurationError(_EXPECTED_DURATION) from None
    if math.isnan(seconds):
        raise DurationError(_EXPECTED_DURATION)
    if seconds < 0:
        raise DurationError("a duration cannot be negative")
    if seconds == 0:
        raise DurationError("a duration must be more than 0")
    if seconds > MAX_DURATION_S:
        raise DurationError(f"at most 7 days ({MAX_DURATION_S:,} s)")
    return seconds


#: The longest duration any flag takes: past it a duration is a slip (``--window 1e30`` once
#: passed, then overflowed the window's end timestamp after the streaming marker was written).
MAX_DURATION_S = 7 * 86_400


#: Windows are named to the second (``20261130T120000Z-...``): a shorter one would repeat a name.
MIN_WINDOW_S = 1.0


#: The flags whose value is a duration (``--job-endpoint-timeout`` takes seconds as a number).
DURATION_FLAGS = ("--window", "--poll-interval", "--drain-timeout", "--stop-after", "--job-endpoint-timeout")


#: A negative duration as a word of the command line (``-5s``, ``-.5h``, ``-1e3``).
_NEGATIVE_DURATION = re.compile(r"-\s*(\d+\.?\d*|\.\d+)(e[-+]?\d+)?\s*[smh]?\s*", re.IGNORECASE)


_EXPECTED_DURATION = "expected a duration such as 90, 90s, 5m or 1h"


class DurationError(ValueError):
    """A duration that cannot be used; the message says why (without the flag)."""


def negative_duration_problems(argv: list[str]) -> list[str]:
    """``--drain-timeout -5s``: argparse takes the value for a flag and says "expected one
    argument"; say what is wrong instead."""
    return [
        f"{flag} {value!r}: a duration cannot be negative; give one such as 90, 90s, 5m or 1h"
        for flag, value in zip(argv, argv[1:])
        if flag in DURATION_FLAGS and _NEGATIVE_DURATION.fullmatch(value)
    ]


def token_settings(ours, problems: list[str]) -> TokenSettings | None:
    """``--tokens`` and the options that need it, as the record settings carry them (a problem
    added for each that cannot work)."""
    needing = [
        flag
        for flag, value in (
            ("--max-example-tokens", ours.max_example_tokens),
            ("--epochs", ours.epochs),
            ("--price-per-mtok", ours.price_per_mtok),
            ("--over-limit drop", True if ours.over_limit == "drop" else None),
        )
        if value is not None
    ]
    if ours.tokens is None:
        problems += [f"{flag} needs --tokens ENCODING ({' or '.join(ENCODINGS)})" for flag in needing]
        return None
    limit = model = None
    if ours.max_example_tokens is not None:
        try:
            limit, model = parse_limit(ours.max_example_tokens)
        except ValueError as error:
            problems.append(str(error))
    elif ours.over_limit == "drop":
        problems.append("--over-limit drop needs --max-example-tokens")
    return TokenSettings(ours.tokens, limit, model, ours.over_limit == "drop", ours.epochs, ours.price_per_mtok)


def record_settings(ours, tokens: TokenSettings | None = None) -> Settings:
    """The record ``Settings`` of our options (``ConvNormOptions`` or ``precheck``'s namespace)."""
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
        drop_roles=tuple(ours.drop_role or ()),
        # A value that is not FROM=TO keeps its text as the target, for the error to name.
        map_roles=tuple(parse_map_role(value) or ("", value) for value in ours.map_role or ()),
        tokens=tokens,
        weights=getattr(ours, "weights", "auto"),
        trailing=getattr(ours, "trailing", "auto"),
        keep_truncated_streams=getattr(ours, "keep_truncated_streams", False),
        chain_groups=getattr(ours, "chain_groups", True),
        dedupe=getattr(ours, "dedupe", "none"),
        examples=getattr(ours, "examples", "whole"),
        chat_template=load_template(ours.chat_template) if getattr(ours, "chat_template", None) else None,
        # A --redact that does not parse is refused by own_problems.
        redact=parse_kinds(ours.redact)[0] if getattr(ours, "redact", None) is not None else (),
        redact_region=parse_kinds(ours.redact)[1] if getattr(ours, "redact", None) is not None else None,
        # A --split that does not parse is left out here and refused by dataset_step_problems.
        splits=parse_splits(ours.split)[0] if getattr(ours, "split", None) else (),
        split_by=getattr(ours, "split_by", None),
        split_seed=getattr(ours, "split_seed", 0),
        # A bound that does not parse keeps its text, for the error to name.
        min_scores=tuple(parse_bound(text) or ("", text) for text in getattr(ours, "min_score", None) or ()),
        max_scores=tuple(parse_bound(text) or ("", text) for text in getattr(ours, "max_score", None) or ()),
        reasoning=getattr(ours, "reasoning", None),
        media=getattr(ours, "media", None),
        kto_threshold=getattr(ours, "kto_threshold", None),
        reward=getattr(ours, "reward", None),
        pairs_across=ours.sink == "trl-dpo",
        pair_by=getattr(ours, "pair_by", None),
    )


def dataset_step_problems(ours, runner: str | None, streaming: bool) -> list[str]:
    """``--dedupe`` and ``--split`` (dataset steps, shuffles: ``pipeline.graph.shard_dataset``):
    a ``--split`` that does not parse; a streaming run, which has no whole dataset."""
    split = getattr(ours, "split", None)
    problems = parse_splits(split)[1] if split else []
    steps = [flag for flag, on in (("--dedupe", getattr(ours, "dedupe", "none") != "none"), ("--split", split)) if on]
    if getattr(ours, "sink", None) == "trl-dpo":
        steps.append("--sink trl-dpo (pairs across conversations)")
    if not steps:
        return problems
    given = " and ".join(steps)
    if streaming:
        problems.append(f"{given} shape a whole dataset: a batch run only (not --streaming)")
    return problems


#: The largest value of any of convnorm's integer flags: past it a size or a count is absurd
#: (it overflowed deep in the reader: every record an unreadable_file dead letter).
MAX_FLAG_INTEGER = 1 << 40


#: --job-endpoint-timeout's largest value, in seconds (a day; past it gRPC overflowed).
MAX_ENDPOINT_TIMEOUT_S = 86_400


def _range_problems(ours) -> list[str]:
    """Integer flags past ``MAX_FLAG_INTEGER``, number flags that are not finite numbers."""
    problems = []
    for dest, action in our_flags().actions.items():
        value = getattr(ours, dest, None)
        if value is None or isinstance(value, bool) or action.type not in (int, float):
            continue
        flag = action.option_strings[0]
        if action.type is int and abs(value) > MAX_FLAG_INTEGER:
            size = " (1 TiB)" if dest.endswith("_bytes") else ""  # a count or a seed is no size
            problems.append(f"{flag} {_digits(value)} is absurd: at most {MAX_FLAG_INTEGER:,}{size}")
        elif action.type is float and not math.isfinite(value):
            problems.append(f"{flag} must be a finite number, not {value}")
    return problems


def _digits(value: int) -> str:
    return f"{value:,}" if value.bit_length() < 200 else f"of {value.bit_length():,} bits"


def _number_problems(ours) -> list[str]:
    problems = _range_problems(ours)
    if not 0 < ours.job_endpoint_timeout <= MAX_ENDPOINT_TIMEOUT_S:  # NaN fails this too
        problems.append(f"--job-endpoint-timeout must be more than 0 and at most {MAX_ENDPOINT_TIMEOUT_S:,} seconds")
    problems += [
        f"{flag} must be at least 1"
        for flag, value in (("--batch-size", ours.batch_size), ("--batch-bytes", ours.batch_bytes))
        if value < 1
    ]
    if ours.shard_bytes < 1 << 16:
        problems.append("--shard-bytes must be at least 65536")
    if ours.part_bytes < 0:
        problems.append("--part-bytes must be 0 (a part per input shard) or more")
    if ours.max_record_bytes < 1024:
        problems.append("--max-record-bytes must be at least 1024")
    if ours.limit is not None and ours.limit < 1:
        problems.append("--limit must be at least 1")
    return problems


def dead_letter_limits(ours, problems: list[str]) -> tuple[DeadLetterLimit | None, DeadLetterLimit | None]:
    """``--max-dead-letters`` and ``--warn-dead-letters`` parsed (a bad one: a problem added)."""
    limits = []
    for flag, text in (("--max-dead-letters", ours.max_dead_letters), ("--warn-dead-letters", ours.warn_dead_letters)):
        try:
            limits.append(None if text is None else DeadLetterLimit.parse(text, flag))
        except ValueError as error:
            problems.append(str(error))
            limits.append(None)
    return limits[0], limits[1]


def _duration_problems(ours) -> list[str]:
    problems = []
    for flag, value in (
        ("--window", ours.window),
        ("--poll-interval", ours.poll_interval),
        ("--drain-timeout", ours.drain_timeout),
        ("--stop-after", ours.stop_after),
    ):
        if value is None:
            continue
        try:
            seconds = parse_duration(value)
        except DurationError as error:
            problems.append(f"{flag} {value!r}: {error}")
            continue
        if flag == "--window" and seconds < MIN_WINDOW_S:
            problems.append(f"{flag} {value!r}: at least 1 s (windows are named to the second)")
    return problems


def _local_file_exists(path: str) -> bool:
    return "://" not in path and os.path.exists(path)


#: The longest path convnorm makes below ``--output``, in bytes: a streaming window's file's
#: temporary name (``<window>/<file>-<hash>-v<n>/.dead_letter.jsonl.<uuid>.tmp``, about 200
#: bytes), rounded up; tests/test_refused_at_start.py checks it against the names made.
DERIVED_PATH_BYTES = 256


def _name_limits(path: str) -> tuple[int, int]:
    """(NAME_MAX, PATH_MAX) of the file system of ``path``'s nearest existing folder."""
    folder = path
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError):  # no pathconf here: Linux's limits
        return 255, 4096


def _shortened(text: str) -> str:
    return text if len(text) <= 80 else f"{text[:40]}...{text[-30:]}"


def output_name_problems(output: str | None) -> list[str]:
    """A local ``--output`` the file system cannot hold, with the names convnorm makes under
    it: a name past NAME_MAX, or a path past PATH_MAX (found before, the run failed after its
    pipeline, or when the lock's folder was made)."""
    if not output or "://" in output:
        return []
    path = os.path.abspath(os.path.expanduser(output))
    name_max, path_max = _name_limits(path)
    encoded = os.fsencode(path)
    problems = [
        f"--output {_shortened(output)!r}: the name {_shortened(os.fsdecode(name))!r} is {len(name):,} bytes; "
        f"this file system takes at most {name_max:,} (NAME_MAX)"
        for name in encoded.split(b"/")
        if len(name) > name_max
    ]
    # PATH_MAX counts the terminating NUL.
    if len(encoded) + 1 + DERIVED_PATH_BYTES + 1 > path_max:
        problems.append(
            f"--output {_shortened(output)!r} is {len(encoded):,} bytes as an absolute path; with the names "
            f"convnorm makes under it (up to {DERIVED_PATH_BYTES} bytes more) it is past this file system's "
            f"{path_max:,} (PATH_MAX): choose a shorter path"
        )
    return problems


def _streaming_only_dests() -> frozenset[str]:
    recorder = FlagRecorder(argparse.ArgumentParser(add_help=False))
    _streaming_flags(recorder.add)
    return frozenset(recorder.actions)


def batch_problems(set_by: dict[str, str]) -> list[str]:
    """Streaming flags set for a run that does not stream (they would do nothing).

    ``set_by``: dest -> where it was set (``""``: the command line, else the preset's path)."""
    ours = our_flags().actions
    problems = []
    for dest in sorted(_streaming_only_dests() & set_by.keys(), key=list(ours).index):
        flag = ours[dest].option_strings[0]
        where = f" (set by --config {set_by[dest]!r})" if set_by[dest] else ""
        problems.append(
            f"{flag}{where} is a streaming option and does nothing in a batch run: give --streaming too "
            "(convnorm run, with --runner PrismRunner), or leave it out"
        )
    return problems


def streaming_problems(ours, runner: str | None, exists=_local_file_exists) -> list[str]:
    """What ``--streaming`` cannot work with among our values (and the runner, when known).

    ``exists(path)``: whether a file is there (``pipeline.config.options`` passes Beam's, for any
    filesystem; here, local paths only)."""
    problems = []
    name = (runner or "").lower()
    if runner and name not in STREAMING_RUNNERS and name + "runner" not in STREAMING_RUNNERS:
        problems.append(
            f"--streaming runs on PrismRunner only (Beam's local runner; build it with .ci/build-prism): "
            f"a landed file's outputs are committed by the driver's own workers, so that none lands "
            f"after the run's totals; --runner {runner} runs batch only"
        )
    problems += _duration_problems(ours)
    if ours.output_format != "jsonl":
        problems.append("--streaming writes JSON Lines only (--output-format jsonl)")
    if ours.max_files_per_poll < 1:
        problems.append("--max-files-per-poll must be at least 1")
    if ours.stop_file and exists(ours.stop_file):
        problems.append(f"--stop-file {ours.stop_file!r} exists already: remove it first")
    if ours.dry_run or ours.limit is not None:
        problems.append("--dry-run and --limit plan a batch run: drop them with --streaming")
    return problems


def own_problems(ours, *, output_required: bool, streaming: bool, runner: str | None, runners) -> list[str]:
    """Everything wrong with our own values that needs no Beam, in the order users read it.

    ``runners``: the runners Beam knows (``None``: not known here).
    """
    token_problems: list[str] = []
    problems = settings_problems(record_settings(ours, token_settings(ours, token_problems))) + token_problems
    problems += dataset_step_problems(ours, runner, streaming)
    if getattr(ours, "redact", None) is not None:
        # Unknown kinds or regions, a missing extra; an empty value too: it would redact nothing.
        problems += parse_kinds(ours.redact)[2]
    if runner and runners is not None:
        problem = runner_problem(runner, (*runners, DASK_RUNNER_NAME))
        if problem:
            problems.append(problem)
    if not ours.input:
        problems.append("--input is required (a file, directory or glob; repeat it for several)")
    if not ours.output and output_required:
        problems.append("--output is required (a directory)")
    problems += output_name_problems(ours.output)
    problems += _number_problems(ours)
    dead_letter_limits(ours, problems)
    if streaming:
        problems += streaming_problems(ours, runner)
    return problems
