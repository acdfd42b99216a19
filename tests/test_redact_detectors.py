"""--redact secrets' own detectors: AWS secret access keys in every assignment form (and under
their name in JSON), OpenAI's prefixed keys whole, no ordinary word taken."""

from __future__ import annotations

import json

import pytest

from pipeline.cli.main import main
from transforms.dataset.redact import redact_messages, redact_text

# AWS's documented example secret, cut so that no scanner takes this file for a leak.
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
# OpenAI-shaped keys (made up): the bodies of today's keys, 156 and 124 characters of
# [A-Za-z0-9_-], with no T3BlbkFJ marker in them.
BODY_156 = ("q7Rf_Zp2-Lm9XwT4" * 10)[:156]
BODY_124 = ("Hk3-vN8_pQ2zLx5R" * 8)[:124]


def _secrets(text: str) -> tuple[str, dict]:
    counts: dict = {}
    return redact_text(text, ("secrets",), None, counts), counts


@pytest.mark.parametrize(
    "template",
    [
        "aws_secret_access_key={}",  # Found: unquoted, left in clear
        "AWS_SECRET_ACCESS_KEY: {}",  # YAML, env listings
        "export AWS_SECRET_ACCESS_KEY={}",
        "[default]\naws_access_key_id = AKIA...\naws_secret_access_key = {}\n",  # ~/.aws/credentials
        'aws_secret_access_key = "{}"',
        "aws configure set aws_secret_access_key {}",
        '{{"Credentials": {{"SecretAccessKey": "{}", "SessionToken": "x"}}}}',  # aws sts output
        '{{\\"secretAccessKey\\": \\"{}\\"}}',  # JSON text inside JSON text
        "aws_secret_key => '{}'",
    ],
)
def test_an_aws_secret_access_key_is_found_in_every_assignment_form(template):
    out, counts = _secrets(template.format(AWS_SECRET))
    assert AWS_SECRET not in out and "bPxRfiCY" not in out
    assert out == template.format("[REDACTED:aws_secret_access_key]")
    assert counts == {"aws_secret_access_key": 1}


def test_an_aws_secret_access_key_under_its_name_in_json_arguments_and_results_goes():
    # Parsed JSON is redacted string by string: the value alone does not say what it is.
    env = {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "note": AWS_SECRET}
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c", "name": "env", "args": env}]},
        {"role": "tool", "tool_call_id": "c", "content": json.dumps({"Credentials": {"SecretAccessKey": AWS_SECRET}})},
    ]
    counts: dict = {}
    out = redact_messages(messages, ("secrets",), None, counts)
    assert out[0]["tool_calls"][0]["args"]["AWS_SECRET_ACCESS_KEY"] == "[REDACTED:aws_secret_access_key]"
    assert out[0]["tool_calls"][0]["args"]["note"] == AWS_SECRET  # 40 characters under another name: not known
    assert json.loads(out[1]["content"]) == {"Credentials": {"SecretAccessKey": "[REDACTED:aws_secret_access_key]"}}
    assert counts == {"aws_secret_access_key": 2}


@pytest.mark.parametrize(
    "key",
    [
        "sk-proj-" + BODY_156,  # Found: no marker, left in clear
        "sk-svcacct-" + BODY_156,
        "sk-admin-" + BODY_124,
        # With the marker but '-' and '_' after it: detect-secrets' pattern stops short (or misses).
        "sk-proj-" + BODY_124[:60] + "T3BlbkFJ" + "dD9Fq-O9Z_3BoBu9F-KFR6Y" + BODY_124[:50],
        "sk-None-" + BODY_124[:48],
    ],
)
def test_openai_project_service_account_and_admin_keys_go_whole(key):
    for text in (f"OPENAI_API_KEY={key}", f'client = OpenAI(api_key="{key}")', f"key {key}."):
        out, counts = _secrets(text)
        assert key[12:] not in out and key[-20:] not in out, out
        assert out == text.replace(key, "[REDACTED:openai_token]")
        assert counts == {"openai_token": 1}


@pytest.mark.parametrize(
    "text",
    [
        "pip install scikit-learn (sk-learn for short); see sk-learn's docs",
        "task-proj-x and task-proj-" + BODY_156,  # a word ending in sk, then the prefix
        "the sk-proj-frontend-backend-integration-tests-for-the-api-v2 branch",  # a slug
        "sk-proj-x, sk-admin-panel, sk-svcacct-setup",
        "sk-proj-" + BODY_156[:30],  # too short for a key
        "set aws_secret_access_key in ~/.aws/credentials, never in code",
        "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}",
        "aws_secret_access_key: " + "a1B2" * 16,  # 64 characters: not an AWS secret
        "aws_secret_access_key: " + "A1b2" * 10 + "x",  # 41 characters
        "my_secret_access_keyring " + "z" * 40,  # the name inside a longer word
    ],
)
def test_ordinary_words_slugs_and_other_lengths_are_not_secrets(text):
    assert _secrets(text) == (text, {})


def test_the_help_names_them(capsys):
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "AWS secret access keys" in text and "sk-proj" in text
