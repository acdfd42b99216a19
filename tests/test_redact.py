"""--redact (transforms/dataset/redact.py): typed placeholders in texts, call arguments and results,
JSON kept valid, counted by kind; refused before the run when it cannot work."""

from __future__ import annotations

import json

import pytest

from transforms.core.jsontext import dumps_line
from transforms.dataset.redact import parse_kinds, redact_messages, redact_text
from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record
from transforms.totals.summary import finalize_run, partial

KEY = "AKIAIOSFODNN7EXAMPLE"
TOKEN = "ghp_" + "a1B2" * 9


def test_each_kind_is_replaced_by_its_placeholder_and_counted():
    counts: dict = {}
    text = f"key {KEY}, mail jane.doe@example.com, call +1 650-253-0000 or (415) 555-2671, {TOKEN}"
    out = redact_text(text, ("secrets", "emails", "phones"), "US", counts)
    assert out == (
        "key [REDACTED:aws_access_key], mail [REDACTED:email], call [REDACTED:phone] or [REDACTED:phone], "
        "[REDACTED:github_token]"
    )
    assert counts == {"aws_access_key": 1, "email": 1, "phone": 2, "github_token": 1}
    # Without a region only numbers in international form are phones; ordinary numbers never are.
    assert redact_text("(415) 555-2671 and order 123456", ("phones",), None, {}) == "(415) 555-2671 and order 123456"
    assert redact_text("nothing here", ("secrets", "emails", "phones"), None, counts) == "nothing here"


def test_private_keys_and_bearer_tokens_go_whole():
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----"
    counts: dict = {}
    assert redact_text(f"a {pem} b", ("secrets",), None, counts) == "a [REDACTED:private_key] b"
    assert redact_text("Authorization: Bearer abcdefghij0123456789", ("secrets",), None, counts).endswith(
        "Bearer [REDACTED:bearer_token]"
    )


def test_json_arguments_and_results_stay_valid_json():
    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"tool_call_id": "c1", "name": "mail", "args": json.dumps({"to": "a@b.io", "n": 1})},
                {"tool_call_id": "c2", "name": "mail", "args": {"to": ["x@y.org"], "keep": True}},
                {"tool_call_id": "c3", "name": "shell", "args": "echo a@b.io"},
            ],
        },
        {"role": "tool", "content": json.dumps({"owner": "bob@corp.io"}), "tool_call_id": "c1"},
    ]
    counts: dict = {}
    out = redact_messages(messages, ("emails",), None, counts)
    calls = out[0]["tool_calls"]
    assert json.loads(calls[0]["args"]) == {"to": "[REDACTED:email]", "n": 1}
    assert calls[1]["args"] == {"to": ["[REDACTED:email]"], "keep": True}
    assert calls[2]["args"] == "echo [REDACTED:email]"
    assert json.loads(out[1]["content"]) == {"owner": "[REDACTED:email]"}
    assert counts == {"email": 4}
    assert messages[1]["content"] == json.dumps({"owner": "bob@corp.io"})  # the input is not changed
    untouched = [{"role": "user", "content": "hi"}]
    assert redact_messages(untouched, ("emails",), None, {})[0] is untouched[0]


def test_the_job_redacts_counts_and_the_summary_lists_it():
    record = {
        "id": "r",
        "messages": [{"role": "user", "content": "I am a@b.io"}, {"role": "assistant", "content": "ok"}],
    }
    settings = Settings(redact=("emails",))
    outcome = process_record(RawRecord("s", 0, dumps_line(record)), settings)
    assert outcome.record["messages"][0]["content"] == "I am [REDACTED:email]"
    assert outcome.metrics["redacted"] == {"email": 1}
    assert finalize_run(partial(1, [outcome.metrics], []), settings)["redacted"] == {"email": 1}
    assert "redacted" not in finalize_run(partial(0, [], []), Settings())


@pytest.mark.parametrize(
    "text, problem",
    [("secret", "unknown --redact 'secret'"), ("emails:US", "only phones takes a region"), (",", "needs at least one")],
)
def test_bad_redact_values_are_refused(text, problem):
    assert any(problem in p for p in parse_kinds(text)[2])
    assert parse_kinds("secrets,emails,phones:us") == (("secrets", "emails", "phones"), "US", [])


def test_explain_names_what_was_redacted():
    from pipeline.finished.explain import Located, explanation_text
    from transforms.repairs.before_after import explain

    messages = [{"role": "user", "content": "a@b.io"}, {"role": "assistant", "content": "ok"}]
    metrics = {"id": "r", "source": "s", "position": 0, "redacted": {"email": 1}, "training": {"trailing_trimmed": 1}}
    text = explanation_text(Located(metrics, explain(messages, "spec"), Settings(), 1, ""), 120)
    assert "redacted (--redact): email 1" in text and "training: trailing_trimmed 1" in text
