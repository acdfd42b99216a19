"""Fine-tuning readiness: tokens per example, as the sink writes it (no Beam import).

Opt-in (``--tokens ENCODING``): with it, the run step counts every example it writes, in the
chosen encoding, and the summary adds the dataset's figures (``transforms.totals.summary``); without
it nothing here runs and the tokenizer is never imported. docs/fine-tuning.md states the rules
for users; this module is their one home.

- **Counting** (``count_example``) reads the output record the sink wrote, where that sink keeps
  its conversation (``sink_view``). OpenAI's chat lines (``openai-finetune``, ``openai-batch``)
  are counted as OpenAI's cookbook counts chat requests ("How to count tokens with tiktoken",
  and its chat fine-tuning data-preparation notebook): 3 tokens per message beyond its values,
  1 more for a message's ``name``, 3 for the reply's priming, and tool definitions by the
  cookbook's function formula. Every other sink gets the same message rule on its own message
  list (a system prompt kept outside the list counts as one more message) and its tools as
  their compact JSON text, the way open models' chat templates put tools in the prompt. Inside
  a message every string, number and true/false counts at any depth (nested tool calls
  included); keys and JSON punctuation do not.
- **Limits**: ``--max-example-tokens`` takes a number or a model name from
  ``FINE_TUNING_LIMITS`` (documented limits, dated).
- **Dataset figures**: each example counted is tallied into the partial summary
  (``tally_example``: totals, and a histogram that merges by adding, exact below
  ``EXACT_BELOW`` tokens, also once written as JSON: a streaming run sums its files' partials
  from disk); ``token_figures`` makes the summary's ``tokens`` section from the merged tally:
  nearest-rank quantiles, training tokens, OpenAI's default epochs, the cost.

The tokenizer is the ``tokens`` extra (``bpe-openai``: GitHub's ``bpe-openai`` Rust crate with the
encodings inside its wheel, so counting works offline), loaded once per process on first use
(``counter``).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple

from transforms.core.jsontext import compact_json
from transforms.dataset.dataset_keys import TRAIN
from transforms.record.output_records import DeadLetter, DropMetrics
from transforms.record.record_settings import TokenSettings

#: The encodings ``--tokens`` takes.
ENCODINGS = ("o200k_base", "cl100k_base")

#: How to install the tokenizer (an optional extra: runs without ``--tokens`` never need it).
#: convnorm is installed from its checkout (README), not from a package index: the extra too.
INSTALL_HINT = "pip install -e '.[tokens]' in convnorm's checkout"


class TokenizerUnavailable(RuntimeError):
    """The tokenizer of the ``tokens`` extra is not installed (or cannot load the encoding)."""


@functools.lru_cache(maxsize=None)
def counter(encoding: str) -> Callable[[str], int]:
    """``count(text) -> tokens`` in ``encoding``: the library's own count of ``text`` as
    ordinary text (a special token's spelling counts as text, as OpenAI's APIs treat a
    message's content). Loaded once per process; raises ``TokenizerUnavailable``."""
    try:
        # The tokens extra; imported here only, so runs without --tokens never load it. The
        # crate's native count (typed in the wheel's _bindings.pyi; the version is pinned):
        # the Python wrapper's encode() refuses texts of 1,000,000 characters or 200,000
        # tokens, which a long example can hold, and builds a token list only to measure it.
        from bpe_openai import _bindings
    except ImportError:
        raise TokenizerUnavailable(f"--tokens needs the tokens extra: {INSTALL_HINT}") from None
    native = _bindings.tokenizer_for_encoding(encoding)

    def count(text: str) -> int:
        try:
            return int(native.count(text))
        except UnicodeEncodeError:
            # A lone surrogate (JSON can spell one): counted as U+FFFD, as tiktoken and
            # bpe-openai's own encode() do.
            return int(native.count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))

    return count


def unavailable(encoding: str) -> str | None:
    """Why ``encoding`` cannot be counted here (a sentence), or ``None`` when it can."""
    try:
        counter(encoding)
    except TokenizerUnavailable as why:
        return str(why)
    except Exception as error:  # noqa: BLE001 — a broken install is a one-line error before the run
        return f"--tokens {encoding}: the tokenizer failed to load ({type(error).__name__}: {error}); {INSTALL_HINT}"
    return None


# --------------------------------------------------------------------------------------------
# Documented fine-tuning limits


class ModelLimit(NamedTuple):
    """Tokens one training example may hold for a model, and the encoding it counts in."""

    tokens: int
    encoding: str


