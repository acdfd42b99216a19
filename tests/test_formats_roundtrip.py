"""Round trips: a writer's output read back by the matching reader gives the same conversation.

``N`` is a normalized flat conversation (what a writer receives). For each pair the property is
``normalize(read(write(N))) == same(N)``, nothing dropped or healed on the way back, where
``same`` states exactly what the target format cannot keep:

- openai-finetune → openai, openai-batch → openai (the whole Batch line): ``same`` = ``N`` with each call's
  arguments in their written form (a string as is, an object as compact JSON, none as
  ``"{}"``). Nothing is moved.
- anthropic → anthropic: ``same`` = ``N`` with the system messages joined by a newline into
  one leading system message (blank ones left out); user and assistant
  messages whose text is blank dropped (blank text is kept only on an assistant message with
  calls, as ``""``); then adjacent user messages, and adjacent assistant messages, merged into
  one (texts joined by a newline, calls concatenated); arguments parsed to objects (none or a
  blank string is ``{}``). Ids are kept (the cases here use ids Anthropic accepts; rewriting the
  others is tested with the writer).
- openai-responses → openai-responses: ``same`` = ``N`` with the system messages joined by a
  newline into one leading system message (blank ones left out: ``instructions``) and
  arguments in their written form (as for OpenAI); an assistant message with calls and no text
  right after an assistant message without calls joins it (items have no turn boundary: the
  reader folds calls into the assistant message before them). Nothing else changes.
- gemini → gemini: ``same`` as for anthropic (system joined into ``systemInstruction``, blank
  turns dropped, adjacent same-role turns merged, arguments as objects); ids are kept as they
  are (Gemini's ids are free text).
- flat → flat: ``same`` = ``N``.

Synthesized ids survive because the writers write them as real ids.

A normalized ``N`` with a result outside the tool block right after its call (MEM-5 keeps such
a result where it is) has no round trip: the provider writers refuse it with
``result_not_adjacent``, exactly when ``convnorm validate`` reports that kind for ``N``, and
never under ``--profile lossless``, which re-attaches displaced results.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from transforms.core.normalize import normalize_conversation  # noqa: E402
from transforms.core.validate import check_sendable  # noqa: E402
from transforms.formats import READERS, WRITERS, FormatError, WriteContext, detect_reader  # noqa: E402
from transforms.repairs.profiles import normalize_with_profile  # noqa: E402

DATA = Path(__file__).parent / "data"
FORMATS = ("openai", "openai-responses", "anthropic", "sharegpt", "gemini", "bedrock-converse")
# (writer, reader, how to find the messages in the written record)
PAIRS = {
    "openai-finetune": ("openai", lambda out: out),
    "openai-batch": ("openai", lambda out: out),  # the reader reads Batch lines
    "anthropic": ("anthropic", lambda out: out),
    "openai-responses": ("openai-responses", lambda out: out),
    "gemini": ("gemini", lambda out: out),
    "bedrock-converse": ("bedrock-converse", lambda out: out),
    "flat": ("flat", lambda out: out),
}
# Refused by the writer (see test_formats_writers.REFUSED): nothing to read back.
REFUSED = {
    ("oa-custom-tool", "anthropic"),
    ("rs-custom-tool-image", "anthropic"),
    ("rs-string-input", "openai-finetune"),
    ("oa-custom-tool", "openai-finetune"),
    ("oa-custom-tool", "gemini"),
    ("rs-custom-tool-image", "gemini"),
    ("oa-custom-tool", "bedrock-converse"),
    ("rs-custom-tool-image", "bedrock-converse"),
    # A Bedrock system tool (nova_grounding) has no definition in any other format.
    *(
        ("bc-server-tool", sink)
        for sink in ("openai-finetune", "openai-batch", "anthropic", "openai-responses", "gemini")
    ),
}


def load(fmt: str) -> list:
    with (DATA / "formats" / f"{fmt}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# --------------------------------------------------------------------------------------------
# What "the same" means, written independently of the writers

PROVIDER_SINKS = ("openai-finetune", "openai-batch", "anthropic", "openai-responses", "gemini", "bedrock-converse")


def not_adjacent(messages: list) -> bool:
    """Does ``convnorm validate`` find a result outside its call's block?"""
    return any(v.kind == "result_not_adjacent" for v in check_sendable(messages))


def args_string(args) -> str:
    if args is None:
        return "{}"
    return args if isinstance(args, str) else json.dumps(args, separators=(",", ":"), ensure_ascii=False)


def args_object(args) -> dict:
    if args is None or (isinstance(args, str) and not args.strip()):
        return {}
    return json.loads(args) if isinstance(args, str) else args


