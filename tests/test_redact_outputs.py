"""--redact reaches every output: ids, the record's other fields, key names, reasoning, dead
letters, the report and ``convnorm explain`` (transforms/dataset/redact.py, transforms/record/records.py,
transforms/record/record_steps.py, pipeline/finished/).

The run's test plants an AWS key id, a GitHub token, an e-mail address and a US phone number
in every place a record can hold one and looks for each in every byte under the output
directory and in everything the run and ``convnorm explain`` print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.finished.html_page import escape
from transforms.core.jsontext import dumps_line
from transforms.dataset.redact import SIGNED_REASONING_LEFT_OUT, Redaction, id_placeholder, redact_media, redact_names
from transforms.record.inputs import Parsed, RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record
from transforms.totals.summary import finalize_run, partial
from transforms.totals.summary_table import format_table

KINDS = ("secrets", "emails", "phones")
REDACT = Settings(redact=KINDS, redact_region="US")
FLAG = "secrets,emails,phones:US"


def aws(n: int) -> str:
    """A distinct AWS access key id per place, so that a leak says where it came from."""
    return f"AKIA{n:02d}QWERTYUIOPASDF"


def github(n: int) -> str:
    return "ghp_" + str(n) * 36


def _process(record: dict, settings: Settings = REDACT):
    return process_record(RawRecord("in.jsonl", 0, dumps_line(record)), settings)


def _text(outcome) -> str:
    return json.dumps([outcome.record, outcome.metrics, outcome.dead_letter], ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# One leak at a time


def test_metadata_and_every_other_field_are_redacted_keys_too():
    record = {
        "id": "r",
        "metadata": {"owner": "meta.owner@example.com", "token": github(2), aws(3): "a key as a key name"},
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}],
    }
    outcome = _process(record)
    metadata = outcome.record["metadata"]
    assert metadata["owner"] == "[REDACTED:email]" and metadata["token"] == "[REDACTED:github_token]"
    assert id_placeholder("aws_access_key", aws(3)) in metadata
    assert outcome.metrics["redacted"] == {"aws_access_key": 1, "email": 1, "github_token": 1}
    assert record["metadata"]["owner"] == "meta.owner@example.com"  # the input is not changed


def test_ids_are_redacted_deterministic_distinct_and_calls_stay_paired():
    def record(n: int) -> dict:
        call = f"call_{aws(n + 1)}"
        return {
            "id": f"conv-{aws(n)}",
            "messages": [
                {"role": "user", "content": "send it"},
                {"role": "assistant", "content": None, "tool_calls": [_call(call)]},
                {"role": "tool", "tool_call_id": call, "content": "sent"},
                {"role": "assistant", "content": "done"},
            ],
        }

    first, again, other = _process(record(1)), _process(record(1)), _process(record(5))
    written = first.record
    assert written["id"] == first.metrics["id"] == "conv-" + id_placeholder("aws_access_key", aws(1))
    assert written == again.record  # the same input, the same output
    assert other.record["id"] != written["id"]  # distinct ids stay distinct
    call_id = written["messages"][1]["tool_calls"][0]["tool_call_id"]
    assert call_id == written["messages"][2]["tool_call_id"] == "call_" + id_placeholder("aws_access_key", aws(2))
    assert first.metrics["messages_out"] == 4 and not first.metrics["drops"]  # the pairing held
    assert aws(1) not in _text(first) and aws(2) not in _text(first)


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "send", "arguments": "{}"}}


def test_a_call_log_session_id_made_the_conversation_id_is_redacted_in_its_assembly():
    group = f"sess-{aws(12)}"
    record = {"id": group, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]}
    assembly = {"format": "litellm", "group": group, "calls": [{"source": "s", "position": 0, "call": aws(13)}]}
    outcome = process_record(RawRecord("s", 0, Parsed(record, None, assembly)), REDACT)
    assert outcome.metrics["assembly"]["group"] == outcome.metrics["id"] == outcome.record["id"]
    assert outcome.metrics["assembly"]["calls"][0]["call"] == id_placeholder("aws_access_key", aws(13))
    assert aws(12) not in _text(outcome) and aws(13) not in _text(outcome)


def _call_log(session: str, mail: str) -> dict:
    return {
        "call_type": "completion",
        "startTime": "2025-01-24 09:21:00",
        "model": "gpt-4o",
        "metadata": {"session_id": session},
        "messages": [{"role": "user", "content": f"Weather for {mail}?"}],
        "response": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "sunny"}}]},
    }


def test_call_log_pieces_are_redacted_before_the_assembly_distinct_finds_kept_distinct():
    from transforms.record.record_steps import read_call_log

    settings = Settings(redact=KINDS, redact_region="US", calls=True)
    first = read_call_log(_call_log(f"sess-{aws(12)}", "one@example.com"), settings).pieces[0]
    other = read_call_log(_call_log(f"sess-{aws(12)}", "two@example.com"), settings).pieces[0]
    # What a streaming run keeps in its output directory (calls.jsonl) holds no find ...
    assert aws(12) not in repr(first) and "one@example.com" not in repr(first)
    assert first.group == "sess-" + id_placeholder("aws_access_key", aws(12))
    # ... and two calls that differ by a find stay different for the assembly.
    assert first.history != other.history
    assert first.history[0]["content"] == f"Weather for {id_placeholder('email', 'one@example.com')}?"


def test_an_assembled_conversation_is_written_and_counted_as_one_read_whole():
    group = "sess-" + id_placeholder("aws_access_key", aws(12))
    text = f"Weather for {id_placeholder('email', 'one@example.com')}?"
    record = {"id": group, "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]}
    assembly = {"format": "litellm", "group": group, "calls": []}
    outcome = process_record(RawRecord("s", 0, Parsed(record, None, assembly)), REDACT)
    assert outcome.record["messages"][0]["content"] == "Weather for [REDACTED:email]?"
    assert outcome.record["id"] == group  # an id keeps its id placeholder
    assert outcome.metrics["redacted"] == {"aws_access_key": 1, "email": 1}  # as the batch path counts them


@pytest.mark.parametrize(
    "line, reason",  # the last: a block type the reader refuses, named in the detail
    [
        (f'{{"id": "x", "messages": [ {aws(9)} broken', "invalid_json"),
        (json.dumps({"id": "y", "messages": f"mail notalist@example.com {aws(10)}"}), "messages_not_a_list"),
        (json.dumps({"id": "z", "weird": "unknown.format@example.com", aws(11): github(1)}), "unknown_format"),
        (
            json.dumps({"messages": [{"role": "user", "content": [{"type": aws(15), "text": "a@b.io"}]}]}),
            "format_error",
        ),
    ],
)
def test_dead_letters_hold_their_raw_line_and_detail_redacted(line, reason):
    letter = process_record(RawRecord("in.jsonl", 0, line.encode()), REDACT).dead_letter
    assert letter is not None and letter["reason"] == reason
    for secret in (aws(9), aws(10), aws(11), aws(15), github(1), "notalist@example.com", "unknown.format@", "a@b.io"):
        assert secret not in letter["raw"] and secret not in letter["detail"]
    assert "[REDACTED:" in letter["raw"]
    # Without --redact the line is kept as it was.
    assert process_record(RawRecord("in.jsonl", 0, line.encode()), Settings()).dead_letter["raw"] == line


def test_validate_reports_ids_and_call_ids_redacted():
    from transforms.record.validate_step import check_record

    record = {
        "id": f"drop-{aws(13)}",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": f"orphan-{aws(14)}", "content": "x"},
        ],
    }
    report = check_record(RawRecord("in.jsonl", 0, dumps_line(record)), REDACT).record
    assert report["id"] == "drop-" + id_placeholder("aws_access_key", aws(13))
    assert report["details"][0]["tool_call_id"] == "orphan-" + id_placeholder("aws_access_key", aws(14))


def test_a_raw_line_longer_than_the_limit_is_redacted_before_it_is_cut():
    line = json.dumps({"messages": "x" * 40 + " " + aws(16)}).encode()  # the key across the cut at 60
    letter = process_record(RawRecord("in.jsonl", 0, line), Settings(redact=KINDS, raw_limit=60)).dead_letter
    assert "AKIA" not in letter["raw"] and len(letter["raw"]) == 60


def test_a_secret_as_a_key_name_is_redacted_in_the_ledger_summary_and_console():
    record = {
        "id": "r",
        "messages": [{"role": "user", "content": "hi", aws(5): 1, aws(6): 2}, {"role": "assistant", "content": "ok"}],
    }
    outcome = _process(record)
    assert outcome.metrics["discarded"] == {"[REDACTED:aws_access_key]": {"fields": 2, "chars": 0}}
    summary = finalize_run(partial(1, [outcome.metrics], []), REDACT)
    printed = format_table(summary)
    assert aws(5) not in json.dumps(summary) + printed and "[REDACTED:aws_access_key]" in printed
    # Counts by name, names that become one placeholder added up, the same dict when nothing is found.
    names = {"a@b.io": {"fields": 1, "chars": 2}, "c@d.io": {"fields": 1, "chars": 3}, "x": {"fields": 1, "chars": 0}}
    redaction = Redaction(("emails",), None, {})
    assert redact_names(names, redaction) == {"[REDACTED:email]": {"fields": 2, "chars": 5}, "x": names["x"]}
    assert redact_names({"x": 1}, redaction) == {"x": 1}
    nested = {"discarded_tool_fields": {"a@b.io": 1, "c@d.io": 2}}  # a writer's counts by a tool's field name
    assert redact_names(nested, redaction) == {"discarded_tool_fields": {"[REDACTED:email]": 3}}


def test_the_report_escapes_control_characters():
    assert escape("bad\x1b[31mkey\x07 <b>") == "bad\\x1b[31mkey\\x07 &lt;b&gt;"


def _anthropic(thinking: str, signature: str | None = "c2lnbmVk") -> dict:
    block = {"type": "thinking", "thinking": thinking, **({"signature": signature} if signature else {})}
    return {
        "id": "a",
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [block, {"type": "text", "text": "ok"}]},
            # Not the last turn: the writer keeps no final turn's thinking (final_thinking_dropped).
            {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "bye"}]},
        ],
    }


def test_a_signed_reasoning_block_holding_a_find_is_left_out_and_counted():
    settings = Settings(redact=KINDS, redact_region="US", sink="anthropic")
    outcome = _process(_anthropic(f"the key is {aws(8)}"), settings)
    assert aws(8) not in _text(outcome)
    assert outcome.record["messages"][1]["content"] == [{"type": "text", "text": "ok"}]
    assert outcome.metrics["redacted"] == {SIGNED_REASONING_LEFT_OUT: 1}
    assert outcome.metrics["discarded"]["thinking"]["fields"] == 1  # in the ledger, as a dropped one is
    summary = finalize_run(partial(1, [outcome.metrics], []), settings)
    assert summary["redacted"] == {SIGNED_REASONING_LEFT_OUT: 1}
    assert f"redacted {SIGNED_REASONING_LEFT_OUT}" in format_table(summary)
    # Nothing found: the signed block is written back as it was.
    kept = _process(_anthropic("plain thoughts"), settings)
    assert kept.record["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "plain thoughts",
        "signature": "c2lnbmVk",
    }
    assert "redacted" not in kept.metrics


def test_a_gemini_call_signature_stays_with_its_call_whose_id_is_redacted():
    call = f"c-{aws(20)}"
    record = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"id": call, "name": "f", "args": {}}, "thoughtSignature": "c2ln"}],
            },
            {"role": "user", "parts": [{"functionResponse": {"id": call, "name": "f", "response": {"x": 1}}}]},
            {"role": "model", "parts": [{"text": "ok"}]},
        ]
    }
    outcome = _process(record, Settings(redact=KINDS, sink="gemini"))
    contents = outcome.record["contents"]
    redacted = "c-" + id_placeholder("aws_access_key", aws(20))
    assert contents[1]["parts"][0] == {
        "functionCall": {"id": redacted, "name": "f", "args": {}},
        "thoughtSignature": "c2ln",
    }
    assert contents[2]["parts"][0]["functionResponse"]["id"] == redacted
    assert outcome.metrics["redacted"] == {"aws_access_key": 2}  # the call and its result


def test_unsigned_reasoning_is_redacted_in_place():
    record = {
        "id": "d",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok", "reasoning_content": f"mail me at think@example.com {aws(7)}"},
        ],
    }
    outcome = _process(record, Settings(redact=KINDS, sink="flat", reasoning="keep"))
    carried = outcome.record["messages"][1]["provider_reasoning"]
    assert carried["fields"]["reasoning_content"] == "mail me at [REDACTED:email] [REDACTED:aws_access_key]"
    assert outcome.metrics["redacted"] == {"aws_access_key": 1, "email": 1}


# --------------------------------------------------------------------------------------------
# The whole run: every byte written, every line printed


def planted_input(path: Path) -> list[str]:
    """An input with a secret in every place a record can hold one; the planted strings."""
    conversation = {
        "id": f"conv-{aws(1)}",
        "metadata": {"owner": "meta.owner@example.com", "token": github(2), aws(3): "key name in metadata"},
        "messages": [
            {"role": "system", "content": "be nice"},
            {
                "role": "user",
                "content": f"my key {aws(4)} mail jane.doe@example.com call (415) 555-2671",
                aws(5): 1,
                "bad\x1b[31mkey\x07": 2,
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{aws(6)}",
                        "type": "function",
                        "function": {
                            "name": "send",
                            "arguments": json.dumps({"to": "arg@example.com", "k": github(7)}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{aws(6)}", "content": "sent to result@example.org, (212) 555-0187"},
            {"role": "assistant", "content": "done"},
        ],
    }
    dropped = {
        "id": f"drop-{aws(13)}",
        "messages": [
            {"role": "user", "content": "hello drop.user@example.com"},
            {"role": "tool", "tool_call_id": f"orphan-{aws(14)}", "content": f"orphan result {github(3)}"},
            {"role": "assistant", "content": "hi"},
        ],
    }
    call_log = {
        "id": "chatcmpl-10",
        "call_type": "completion",
        "startTime": "2025-01-24 09:21:00",
        "model": "gpt-4o",
        "metadata": {"session_id": f"sess-{aws(12)}"},
        "messages": [{"role": "user", "content": "Weather for callog.user@example.com?"}],
        "response": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "sunny"}}]},
    }
    lines = [
        json.dumps(conversation),
        json.dumps(_anthropic(f"the key is {aws(8)}")),
        f'{{"id": "x", "messages": [ {aws(9)} broken',
        json.dumps({"id": "y", "messages": f"mail notalist@example.com {aws(10)}"}),
        json.dumps({"id": "z", "weird": "unknown.format@example.com", aws(11): github(1)}),
        json.dumps(call_log),
        json.dumps(dropped),
        json.dumps(
            {"messages": [{"role": "user", "content": [{"type": aws(15), "text": "format.error@example.com"}]}]}
        ),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    emails = ["meta.owner", "jane.doe", "arg@", "result@", "drop.user", "callog.user", "notalist", "unknown.format"]
    emails.append("format.error")
    return [aws(n) for n in range(1, 16)] + [github(n) for n in (1, 2, 3, 7)] + emails + ["555-2671", "555-0187"]


def _leaks(planted: list[str], name: str, data: bytes) -> list[str]:
    found = [f"{secret!r} in {name}" for secret in planted if secret.encode() in data]
    # Raw control characters from a key name (ESC, BEL) nowhere either.
    return found + [f"{char!r} in {name}" for char in ("\x1b", "\x07") if char.encode() in data]


@pytest.mark.slow
@pytest.mark.parametrize("sink", ["flat", "anthropic"])
def test_no_planted_secret_reaches_any_output_file_or_anything_printed(tmp_path, capfd, sink):
    from pipeline.cli.main import main

    planted = planted_input(tmp_path / "in.jsonl")
    out = tmp_path / "out"
    argv = ["--input", str(tmp_path / "in.jsonl"), "--output", str(out), "--sink", sink, "--redact", FLAG, "--report"]
    if sink == "anthropic":
        argv += ["--model", "claude-sonnet-4-5"]  # the call log's own model is OpenAI's (foreign_model)
    assert main(argv) == 0
    printed = capfd.readouterr()
    leaks = _leaks(planted, "the run's output", (printed.out + printed.err).encode())
    files = sorted(path for path in out.rglob("*") if path.is_file())
    assert out / "report.html" in files and list((out / "dead_letter").iterdir())
    for path in files:
        leaks += _leaks(planted, str(path.relative_to(out)), path.read_bytes())
    drops = [json.loads(line) for path in (out / "drops").iterdir() for line in path.read_text().splitlines()]
    ids = [m["id"] for m in drops]
    assert len(ids) == 4 and "[REDACTED:signed_reasoning_left_out]" not in ids
    # convnorm explain, on each conversation: by the id as written, and as the input spells it.
    for asked in [*ids, f"conv-{aws(1)}", f"drop-{aws(13)}"]:
        for html in ([], ["--html"]):
            assert main(["explain", str(out), "--id", asked, "--width", "200", *html]) == 0, asked
            printed = capfd.readouterr()
            leaks += _leaks(planted, f"explain {asked} {html}", (printed.out + printed.err).encode())
            assert "REDACTED" in printed.out or asked in ("a", "anth-1")
    assert not leaks, leaks


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_streaming_run_keeps_no_planted_secret_in_its_output_directory(tmp_path, capfd):
    """A streaming run keeps call-log pieces, indexes and window summaries in its output, and
    has no manifest of its options: its explain and report redact by its summary's ``redact``."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from streaming_runs import START_TIMEOUT_S, Streaming, land

    from pipeline.cli.main import main

    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    planted = planted_input(tmp_path / "in.jsonl")
    with Streaming(tmp_path, landing, out, "redacted", f"--redact={FLAG}") as run:
        run.wait_started()
        land(landing, "planted.jsonl", (tmp_path / "in.jsonl").read_bytes())
        run.wait_for(lambda: list(out.glob("*/assembled/assembled.json")), START_TIMEOUT_S, "the window's assembly")
        assert run.stop() == 0, run.text
    leaks = _leaks(planted, "the run's output", run.text.encode())
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        leaks += _leaks(planted, str(path.relative_to(out)), path.read_bytes())
    assert main(["explain", str(out), "--id", f"drop-{aws(13)}", "--width", "200"]) == 0
    printed = capfd.readouterr()
    leaks += _leaks(planted, "explain", (printed.out + printed.err).encode())
    assert not leaks, leaks
    assert "[REDACTED:github_token]" in printed.out  # the dropped result, shown redacted
    assert json.loads((out / "summary.json").read_text())["redact"] == FLAG