#: When ``FINE_TUNING_LIMITS`` was read from its sources (docs/fine-tuning.md cites them):
#: limits change, so the table says how old it is.
LIMITS_AS_OF = "2026-12-01"

#: Tokens per training example, by fine-tunable model snapshot: OpenAI's fine-tuning guide,
#: section "Token limits" (gpt-4o-mini, gpt-3.5-turbo), and Azure OpenAI's table of
#: fine-tunable models, column "Max request (tokens)", line "Training example context length"
#: (gpt-4o, the gpt-4.1 family). A model not listed: give the number itself.
FINE_TUNING_LIMITS: dict[str, ModelLimit] = {
    "gpt-4.1-2025-04-14": ModelLimit(65_536, "o200k_base"),
    "gpt-4.1-mini-2025-04-14": ModelLimit(65_536, "o200k_base"),
    "gpt-4.1-nano-2025-04-14": ModelLimit(32_768, "o200k_base"),
    "gpt-4o-2024-08-06": ModelLimit(65_536, "o200k_base"),
    "gpt-4o-mini-2024-07-18": ModelLimit(65_536, "o200k_base"),
    "gpt-3.5-turbo-0125": ModelLimit(16_385, "cl100k_base"),
}

#: Model names without a snapshot date, for the snapshot the table lists.
MODEL_ALIASES = {
    "gpt-4.1": "gpt-4.1-2025-04-14",
    "gpt-4.1-mini": "gpt-4.1-mini-2025-04-14",
    "gpt-4.1-nano": "gpt-4.1-nano-2025-04-14",
    "gpt-4o": "gpt-4o-2024-08-06",
    "gpt-4o-mini": "gpt-4o-mini-2024-07-18",
    "gpt-3.5-turbo": "gpt-3.5-turbo-0125",
}


def parse_limit(text: str) -> tuple[int, str | None]:
    """``--max-example-tokens``: (tokens, the model named or ``None``). Raises ``ValueError``
    with a sentence for a person."""
    text = str(text).strip()
    if text.isdigit():
        if int(text) < 1:
            raise ValueError("--max-example-tokens must be at least 1")
        return int(text), None
    model = MODEL_ALIASES.get(text, text)
    if model not in FINE_TUNING_LIMITS:
        known = ", ".join([*MODEL_ALIASES, *FINE_TUNING_LIMITS])
        raise ValueError(
            f"--max-example-tokens {text!r}: expected a number of tokens or a model with a documented "
            f"fine-tuning limit ({known})"
        )
    return FINE_TUNING_LIMITS[model].tokens, model


# --------------------------------------------------------------------------------------------
# Where each sink keeps its conversation


class SinkView(NamedTuple):
    """Where a sink's output record holds what is counted."""

    #: Paths to the message list, the first present one is used (a Batch line written back
    #: keeps the message field's own name in its body).
    messages: tuple[tuple[str, ...], ...]
    #: A system prompt kept outside the message list (counted as one more message).
    system: tuple[str, ...] | None
    tools: tuple[str, ...] | None
    #: OpenAI's chat format: tools by the cookbook's function formula (else as JSON text).
    chat_format: bool = False
    #: More message lists counted beside the first (the TRL sinks: a prompt and its continuations).
    more: tuple[tuple[str, ...], ...] = ()


#: The sinks' views; ``flat`` depends on the record settings (``sink_view``).
SINK_VIEWS: dict[str, SinkView] = {
    "openai-finetune": SinkView((("messages",),), None, ("tools",), chat_format=True),
    "openai-batch": SinkView((("body", "messages"),), None, ("body", "tools"), chat_format=True),
    "openai-responses": SinkView((("input",),), ("instructions",), ("tools",)),
    "anthropic": SinkView((("messages",),), ("system",), ("tools",)),
    "gemini": SinkView((("contents",),), ("systemInstruction",), ("tools",)),
    "sharegpt": SinkView((("conversations",),), ("system",), ("tools",)),
    "bedrock-converse": SinkView((("messages",),), ("system",), ("toolConfig", "tools")),
    "hf": SinkView((("messages",),), None, ("tools",)),
    # The prompt once and each continuation (a pair made across conversations is counted with
    # its rejected side only: its chosen one comes after the count).
    "trl-dpo": SinkView((("prompt",),), None, ("tools",), more=(("chosen",), ("rejected",))),
    "trl-kto": SinkView((("prompt",),), None, ("tools",), more=(("completion",),)),
    "trl-prompts": SinkView((("prompt",),), None, ("tools",), more=(("answer",),)),
}


