"""--tokens: counts per example as the sink writes it, limits, the dataset's figures, offline.

The counts are checked against the tokenizer's own ``encode`` on the exact text of the output
files (the rule written out again here, plainly), against the figures OpenAI's cookbook
publishes for its counting function (checked there against the API), and the dataset figures
against a recomputation from drops/.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.main import main
from transforms.formats import WRITERS
from transforms.record import tokens
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings, TokenSettings
from transforms.record.records import normalize_batch, process_record
from transforms.totals import summary as summaries

bpe_openai = pytest.importorskip("bpe_openai", reason="the tokens extra (bpe-openai) is not installed")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"
#: Over this, some of the sample's examples (its largest is about 1,000 tokens in o200k_base).
LIMIT = 900


def _encode(encoding: str):
    """The library's own encoding: tokens of a text as ordinary text."""
    enc = bpe_openai.get_encoding(encoding)
    return lambda text: len(enc.encode_ordinary(text))


def _lines(directory: Path) -> list[dict]:
    return [
        json.loads(line) for path in sorted(directory.glob("part-*.jsonl")) for line in path.read_text().splitlines()
    ]


# --------------------------------------------------------------------------------------------
# The rules, on OpenAI's own published figures

#: OpenAI's cookbook ("How to count tokens with tiktoken"), example messages and tools; its
#: counting function gives these prompt tokens, which the API returned too.
COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English.",
    },
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]
COOKBOOK_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]
COOKBOOK_TOOL_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant that can answer to questions about the weather."},
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


@pytest.mark.parametrize("encoding, messages_only, with_tools", [("o200k_base", 124, 101), ("cl100k_base", 129, 105)])
def test_openai_chat_lines_count_as_the_cookbook_and_the_api_do(encoding, messages_only, with_tools):
    view = tokens.sink_view("openai-finetune")
    assert tokens.count_example({"messages": COOKBOOK_MESSAGES}, view, encoding) == messages_only
    example = {"messages": COOKBOOK_TOOL_MESSAGES, "tools": COOKBOOK_TOOLS}
    assert tokens.count_example(example, view, encoding) == with_tools
    # A Batch line holds the same request in its body.
    batch = {"custom_id": "a", "body": {"model": "m", **example}}
    assert tokens.count_example(batch, tokens.sink_view("openai-batch"), encoding) == with_tools


def test_every_value_in_a_message_counts_at_any_depth_and_keys_do_not():
    count = tokens.counter("o200k_base")
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
    }
    strings = ["assistant", "c1", "f", "{}"]
    assert tokens.value_tokens(message, count) == sum(map(count, strings))
    assert tokens.value_tokens({"a": [1, 2.5, True, None, {"b": "x"}]}, count) == sum(
        map(count, ["1", "2.5", "true", "x"])
    )
    deep: list = []
    for _ in range(5000):  # deeper than Python's recursion limit: counted, not an error
        deep = [deep, "x"]
    assert tokens.value_tokens(deep, count) == 5000 * count("x")
    named = {"role": "user", "name": "n", "content": "hi"}
    assert tokens.message_tokens(named, count) == 3 + 1 + sum(map(count, ["user", "n", "hi"]))


def test_tool_definitions_of_any_shape_are_counted_without_an_error():
    count, form = tokens.counter("o200k_base"), tokens.TOOL_FORMATS["o200k_base"]
    odd = [
        "not a tool",
        {"type": "function", "function": {"name": "f"}},  # no description, no parameters
        {"type": "custom", "custom": {"name": "g", "description": "Free text."}},
        {
            "type": "function",
            "function": {"name": "h", "parameters": {"properties": {"p": {"type": ["string", "null"]}}}},
        },
    ]
    expected = (
        form.end
        + 4 * form.function
        + count(":")
        + count("f:")
        + count("g:Free text")
        + count("h:")
        + form.properties
        + form.property
        + count('p:["string","null"]:')
    )
    assert tokens.openai_tools_tokens(odd, count, form) == expected
    assert tokens.openai_tools_tokens(None, count, form) == tokens.openai_tools_tokens([], count, form) == 0


