"""The text of ``convnorm --help`` and ``convnorm validate --help``.

Built from ``ConvNormOptions`` (so every flag is listed, with its default) and the registries
(readers, writers, profiles); validate's help leaves out the flags only normalization uses.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import NamedTuple

from pipeline.config.flags import add_convnorm_flags
from transforms.calllogs.readers import CALL_LOG_READERS
from transforms.formats import READERS, WRITERS
from transforms.repairs.profiles import PROFILES

#: Exit statuses, as each command's --help states them.
EXIT_STATUSES = {
    "run": "0 done, every record accounted for; 1 the pipeline failed, a file it wrote is missing, it did "
    "not account for every record, an input changed while it was read, it normalized none of the records "
    "it read, or had more dead letters than --max-dead-letters (outputs are written all the same); 2 bad "
    "options, a refused output directory or a held lock (nothing was run or deleted); 130 stopped by "
    "Ctrl-C, 143 by SIGTERM (the output directory unchanged)",
    "validate": "0 every conversation is sendable; 1 a conversation breaks a rule or a record cannot be "
    "read; 2 bad options, a refused output directory or a held lock (nothing was run); 3 the "
    "validation pipeline failed or a file it wrote is missing; 130 stopped by Ctrl-C, 143 by SIGTERM",
}

#: The flags of ``--streaming`` (a group of the help, and normalization's only).
STREAMING_FLAGS = (
    "window",
    "poll_interval",
    "new_only",
    "max_files_per_poll",
    "drain_timeout",
    "changed_files",
    "stop_after",
    "stop_file",
)

#: convnorm flags that only normalization uses: ``convnorm validate --help`` leaves them out.
RUN_ONLY_FLAGS = frozenset(
    {
        "sink",
        "output_format",
        "profile",
        "model",
        "max_tokens",
        "tools_field",
        "check",
        "drop_role",
        "map_role",
        "reasoning",
        "media",
        "report",
        "max_dead_letters",
        "warn_dead_letters",
        "tokens",
        "max_example_tokens",
        "over_limit",
        "epochs",
        "price_per_mtok",
        "kto_threshold",
        "pair_by",
        "reward",
        *STREAMING_FLAGS,
    }
)


class HelpGroup(NamedTuple):
    """One group of ``--help``: a task, and the flags (dests) that serve it (listed in the order
    ``pipeline.config.flags`` declares them)."""

    title: str
    dests: tuple[str, ...]
    #: Listed by ``--help-all`` only; plain ``--help`` shows the title and says so.
    hidden: bool = False


#: ``convnorm run --help`` by task (every convnorm flag in exactly one group, at most
#: MAX_GROUP_FLAGS each: tests/test_help.py holds both to the real parser).
HELP_GROUPS = (
    HelpGroup(
        "input",
        ("config", "input", "input_format", "messages_field", "id_field", "follow_symlinks", "dry_run", "limit"),
    ),
    HelpGroup(
        "output and sinks",
        (
            "output",
            "sink",
            "output_format",
            "model",
            "max_tokens",
            "tools_field",
            "overwrite",
            "break_stale_lock",
            "report",
            "warn_dead_letters",
            "max_dead_letters",
            "progress",
            "quiet",
        ),
    ),
    HelpGroup("repair", ("profile", "check", "drop_role", "map_role", "reasoning", "media")),
    HelpGroup("preference, KTO and RL sets (docs/fine-tuning.md)", ("kto_threshold", "pair_by", "reward")),
    HelpGroup(
        "training set (docs/fine-tuning.md)",
        (
            "tokens",
            "max_example_tokens",
            "over_limit",
            "epochs",
            "price_per_mtok",
            "weights",
            "trailing",
            "dedupe",
            "split",
            "split_by",
            "split_seed",
            "chat_template",
            "redact",
            "examples",
        ),
    ),
    HelpGroup(
        "call logs and labels (docs/call-logs.md)",
        ("call_logs", "chain_groups", "keep_truncated_streams", "min_score", "max_score"),
    ),
    HelpGroup("streaming (Beam's --streaming; docs/streaming.md)", STREAMING_FLAGS),
    HelpGroup("runners (Beam's own options below)", ("graph", "host_loopback", "insecure_dask_scheduler")),
    HelpGroup(
        "tuning (speed and memory, never the outputs)",
        (
            "shard_bytes",
            "part_bytes",
            "batch_size",
            "batch_bytes",
            "max_record_bytes",
            "raw_limit",
            "job_endpoint_timeout",
        ),
        hidden=True,
    ),
)
#: The most flags one group of ``--help`` may hold: a group longer than this is two tasks.
MAX_GROUP_FLAGS = 15
#: The title of the group of a flag no HELP_GROUPS entry names (tests/test_help.py: none).
UNGROUPED = "other options"


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Our description and epilog as written, and every flag's default after its help."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        # Never cut a flag such as --no-break-stale-lock at one of its hyphens.
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is argparse.SUPPRESS
            or "%(default)" in text
            or action.dest == "help"
        ):
            return text
        if isinstance(default, bool):
            shown = "--" + ("" if default else "no-") + action.option_strings[0][2:]
        else:
            shown = "%(default)s"
        return f"{text} (default: {shown})"


def _exit_status(command: str) -> str:
    return textwrap.fill("exit status: " + EXIT_STATUSES[command], width=92, subsequent_indent="  ")


#: The usage lines of ``convnorm --help`` (and of a bare ``convnorm``).
USAGE = (
    "convnorm [run] --input INPUT --output OUTPUT [options]\n"
    "       convnorm validate --input INPUT [--output OUTPUT] [options]   (see convnorm validate --help)\n"
    "       convnorm report OUT_DIR                                       (see convnorm report --help)\n"
    "       convnorm explain OUT_DIR --id ID                              (see convnorm explain --help)\n"
    "       convnorm --version"
)


def usage_text() -> str:
    return "usage: " + USAGE


def help_text(command: str = "run", show_all: bool = False) -> str:
    """``convnorm --help`` (command ``run``) or ``convnorm validate --help``; ``show_all``:
    ``--help-all``, the hidden groups' flags listed too."""
    listing = textwrap.dedent("""\
        readers (--format, default auto: detected per record):
        {readers}
        call-log readers (--format too; one record per LLM call, conversations assembled from
        their calls: docs/call-logs.md):
        {call_logs}
        """).format(
        readers="\n".join(f"  {r.name:<18}{r.description}" for r in sorted(READERS.values(), key=lambda r: r.name)),
        call_logs="\n".join(
            f"  {r.name:<18}{r.description}" for r in sorted(CALL_LOG_READERS.values(), key=lambda r: r.name)
        ),
    )
    beam_note = textwrap.dedent("""\
        Every Apache Beam option passes through (not listed here), e.g. --runner (default
        FnApiRunner, in-process), --direct_num_workers=2 --direct_running_mode=multi_processing,
        --job_endpoint=HOST:PORT; --runner DaskRunner with --dask_scheduler_file FILE (or none:
        a loopback-only cluster of convnorm's own; needs the dask extra). Docs: README.md,
        docs/operations.md, docs/cluster.md; presets: configs/*.yaml.""")
    if command == "validate":
        usage = "convnorm validate --input INPUT [--output OUTPUT] [options]"
        description = textwrap.dedent("""\
            Check conversations as they are, against the pairing rules providers enforce (OpenAI,
            Anthropic, Gemini): nothing is normalized or changed. Prints totals by kind of
            violation and the first conversations with violations.

            outputs (with --output; without it, a temporary directory that is removed):
              OUTPUT/violations/part-*.jsonl  one report per conversation: id, source, position,
                                              messages, violations by kind, the first details
              OUTPUT/dead_letter/part-*.jsonl records that could not be read, with the reason
              OUTPUT/validation.json          the totals""")
        epilog = listing + "\n" + _exit_status("validate") + "\n\n" + beam_note
    else:
        usage = USAGE
        description = textwrap.dedent("""\
            Normalize logged LLM conversations by FlowDrop rule MEM-5 and report every drop.

            outputs under --output: normalized/ (the records), drops/ (what each conversation lost),
            dead_letter/ (records that could not be processed, with the reason), summary.json
            (totals), report.html (one page with charts and examples). convnorm explain OUT --id ID
            shows one conversation before and after, each repair marked with its reason.""")
        epilog = (
            listing
            + textwrap.dedent("""\
            writers (--sink, default flat):
            {writers}
            profiles (--profile): {profiles}

            {status}

            """).format(
                writers="\n".join(
                    f"  {w.name:<18}{w.description}" for w in sorted(WRITERS.values(), key=lambda w: w.name)
                ),
                profiles=", ".join(PROFILES),
                status=_exit_status("run"),
            )
            + beam_note
        )
    return help_parser(usage, description, epilog, command, show_all).format_help()