def openai_same(messages: list) -> list:
    out = []
    for m in messages:
        if "tool_calls" in m:
            m = {**m, "tool_calls": [{**c, "args": args_string(c.get("args"))} for c in m["tool_calls"]]}
        out.append(m)
    return out


def anthropic_same(messages: list) -> list:
    systems = [m["content"] for m in messages if m["role"] == "system" and m["content"].strip()]
    out = [{"role": "system", "content": "\n".join(systems)}] if systems else []
    for m in [m for m in messages if m["role"] != "system"]:
        if m["role"] == "tool":
            out.append(m)
            continue
        text = m["content"] if m["content"].strip() else ""
        calls = [{**c, "args": args_object(c.get("args"))} for c in m.get("tool_calls", ())]
        if not text and not calls:
            continue
        if out and out[-1]["role"] == m["role"]:
            previous = out[-1]
            previous["content"] = "\n".join(t for t in (previous["content"], text) if t)
            if calls:
                previous["tool_calls"] = previous.get("tool_calls", []) + calls
            continue
        out.append({"role": m["role"], "content": text, **({"tool_calls": calls} if calls else {})})
    return out


def responses_same(messages: list) -> list:
    systems = [m["content"] for m in messages if m["role"] == "system" and m["content"].strip()]
    out = [{"role": "system", "content": "\n".join(systems)}] if systems else []
    for m in openai_same([m for m in messages if m["role"] != "system"]):
        previous = out[-1] if out else None
        if (
            m["role"] == "assistant"
            and m.get("tool_calls")
            and not m["content"]
            and previous is not None
            and previous["role"] == "assistant"
            and "tool_calls" not in previous
        ):
            # Items have no turns: calls right after an assistant message are its calls.
            out[-1] = {**previous, "tool_calls": m["tool_calls"]}
            continue
        out.append(m)
    return out


def prefill_same(messages: list) -> list:
    """``anthropic_same``, with a final assistant text right-stripped: the Anthropic and
    Converse writers trim a prefill, which their APIs refuse to end in whitespace."""
    out = anthropic_same(messages)
    if out and out[-1]["role"] == "assistant" and not out[-1].get("tool_calls"):
        out[-1] = {**out[-1], "content": out[-1]["content"].rstrip()}
    return out


SAME = {
    "openai-finetune": openai_same,
    "openai-batch": openai_same,
    "anthropic": prefill_same,
    "openai-responses": responses_same,
    "gemini": anthropic_same,
    "bedrock-converse": prefill_same,
    "flat": lambda m: m,
}


def round_trip(sink: str, messages: list, **fields) -> list:
    """Write normalized ``messages`` with ``sink``, read back, normalize: the messages."""
    record = {"id": "r1", "messages": messages, **fields}
    out = WRITERS[sink].write(record, WriteContext("r1", model="test-model"))
    reader, locate = PAIRS[sink]
    result = normalize_conversation(READERS[reader].read(locate(out), "messages").messages)
    assert (result.dropped, result.healed) == (0, 0), "the written record must pair cleanly"
    return result.messages


# --------------------------------------------------------------------------------------------
# Fixtures and real logs

FIXTURES = [(fmt, r) for fmt in FORMATS for r in load(fmt)]
FIXTURE_IDS = [f"{fmt}-{r.get('id') if isinstance(r, dict) else n}" for n, (fmt, r) in enumerate(FIXTURES)]


@pytest.mark.parametrize("sink", sorted(PAIRS))
@pytest.mark.parametrize("fmt,record", FIXTURES, ids=FIXTURE_IDS)
def test_fixture_round_trips(fmt, record, sink):
    rid = record.get("id") if isinstance(record, dict) else None
    conversation = READERS[fmt].read(record, "messages")
    messages = normalize_conversation(conversation.messages).messages
    fields = {k: v for k, v in conversation.fields.items() if k not in ("id", "messages")}
    if (rid, sink) in REFUSED:
        # No round trip to make: the writer refuses the record, and says so.
        with pytest.raises(FormatError):
            round_trip(sink, messages, **fields)
        return
    assert round_trip(sink, messages, **fields) == SAME[sink](messages)


def test_results_are_already_next_to_their_calls_in_the_fixtures():
    # So no fixture is refused for a displaced result, and the OpenAI round trip only
    # stringifies arguments.
    for fmt, record in FIXTURES:
        messages = normalize_conversation(READERS[fmt].read(record, "messages").messages).messages
        assert not not_adjacent(messages), record