@functools.lru_cache(maxsize=64)
def sink_view(sink: str, messages_field: str = "messages", tools_field: str = "tools") -> SinkView | None:
    """The view of ``sink``'s output records, ``None`` for a sink without one (a plug-in writer)."""
    if sink == "flat":
        return SinkView(((messages_field,),), None, tuple(tools_field.split(".")))
    view = SINK_VIEWS.get(sink)
    if view is not None and sink == "openai-batch" and messages_field != "messages":
        view = view._replace(messages=(*view.messages, ("body", messages_field)))
    return view


def _at(record: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(record, dict):
            return None
        record = record.get(key)
    return record


# --------------------------------------------------------------------------------------------
# Counting one example

#: OpenAI's chat format as its cookbook counts it: tokens per message beyond its values, for a
#: message's ``name``, and for the reply's priming (``<|start|>assistant<|message|>``).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3


class ToolFormat(NamedTuple):
    """The cookbook's token costs of function definitions ("Counting tokens for chat
    completions with tool calls"): per function, property list, property, enum, enum item, end."""

    function: int
    properties: int
    property: int
    enum: int
    enum_item: int
    end: int


#: By encoding: gpt-4o / gpt-4o-mini's figures for o200k_base, gpt-3.5-turbo / gpt-4's for cl100k_base.
TOOL_FORMATS = {
    "o200k_base": ToolFormat(7, 3, 3, -3, 3, 12),
    "cl100k_base": ToolFormat(10, 3, 3, -3, 3, 12),
}


def _text(value: Any) -> str:
    """A scalar as the text that counts: a string as it is, anything else as its JSON."""
    return value if isinstance(value, str) else compact_json(value)


def value_tokens(value: Any, count: Callable[[str], int]) -> int:
    """Tokens of every string, number and true/false in ``value``, at any depth (keys, nulls
    and JSON punctuation count nothing). Iterative: a deeply nested value cannot overflow."""
    total, stack = 0, [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)  # exact types first: this loop is most of the counting's own cost
        if kind is str:
            total += count(item)
        elif kind is dict:
            extend(item.values())
        elif kind is list:
            extend(item)
        elif item is None:
            continue
        elif isinstance(item, dict):
            extend(item.values())
        elif isinstance(item, (list, tuple)):
            extend(item)
        else:
            total += count(_text(item))
    return total


def messages_tokens(messages: list[Any], count: Callable[[str], int]) -> int:
    """A message list: per message ``TOKENS_PER_MESSAGE``, its values' tokens, and
    ``TOKENS_PER_NAME`` for a name (one walk over the whole list)."""
    names = sum(1 for m in messages if isinstance(m, dict) and "name" in m)
    return TOKENS_PER_MESSAGE * len(messages) + TOKENS_PER_NAME * names + value_tokens(messages, count)


def message_tokens(message: Any, count: Callable[[str], int]) -> int:
    """One message (a system prompt kept outside the list, say), as ``messages_tokens`` counts it."""
    return messages_tokens([message], count)


def _described(value: Any) -> str:
    text = "" if value is None else _text(value)
    return text[:-1] if text.endswith(".") else text  # the cookbook drops a final period


def openai_tools_tokens(tools: Any, count: Callable[[str], int], form: ToolFormat) -> int:
    """Chat Completions tool definitions by the cookbook's formula; any shape is taken (a
    custom tool counts its name and description, a missing field as empty)."""
    if not isinstance(tools, list) or not tools:
        return 0
    tokens = form.end
    for tool in tools:
        spec = (tool.get("function") or tool.get("custom")) if isinstance(tool, dict) else None
        spec = spec if isinstance(spec, dict) else {}
        tokens += form.function + count(f"{_described(spec.get('name'))}:{_described(spec.get('description'))}")
        parameters = spec.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, dict) else None
        if not isinstance(properties, dict) or not properties:
            continue
        tokens += form.properties
        for name, prop in properties.items():
            prop = prop if isinstance(prop, dict) else {}
            tokens += form.property
            enum = prop.get("enum")
            if isinstance(enum, list):
                tokens += form.enum + sum(form.enum_item + count(_text(item)) for item in enum)
            kind = prop.get("type")
            tokens += count(f"{name}:{'' if kind is None else _text(kind)}:{_described(prop.get('description'))}")
    return tokens