def test_every_registered_writer_has_a_token_view():
    # A new writer must say where its records keep the conversation (transforms/record/tokens.py).
    assert all(tokens.sink_view(name) is not None for name in WRITERS)
    flat = tokens.sink_view("flat", "turns", "kwargs.tools")
    assert flat.messages == (("turns",),) and flat.tools == ("kwargs", "tools")


# --------------------------------------------------------------------------------------------
# Limits, epochs, quantiles


def test_limits_are_a_number_or_a_listed_model():
    assert tokens.parse_limit("4096") == (4096, None)
    assert tokens.parse_limit("gpt-4o-mini") == (65_536, "gpt-4o-mini-2024-07-18")
    assert tokens.parse_limit("gpt-4.1-nano-2025-04-14") == (32_768, "gpt-4.1-nano-2025-04-14")
    for bad in ("0", "gpt-5-turbo-max", "-3", "1e4"):
        with pytest.raises(ValueError, match="--max-example-tokens"):
            tokens.parse_limit(bad)
    assert set(tokens.MODEL_ALIASES.values()) == set(tokens.FINE_TUNING_LIMITS)
    assert {limit.encoding for limit in tokens.FINE_TUNING_LIMITS.values()} <= set(tokens.ENCODINGS)


@pytest.mark.parametrize(
    "examples, epochs",
    [
        (0, 3),
        (1, 25),
        (3, 25),
        (4, 25),
        (5, 20),
        (33, 3),
        (34, 3),
        (100, 3),
        (8_333, 3),
        (8_334, 2),
        (12_501, 1),
        (10**6, 1),
    ],
)
def test_default_epochs_follow_openais_rule(examples, epochs):
    # OpenAI's notebook: 3 epochs, raised toward 100 training examples (at most 25), lowered
    # toward 25,000 (at least 1).
    assert tokens.default_epochs(examples) == epochs


def test_quantiles_from_the_merged_histogram_are_the_exact_nearest_rank_ones():
    rng = random.Random(5)
    values = [rng.choice((rng.randint(0, 300), rng.randint(0, 99_999))) for _ in range(2_001)]
    counts: dict[int, int] = {}
    for part in (values[:700], values[700:1500], values[1500:]):  # merged as workers' partials are
        piece: dict[int, int] = {}
        for v in part:
            piece[tokens.histogram_key(v)] = piece.get(tokens.histogram_key(v), 0) + 1
        summaries.merge_into(counts, piece)
    ordered = sorted(values)
    for share in (0.5, 0.9, 0.99, 1.0):
        assert tokens.nearest_rank(counts, share) == ordered[math.ceil(share * len(values)) - 1]
    # Past EXACT_BELOW a count is kept to 3 significant digits, rounded down (within 1%).
    assert [tokens.histogram_key(v) for v in (99_999, 100_000, 123_456, 9_876_543)] == [
        99_999,
        100_000,
        123_000,
        9_870_000,
    ]
    assert tokens.nearest_rank({}, 0.5) == 0


def test_the_length_histogram_lists_every_bucket_in_order():
    histogram = tokens.length_histogram({0: 1, 255: 2, 256: 3, 65_536: 4, 10**6: 5})
    assert list(histogram) == [label for label, _ in tokens.LENGTH_BUCKETS]
    assert histogram["<256"] == 3 and histogram["256-511"] == 3
    assert histogram["65,536-131,071"] == 4 and histogram["131,072+"] == 5
    assert sum(histogram.values()) == 15


