"""convnorm's own flags, declared once, without Beam.

Importing Apache Beam takes seconds; ``convnorm --help``, ``--version`` and a mistyped option
must answer at once. So this module imports no Beam: it declares convnorm's flags, for
``ConvNormOptions`` in ``pipeline.config.options``, for ``--help`` in ``pipeline.cli.help``, and
for the check before Beam's import (``pipeline.config.precheck``). The checks of their values
are ``pipeline.config.checks``'s, ``--config`` presets ``pipeline.config.presets``'.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from pipeline.io.parts import DEFAULT_PART_BYTES
from transforms.dataset.dataset_keys import DEDUPE_CHOICES
from transforms.dataset.training import EXAMPLE_CHOICES, TRAILING_CHOICES, WEIGHT_CHOICES
from transforms.record.inputs import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_SHARD_BYTES,
)
from transforms.record.record_settings import DEFAULT_RAW_LIMIT

#: The runner used when none is named: in-process, works offline (the DirectRunner would
#: first try to download the Prism binary).
DEFAULT_RUNNER = "FnApiRunner"
#: ``--graph``'s values, accepted and ignored (deprecated): one graph runs on every runner.
GRAPHS = ("auto", "tagged-outputs", "per-shard")
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

    def __init__(
        self, target, leave_out: frozenset[str] = frozenset(), route: Callable[[str], Any] | None = None
    ) -> None:
        self.target = target
        self.leave_out = leave_out
        #: ``--help``'s groups: the argument group a dest goes to (``target`` when None).
        self.route = route
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
        target = (self.route(dest) if self.route else None) or self.target
        self.actions[dest] = target.add_argument(*flags, dest=dest, **kwargs)
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
        help="file format of the normalized output: jsonl or parquet (flat, hf and TRL sinks only)",
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
        "--kto-threshold",
        help="trl-kto: NAME=VALUE, the numeric label NAME makes each row's label, true at or above VALUE "
        "(default: bool labels, thumbs, only)",
    )
    add(
        "--pair-by",
        help="trl-dpo: NAME, the label that pairs conversations of one prompt (the higher value chosen, "
        "a bool true above false; default: bool labels, thumbs)",
    )
    add(
        "--reward",
        help="trl-prompts: the label NAME whose value is each prompt's reward column (a bool as 1.0 / 0.0)",
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
    add(
        "--reasoning",
        choices=("keep", "drop"),
        help="a provider's reasoning (Anthropic thinking and signatures, Gemini thought signatures, "
        "reasoning_content, Responses reasoning items): keep writes it back where the sink is that "
        "provider's, drop leaves it out; left out, it is counted in the ledger (default: keep, for flat drop)",
    )
    add(
        "--media",
        choices=("keep", "drop"),
        help="images, audio and files: keep writes them where their [image] placeholder stands in every sink "
        "that can hold them (converting base64 and URLs where exact), drop leaves the placeholders; a "
        "placeholder left is counted in the ledger as media_<kind> (default: keep, for flat drop)",
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
        help=f"split uncompressed JSONL inputs into byte ranges of this size, and Parquet inputs into "
        f"row groups of about it ({DEFAULT_SHARD_BYTES >> 20} MiB; at least 65536)",
    )
    add(
        "--graph",
        default=None,
        choices=GRAPHS,
        help="deprecated, does nothing (one graph runs on every runner); accepted so that presets naming it still work",
    )
    add(
        "--insecure-dask-scheduler",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="accept a Dask scheduler of your own that takes plain TCP on an address other than loopback "
        "(refused by default: anyone on the network who reaches it can run code on its workers and read "
        "their credentials; give it TLS instead, docs/cluster.md)",
    )
    add("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="records per batch between reading and writing")
    add(
        "--batch-bytes",
        type=int,
        default=DEFAULT_BATCH_BYTES,
        help=f"raw input bytes per batch: a batch closes at --batch-size records or at this many bytes, "
        f"whichever comes first ({DEFAULT_BATCH_BYTES >> 10} KiB)",
    )
    add(
        "--part-bytes",
        type=int,
        default=DEFAULT_PART_BYTES,
        help=f"read consecutive input files (or byte ranges) of up to this many bytes together and write "
        f"their outputs into one part file each ({DEFAULT_PART_BYTES >> 20} MiB; many small inputs, few "
        "outputs); 0: one part file per input shard",
    )
    add(
        "--call-logs",
        choices=("auto", "on", "off"),
        default="auto",
        help="assemble conversations from call-log records (one record per LLM call: docs/call-logs.md): "
        "auto (the default) builds the assembly's steps when the first records of an input file hold a call "
        "log (what --dry-run samples; always when streaming, past 64 input files or for .json and Parquet files), "
        "and a call-log record "
        "met later is a call_log dead letter that says to rerun with on; on always builds them; off leaves "
        "them out and makes any call-log record a call_log dead letter",
    )
    add(
        "--chain-groups",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a conversation assembled from call logs whose messages, ending at an answer, are the start "
        "of a longer one of another group (a trace or id per call or per turn), logged no earlier, "
        "is part of that one: dropped and counted (call_logs.chained_across_groups), its calls in the "
        "longer one's account; a call continuing a response (previous_response_id) another group holds "
        "joins that group (the default); --no-chain-groups keeps every group's conversations apart",
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
        help="streaming (Beam's --streaming, on --runner PrismRunner only; "
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


def _training_flags(add) -> None:
    """A training set (docs/fine-tuning.md, "A training set")."""
    add(
        "--weights",
        default="auto",
        choices=WEIGHT_CHOICES,
        help="per-message weights (OpenAI's weight 0/1, a flat message's train true/false): keep them "
        "(carried around the MEM-5 core, written by openai-finetune on assistant messages, by hf and "
        "flat on every message), or drop them; auto: kept for openai-finetune, hf and sharegpt (which "
        "counts them, weights_not_written), dropped elsewhere",
    )
    add(
        "--trailing",
        default="auto",
        choices=TRAILING_CHOICES,
        help="messages after the last assistant message: trim them (counted trailing_trimmed), keep "
        "them, or refuse the conversation (an unwritable dead letter, trailing_turns); auto: trim for "
        "openai-finetune, sharegpt and hf, keep elsewhere",
    )
    add(
        "--keep-truncated-streams",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="write a conversation assembled from call logs whose answer was a server-sent event stream "
        "cut off before its end (no finish_reason, no [DONE]) with the training sinks too; by default "
        "openai-finetune, sharegpt and hf refuse it (an unwritable dead letter, truncated_stream); "
        "either way it is counted (truncated_streams)",
    )
    add(
        "--dedupe",
        default="none",
        choices=DEDUPE_CHOICES,
        help="collapse identical conversations (exact: same tools and messages as written, ids and "
        "other fields aside), and with prefix also a conversation that begins a longer one, into one "
        "that keeps the first id and lists the others (drops/ duplicates); each other is a duplicate "
        "dead letter naming the id kept (a shuffle: a batch run only)",
    )
    add(
        "--split",
        help="NAME=SHARE[,NAME=SHARE]: draw splits beside train (e.g. eval=0.05,test=0.05), each "
        "written to its own directory (train: normalized/), by a hash of --split-by and --split-seed",
    )
    add(
        "--split-by",
        help="dotted path of the field whose value keeps a group on one side of --split (a user, a "
        "session: metadata.user_id); default: the record id",
    )
    add("--split-seed", type=int, default=0, help="seed of the --split hash (default 0)")
    add(
        "--min-score",
        action="append",
        help="NAME=VALUE: keep only conversations whose score NAME (metadata.scores: their labels) is at "
        "least VALUE (a number, or true/false); others are dead letters, score_below_min or score_missing "
        "(repeatable: every bound must hold)",
    )
    add(
        "--max-score",
        action="append",
        help="NAME=VALUE: keep only conversations whose score NAME is at most VALUE; others are dead "
        "letters, score_above_max or score_missing (repeatable)",
    )
    add(
        "--chat-template",
        help="a Jinja chat template file, or a local tokenizer folder (tokenizer_config.json, "
        "tokenizer.json): every example is rendered as the trainer renders it; one that does not "
        "render, or whose assistant messages do not show, is an unwritable dead letter; tokens "
        "counted with the folder's tokenizer, offline (needs the chat-template extra)",
    )
    add(
        "--redact",
        help="KIND[,KIND]: replace secrets (detect-secrets' detectors, private keys, bearer tokens, "
        "AWS secret access keys after their name, OpenAI sk-proj/sk-svcacct/sk-admin keys), emails and "
        "phones (international form; phones:CC also region CC's national numbers, CC a two-letter ISO "
        "3166 code phonenumbers has a plan for: US, GB (not UK), DE, IN ...; docs/fine-tuning.md lists "
        "them) with typed placeholders [REDACTED:kind] in every message text, call argument and "
        "result, JSON kept valid, and in every other output (ids, fields, key names, dead letters, the "
        "report, explain); counted by kind (needs the redact extra)",
    )
    add(
        "--examples",
        default="whole",
        choices=EXAMPLE_CHOICES,
        help="training examples per conversation: whole (as it is); last (up to its last assistant "
        "message, trained on that one alone: earlier ones weight 0); each (one per assistant "
        "message, its prefix as history, ids <id>#2, #3 ...); for openai-finetune, hf, sharegpt",
    )


def add_convnorm_flags(
    target, leave_out: frozenset[str] = frozenset(), route: Callable[[str], Any] | None = None
) -> FlagRecorder:
    """Add convnorm's flags, in ``--help`` order, to a parser or argument group; with ``route``,
    each to the group ``route(dest)`` gives (``target`` for None)."""
    recorder = FlagRecorder(target, leave_out, route)
    for topic in (
        _where_flags,
        _plan_flags,
        _record_flags,
        _run_flags,
        _console_flags,
        _limit_flags,
        _token_flags,
        _streaming_flags,
        _training_flags,
    ):
        topic(recorder.add)
    return recorder


def our_flags() -> FlagRecorder:
    return add_convnorm_flags(argparse.ArgumentParser(add_help=False))


def our_dests() -> frozenset[str]:
    return frozenset(our_flags().actions)