def count_example(output: Any, view: SinkView, encoding: str) -> int:
    """Tokens of one output record as ``view`` reads it (the module's rules)."""
    count = counter(encoding)
    messages: Any = None
    for path in view.messages:
        messages = _at(output, path)
        if messages is not None:
            break
    tokens = REPLY_PRIMING + (messages_tokens(messages, count) if isinstance(messages, list) else 0)
    for path in view.more:
        continuation = _at(output, path)
        if isinstance(continuation, list):
            tokens += messages_tokens(continuation, count)
    system = _at(output, view.system) if view.system else None
    if system is not None:
        tokens += message_tokens(system, count)
    tools = _at(output, view.tools) if view.tools else None
    if view.chat_format:
        tokens += openai_tools_tokens(tools, count, TOOL_FORMATS[encoding])
    elif tools is not None:
        tokens += count(_text(tools))
    return tokens


def has_assistant_message(messages: list[Any]) -> bool:
    """Does a normalized (flat) conversation hold an assistant turn to learn from?"""
    return any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages)


# --------------------------------------------------------------------------------------------
# Dataset figures

#: Counts below this are kept exactly in the mergeable histogram; larger ones to 3
#: significant digits, rounded down (a quantile up there is within 1%).
EXACT_BELOW = 100_000


def histogram_key(tokens: int) -> int:
    """The histogram bucket of an example's count: the count itself below ``EXACT_BELOW``."""
    if tokens < EXACT_BELOW:
        return tokens
    step: int = 10 ** (len(str(tokens)) - 3)
    return tokens - tokens % step


def nearest_rank(counts: dict[int, int], share: float) -> int:
    """The smallest count that at least ``share`` of the examples do not exceed (nearest-rank
    quantile of the histogram); 0 for no examples."""
    total = sum(counts.values())
    if not total:
        return 0
    rank = max(1, math.ceil(total * share))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    return max(counts)


#: Buckets of the report's histogram of tokens per example, powers of two: (label, lowest).
LENGTH_BUCKETS = (
    ("<256", 0),
    *((f"{low:,}-{2 * low - 1:,}", low) for low in (2**k for k in range(8, 17))),
    ("131,072+", 131_072),
)


def length_histogram(counts: dict[int, int]) -> dict[str, int]:
    """Examples per ``LENGTH_BUCKETS`` bucket, every bucket listed in order."""
    lows = [low for _, low in LENGTH_BUCKETS]
    out = dict.fromkeys((label for label, _ in LENGTH_BUCKETS), 0)
    for value, n in counts.items():
        index = max(i for i, low in enumerate(lows) if value >= low)
        out[LENGTH_BUCKETS[index][0]] += n
    return out


#: OpenAI's default epochs (its chat fine-tuning data-preparation notebook): 3, raised so
#: that small datasets train on at least 100 examples (at most 25 epochs), lowered so that big
#: ones train on at most 25,000 (at least 1 epoch).
TARGET_EPOCHS = 3
MIN_TARGET_EXAMPLES = 100
MAX_TARGET_EXAMPLES = 25_000
MIN_DEFAULT_EPOCHS = 1
MAX_DEFAULT_EPOCHS = 25