def test_toolbench_chains_round_trip_exactly_through_openai():
    # Legacy logs carry string arguments, so the OpenAI round trip is the identity.
    for path in sorted((DATA / "corpora" / "ToolBench").rglob("*.json")):
        generation = json.loads(path.read_text(encoding="utf-8"))["answer_generation"]
        for prefix in generation.get("train_messages") or ():
            messages = normalize_conversation(READERS["openai"].read(prefix, "messages").messages).messages
            assert round_trip("openai-finetune", messages) == messages
            assert round_trip("openai-batch", messages) == messages
            assert round_trip("anthropic", messages) == prefill_same(messages)


@pytest.mark.parametrize("fmt,record", FIXTURES, ids=FIXTURE_IDS)
def test_a_batch_line_read_back_writes_the_same_line(fmt, record):
    # The openai reader carries the line's fields (custom_id, model, tools, ...): writing what
    # it read gives the line back, model and all, and convnorm validate finds nothing in it.
    messages = normalize_conversation(READERS[fmt].read(record, "messages").messages).messages
    fields = {k: v for k, v in READERS[fmt].read(record, "messages").fields.items() if k not in ("id", "messages")}
    try:
        line = WRITERS["openai-batch"].write({"messages": messages, **fields}, WriteContext("conv-1", model="m-1"))
    except FormatError:
        return  # refused (see test_formats_writers.REFUSED)
    conversation = READERS["openai"].read(line, "messages")
    assert check_sendable(conversation.messages) == []
    again = dict(conversation.fields)
    again["messages"] = normalize_conversation(conversation.messages).messages
    assert list(again)[:4] == ["custom_id", "method", "url", "model"]
    assert WRITERS["openai-batch"].write(again, WriteContext(again["custom_id"])) == line


@pytest.mark.parametrize("sink", ["openai-finetune", "openai-batch"])
@pytest.mark.parametrize("fmt,record", FIXTURES, ids=FIXTURE_IDS)
def test_openai_output_validates_as_it_is(fmt, record, sink):
    # What `convnorm validate` does with our own output: auto-detect, read, check as it is.
    messages = normalize_conversation(READERS[fmt].read(record, "messages").messages).messages
    fields = {k: v for k, v in READERS[fmt].read(record, "messages").fields.items() if k not in ("id", "messages")}
    try:
        out = WRITERS[sink].write({"messages": messages, **fields}, WriteContext("r1", model="m"))
    except FormatError:
        return
    reader = detect_reader(out, "messages")
    assert reader is not None and reader.name in ("openai", "flat")
    if any("tool_calls" in m for m in messages) or sink == "openai-batch":
        assert reader.name == "openai"
    assert check_sendable(reader.read(out, "messages").messages) == []


CALL = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1", "name": "f", "args": {"a": 1}}]}
RESULT = {"role": "tool", "content": "r", "tool_call_id": "c1"}
DISPLACED = {
    # The spec's own vector misordered-result-mid-list-left-as-is: a result before its call.
    "before": [{"role": "user", "content": "q"}, RESULT, CALL],
    # MEM-5 counts a call as answered by a result anywhere in the list: after a later turn.
    "after": [{"role": "user", "content": "q"}, CALL, {"role": "user", "content": "still there?"}, RESULT],
}


@pytest.mark.parametrize("sink", PROVIDER_SINKS)
@pytest.mark.parametrize("case", sorted(DISPLACED))
def test_a_displaced_result_is_refused_not_moved(case, sink):
    messages = normalize_conversation(DISPLACED[case]).messages
    assert messages == DISPLACED[case], "MEM-5 keeps the result where it is"
    with pytest.raises(FormatError) as err:
        round_trip(sink, messages)
    assert err.value.reason == "result_not_adjacent"
    assert "--profile lossless" in str(err.value)
    # lossless re-attaches it (a repair it reports); then the record writes, nothing moved.
    repaired = normalize_with_profile(DISPLACED[case], "lossless")
    assert repaired.repairs == {"moved_result": 1}
    assert repaired.messages[1:3] == [CALL, RESULT]
    assert round_trip(sink, repaired.messages) == SAME[sink](repaired.messages)


def test_the_results_of_one_block_keep_their_order():
    # Any order inside the block is adjacent for every provider: written as it is.
    messages = normalize_conversation(
        [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"tool_call_id": "c1", "name": "f"}, {"tool_call_id": "c2", "name": "g"}],
            },
            {"role": "tool", "content": "2", "tool_call_id": "c2"},
            {"role": "tool", "content": "1", "tool_call_id": "c1"},
        ]
    ).messages
    for sink in PROVIDER_SINKS:
        back = round_trip(sink, messages)
        assert [m.get("tool_call_id") for m in back[2:]] == ["c2", "c1"]
        assert back == SAME[sink](messages)