def test_summaries_merge_in_any_order_and_in_place():
    settings = Settings(sink="openai-finetune", tokens=TokenSettings("o200k_base", LIMIT))
    raws = [RawRecord("s", i, line) for i, line in enumerate(SAMPLE.read_bytes().splitlines()) if line.strip()]
    a, b = normalize_batch(raws[:150], settings), normalize_batch(raws[150:], settings)
    part_a = summaries.partial(150, a.metrics, a.dead_letters)
    part_b = summaries.partial(len(raws) - 150, b.metrics, b.dead_letters)
    frozen = json.dumps([part_a, part_b], default=str, sort_keys=True)
    forward = summaries.finalize(summaries.merge(part_a, part_b), tokens=settings.tokens)
    backward = summaries.finalize(summaries.merge(part_b, part_a), tokens=settings.tokens)
    in_place = summaries.finalize(
        summaries.merge_into(summaries.merge_into({}, part_a), part_b), tokens=settings.tokens
    )
    assert forward == backward == in_place
    assert json.dumps([part_a, part_b], default=str, sort_keys=True) == frozen  # merge_into left its inputs alone
    assert forward["tokens"]["examples"] == forward["records_out"]


def test_without_tokens_nothing_is_counted_and_the_summary_has_no_tokens_section():
    result = normalize_batch([RawRecord("s", 0, SAMPLE.read_bytes().splitlines()[0])], Settings())
    assert "tokens" not in result.metrics[0]
    part = summaries.partial(1, result.metrics)
    assert "tokens" not in part and "tokens" not in summaries.finalize(part)


def test_counts_are_deterministic_and_follow_the_rule_for_every_sink():
    raws = [RawRecord("s", i, line) for i, line in enumerate(SAMPLE.read_bytes().splitlines()[:40]) if line.strip()]
    count = _encode("o200k_base")
    for sink in WRITERS:
        settings = Settings(sink=sink, model="m", max_tokens=64, tokens=TokenSettings("o200k_base"))
        first, again = normalize_batch(raws, settings), normalize_batch(raws, settings)
        assert [m["tokens"] for m in first.metrics] == [m["tokens"] for m in again.metrics]
        view = tokens.sink_view(sink)
        for output, metrics in zip(first.records, first.metrics):
            messages = output
            for key in view.messages[0]:
                messages = messages[key]
            expected = 3 + sum(tokens.message_tokens(m, count) for m in messages)
            for path in view.more:  # the TRL sinks: each continuation beside the prompt
                expected += sum(tokens.message_tokens(m, count) for m in output[path[0]] or ())
            if view.system and output.get(view.system[0]) is not None:
                expected += tokens.message_tokens(output[view.system[0]], count)
            tools = output
            for key in view.tools if not view.chat_format else ():
                tools = tools.get(key) if isinstance(tools, dict) else None  # bedrock: toolConfig.tools
            tools = tools if not view.chat_format else None
            if tools is not None:
                expected += count(
                    tools if isinstance(tools, str) else json.dumps(tools, separators=(",", ":"), ensure_ascii=False)
                )
            if view.chat_format:
                container = output.get("body", output)
                expected += tokens.openai_tools_tokens(container.get("tools"), count, tokens.TOOL_FORMATS["o200k_base"])
            assert metrics["tokens"] == expected, (sink, metrics["id"])


def test_an_assistant_less_conversation_is_flagged():
    line = json.dumps({"id": "q", "messages": [{"role": "user", "content": "hello?"}]}).encode()
    outcome = process_record(RawRecord("s", 0, line), Settings(tokens=TokenSettings("o200k_base")))
    assert outcome.metrics["no_assistant_message"] is True
    # openai-finetune refuses such an example itself: an unwritable dead letter, as without --tokens.
    refused = process_record(
        RawRecord("s", 0, line), Settings(sink="openai-finetune", tokens=TokenSettings("o200k_base"))
    )
    assert refused.dead_letter["reason"] == "unwritable" and "no_assistant_message" in refused.dead_letter["detail"]


