"""The TRL sinks (transforms/formats/trl.py) and the label readers (Braintrust rows, OpenPipe
dataset entries): pairs, thumbs and prompts from a conversation's labels, each refusal by its
reason, and the outputs checked with TRL's own ``trl.data_utils`` and loaded by ``datasets``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.cli.main import main
from transforms.core.normalize import normalize_conversation
from transforms.formats import READERS, WRITERS, FormatError, WriteContext, detect_reader
from transforms.formats.trl import parse_threshold
from transforms.record.record_settings import Settings, problems

DATA = Path(__file__).parent / "data"
LABELLED = DATA / "labels" / "conversations.jsonl"
TEMPLATE = DATA / "chat_template" / "chatml.jinja"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _normalized(record: dict, fmt: str | None = None) -> dict:
    """What the job hands a writer: the record's fields with its normalized messages."""
    reader = READERS[fmt] if fmt else detect_reader(record)
    assert reader is not None
    conversation = reader.read(record, "messages")
    return {**conversation.fields, "messages": normalize_conversation(conversation.messages).messages}


def _write(sink: str, record: dict, **options):
    ctx = WriteContext(str(record.get("id", "r")), **options)
    return WRITERS[sink].write(record, ctx), ctx.report


def _refusal(sink: str, record: dict, **options) -> str:
    with pytest.raises(FormatError) as error:
        _write(sink, record, **options)
    return error.value.reason


def _texts(messages: list[dict]) -> list[tuple]:
    return [(m["role"], m["content"]) for m in messages]


LABELLED_BY_ID = {record["id"]: _normalized(record) for record in _lines(LABELLED)}


# --------------------------------------------------------------------------------------------
# trl-dpo


def test_a_correction_is_chosen_against_the_logged_output():
    out, report = _write("trl-dpo", LABELLED_BY_ID["c-correction"])
    assert list(out) == ["id", "prompt", "chosen", "rejected", "tools"]
    assert _texts(out["prompt"]) == [("user", "Spell 'necessary'.")]
    assert _texts(out["chosen"]) == [("assistant", "necessary")]
    assert _texts(out["rejected"]) == [("assistant", "neccessary")]
    assert report == {"pairs_from": {"correction": 1}}


def test_a_label_on_an_earlier_turn_pairs_that_turn_with_its_own_history():
    out, _ = _write("trl-dpo", LABELLED_BY_ID["c-mid-label"])
    assert _texts(out["prompt"]) == [("user", "Hi, I am Bob.")]
    assert _texts(out["chosen"]) == [("assistant", "Hello Bob, how can I help?")]
    assert _texts(out["rejected"]) == [("assistant", "Hello Bob, call me at +1 415 555 0100.")]


def test_openpipes_rejected_message_is_the_rejected_side():
    entry = _lines(DATA / "formats" / "openpipe-dataset.jsonl")[0]
    out, report = _write("trl-dpo", _normalized(entry))
    assert _texts(out["chosen"]) == [("assistant", "positive")]
    assert _texts(out["rejected"]) == [("assistant", "negative")]
    assert report == {"pairs_from": {"rejected_output": 1}}


def test_braintrust_expected_is_chosen_against_a_different_output_and_refused_when_the_same():
    rows = [_normalized(row) for row in _lines(DATA / "formats" / "braintrust.jsonl")]
    out, _ = _write("trl-dpo", rows[0])
    assert _texts(out["prompt"]) == [("system", "You are terse."), ("user", "What is 2+2?")]
    assert (_texts(out["chosen"]), _texts(out["rejected"])) == ([("assistant", "4")], [("assistant", "5")])
    assert _refusal("trl-dpo", rows[1]) == "same_continuation"  # expected "Paris", output "Paris"
    assert _refusal("trl-dpo", rows[2]) == "no_pair"  # scores only: nothing to pair with


@pytest.mark.parametrize("rid", ["c-thumb-up", "c-thumb-down", "c-scores-only", "c-prompt-only", "c-no-labels"])
def test_no_pair_without_another_output(rid):
    assert _refusal("trl-dpo", LABELLED_BY_ID[rid]) == "no_pair"