# --------------------------------------------------------------------------------------------
# Any normalized conversation

IDS = st.sampled_from(["c1", "c2", "c3", "toolu_4", "call_5"])
TEXT = st.sampled_from(["", " ", "hi", "x\ny", "é ü", "[error] bad", "[error] "])
#: A conversation ending on an assistant text with trailing whitespace (TEXT draws it only
#: now and then: which examples run differs between xdist workers).
PREFILL = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "[error] "}]
OBJECT_ARGS = st.one_of(
    st.none(),
    st.just(""),
    st.dictionaries(st.sampled_from(["a", "b", "ü"]), st.one_of(st.integers(), st.text(max_size=3)), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2).map(json.dumps),
)
ANY_ARGS = st.one_of(OBJECT_ARGS, st.sampled_from(["print(1)", "[1, 2]", "{not json", '"{\\"x\\": 1}"']), st.integers())


def raw_conversations(args):
    """Flat lists with every defect the core repairs, displaced results included."""
    call = st.fixed_dictionaries({"tool_call_id": IDS, "name": st.sampled_from(["f", "g"])}, optional={"args": args})
    message = st.one_of(
        st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]), "content": TEXT}),
        st.fixed_dictionaries(
            {"role": st.just("assistant"), "content": TEXT, "tool_calls": st.lists(call, min_size=1, max_size=3)}
        ),
        st.fixed_dictionaries({"role": st.just("tool"), "content": TEXT, "tool_call_id": IDS}),
    )
    return st.lists(message, max_size=10)


def conversations(args):
    """Normalized under the default ``spec`` profile (MEM-5), as a writer receives them."""
    return raw_conversations(args).map(lambda ms: normalize_conversation(ms).messages)


def _unwritable(sink: str, messages: list) -> bool:
    """Does the writer refuse ``messages``? Only for the reasons it may; a displaced result
    exactly when ``convnorm validate`` reports one (the flat writer never refuses)."""
    displaced = sink != "flat" and not_adjacent(messages)
    try:
        WRITERS[sink].write({"messages": messages}, WriteContext("r1", model="m"))
    except FormatError as err:
        if displaced:
            assert err.reason == "result_not_adjacent"
        elif sink in ("bedrock-converse", "anthropic", "gemini") and err.reason == "leading_assistant":
            # Converse, Anthropic and Gemini want a user message first (blank messages write nothing).
            written = [m for m in messages if m["role"] != "system" and (m["content"].strip() or m.get("tool_calls"))]
            assert written[0]["role"] == "assistant"
        else:
            assert err.reason in ("empty_conversation", "no_assistant_message")
        return True
    assert not displaced, "a displaced result must be refused, not moved"
    return False


@given(conversations(ANY_ARGS), st.sampled_from(["openai-finetune", "openai-batch", "openai-responses", "flat"]))
def test_any_conversation_round_trips_through_openai(messages, sink):
    if _unwritable(sink, messages):
        return
    assert round_trip(sink, messages) == SAME[sink](messages)


@given(conversations(OBJECT_ARGS), st.sampled_from(["anthropic", "gemini", "bedrock-converse"]))
@example(PREFILL, "anthropic")
@example(PREFILL, "bedrock-converse")
@example(PREFILL, "gemini")
def test_any_conversation_round_trips_through_anthropic_and_gemini(messages, sink):
    if _unwritable(sink, messages):
        return
    assert round_trip(sink, messages) == SAME[sink](messages)


@given(raw_conversations(OBJECT_ARGS), st.sampled_from(PROVIDER_SINKS))
def test_lossless_output_is_never_refused_for_placement(raw, sink):
    messages = normalize_with_profile(raw, "lossless").messages
    assert not not_adjacent(messages)
    if _unwritable(sink, messages):
        return
    expected = SAME[sink](messages)
    if sink in ("anthropic", "bedrock-converse"):
        # Re-keyed ids (``c1~2``) are outside Anthropic's id alphabet: the writer rewrites
        # them (``c1_2``; no generated id can collide with that).
        # Only the ids: a '~' inside arguments or text is kept as it is.
        expected = [_anthropic_ids(m) for m in expected]
    assert round_trip(sink, messages) == expected


def _anthropic_ids(message: dict) -> dict:
    out = dict(message)
    if isinstance(out.get("tool_call_id"), str):
        out["tool_call_id"] = out["tool_call_id"].replace("~", "_")
    if out.get("tool_calls"):
        out["tool_calls"] = [
            {**c, "tool_call_id": c["tool_call_id"].replace("~", "_")} if isinstance(c.get("tool_call_id"), str) else c
            for c in out["tool_calls"]
        ]
    return out