# --------------------------------------------------------------------------------------------
# The job, on the bundled sample


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    out = tmp_path_factory.mktemp("tokens") / "kept"
    argv = ["--input", str(SAMPLE), "--output", str(out), "--sink", "openai-finetune", "--quiet"]
    argv += ["--tokens", "o200k_base", "--max-example-tokens", str(LIMIT), "--price-per-mtok", "2.5"]
    # In 64 KiB shards: the summary is merged from many partials.
    assert main([*argv, "--shard-bytes", "65536"]) == 0
    return out


@pytest.fixture(scope="module")
def dropped(tmp_path_factory):
    out = tmp_path_factory.mktemp("tokens") / "dropped"
    argv = ["--input", str(SAMPLE), "--output", str(out), "--sink", "openai-finetune", "--quiet", "--no-report"]
    argv += ["--tokens", "o200k_base", "--max-example-tokens", str(LIMIT), "--over-limit", "drop", "--epochs", "2"]
    assert main(argv) == 0
    return out


def _cookbook_count(example: dict, count) -> int:
    """The cookbook's rule written out again over a line of the output file."""
    total = 3
    for message in example["messages"]:
        total += 3 + (1 if "name" in message else 0)
        stack = list(message.values())
        while stack:
            value = stack.pop()
            if isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, list):
                stack.extend(value)
            elif isinstance(value, str):
                total += count(value)
            elif value is not None:
                total += count(json.dumps(value))
    return total + tokens.openai_tools_tokens(example.get("tools"), count, tokens.TOOL_FORMATS["o200k_base"])


@pytest.mark.slow
def test_drops_carry_the_encodings_own_count_of_the_lines_written(kept):
    written, drops = _lines(kept / "normalized"), _lines(kept / "drops")
    assert len(written) == len(drops) == 301
    count = _encode("o200k_base")
    assert [d["tokens"] for d in drops] == [_cookbook_count(example, count) for example in written]
    assert [d["id"] for d in drops if d.get("over_token_limit")] == [d["id"] for d in drops if d["tokens"] > LIMIT]


@pytest.mark.slow
def test_the_summary_figures_are_those_of_drops(kept):
    summary = json.loads((kept / "summary.json").read_text())
    figures, counts = summary["tokens"], sorted(d["tokens"] for d in _lines(kept / "drops"))
    over = [n for n in counts if n > LIMIT]
    assert over, "the sample should have examples over the limit"
    assert figures["examples"] == len(counts) == summary["records_out"]
    assert figures["total"] == sum(counts)
    assert (figures["min"], figures["max"]) == (counts[0], counts[-1])
    for name, share in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert figures[name] == counts[math.ceil(share * len(counts)) - 1]
    assert sum(figures["histogram"].values()) == len(counts)
    assert figures["over_limit"] == figures["over_limit_kept"] == len(over) and figures["over_limit_dropped"] == 0
    per_epoch = sum(min(n, LIMIT) for n in counts)  # billed up to the limit
    assert figures["training_tokens_per_epoch"] == per_epoch
    assert figures["epochs"] == 3 and figures["epochs_default"] is True
    assert figures["training_tokens"] == 3 * per_epoch
    assert figures["estimated_cost"] == round(3 * per_epoch * 2.5 / 1e6, 2)
    assert figures["without_assistant"] == 0 and summary["accounted"] is True


