"""convnorm's own flags, and the checks of their values that need no Beam (``precheck``).

Importing Apache Beam takes seconds; ``convnorm --help``, ``--version`` and a mistyped option
must answer at once. So this module imports no Beam: it declares convnorm's flags (for
``ConvNormOptions`` in ``pipeline.config.options``, for ``--help`` in ``pipeline.cli.help``, and for
the check below), and ``precheck(argv)`` checks a command line and its ``--config`` preset
against them and against Beam's flags as ``pipeline.config.beam_flags`` lists them. The command line
runs ``precheck`` before it imports Beam, and ``pipeline.config.options.load_job`` runs it again
first, so both paths give the same errors; what needs Beam (the output's filesystem, the
input files, Beam's own values) is checked by ``load_job`` after the import.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import stat

import yaml

from pipeline.config import beam_flags
from pipeline.config.checks import settings_problems
from pipeline.runners.dask_cluster import DASK_FLAGS, DASK_RUNNER_NAME, is_dask_runner
from transforms.inputs import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_SIZE, DEFAULT_MAX_RECORD_BYTES, DEFAULT_SHARD_BYTES
from transforms.roles import parse_map_role
from transforms.settings import DEFAULT_RAW_LIMIT, Settings, TokenSettings
from transforms.summary import DeadLetterLimit
from transforms.tokens import ENCODINGS, parse_limit

#: The runner used when none is named: in-process, works offline (the DirectRunner would
#: first try to download the Prism binary).
DEFAULT_RUNNER = "FnApiRunner"
#: The job's graphs (``pipeline.graph.build``); ``auto`` picks by runner (``graph_for``).
TAGGED_OUTPUTS, PER_SHARD = "tagged-outputs", "per-shard"
GRAPHS = ("auto", TAGGED_OUTPUTS, PER_SHARD)
#: ``--warn-dead-letters``: dead letters past this share of the records read are worth a warning.
DEFAULT_WARN_DEAD_LETTERS = "1%"
#: Runners that can run the streaming job (lower case, as --runner may spell them).
#: The runners ``--streaming`` runs on. The step that makes a landed file processed (renaming
#: its outputs into place) is shut by the driver once it has stopped the job, and that holds
#: only where the workers are threads of the driver: Prism as convnorm starts it (its worker
#: pool in this process). On Flink or Dataflow a file could land in the outputs after the
#: totals were summed, so they are refused rather than trusted.
STREAMING_RUNNERS = frozenset({"prismrunner"})
#: Streaming: files admitted per poll and in flight at once (``--max-files-per-poll``).
DEFAULT_MAX_FILES_PER_POLL = 50
#: Streaming: what ``--changed-files`` does with a file rewritten after it was processed.
CHANGED_FILES = ("new-version", "report")


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
    add(
        "--config",
        help="YAML preset of options, a regular file (configs/*.yaml); flags on the command line override it",
    )
    add(
        "--input",
        action="append",
        help="input file, directory or glob, quoted (repeatable): .jsonl, .jsonl.gz, .jsonl.zst, .json, "
        ".parquet; a directory means every such file directly in it (dot-files and convnorm's own "
        "outputs are never read); local or any Beam filesystem",
    )
    add(
        "--output",
        help="output directory, local (~ expanded; its absolute path at least 256 bytes short of the file "
        "system's PATH_MAX, room for the names convnorm makes in it) or any Beam filesystem",
    )
    add(
        "--follow-symlinks",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="read symbolic links that lead out of a directory --input (batch) or out of the landing "
        "directory (streaming); without it such a link is not read, with a warning saying so",
    )


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
        help="model name for replay sinks (openai-batch, openai-responses, anthropic, bedrock-converse); "
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
    add(
        "--drop-role",
        action="append",
        help="drop every message of this role before normalization, counted as the drop reason drop_role "
        "(repeatable); for roles a sink cannot take, e.g. an agent's exit",
    )
    add(
        "--map-role",
        action="append",
        help="FROM=TO: give every message of role FROM the role TO (user, assistant, system or developer), "
        "counted as the repair map_role (repeatable)",
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
        "--host-loopback",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="where no private network namespace can be made for the Prism a run starts, run it on "
        "the host's loopback anyway, where every local user can send it work: only on a machine "
        "whose local users are all trusted (docs/outputs.md, Network)",
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
    add(
        "--graph",
        default="auto",
        choices=GRAPHS,
        help="the job's graph: tagged-outputs (the NormalizeConversation DoFn's outputs, each with its own "
        "writer), per-shard (each input shard read, processed and written in one step: for runners that "
        "cannot route tagged outputs), or auto: per-shard on DaskRunner, tagged-outputs elsewhere",
    )
    add("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="records per batch between reading and writing")
    add(
        "--batch-bytes",
        type=int,
        default=DEFAULT_BATCH_BYTES,
        help=f"raw input bytes per batch: a batch closes at --batch-size records or at this many bytes, "
        f"whichever comes first ({DEFAULT_BATCH_BYTES >> 10} KiB)",
    )


def _plan_flags(add) -> None:
    """Looking before leaping: the plan alone, or a small part of it."""
    add(
        "--dry-run",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="plan only: print the files, shards and sizes, the reader each file gets (detected on a "
        "sample of its records) and what would be written where, then exit 0 without writing anything",
    )
    add(
        "--limit",
        type=int,
        help="read only the first N records of the plan (files in name order), for a quick look at a big dataset",
    )


def _console_flags(add) -> None:
    """What the run shows and writes about itself."""
    add(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write report.html: one self-contained page with charts, examples and each repair explained",
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
        "--warn-dead-letters",
        default=DEFAULT_WARN_DEAD_LETTERS,
        help="warn, on the console and in the report, when dead letters (sink refusals included) are "
        "more than N, or more than P%% of the records read (N or P%%); the exit status is "
        "--max-dead-letters's",
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
        help="largest record read (a JSONL line, a .json array element or document, a Parquet row); a "
        "larger one is a record_too_large dead letter (default 32 MiB; see docs/input-limits.md)",
    )


def _token_flags(add) -> None:
    """Fine-tuning readiness (docs/fine-tuning.md)."""
    add(
        "--tokens",
        help="count the tokens of every example as the sink writes it, in this encoding (o200k_base or "
        "cl100k_base), offline; drops/, summary.json and the report get the figures (needs the tokens "
        "extra: pip install -e '.[tokens]' in convnorm's checkout)",
    )
    add(
        "--max-example-tokens",
        help="tokens one example may hold: a number, or a fine-tunable model whose documented limit to use "
        "(gpt-4o-mini, gpt-4o, gpt-4.1, gpt-4.1-mini, gpt-4.1-nano, gpt-3.5-turbo); examples over it are "
        "counted and listed (needs --tokens)",
    )
    add(
        "--over-limit",
        default="keep",
        choices=("keep", "drop"),
        help="an example over --max-example-tokens: keep it in the output (counted, listed), or drop it "
        "to dead_letter/ with reason over_token_limit; never cut",
    )
    add(
        "--epochs",
        type=int,
        help="epochs of the training-token estimate (default: OpenAI's default for the dataset's size; needs --tokens)",
    )
    add(
        "--price-per-mtok",
        type=float,
        help="price of one million training tokens: the summary estimates the training cost (no prices "
        "are built in; needs --tokens)",
    )


def _streaming_flags(add) -> None:
    """Streaming mode (Beam's own --streaming turns it on; see docs/streaming.md)."""
    add(
        "--window",
        default="60s",
        help="streaming (Beam's --streaming with --runner PrismRunner, Flink or Dataflow; "
        "see docs/streaming.md): window of the summaries, e.g. 60s, 5m (1 s to 7 days). Every streaming "
        "flag is refused without --streaming; a duration is more than 0 and at most 7 days",
    )
    add("--poll-interval", default="2s", help="streaming: how often the --input patterns are matched")
    add(
        "--new-only",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="streaming: leave the files present at start alone (as they are then); by default every "
        "matching file not yet processed is read, those present at start included",
    )
    add(
        "--max-files-per-poll",
        type=int,
        default=DEFAULT_MAX_FILES_PER_POLL,
        help="streaming: files admitted per poll, and in flight at once (a stop drains at most these)",
    )
    add(
        "--drain-timeout",
        default="2m",
        help="streaming: after a stop, how long the files in flight may take; then the job is "
        "cancelled and what is left is read by the next start",
    )
    add(
        "--changed-files",
        default="new-version",
        choices=CHANGED_FILES,
        help="streaming: a file rewritten after it was processed is read again as a new version, "
        "or only reported (an appended .jsonl is always read from where it was left)",
    )
    add("--stop-after", help="streaming: stop watching after this long (e.g. 10m), then drain and exit")
    add("--stop-file", help="streaming: stop watching once this file exists, then drain and exit")


def add_convnorm_flags(target, leave_out: frozenset[str] = frozenset()) -> FlagRecorder:
    """Add convnorm's flags, in ``--help`` order, to a parser or argument group."""
    recorder = FlagRecorder(target, leave_out)
    for topic in (
        _where_flags,
        _plan_flags,
        _record_flags,
        _run_flags,
        _console_flags,
        _limit_flags,
        _token_flags,
        _streaming_flags,
    ):
        topic(recorder.add)
    return recorder


def our_flags() -> FlagRecorder:
    return add_convnorm_flags(argparse.ArgumentParser(add_help=False))


def our_dests() -> frozenset[str]:
    return frozenset(our_flags().actions)


# --------------------------------------------------------------------------------------------
# Presets (--config FILE.yaml)


#: A preset is a short mapping of options: past these it is refused before it is read into
#: values (a YAML alias bomb, ten lines long, expands to gigabytes when its values are used).
MAX_PRESET_BYTES = 1 << 20
MAX_PRESET_VALUES = 100_000
#: Numbers in a preset: an integer past this is no option's value (and past 4,300 digits
#: Python cannot even show it in an error).
MAX_PRESET_INTEGER = 1 << 63


_YAML_INT = "tag:yaml.org,2002:int"


def _expanded_size(node, sizes: dict, path: str, open_nodes: set, option: str = "") -> int:
    """The number of values ``node`` stands for once every alias in it is expanded, counted on
    the composed graph (an alias is the node it names: nothing is expanded here); ``option`` is
    the top-level key it is under, for the errors."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise ConfigError(f"--config {path!r}: an alias refers to the value that holds it")
    if node.tag == _YAML_INT and len(str(node.value).lstrip("+-").replace("_", "")) > 19:
        raise ConfigError(
            f"--config {path!r}: {option!r} holds an integer of {len(node.value):,} digits; no option takes one "
            "that large"
        )
    open_nodes.add(key)
    children: list = []
    if isinstance(node, yaml.MappingNode):
        children = [(child, option or str(pair[0].value)) for pair in node.value for child in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = [(child, option) for child in node.value]
    total = 1
    for child, under in children:
        total += _expanded_size(child, sizes, path, open_nodes, under)
        if total > MAX_PRESET_VALUES:
            raise ConfigError(
                f"--config {path!r} expands to more than {MAX_PRESET_VALUES:,} values (YAML aliases repeat "
                "what they name); a preset is a short mapping of options"
            )
    open_nodes.discard(key)
    sizes[key] = total
    return total


def _check_numbers(value, path: str, key) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) >= MAX_PRESET_INTEGER:
            raise ConfigError(
                f"--config {path!r}: {key!r} holds an integer of {item.bit_length():,} bits; no option takes "
                "one that large"
            )
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _open_regular(path: str):
    """A local preset, opened to read its bytes only if it is a regular file: a FIFO would make
    the read wait for a writer for ever, a device never ends. Opened without blocking, then
    looked at (what is opened is what is looked at)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"--config {path!r} is {_kind(mode)}; a preset is a regular file (YAML)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (``pipeline.io.text_containers`` says the same)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file"


def read_preset(path: str, open_file=open) -> dict:
    """The mapping a ``--config`` file holds (empty for an empty file). Raises ConfigError.

    ``open_file(path)`` opens one on another filesystem (``pipeline.config.options`` passes Beam's
    ``FileSystems.open``); a local one is read only if it is a regular file. At most ``MAX_PRESET_BYTES``,
    standing for at most ``MAX_PRESET_VALUES`` values with its aliases expanded, integers below
    2**63: checked before the values exist.
    """
    try:
        with _open_regular(path) if "://" not in path else open_file(path) as handle:
            text = handle.read(MAX_PRESET_BYTES + 1)
        if len(text) > MAX_PRESET_BYTES:
            raise ConfigError(
                f"--config {path!r} is larger than {MAX_PRESET_BYTES >> 20} MiB; a preset is a short file"
            )
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return {}
            _expanded_size(node, {}, path, set())
            loaded = loader.construct_document(node)
        finally:
            loader.dispose()
    except FileNotFoundError:
        raise ConfigError(f"--config {path!r}: no such file") from None
    except RecursionError:
        raise ConfigError(f"--config {path!r}: nested too deeply") from None
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"--config {path!r}: {' '.join(str(error).split())}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"--config {path!r}: expected a mapping of option names to values")
    for key, value in loaded.items():
        _check_numbers(value, path, key)
    return loaded


def preset_entries(path: str, loaded: dict, known: frozenset[str] | None):
    """``(key as written, dest, value)`` of each option a preset sets. Raises ConfigError.

    A key may name a flag (``format``, ``max-tokens``) or its dest (``input_format``);
    ``known`` is every option name (ours and Beam's); ``None`` when Beam's are not known here
    (then a key that is not ours is left for the check after Beam's import). A key whose value
    is empty (``key:``) leaves the option as it was.
    """
    ours = our_flags()
    by_flag = {action.option_strings[0][2:].replace("-", "_"): dest for dest, action in ours.actions.items()}
    by_flag.update({flag[2:]: dest for flag, dest in DASK_FLAGS.items()})  # Beam's Dask flags name no dest
    for raw_key, value in loaded.items():
        key = str(raw_key).replace("-", "_")
        dest = by_flag.get(key, key)
        if dest == "config":
            raise ConfigError(f"--config {path!r}: a preset cannot load another preset")
        if dest not in ours.actions and known is not None and dest not in known:
            raise ConfigError(f"--config {path!r}: unknown option {raw_key!r}")
        if value is not None:
            yield raw_key, dest, value


class WrongShape(Exception):
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
    """A preset's value for one of our flags, as the flag would set it. Raises WrongShape."""
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
        raise WrongShape(f"expects {_expected(action, repeatable)}")
    return value


def shown_value(value) -> str:
    """A preset's value as an error names it: ``the string '500'``, ``a list``, ``true``."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "a mapping"
    return f"the string {value!r}" if isinstance(value, str) else json.dumps(value)


def our_preset_value(path: str, raw_key, ours: FlagRecorder, dest: str, value):
    """A preset's value for one of our flags, checked and converted. Raises ConfigError."""
    try:
        return _our_value(ours.actions[dest], dest in ours.repeatable, value)
    except WrongShape as wrong:
        raise ConfigError(f"--config {path!r}: {raw_key!r} {wrong}, not {shown_value(value)}") from None


def argparse_detail(error: Exception) -> str:
    """argparse's message without its ``argument --flag:`` prefix (the caller names the key)."""
    return str(error).split(": ", 1)[-1] if str(error).startswith("argument ") else str(error)


# --------------------------------------------------------------------------------------------
# Words for mistakes


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


def graph_for(graph: str, runner: str | None) -> str:
    """``--graph`` resolved: ``auto`` is per-shard on runners that cannot route a DoFn's tagged
    outputs (DaskRunner), tagged-outputs elsewhere."""
    if graph != "auto":
        return graph
    return PER_SHARD if is_dask_runner(runner) else TAGGED_OUTPUTS


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


def negative_duration_problems(argv: list[str]) -> list[str]:
    """``--drain-timeout -5s``: argparse takes the value for a flag and says "expected one
    argument"; say what is wrong instead."""
    return [
        f"{flag} {value!r}: a duration cannot be negative; give one such as 90, 90s, 5m or 1h"
        for flag, value in zip(argv, argv[1:])
        if flag in DURATION_FLAGS and _NEGATIVE_DURATION.fullmatch(value)
    ]


# --------------------------------------------------------------------------------------------
# Checks of our own values


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
    )


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
            problems.append(f"{flag} {_digits(value)} is absurd: at most {MAX_FLAG_INTEGER:,} (1 TiB)")
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
            "(convnorm run, with a runner that streams), or leave it out"
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
    if runner and runners is not None:
        problem = runner_problem(runner, (*runners, DASK_RUNNER_NAME))
        if problem:
            problems.append(problem)
    if getattr(ours, "graph", None) == TAGGED_OUTPUTS and is_dask_runner(runner):
        problems.append(
            "--graph tagged-outputs cannot run on DaskRunner (it gives every consumer every tagged output); "
            "leave --graph at auto (per-shard)"
        )
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


# --------------------------------------------------------------------------------------------
# The check before Beam's import


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


def precheck(argv: list[str], *, output_required: bool = True) -> argparse.Namespace:
    """Check a command line and its local ``--config`` preset without Beam. Raises ConfigError.

    Returns our options' values (defaults, then the preset, then the command line), and as
    ``.beam`` those of Beam's flags in ``PRECHECKED_BEAM`` that the preset or the command line
    set. Refuses
    unknown flags and preset keys (when ``pipeline.config.beam_flags`` matches the installed Beam),
    and every value of ours that cannot work; ``pipeline.config.options.load_job`` checks the rest.
    """
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
    if config and "://" not in config:  # a preset on another filesystem is read after Beam's import
        known = (beam_flags.DESTS | ours.actions.keys() | set(DASK_FLAGS.values())) if beam_known else None
        for raw_key, dest, value in preset_entries(config, read_preset(config), known):
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
    return namespace