def test_a_prompt_holding_a_call_without_its_result_is_refused():
    # Not what MEM-5 leaves (it answers every call), but a writer called alone must not write it.
    record = {
        "id": "r",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f", "args": "{}"}]},
            {"role": "user", "content": "and?"},
            {"role": "assistant", "content": "a"},
        ],
        "metadata": {"labels": [{"name": "x", "value": 0, "message": 3, "correction": {"content": "b"}}]},
    }
    assert _refusal("trl-dpo", record) == "unanswered_call"


def test_a_label_naming_no_assistant_message_is_refused():
    record = {**LABELLED_BY_ID["c-correction"]}
    label = {**record["metadata"]["labels"][0], "message": 0}
    record["metadata"] = {"labels": [label]}
    assert _refusal("trl-dpo", record) == "label_message_not_assistant"
    record["metadata"] = {"labels": [{**label, "message": 7}]}
    assert _refusal("trl-dpo", record) == "label_message_out_of_range"


# --------------------------------------------------------------------------------------------
# trl-kto


def test_thumbs_make_kto_rows_with_the_judged_continuation():
    up, report = _write("trl-kto", LABELLED_BY_ID["c-thumb-up"])
    assert list(up) == ["id", "prompt", "completion", "label", "tools"]
    assert up["label"] is True and _texts(up["prompt"]) == [("user", "What is the weather in Oslo?")]
    # The whole continuation: the call, its result and the answer.
    assert [m["role"] for m in up["completion"]] == ["assistant", "tool", "assistant"]
    assert up["completion"][0]["tool_calls"][0]["function"] == {"name": "weather", "arguments": {"city": "Oslo"}}
    assert up["tools"][0]["function"]["name"] == "weather"
    assert report == {"labels_written": {"true": 1}}
    assert _write("trl-kto", LABELLED_BY_ID["c-thumb-down"])[0]["label"] is False
    assert _write("trl-kto", LABELLED_BY_ID["c-scores-only"])[0]["label"] is True  # a whole-conversation score


def test_kto_refusals():
    assert _refusal("trl-kto", LABELLED_BY_ID["c-disagree"]) == "labels_disagree"
    assert _refusal("trl-kto", LABELLED_BY_ID["c-correction"]) == "no_label"  # 0 is a number, not a thumb
    assert _refusal("trl-kto", LABELLED_BY_ID["c-no-labels"]) == "no_label"


def test_a_label_whose_message_the_core_dropped_judges_nothing_written():
    # The job keeps such a label without its index ("message_dropped": true): it judged a
    # message no longer written, never the final answer that is.
    record = {
        "id": "dropped",
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        "metadata": {"labels": [{"name": "thumb", "value": False, "source": "langfuse", "message_dropped": True}]},
    }
    assert _refusal("trl-kto", record) == "no_label"
    kept = {**record, "metadata": {"labels": [{"name": "thumb", "value": False, "source": "langfuse"}]}}
    assert _write("trl-kto", kept)[0]["label"] is False


def test_a_threshold_turns_a_numeric_label_into_the_thumb():
    threshold = parse_threshold("helpfulness=0.5")
    assert threshold == ("helpfulness", 0.5)
    assert _write("trl-kto", LABELLED_BY_ID["c-thumb-down"], kto_threshold=threshold)[0]["label"] is False
    assert _write("trl-kto", LABELLED_BY_ID["c-scores-only"], kto_threshold=threshold)[0]["label"] is True
    at = _write("trl-kto", LABELLED_BY_ID["c-scores-only"], kto_threshold=("helpfulness", 0.8))[0]
    assert at["label"] is True  # at the threshold: good
    # The last judged turn: helpfulness 0.9 on the final answer (the earlier "safe" thumb is not it).
    out, report = _write("trl-kto", LABELLED_BY_ID["c-mid-label"], kto_threshold=threshold)
    assert out["label"] is True and _texts(out["completion"]) == [("assistant", "You are welcome.")]
    assert _refusal("trl-kto", LABELLED_BY_ID["c-thumb-up"], kto_threshold=threshold) == "no_label"