def help_parser(
    usage: str | None = None,
    description: str | None = None,
    epilog: str | None = None,
    command: str = "run",
    show_all: bool = False,
) -> argparse.ArgumentParser:
    """The parser whose help ``help_text`` prints: convnorm's flags in HELP_GROUPS (only the
    flags of ``command``); a hidden group's flags unlisted unless ``show_all``."""
    parser = argparse.ArgumentParser(
        prog="convnorm", usage=usage, description=description, epilog=epilog, formatter_class=_HelpFormatter
    )
    parser.add_argument(
        "--help-all", action="store_true", default=argparse.SUPPRESS, help="this help, every group's options listed"
    )
    leave_out = RUN_ONLY_FLAGS if command == "validate" else frozenset()
    groups: dict[str, argparse._ArgumentGroup] = {}
    for group in HELP_GROUPS:
        shown = [dest for dest in group.dests if dest not in leave_out]
        if not shown:
            continue
        note = None
        if group.hidden and not show_all:
            note = f"{len(shown)} options, listed by convnorm {'validate ' if command == 'validate' else ''}--help-all"
        made = parser.add_argument_group(group.title, note)
        for dest in shown:
            groups[dest] = made
    hidden = {dest for group in HELP_GROUPS if group.hidden and not show_all for dest in group.dests}
    ungrouped = parser.add_argument_group(UNGROUPED)
    recorder = add_convnorm_flags(ungrouped, leave_out, groups.get)
    for dest in hidden & set(recorder.actions):
        recorder.actions[dest].help = argparse.SUPPRESS
    return parser