@pytest.mark.slow
def test_explain_finds_a_conversation_refused_after_reading_by_its_id_with_a_secret(tmp_path, capfd):
    from pipeline.cli.main import main

    record = {
        "id": f"t-{aws(21)}",
        "messages": [
            {"role": "user", "content": "hi t@example.com"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "more"},  # refused: --trailing refuse
        ],
    }
    (tmp_path / "in.jsonl").write_text(json.dumps(record) + "\n")
    out = tmp_path / "out"
    main(["--input", str(tmp_path / "in.jsonl"), "--output", str(out), "--trailing", "refuse", "--redact", FLAG])
    capfd.readouterr()
    for asked in (f"t-{aws(21)}", "t-" + id_placeholder("aws_access_key", aws(21))):
        assert main(["explain", str(out), "--id", asked]) == 0
        printed = capfd.readouterr().out
        assert "dead-lettered (unwritable)" in printed and aws(21) not in printed and "t@example.com" not in printed
        assert "before (as read from the input, redacted)" in printed


def test_media_urls_are_redacted_their_inline_data_kept():
    items = [
        {"kind": "image", "placeholder": "[image]", "provider": "openai", "url": "https://x.io/a.png?owner=a@b.io"},
        {"kind": "image", "placeholder": "[image]", "provider": "anthropic", "data": "a@b.io", "mime": "image/png"},
    ]
    counts: dict = {}
    out = redact_media(items, Redaction(KINDS, None, counts))
    assert out[0]["url"] == "https://x.io/a.png?owner=[REDACTED:email]" and out[1] == items[1]
    assert counts == {"email": 1}