@pytest.mark.parametrize("text", ["x", "=1", "a=", "a=b", "a=nan", "a=inf"])
def test_a_threshold_that_is_not_name_equals_number_is_refused_before_the_run(text):
    assert parse_threshold(text) is None
    found = problems(Settings(sink="trl-kto", kto_threshold=text))
    assert len(found) == 1 and "NAME=VALUE" in found[0]


def test_the_options_belong_to_their_sinks():
    assert problems(Settings(sink="hf", kto_threshold="a=1")) == ["kto_threshold is for sink trl-kto, not hf"]
    assert problems(Settings(sink="trl-kto", reward="a")) == ["reward is for sink trl-prompts, not trl-kto"]


# --------------------------------------------------------------------------------------------
# trl-prompts


def test_prompts_carry_the_logged_answer_its_scores_and_reward():
    out, _ = _write("trl-prompts", LABELLED_BY_ID["c-thumb-down"], reward="helpfulness")
    assert list(out) == ["id", "prompt", "answer", "reward", "scores", "reference", "tools"]
    assert _texts(out["prompt"]) == [("system", "Be brief."), ("user", "Name a prime.")]
    assert _texts(out["answer"]) == [("assistant", "Nine.")]
    assert (out["reward"], out["scores"]) == (0.2, {"helpfulness": 0.2, "thumb": False})
    thumb = _write("trl-prompts", LABELLED_BY_ID["c-thumb-down"], reward="thumb")[0]
    assert thumb["reward"] == 0.0  # a bool as a number
    correction = _write("trl-prompts", LABELLED_BY_ID["c-correction"])[0]
    assert correction["reward"] is None and _texts(correction["reference"]) == [("assistant", "necessary")]


def test_a_prompt_without_an_answer_is_all_prompt():
    out, report = _write("trl-prompts", LABELLED_BY_ID["c-prompt-only"])
    assert _texts(out["prompt"]) == [("system", "You solve maths."), ("user", "What is 17*23?")]
    assert (out["answer"], out["reward"], out["scores"]) == (None, None, None)
    assert report == {"prompts_with": {"no_answer": 1}}


def test_a_text_label_is_no_reward():
    assert _refusal(
        "trl-prompts", LABELLED_BY_ID["c-thumb-up"] | {"metadata": {"scores": {"v": "ok"}}}, reward="v"
    ) == ("reward_not_a_number")


# --------------------------------------------------------------------------------------------
# The readers


def test_braintrust_rows_carry_scores_labels_and_context():
    row = _lines(DATA / "formats" / "braintrust.jsonl")[0]
    assert detect_reader(row).name == "braintrust"
    conversation = READERS["braintrust"].read(row, "messages")
    assert _texts(conversation.messages) == [("system", "You are terse."), ("user", "What is 2+2?"), ("assistant", "5")]
    metadata = conversation.fields["metadata"]
    assert metadata["scores"] == {"Factuality": 0.0, "Levenshtein": 0.5}
    assert (
        metadata["tags"] == ["eval", "math"] and metadata["trace_ids"] == ["t1"] and metadata["model"] == "gpt-4o-mini"
    )
    assert metadata["labels"] == [
        {"name": "Factuality", "value": 0.0, "source": "braintrust", "message": 2},
        {"name": "Levenshtein", "value": 0.5, "source": "braintrust", "message": 2},
        {
            "name": "expected",
            "value": "reference",
            "source": "braintrust",
            "message": 2,
            "correction": [{"role": "assistant", "content": "4"}],
        },
    ]
    assert not {"input", "output", "expected", "scores"} & set(conversation.fields)


def test_a_braintrust_row_whose_input_is_no_conversation_is_refused():
    with pytest.raises(FormatError) as error:
        READERS["braintrust"].read({"input": {"query": "x"}, "output": "y", "scores": {}}, "messages")
    assert error.value.reason == "input_not_messages"


