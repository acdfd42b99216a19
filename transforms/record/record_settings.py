"""How the per-record steps read, normalize and write (no Beam import).

``Settings`` is a plain frozen dataclass that the DoFns carry to the workers. ``problems``
holds the rules its record fields must follow; the command line checks them, naming its flags
(``pipeline.config.checks.settings_problems``, which adds the ``--tokens`` rules), before any
pipeline is built, and the public DoFns (``transforms.conversations.NormalizeConversation``)
when they are made. The steps take it as valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from transforms.calllogs.readers import CALL_LOG_READERS  # (importing it registers the call-log readers)
from transforms.dataset.chat_template import TemplateSettings
from transforms.dataset.dataset_keys import DEDUPE_CHOICES
from transforms.dataset.training import (
    EXAMPLE_CHOICES,
    TRAILING_CHOICES,
    TRAINING_SINKS,
    WEIGHT_CHOICES,
    WEIGHT_SINKS,
    keeps_weights,
    trailing_policy,
)
from transforms.formats import READERS, WRITERS
from transforms.formats.trl import parse_threshold
from transforms.repairs.profiles import PROFILES
from transforms.repairs.roles import MAP_TARGETS

#: Raw text kept in a dead letter, in characters.
DEFAULT_RAW_LIMIT = 2000


@dataclass(frozen=True)
class TokenSettings:
    """Fine-tuning readiness (``--tokens``): how examples are counted and what the run reports.

    See ``transforms.record.tokens`` (the counting) and docs/fine-tuning.md.
    """

    #: The encoding the counts are in (``--tokens``): ``o200k_base`` or ``cl100k_base``.
    encoding: str
    #: Tokens one example may hold (``--max-example-tokens``); ``None``: no limit checked.
    max_example_tokens: int | None = None
    #: The model whose documented limit ``max_example_tokens`` is (``None``: a number was given).
    limit_model: str | None = None
    #: ``--over-limit drop``: an example over the limit is an ``over_token_limit`` dead letter
    #: instead of an output record (``False``: it is written, counted and listed).
    drop_over_limit: bool = False
    #: ``--epochs``; ``None``: the default OpenAI's fine-tuning guide states for the dataset's size.
    epochs: int | None = None
    #: ``--price-per-mtok``: price of a million training tokens, for the cost estimate.
    price_per_mtok: float | None = None


@dataclass(frozen=True)
class Settings:
    """How to read, normalize and write records; validated by the options before use."""

    messages_field: str = "messages"
    id_field: str = "id"
    input_format: str = "auto"
    profile: str = "spec"
    sink: str = "flat"
    model: str | None = None
    max_tokens: int | None = None
    #: Dotted path of a record's tool definitions for the writers (``--tools-field``).
    tools_field: str = "tools"
    #: Also run the strict sendability check on every normalized conversation.
    check: bool = False
    #: Roles whose messages are dropped before normalization (``--drop-role``), and roles
    #: given another one (``--map-role FROM=TO``): ``transforms.repairs.roles``.
    drop_roles: tuple[str, ...] = ()
    map_roles: tuple[tuple[str, str], ...] = ()
    raw_limit: int = DEFAULT_RAW_LIMIT
    #: Count tokens per example (``--tokens``); ``None``: no counting, no work per record.
    tokens: TokenSettings | None = None
    #: Hand call-log records on to be assembled (``transforms.calllogs``): what the composites
    #: that assemble set. ``False`` (a DoFn alone): a call-log record is a ``call_log`` dead letter.
    calls: bool = False
    #: Why a step that does not assemble was left without it: ``--call-logs auto`` found no call
    #: log in the first records of any input file (``pipeline.io.input_sample``), so a call-log
    #: record's dead letter says to rerun with ``--call-logs on``.
    calls_sampled_out: bool = False
    #: Per-message weights (``--weights``: auto, keep, drop) and turns after the last assistant
    #: message (``--trailing``: auto, trim, keep, refuse): ``transforms.dataset.training``.
    weights: str = "auto"
    trailing: str = "auto"
    #: ``--keep-truncated-streams``: a conversation holding an answer whose event stream was cut
    #: off (``truncated_stream``) is written by the training sinks too (counted) instead of refused.
    keep_truncated_streams: bool = False
    #: ``--chain-groups``: a conversation assembled from call logs that is the start of a longer
    #: one in another group (its history and output extended) is that one's, not its own
    #: (``transforms.calllogs.chained``).
    chain_groups: bool = True
    #: Dataset steps (``transforms.dataset.dataset_keys``, ``transforms.record.dedupe``): ``--dedupe``
    #: (none, exact, prefix), ``--split`` as ``((name, share), ...)``, ``--split-by``, ``--split-seed``.
    dedupe: str = "none"
    #: ``--examples``: whole, last, each (``transforms.dataset.training``).
    examples: str = "whole"
    #: ``--chat-template``: the template every example is rendered with (``transforms.dataset.chat_template``).
    chat_template: TemplateSettings | None = None
    #: ``--redact``: the kinds replaced by placeholders, and the region of national phone numbers.
    redact: tuple[str, ...] = ()
    redact_region: str | None = None
    splits: tuple[tuple[str, float], ...] = ()
    split_by: str | None = None
    split_seed: int = 0
    #: ``--min-score`` / ``--max-score`` NAME=VALUE: the bounds a conversation's
    #: ``metadata.scores`` must meet (``transforms.record.score_filter``); a value that does not
    #: parse is kept as ``("", text)``, for ``problems`` to name.
    min_scores: tuple[tuple[str, Any], ...] = ()
    max_scores: tuple[tuple[str, Any], ...] = ()

    #: ``--reasoning``: ``keep`` or ``drop`` a provider's carried reasoning
    #: (``transforms.formats.reasoning``); ``None``: the sink's default (``Writer.reasoning_default``).
    reasoning: str | None = None
    #: ``--kto-threshold NAME=VALUE`` as given (``kto_bound`` parses it) and ``--reward NAME``:
    #: what the TRL sinks read from a conversation's labels (``transforms.formats.trl``).
    kto_threshold: str | None = None
    reward: str | None = None
    #: ``--sink trl-dpo`` in a batch run: conversations of one prompt are paired across records
    #: (``transforms.record.pairs``, ``pipeline.graph.shard_pairs``), by the label ``--pair-by``.
    pairs_across: bool = False
    pair_by: str | None = None
    #: ``--media``: ``keep`` or ``drop`` the carried media of messages
    #: (``transforms.formats.media``); ``None``: the sink's default (``Writer.media_default``).
    media: str | None = None

    @property
    def keep_weights(self) -> bool:
        return keeps_weights(self.sink, self.weights)

    @property
    def kto_bound(self) -> tuple[str, float] | None:
        return None if self.kto_threshold is None else parse_threshold(self.kto_threshold)

    @property
    def trailing_policy(self) -> str:
        return trailing_policy(self.sink, self.trailing)


def field_name(field: str) -> str:
    return field


def problems(settings: Settings, named: Callable[[str], str] = field_name) -> list[str]:
    """Every record setting that cannot work, as sentences for a person; ``named(field)`` is
    how the caller calls a field (the command line: its flag)."""
    found = []
    if settings.input_format != "auto" and settings.input_format not in {*READERS, *CALL_LOG_READERS}:
        known = ", ".join(sorted({*READERS, *CALL_LOG_READERS}))
        found.append(f"unknown {named('input_format')} {settings.input_format!r}; known: auto, {known}")
    if settings.sink not in WRITERS:
        found.append(f"unknown {named('sink')} {settings.sink!r}; known: {', '.join(sorted(WRITERS))}")
    if settings.profile not in PROFILES:
        found.append(f"unknown {named('profile')} {settings.profile!r}; known: {', '.join(PROFILES)}")
    if not settings.messages_field:
        found.append(f"{named('messages_field')} must not be empty")
    if not settings.id_field:
        found.append(f"{named('id_field')} must not be empty")
    if settings.id_field == settings.messages_field:
        found.append(f"{named('id_field')} and {named('messages_field')} must differ")
    if not settings.tools_field or any(not part for part in settings.tools_field.split(".")):
        found.append(f"{named('tools_field')} {settings.tools_field!r} is not a dotted path of field names")
    if settings.max_tokens is not None and settings.max_tokens < 1:
        found.append(f"{named('max_tokens')} must be at least 1")
    if settings.raw_limit < 0:
        found.append(f"{named('raw_limit')} must be 0 or more")
    if settings.reasoning is not None and settings.reasoning not in ("keep", "drop"):
        found.append(f"{named('reasoning')} must be keep or drop, not {settings.reasoning!r}")
    if settings.media is not None and settings.media not in ("keep", "drop"):
        found.append(f"{named('media')} must be keep or drop, not {settings.media!r}")
    found += _role_problems(settings, named) + _training_problems(settings, named)
    return found + _label_problems(settings, named)


def _label_problems(settings: Settings, named: Callable[[str], str]) -> list[str]:
    """The options the TRL sinks read: each for its sink, a threshold that parses."""
    found = []
    if settings.kto_threshold is not None:
        if settings.sink != "trl-kto":
            found.append(f"{named('kto_threshold')} is for {named('sink')} trl-kto, not {settings.sink}")
        elif settings.kto_bound is None:
            found.append(
                f"{named('kto_threshold')} {settings.kto_threshold!r} is not NAME=VALUE with a number "
                "(e.g. helpfulness=0.7)"
            )
    if settings.pair_by is not None and settings.sink != "trl-dpo":
        found.append(f"{named('pair_by')} is for {named('sink')} trl-dpo, not {settings.sink}")
    if settings.pairs_across and settings.dedupe != "none":
        found.append(
            f"{named('sink')} trl-dpo pairs conversations across the dataset: without {named('dedupe')} "
            "(deduplicate to flat first, then write the pairs from that output)"
        )
    if settings.reward is not None:
        if settings.sink != "trl-prompts":
            found.append(f"{named('reward')} is for {named('sink')} trl-prompts, not {settings.sink}")
        elif not settings.reward.strip():
            found.append(f"{named('reward')} names no label")
    return found


def _training_problems(settings: Settings, named: Callable[[str], str]) -> list[str]:
    found = []
    if settings.weights not in WEIGHT_CHOICES:
        found.append(f"unknown {named('weights')} {settings.weights!r}; known: {', '.join(WEIGHT_CHOICES)}")
    elif settings.weights == "keep" and settings.sink not in WEIGHT_SINKS:
        found.append(
            f"{named('weights')} keep: {named('sink')} {settings.sink} has no per-message weight "
            f"(these have: {', '.join(WEIGHT_SINKS)})"
        )
    if settings.examples not in EXAMPLE_CHOICES:
        found.append(f"unknown {named('examples')} {settings.examples!r}; known: {', '.join(EXAMPLE_CHOICES)}")
    elif settings.examples != "whole" and settings.sink not in TRAINING_SINKS:
        found.append(
            f"{named('examples')} {settings.examples}: training examples are for {', '.join(TRAINING_SINKS)}, "
            f"not {named('sink')} {settings.sink}"
        )
    elif settings.examples == "last" and not (settings.keep_weights and settings.sink in WEIGHT_SINKS):
        found.append(
            f"{named('examples')} last trains on the last assistant message only, with weights: "
            f"{named('sink')} {settings.sink} writes none (sharegpt: LLaMA-Factory's mask_history does it)"
        )
    if (
        settings.examples == "each"
        and settings.dedupe == "prefix"
        and not (settings.keep_weights and settings.sink in WEIGHT_SINKS)
    ):
        # Without weights a conversation's examples are prefixes of each other: all but the last would go.
        found.append(
            f"{named('dedupe')} prefix with {named('examples')} each needs a sink that writes weights "
            f"({named('sink')} {settings.sink} does not: its examples are prefixes of each other); use exact"
        )
    if settings.chat_template is not None and settings.chat_template.error:
        found.append(settings.chat_template.error)
    if settings.dedupe not in DEDUPE_CHOICES:
        found.append(f"unknown {named('dedupe')} {settings.dedupe!r}; known: {', '.join(DEDUPE_CHOICES)}")
    if settings.split_by is not None and not settings.splits:
        found.append(f"{named('split_by')} needs {named('splits')} (e.g. eval=0.05)")
    if settings.split_by is not None and any(not part for part in settings.split_by.split(".")):
        found.append(f"{named('split_by')} {settings.split_by!r} is not a dotted path of field names")
    for field in ("min_scores", "max_scores"):
        for name, value in getattr(settings, field):
            if not name:
                found.append(f"{named(field)} {value!r} is not NAME=VALUE (VALUE a number, true or false)")
    if settings.trailing not in TRAILING_CHOICES:
        found.append(f"unknown {named('trailing')} {settings.trailing!r}; known: {', '.join(TRAILING_CHOICES)}")
    return found


def _role_problems(settings: Settings, named: Callable[[str], str]) -> list[str]:
    drop, mapping = named("drop_roles"), named("map_roles")
    found = [f"{drop} {role!r} is blank" for role in settings.drop_roles if not role.strip()]
    for source, target in settings.map_roles:
        if not source:
            found.append(f"{mapping} {target!r} is not FROM=TO (e.g. exit=assistant)")
        elif target not in MAP_TARGETS:
            found.append(f"{mapping} {source}={target}: the role must be one of {', '.join(MAP_TARGETS)}")
    both = sorted(set(settings.drop_roles) & {source for source, _ in settings.map_roles})
    if both:
        found.append(f"role(s) {', '.join(both)} given to both {drop} and {mapping}")
    return found
