"""--chat-template (transforms/dataset/chat_template.py; its files read on the driver by
pipeline/config/chat_template_files.py): every example rendered as a trainer renders it, its
assistant messages shown, its tokens counted with a local tokenizer; what fails is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config.chat_template_files import load_template
from transforms.core.jsontext import dumps_line
from transforms.dataset.chat_template import TemplateRefused, check_rendered, count_tokens, render
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings, problems
from transforms.record.records import process_record
from transforms.totals.summary import finalize_run, partial

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


@pytest.mark.parametrize(
    "template",
    [
        pytest.param("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", id="loops"),
        pytest.param("{% for i in range(100000) %}{{ range(100000)|list|length }}{% endfor %}", id="lists"),
        pytest.param("{% set b %}{% for i in range(9999) %}{{ range(9999)|join }}{% endfor %}{% endset %}", id="set"),
        pytest.param("{% set a = 'x' * 16 %}" + "{% set a = a ~ a %}" * 30, id="doubling"),
        pytest.param("{{ 'x' * 10000000000 }}", id="repeat"),
        pytest.param("{{ 2 ** 1000000000 }}", id="power"),
        pytest.param("{{ 'x'|center(1000000000) }}", id="center"),
        pytest.param("{{ 'x'.ljust(1000000000) }}", id="ljust"),
        pytest.param("{{ '%0999999999d'|format(1) }}{{ '%0999999999d' % 1 }}", id="format"),
        pytest.param("{{ '{:>999999999}'.format(1) }}", id="str-format"),
        pytest.param("{{ ('x' * 1000000)|replace('x', 'y' * 100) }}", id="replace"),
        pytest.param("{{ ('x' * 1000000).join(range(100000)|map('string')) }}", id="join"),
    ],
)
def test_a_rendering_past_its_budget_is_refused_for_that_example(template, tmp_path):
    # Counted steps and sizes, not time: the same verdict on any machine, in well under a second.
    path = tmp_path / "t.jinja"
    path.write_text(template)
    settings = load_template(str(path))
    assert settings.error is None
    letter = run(CONVERSATION, settings, sink="hf").dead_letter
    assert letter["reason"] == "unwritable" and letter["detail"].startswith("chat-template: render_limit: ")
    doc = finalize_run(partial(1, [], [letter]), Settings(sink="hf", chat_template=settings))
    assert doc["sink_refusals_by_reason"] == {"render_limit": 1}


def test_loops_and_outputs_under_the_budget_render_as_before(tmp_path):
    path = tmp_path / "t.jinja"
    path.write_text(
        "{% for m in messages recursive %}{{ loop.index }}/{{ loop.length }}{{ m.content }}"
        "{% if loop.last %}.{% endif %}{% endfor %}{{ (range(3)|list)|join(',') }}{{ 'ab' ~ 'c' }}"
    )
    settings = load_template(str(path))
    text = render({"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}]}, settings)
    assert text == "1/2go2/2ok.0,1,2abc"


def test_only_regular_files_of_bounded_size_are_read(tmp_path, monkeypatch):
    import os

    from pipeline.config import chat_template_files

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a blocking open would wait for a writer for ever
    big = tmp_path / "big.jinja"
    big.write_text("{{ messages }}" * 10)
    monkeypatch.setattr(chat_template_files, "FILE_LIMIT", 100)
    for path, problem in [
        ("/dev/zero", "/dev/zero is not a regular file"),
        (str(fifo), f"{fifo} is not a regular file"),
        (str(big), f"{big} holds 140 bytes, more than 100"),
    ]:
        template = load_template(path)
        assert template.error == f"--chat-template {path}: {problem}"
        assert template.error in problems(Settings(chat_template=template))


def test_a_tokenizer_folders_symlink_out_of_it_is_not_followed(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("{{ messages }}")
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "chat_template.jinja").symlink_to(outside)
    template = load_template(str(folder))
    assert template.error == (
        f"--chat-template {folder}: chat_template.jinja is a symlink to {outside}, outside the tokenizer folder"
    )
    # A symlink inside the folder, and a Hugging Face cache snapshot's link to its blobs/, are read.
    (folder / "chat_template.jinja").unlink()
    (folder / "t.jinja").write_text("{{ messages }}")
    (folder / "chat_template.jinja").symlink_to("t.jinja")
    assert load_template(str(folder)).error is None
    snapshot = tmp_path / "models--x--y" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (tmp_path / "models--x--y" / "blobs").mkdir()
    (tmp_path / "models--x--y" / "blobs" / "f00").write_text("{{ messages }}")
    (snapshot / "chat_template.jinja").symlink_to("../../blobs/f00")
    assert load_template(str(snapshot)).error is None


def test_the_workers_open_no_file_the_tokenizer_travels_as_text(tmp_path):
    # Read once on the driver: counting tokens on a worker opens nothing (the folder may not
    # even be on the worker's machine).
    pytest.importorskip("tokenizers")
    import shutil

    folder = tokenizer_folder(tmp_path)
    template = load_template(str(folder))
    assert template.error is None and template.tokenizer.lstrip().startswith("{")
    shutil.rmtree(folder)
    assert count_tokens("go done", template) == 2