def test_an_openpipe_entry_prefers_its_last_assistant_message():
    entry = _lines(DATA / "formats" / "openpipe-dataset.jsonl")[0]
    assert detect_reader(entry).name == "openpipe-dataset"
    conversation = READERS["openpipe-dataset"].read(entry, "messages")
    assert conversation.fields["metadata"]["labels"] == [
        {
            "name": "preferred",
            "value": True,
            "source": "openpipe",
            "message": 2,
            "rejected": [{"role": "assistant", "content": "negative"}],
        }
    ]
    assert "rejected_message" not in conversation.fields and conversation.fields["split"] == "TRAIN"


@pytest.mark.slow
def test_drops_and_explain_count_a_rejected_output_as_a_correction_is(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--input", str(DATA / "formats" / "openpipe-dataset.jsonl"), "--output", str(out), "--quiet"]) == 0
    lines = [line for path in sorted((out / "drops").glob("*.jsonl")) for line in _lines(path)]
    labelled = next(line for line in lines if line.get("labels"))
    assert labelled["labels"][0]["rejected"] == 1  # the messages are the output's, not the drops line's
    capsys.readouterr()
    assert main(["explain", str(out), "--id", labelled["id"]]) == 0
    assert (
        "label preferred = true (openpipe), on message 2; a rejected output of 1 message(s)" in capsys.readouterr().out
    )


# --------------------------------------------------------------------------------------------
# The job's outputs, checked by TRL itself


def _run(tmp_path: Path, sink: str, *more: str) -> Path:
    out = tmp_path / sink
    inputs = [LABELLED, DATA / "formats" / "braintrust.jsonl", DATA / "formats" / "openpipe-dataset.jsonl"]
    argv = [arg for path in inputs for arg in ("--input", str(path))]
    assert main([*argv, "--output", str(out), "--sink", sink, "--quiet", *more]) == 0
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("trl")
    return {
        "trl-dpo": _run(root, "trl-dpo"),
        "trl-kto": _run(root, "trl-kto"),
        "trl-prompts": _run(root, "trl-prompts", "--reward", "helpfulness"),
    }


def _written(out: Path, folder: str = "normalized") -> list[dict]:
    return [row for path in sorted((out / folder).glob("*.jsonl")) for row in _lines(path)]


WRITTEN = {"trl-dpo": 4, "trl-kto": 6, "trl-prompts": 13}


@pytest.mark.slow
@pytest.mark.parametrize("sink", sorted(WRITTEN))
def test_each_sink_writes_what_it_can_and_counts_what_it_refuses(runs, sink):
    out = runs[sink]
    summary = json.loads((out / "summary.json").read_text())
    letters = _written(out, "dead_letter")
    assert summary["records_in"] == 13 and summary["accounted"]
    assert len(_written(out)) == WRITTEN[sink] == summary["records_out"]
    by_reason: dict[str, int] = {}
    for letter in letters:
        reason = letter["detail"].split(": ")[1]
        by_reason[reason] = by_reason.get(reason, 0) + 1
    expected = {
        # c-disagree is a candidate for pairs across conversations whose thumbs disagree.
        "trl-dpo": {"no_pair": 6, "labels_disagree": 1, "same_continuation": 2},
        "trl-kto": {"no_label": 6, "labels_disagree": 1},
        "trl-prompts": {},
    }[sink]
    assert by_reason == expected
    assert summary.get("sink_refusals_by_reason", {}) == expected


def _tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    tokenizer.chat_template = TEMPLATE.read_text(encoding="utf-8")
    return tokenizer


@pytest.mark.slow
@pytest.mark.parametrize("sink", sorted(WRITTEN))
def test_trl_takes_each_sinks_output_as_it_is(runs, sink):
    data_utils = pytest.importorskip("trl.data_utils", reason="trl is not installed (the test extra installs it)")
    import datasets

    datasets.disable_progress_bars()
    out = runs[sink]
    parts = sorted(str(p) for p in (out / "normalized").glob("*.jsonl"))
    plain = datasets.load_dataset("json", data_files=parts, split="train", cache_dir=str(out / ".cache"))
    carded = datasets.load_dataset(str(out), split="train", cache_dir=str(out / ".cache"))
    assert len(plain) == len(carded) == WRITTEN[sink]
    tokenizer = _tokenizer()
    rendered = []
    for example in carded:
        assert data_utils.is_conversational(example)
        text = data_utils.maybe_apply_chat_template(example, tokenizer, tools=example["tools"])
        assert text["prompt"].startswith("<|im_start|>") and "<|im_start|>user" in text["prompt"]
        rendered.append(text)
    if sink == "trl-dpo":
        assert all(t["chosen"] != t["rejected"] and t["chosen"].startswith("<|im_start|>assistant") for t in rendered)
    if sink == "trl-kto":
        assert {t["label"] for t in rendered} == {True, False}
        assert any("<tool_call>" in t["completion"] for t in rendered)  # a call and its result, rendered
    if sink == "trl-prompts":
        assert any('"name": "weather"' in t["prompt"] for t in rendered)  # the tools, in the prompt


@pytest.mark.slow
def test_redact_covers_what_the_trl_sinks_write(tmp_path):
    pytest.importorskip("detect_secrets")
    written = {}
    for sink in ("trl-dpo", "trl-kto", "trl-prompts"):
        out = _run(tmp_path, sink, "--redact", "emails,phones")
        text = "".join(
            p.read_text() for folder in ("normalized", "drops", "dead_letter") for p in (out / folder).glob("*")
        )
        written[sink] = text
        assert "alice@example.com" not in text and "555 0100" not in text, sink
    # An answer's address in a KTO completion; a phone number in a pair's rejected side.
    assert "[REDACTED:email]" in written["trl-kto"] and "[REDACTED:phone]" in written["trl-dpo"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_streaming_run_writes_the_batch_runs_bytes(tmp_path):
    # The per-record TRL sinks run in streaming's per-file step as they do in a batch run.
    import subprocess
    import sys

    from prism_build import prism_binary

    landing = tmp_path / "land"
    landing.mkdir()
    shutil.copy(LABELLED, landing / "labelled.jsonl")
    for sink in ("trl-kto", "trl-prompts"):
        batch = tmp_path / f"{sink}-batch"
        assert (
            main(["--input", str(landing / "labelled.jsonl"), "--output", str(batch), "--sink", sink, "--quiet"]) == 0
        )
        out = tmp_path / f"{sink}-streaming"
        argv = ["--streaming", "--runner=PrismRunner", f"--prism_location={prism_binary()}"]
        argv += [f"--input={landing}/*.jsonl", f"--output={out}", "--sink", sink, "--window=4s"]
        argv += ["--poll-interval=0.3s", "--stop-after=15s", "--quiet"]
        subprocess.run([sys.executable, "-m", "pipeline", *argv], check=True, capture_output=True, timeout=600)
        (written,) = out.glob("*/labelled-*/normalized.jsonl")
        assert written.read_bytes() == b"".join(p.read_bytes() for p in sorted((batch / "normalized").glob("*.jsonl")))


@pytest.mark.parametrize(
    "flags,problem",
    [
        (("--sink", "hf", "--kto-threshold", "a=1"), "--kto-threshold is for --sink trl-kto, not hf"),
        (("--sink", "trl-kto", "--kto-threshold", "a"), "--kto-threshold 'a' is not NAME=VALUE with a number"),
        (("--sink", "trl-dpo", "--dedupe", "exact"), "--sink trl-dpo pairs conversations across the dataset"),
        (("--sink", "hf", "--pair-by", "x"), "--pair-by is for --sink trl-dpo, not hf"),
        (("--sink", "trl-kto", "--reward", "x"), "--reward is for --sink trl-prompts, not trl-kto"),
    ],
)
def test_the_label_options_are_refused_before_the_run(tmp_path, capsys, flags, problem):
    assert main(["--input", str(LABELLED), "--output", str(tmp_path / "out"), *flags]) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
