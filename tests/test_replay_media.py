"""Media kept in every sink that can carry them (transforms.formats.media): converted between
encodings where exact, written where the placeholder stood; where a sink cannot, the
placeholder stays and is counted in the ledger (tests/data/replay/media.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sdk_checks

from transforms.record.inputs import RawRecord
from transforms.record.record_settings import Settings
from transforms.record.records import process_record

RECORDS = {
    r["id"]: r for r in map(json.loads, (Path(__file__).parent / "data/replay/media.jsonl").read_text().splitlines())
}
PNG = RECORDS["an-base64-image"]["messages"][0]["content"][0]["source"]["data"]
WAV = RECORDS["oa-image-url-audio"]["messages"][0]["content"][2]["input_audio"]["data"]
PDF = RECORDS["gm-inline-pdf-and-file-uri"]["contents"][0]["parts"][0]["inlineData"]["data"]


def run(record_id: str, sink: str, **settings):
    raw = RawRecord("media.jsonl", 0, json.dumps(RECORDS[record_id]).encode())
    outcome = process_record(raw, Settings(sink=sink, model="m", max_tokens=100, **settings))
    assert outcome.dead_letter is None, outcome.dead_letter
    return outcome.record, outcome.metrics


def test_an_anthropic_image_comes_back_as_it_was():
    body, metrics = run("an-base64-image", "anthropic")
    assert body["messages"][0]["content"] == RECORDS["an-base64-image"]["messages"][0]["content"]
    assert "discarded" not in metrics


@pytest.mark.parametrize(
    "sink,where,expected",
    [
        ("gemini", lambda b: b["contents"][0]["parts"][0], {"inlineData": {"mimeType": "image/png", "data": PNG}}),
        (
            "bedrock-converse",
            lambda b: b["messages"][0]["content"][0],
            {"image": {"format": "png", "source": {"bytes": PNG}}},
        ),
        (
            "openai-batch",
            lambda b: b["body"]["messages"][0]["content"][0],
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ),
        (
            "openai-responses",
            lambda b: b["input"][0]["content"][0],
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
        ),
    ],
)
def test_a_base64_image_converts_exactly_to_every_provider(sink, where, expected):
    body, metrics = run("an-base64-image", sink)
    assert where(body) == expected
    assert "discarded" not in metrics


@pytest.mark.parametrize("sink", ["openai-finetune", "sharegpt"])
def test_a_sink_without_media_keeps_the_placeholder_counted(sink):
    body, metrics = run("an-base64-image", sink)
    assert "[image]" in json.dumps(body) and PNG not in json.dumps(body)
    assert metrics["discarded"] == {"media_image": {"fields": 1, "chars": 0}}


def test_media_drop_keeps_placeholders_counted():
    body, metrics = run("an-base64-image", "anthropic", media="drop")
    assert body["messages"][0]["content"][0] == {"type": "text", "text": "[image]\nWhat is in this image?"}
    assert metrics["discarded"] == {"media_image": {"fields": 1, "chars": 0}}


def test_a_web_url_image_and_wav_audio():
    # Anthropic takes the image by URL, has no audio block: that placeholder stays, counted.
    body, metrics = run("oa-image-url-audio", "anthropic")
    content = body["messages"][0]["content"]
    url = RECORDS["oa-image-url-audio"]["messages"][0]["content"][1]["image_url"]["url"]
    assert content == [
        {"type": "text", "text": "Describe the photo, then transcribe the clip."},
        {"type": "image", "source": {"type": "url", "url": url}},
        {"type": "text", "text": "[audio]"},
    ]
    assert metrics["discarded"] == {"media_audio": {"fields": 1, "chars": 0}}
    # Gemini takes the wav bytes inline; a URL has no MIME type, which fileData requires.
    body, metrics = run("oa-image-url-audio", "gemini")
    assert body["contents"][0]["parts"] == [
        {"text": "Describe the photo, then transcribe the clip.\n[image]"},
        {"inlineData": {"mimeType": "audio/wav", "data": WAV}},
    ]
    assert metrics["discarded"] == {"media_image": {"fields": 1, "chars": len(url)}}


def test_gemini_inline_pdf_and_file_uri():
    source = RECORDS["gm-inline-pdf-and-file-uri"]["contents"][0]["parts"]
    body, _ = run("gm-inline-pdf-and-file-uri", "gemini")
    assert body["contents"][0]["parts"] == source  # both parts back as they were, the fileUri too
    body, metrics = run("gm-inline-pdf-and-file-uri", "anthropic")
    assert body["messages"][0]["content"][0] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
    }
    assert metrics["discarded"] == {
        "media_file": {"fields": 1, "chars": len("gs://cloud-samples-data/video/animals.mp4")}
    }


def test_flat_carries_media_only_when_asked_and_replays_them_in_a_second_run():
    plain, metrics = run("an-base64-image", "flat")
    assert "media" not in plain["messages"][0] and metrics["discarded"] == {"media_image": {"fields": 1, "chars": 0}}
    kept, metrics = run("an-base64-image", "flat", media="keep")
    assert kept["messages"][0]["media"][0]["data"] == PNG and "discarded" not in metrics
    assert {k: v for k, v in kept["messages"][0].items() if k != "media"} == plain["messages"][0]
    direct, _ = run("an-base64-image", "gemini")
    outcome = process_record(RawRecord("flat.jsonl", 0, json.dumps(kept).encode()), Settings(sink="gemini"))
    assert outcome.record["contents"] == direct["contents"]


@pytest.mark.slow  # the first use of an SDK imports it (about a second or more)
def test_bodies_with_media_validate_with_the_sdk_types():
    for module in ("anthropic", "google.genai", "openai", "botocore"):
        sdk_checks.needs(module)
    for record_id in sorted(RECORDS):
        assert sdk_checks.anthropic_errors(run(record_id, "anthropic")[0]) == [], record_id
        assert sdk_checks.gemini_errors(run(record_id, "gemini")[0]) == [], record_id
        assert sdk_checks.openai_chat_errors(run(record_id, "openai-batch")[0]["body"]) == [], record_id
        assert sdk_checks.responses_errors(run(record_id, "openai-responses")[0]) == [], record_id
        assert sdk_checks.bedrock_errors(run(record_id, "bedrock-converse")[0]) == [], record_id