@pytest.mark.slow
def test_over_the_limit_with_drop_is_a_dead_letter_of_its_own(kept, dropped):
    summary = json.loads((dropped / "summary.json").read_text())
    letters = [d for d in _lines(dropped / "dead_letter") if d["reason"] == "over_token_limit"]
    kept_summary = json.loads((kept / "summary.json").read_text())
    assert len(letters) == kept_summary["tokens"]["over_limit"] == summary["dead_letters_by_reason"]["over_token_limit"]
    assert all(d["tokens"] > LIMIT and f"{d['tokens']:,} tokens" in d["detail"] for d in letters)
    assert all(d["tokens"] <= LIMIT for d in _lines(dropped / "drops"))
    assert summary["records_in"] == summary["records_out"] + summary["dead_letters"] and summary["accounted"]
    figures = summary["tokens"]
    assert figures["over_limit_dropped"] == len(letters) and figures["over_limit_kept"] == 0
    # Every example counted, the dropped ones too; training tokens only for those written.
    assert (
        figures["examples"] == kept_summary["tokens"]["examples"]
        and figures["total"] == kept_summary["tokens"]["total"]
    )
    written = sum(d["tokens"] for d in _lines(dropped / "drops"))
    assert figures["training_tokens_per_epoch"] == written and figures["training_tokens"] == 2 * written
    assert figures["epochs"] == 2 and figures["epochs_default"] is False


@pytest.mark.slow
def test_the_report_shows_the_figures_and_lists_the_examples_over_the_limit(kept):
    from report_page import parse

    from pipeline.io.output_names import REPORT_FILE

    page = parse((kept / REPORT_FILE).read_text())
    figures = json.loads((kept / "summary.json").read_text())["tokens"]
    assert "Fine-tuning readiness (--tokens)" in page.headings and page.charts["tokens_histogram"]
    for name in ("examples", "total", "p50", "p90", "p99", "max", "over_limit", "training_tokens", "epochs"):
        assert page.values[f"tokens.{name}"] == f"{figures[name]:,}", name
    assert page.values["tokens.estimated_cost"] == f"{figures['estimated_cost']:,.2f}"
    text = (kept / REPORT_FILE).read_text()
    over = [d for d in _lines(kept / "drops") if d["tokens"] > LIMIT]
    assert all(d["id"] in text for d in over)


