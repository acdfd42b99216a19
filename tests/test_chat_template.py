"""--chat-template (transforms/chat_template.py): every example rendered as a trainer renders it,
its assistant messages shown, its tokens counted with a local tokenizer; what fails is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transforms.chat_template import TemplateRefused, check_rendered, count_tokens, load_template, render
from transforms.inputs import RawRecord
from transforms.jsontext import dumps_line
from transforms.record_settings import Settings, problems
from transforms.records import process_record
from transforms.summary import finalize_run, partial

TEMPLATE = Path(__file__).resolve().parent / "data" / "chat_template" / "chatml.jinja"
CALL = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "run", "args": {"x": "é"}}]}
CONVERSATION = [
    {"role": "user", "content": "go"},
    CALL,
    {"role": "tool", "content": "ran", "tool_call_id": "c1"},
    {"role": "assistant", "content": "done"},
]


def run(messages, template, **settings):
    record = {"id": "r1", "messages": messages, "tools": [{"name": "run", "parameters": {"type": "object"}}]}
    return process_record(RawRecord("in.jsonl", 0, dumps_line(record)), Settings(chat_template=template, **settings))


def tokenizer_folder(tmp_path: Path) -> Path:
    """A local tokenizer folder: the template in tokenizer_config.json, a word-level tokenizer.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path / "tok"
    folder.mkdir()
    config = {"chat_template": TEMPLATE.read_text(), "bos_token": {"content": "<s>"}, "eos_token": "</s>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    words = ["[UNK]", "<", "|", "im_start", "im_end", ">", "user", "assistant", "tool", "go", "done", "ran"]
    tokenizer = Tokenizer(models.WordLevel({w: n for n, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def test_an_example_renders_as_the_trainer_renders_it():
    template = load_template(str(TEMPLATE))
    assert template.error is None and template.tokenizer is None
    outcome = run(CONVERSATION, template, sink="hf")
    assert outcome.dead_letter is None
    assert outcome.metrics["training"]["examples_rendered"] == 1 and "template_tokens" not in outcome.metrics
    text = render(outcome.record, template)
    assert '<tool_call>{"name": "run", "arguments": {"x": "é"}}</tool_call>' in text  # objects, non-ASCII kept
    assert text.count("<|im_start|>assistant") == 2 and "# Tools" in text


def test_a_tokenizer_folder_counts_the_renderings_tokens(tmp_path):
    template = load_template(str(tokenizer_folder(tmp_path)))
    assert (
        template.error is None and template.tokenizer and template.bos_token == "<s>" and template.eos_token == "</s>"
    )
    outcome = run(CONVERSATION, template, sink="openai-finetune")
    text = render({"messages": [{"role": "user", "content": "go"}], "tools": None}, template)
    # The word-level tokenizer's pieces: <| im_start |> user go <| im_end |> (punctuation runs are one).
    assert text == "<|im_start|>user\ngo\n<|im_end|>\n" and count_tokens(text, template) == 8
    assert outcome.metrics["template_tokens"] > 10
    doc = finalize_run(partial(1, [outcome.metrics], []), Settings(sink="openai-finetune", chat_template=template))
    assert doc["chat_template"] == {
        "template": template.path,
        "examples_rendered": 1,
        "tokens": outcome.metrics["template_tokens"],
    }


def test_what_fails_to_render_or_hides_an_assistant_message_is_refused(tmp_path):
    raising = tmp_path / "raising.jinja"
    raising.write_text(
        "{% if messages[0].role != 'system' %}{{ raise_exception('a system message first') }}{% endif %}"
    )
    letter = run(CONVERSATION, load_template(str(raising)), sink="hf").dead_letter
    assert letter["reason"] == "unwritable"
    assert letter["detail"] == "chat-template: render_failed: the template raised: a system message first"
    hiding = tmp_path / "hiding.jinja"
    hiding.write_text("{% for m in messages %}{% if m.role != 'assistant' %}{{ m.content }}{% endif %}{% endfor %}")
    letter = run(CONVERSATION, load_template(str(hiding)), sink="hf").dead_letter
    assert letter["detail"].startswith("chat-template: empty_assistant_span: assistant message 1")
    with pytest.raises(TemplateRefused):
        check_rendered({"messages": [{"role": "assistant", "content": "x", "tool_calls": None}]}, "")


def test_a_template_that_cannot_be_used_is_refused_before_the_run(tmp_path):
    (tmp_path / "bad.jinja").write_text("{% for %}")
    (tmp_path / "folder").mkdir()
    for path, problem in [
        (tmp_path / "missing.jinja", "No such file"),
        (tmp_path / "bad.jinja", "not a Jinja template"),
        (tmp_path / "folder", "no chat_template in its tokenizer_config.json"),
    ]:
        template = load_template(str(path))
        assert problem in (template.error or "")
        assert any(problem in p for p in problems(Settings(chat_template=template)))