def default_epochs(examples: int) -> int:
    """The epochs a fine-tuning job runs by default on ``examples`` training examples."""
    if examples <= 0:
        return TARGET_EPOCHS
    if examples * TARGET_EPOCHS < MIN_TARGET_EXAMPLES:
        return min(MAX_DEFAULT_EPOCHS, MIN_TARGET_EXAMPLES // examples)
    if examples * TARGET_EPOCHS > MAX_TARGET_EXAMPLES:
        return max(MIN_DEFAULT_EPOCHS, MAX_TARGET_EXAMPLES // examples)
    return TARGET_EPOCHS


#: The additive totals of ``--tokens`` in a partial summary (``tally_example``).
_TOKEN_TALLIES = (
    "examples",
    "tokens",
    "over_limit_kept",
    "over_limit_kept_tokens",
    "over_limit_dropped",
    "over_limit_dropped_tokens",
    "without_assistant",
)


#: A split's totals in the tally (``by_split``): what its examples are billed per epoch.
_SPLIT_TALLIES = ("examples", "tokens", "over_limit_kept", "over_limit_kept_tokens")


def _billed(t: dict[str, Any], limit: int | None) -> int:
    """Tokens billed per epoch for the examples of ``t``: each at most ``limit`` (the notebook:
    a longer one is truncated in training)."""
    return int(t["tokens"] - (t["over_limit_kept_tokens"] - t["over_limit_kept"] * limit if limit else 0))


def tally_example(tally: dict[str, Any], item: DropMetrics | DeadLetter) -> None:
    """Add one counted example: a written one (its drop metrics) or one refused for its length
    (its dead letter). ``counts`` is the histogram of examples by count (``histogram_key``)."""
    n = item["tokens"]
    if not tally:
        tally.update(dict.fromkeys(_TOKEN_TALLIES, 0), counts={})
    key = histogram_key(n)
    tally["counts"][key] = tally["counts"].get(key, 0) + 1
    if "reason" in item:  # a dead letter: over the limit, not in the output
        tally["over_limit_dropped"] += 1
        tally["over_limit_dropped_tokens"] += n
        return
    tally["examples"] += 1
    tally["tokens"] += n
    if item.get("over_token_limit"):
        tally["over_limit_kept"] += 1
        tally["over_limit_kept_tokens"] += n
    if item.get("no_assistant_message"):
        tally["without_assistant"] += 1
    split = item.get("split")
    if split is not None:
        # What each split holds, so the bill counts the training split alone (``--split``).
        of_split = tally.setdefault("by_split", {}).setdefault(split, dict.fromkeys(_SPLIT_TALLIES, 0))
        of_split["examples"] += 1
        of_split["tokens"] += n
        if item.get("over_token_limit"):
            of_split["over_limit_kept"] += 1
            of_split["over_limit_kept_tokens"] += n


def _histogram(counts: dict[Any, int]) -> dict[int, int]:
    """The tally's histogram keyed by count. A tally read back from JSON (a streaming run's
    per-file partial, ``source.json``) has its keys as text: ``"121"`` is the bucket 121."""
    histogram: dict[int, int] = {}
    for key, n in counts.items():
        histogram[int(key)] = histogram.get(int(key), 0) + n
    return histogram


def token_figures(tally: dict[str, Any], settings: TokenSettings) -> dict[str, Any]:
    """The summary's ``tokens`` section: the dataset's figures from the merged tally.

    ``examples`` / ``total`` / the quantiles cover every example counted: those written and
    those refused for their length (``--over-limit drop``). Training tokens cover the examples
    written, each billed at most ``--max-example-tokens`` (OpenAI's notebook: longer ones are
    truncated), for ``epochs`` (``--epochs``, else OpenAI's default for the dataset's size).
    """
    t = {key: tally.get(key, 0) for key in _TOKEN_TALLIES}
    counts = _histogram(tally.get("counts", {}))
    limit = settings.max_example_tokens
    by_split = tally.get("by_split", {})
    # With --split only the training split is trained on, so it alone is billed; the others
    # are listed beside it (``splits``).
    trained = by_split.get(TRAIN, dict.fromkeys(_SPLIT_TALLIES, 0)) if by_split else t
    per_epoch = _billed(trained, limit)
    epochs = settings.epochs if settings.epochs is not None else default_epochs(trained["examples"])
    figures: dict[str, Any] = {
        "encoding": settings.encoding,
        "examples": sum(counts.values()),
        "total": t["tokens"] + t["over_limit_dropped_tokens"],
        "min": min(counts, default=0),
        "p50": nearest_rank(counts, 0.50),
        "p90": nearest_rank(counts, 0.90),
        "p99": nearest_rank(counts, 0.99),
        "max": max(counts, default=0),
        "histogram": length_histogram(counts),
        "max_example_tokens": limit,
        "limit_model": settings.limit_model,
        "over_limit": t["over_limit_kept"] + t["over_limit_dropped"],
        "over_limit_kept": t["over_limit_kept"],
        "over_limit_dropped": t["over_limit_dropped"],
        "without_assistant": t["without_assistant"],
        "training_examples": trained["examples"],
        "training_tokens_per_epoch": per_epoch,
        "epochs": epochs,
        "epochs_default": settings.epochs is None,
        "training_tokens": per_epoch * epochs,
    }
    if by_split:
        figures["splits"] = {
            name: {"examples": by_split[name]["examples"], "tokens_per_epoch": _billed(by_split[name], limit)}
            for name in sorted(by_split)
        }
    if settings.price_per_mtok is not None:
        figures["price_per_mtok"] = settings.price_per_mtok
        figures["estimated_cost"] = round(per_epoch * epochs * settings.price_per_mtok / 1_000_000, 2)
    return figures
