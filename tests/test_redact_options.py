"""--redact's value: an empty one, an unknown kind or phone region (UK for GB) refused with one
line before any work, from the command line and from a preset; the regions are phonenumbers'."""

from __future__ import annotations

import re
from pathlib import Path

import phonenumbers
import pytest

from pipeline.cli.main import main
from pipeline.config.options import ConfigError, load_job
from transforms.dataset.redact import parse_kinds, phone_regions, redact_text

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "conversations.jsonl"


@pytest.mark.parametrize(
    "value, problem",
    [
        ("", "--redact '' needs at least one of secrets, emails, phones"),  # Found: accepted, redacted nothing
        (",", "--redact ',' needs at least one of secrets, emails, phones"),
        (" , ", "needs at least one of secrets, emails, phones"),
        ("secrets,keys", "unknown --redact 'keys'; known: secrets, emails, phones"),
        ("phones:UK", "--redact phones:UK: UK is no region code; the United Kingdom's is GB (phones:GB)"),
        ("phones:uk", "the United Kingdom's is GB"),
        ("phones:XX", "--redact phones:XX: no such region; phones:CC takes a two-letter ISO 3166 code"),
        ("phones:001", "no such region"),  # phonenumbers' code for non-geographic numbers
        ("phones:US,phones:GB", "--redact takes one phone region, not phones:US and phones:GB"),
    ],
)
def test_a_redact_value_that_would_redact_less_than_it_says_is_refused(value, problem):
    problems = parse_kinds(value)[2]
    assert len(problems) == 1 and problem in problems[0] and "\n" not in problems[0], problems


def test_every_region_phonenumbers_has_is_taken_and_matches_its_national_numbers():
    regions = phone_regions()
    assert regions == tuple(sorted(phonenumbers.SUPPORTED_REGIONS)) and "GB" in regions and "UK" not in regions
    for region in ("gb", "US", "de"):
        assert parse_kinds(f"phones:{region}") == (("phones",), region.upper(), [])
    assert parse_kinds("secrets,phones:GB,phones") == (("secrets", "phones"), "GB", [])
    # The region refused before was the one that silently matched nothing.
    assert redact_text("ring 020 7946 0958", ("phones",), "GB", {}) == "ring [REDACTED:phone]"
    assert redact_text("ring 020 7946 0958", ("phones",), "UK", {}) == "ring 020 7946 0958"


def _error_line(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("convnorm: error:")]


@pytest.mark.parametrize(
    "value, message",
    [
        ("", "--redact '' needs at least one of secrets, emails, phones"),
        ("phones:UK", "(phones:GB)"),
        ("phones:XX", "--redact phones:XX: no such region"),
    ],
)
def test_the_command_line_refuses_it_with_exit_2_and_one_line_before_any_work(value, message, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["--input", str(SAMPLE), "--output", str(out), "--redact", value]) == 2
    errors = _error_line(capsys)
    assert len(errors) == 1 and message in errors[0], errors
    assert not out.exists()


@pytest.mark.parametrize(
    "line, message",
    [
        ("redact: ''", "--redact '' needs at least one of"),
        ("redact: ','", "--redact ',' needs at least one of"),
        ("redact: phones:UK", "the United Kingdom's is GB"),
        ("redact: secrets,phones:XX", "--redact phones:XX: no such region"),
        ("redact: emails:US", "only phones takes a region"),
    ],
)
def test_a_preset_gets_the_same_refusals(line, message, tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(f"input: [{SAMPLE}]\n{line}\n")
    with pytest.raises(ConfigError) as raised:
        load_job(["--config", str(preset), "--output", str(tmp_path / "o")])
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "o").exists()


def test_a_preset_that_names_kinds_and_a_region_sets_them(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(f"input: [{SAMPLE}]\nredact: secrets, phones:gb\n")
    settings = load_job(["--config", str(preset), "--output", str(tmp_path / "o")]).settings
    assert (settings.redact, settings.redact_region) == (("secrets", "phones"), "GB")


def test_the_help_and_the_docs_name_the_regions(capsys):
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "ISO 3166 code" in text and "GB (not UK)" in text
    page = (ROOT / "docs" / "fine-tuning.md").read_text()
    listed = re.search(r"<!-- phone regions -->(.*?)<!-- /phone regions -->", page, re.DOTALL)
    assert listed, "docs/fine-tuning.md lists the regions of phones:CC"
    assert tuple(re.findall(r"`([A-Z]{2})`", listed.group(1))) == phone_regions()