@pytest.mark.slow
def test_the_summary_table_prints_the_figures(tmp_path, capsys):
    argv = ["--input", str(SAMPLE), "--output", str(tmp_path / "o"), "--no-report", "--tokens", "cl100k_base"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "tokens (cl100k_base)" in printed and "training tokens, 3 epochs (default)" in printed


def test_with_a_split_only_the_training_split_is_billed():
    # The eval split is not trained on: its examples are listed beside the bill, not in it.
    settings = Settings(
        sink="openai-finetune",
        tokens=TokenSettings("o200k_base", LIMIT, price_per_mtok=3.0),
        splits=(("eval", 0.3),),
    )
    lines = SAMPLE.read_bytes().splitlines()
    raws = [RawRecord("s", i, line) for i, line in enumerate(lines) if line.strip()]
    result = normalize_batch(raws, settings)
    doc = summaries.finalize(summaries.partial(len(raws), result.metrics, result.dead_letters), tokens=settings.tokens)
    figures = doc["tokens"]
    train = [m["tokens"] for m in result.metrics if m["split"] == "train"]
    held_out = [m["tokens"] for m in result.metrics if m["split"] == "eval"]
    assert train and held_out
    assert figures["examples"] == len(train) + len(held_out)
    assert figures["training_examples"] == len(train)
    assert figures["training_tokens_per_epoch"] == sum(min(n, LIMIT) for n in train)
    assert figures["epochs"] == tokens.default_epochs(len(train))
    assert figures["estimated_cost"] == round(figures["training_tokens"] * 3.0 / 1e6, 2)
    assert figures["splits"] == {
        "eval": {"examples": len(held_out), "tokens_per_epoch": sum(min(n, LIMIT) for n in held_out)},
        "train": {"examples": len(train), "tokens_per_epoch": figures["training_tokens_per_epoch"]},
    }
    table = summaries.format_table(doc)
    assert f"eval split (not billed): {len(held_out):,} examples" in table


def test_the_worked_example_of_the_docs_shows_what_the_run_prints():
    # docs/fine-tuning.md quotes the table of its first command: the same figures, here in-process.
    page = (ROOT / "docs" / "fine-tuning.md").read_text()
    quoted = page.split("The summary table ends with the figures:\n\n```text\n", 1)[1].split("```", 1)[0]
    settings = Settings(sink="openai-finetune", tokens=TokenSettings("o200k_base", LIMIT, price_per_mtok=3.0))
    lines = SAMPLE.read_bytes().splitlines()
    raws = [RawRecord("s", i, line) for i, line in enumerate(lines) if line.strip()]
    result = normalize_batch(raws, settings)
    doc = summaries.finalize(summaries.partial(len(raws), result.metrics, result.dead_letters), tokens=settings.tokens)
    table = summaries.format_table(doc).splitlines()
    first = next(i for i, line in enumerate(table) if line.startswith("  tokens ("))
    assert "\n".join(table[first : first + len(quoted.splitlines())]) + "\n" == quoted


# --------------------------------------------------------------------------------------------
# Options: checked before the pipeline is built


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--max-example-tokens", "100"], "--max-example-tokens needs --tokens ENCODING"),
        (["--epochs", "2"], "--epochs needs --tokens"),
        (["--tokens", "p50k_base"], "unknown --tokens 'p50k_base'; known: o200k_base, cl100k_base"),
        (["--tokens", "o200k_base", "--over-limit", "drop"], "--over-limit drop needs --max-example-tokens"),
        (
            ["--tokens", "cl100k_base", "--max-example-tokens", "gpt-4o"],
            "counts in o200k_base, not --tokens cl100k_base",
        ),
        (["--tokens", "o200k_base", "--max-example-tokens", "llama"], "a model with a documented fine-tuning limit"),
        (["--tokens", "o200k_base", "--epochs", "0"], "--epochs must be at least 1"),
        (["--tokens", "o200k_base", "--price-per-mtok", "-1"], "--price-per-mtok must be a price"),
    ],
)
def test_bad_token_options_are_one_line_errors(tmp_path, capsys, extra, message):
    assert main(["--input", str(SAMPLE), "--output", str(tmp_path / "o"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_without_the_extra_tokens_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # import bpe_openai raises ImportError
    tokens.counter.cache_clear()
    try:
        assert main(["--input", str(SAMPLE), "--output", str(tmp_path / "o"), "--tokens", "o200k_base"]) == 2
    finally:
        tokens.counter.cache_clear()
    err = capsys.readouterr().err
    # Found: the hint said pip install 'convnorm[tokens]', which asks a package index for a
    # "convnorm" (not where this one comes from: its checkout, as the README installs it).
    assert (
        err == "convnorm: error: --tokens needs the tokens extra: pip install -e '.[tokens]' in convnorm's checkout\n"
    )
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_a_run_without_tokens_never_imports_the_tokenizer(tmp_path):
    code = (
        "import sys; from pipeline.cli.main import main\n"
        f"status = main(['--input', {str(SAMPLE)!r}, '--output', {str(tmp_path / 'o')!r}, '--quiet', '--no-report'])\n"
        "assert status == 0, status\n"
        "assert 'bpe_openai' not in sys.modules, 'the tokenizer was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)


@pytest.mark.parametrize("encoding", tokens.ENCODINGS)
def test_a_text_past_the_wrappers_limits_is_counted(encoding):
    # bpe-openai's encode() refuses 1,000,000 characters or 200,000 tokens; an example can hold
    # more, so the count must not go through it. " hello" is one pre-token: its count adds up.
    piece = " hello" * 1_000
    text = piece * 250  # 1.5 million characters, 250,000 pieces
    assert tokens.counter(encoding)(text) == 250 * _encode(encoding)(piece)


def test_a_lone_surrogate_counts_as_the_replacement_character():
    count = tokens.counter("o200k_base")
    assert count("a\ud800b") == count("a\ufffdb") == _encode("o200k_base")("a\ud800b")
