"""The shapes of the records convnorm writes besides the normalized ones (no Beam import).

One home for the keys of a drop-metrics record (``drops/``), a dead letter (``dead_letter/``)
and a violation report (``convnorm validate``'s ``violations/``): the per-record steps build
them, the summary reads them, the sinks write them as they are.

They are ``TypedDict``s, not dataclasses: each record is a JSON document, serialized once,
whose keys are documented for users (docs/operations.md, "Outputs"). A ``TypedDict`` is that
dict, so a type checker sees every key a module reads or writes, at no cost per record and
with output bytes unchanged.
"""

from typing import Any, TypedDict

# No ``from __future__ import annotations`` here: TypedDict reads its keys' annotations at
# class creation (which keys are required), and the optional ones come from ``total=False``
# (``NotRequired`` needs Python 3.11; convnorm runs on 3.10).


class _DeadLetterFields(TypedDict):
    source: str
    position: int
    #: One of ``transforms.record.record_steps.DeadLetterReason`` (as plain text).
    reason: str
    detail: str
    #: The raw input as text, cut to ``--dead-letter-raw-limit`` characters.
    raw: str


class DeadLetter(_DeadLetterFields, total=False):
    """A record that could not be processed, and why: the keys of ``_DeadLetterFields``
    always, and ``tokens`` for an example refused for its length (``over_token_limit``)."""

    tokens: int
    #: A conversation assembled from call logs: the calls that made it (``DropMetrics.assembly``).
    assembly: dict[str, Any]


class _DropCounts(TypedDict):
    id: str
    source: str
    position: int
    dropped: int
    #: Messages dropped, by MEM-5 reason (only reasons that occurred).
    drops: dict[str, int]
    healed: int
    messages_in: int
    messages_out: int


class DropMetrics(_DropCounts, total=False):
    """What normalizing one conversation dropped, healed and discarded: the keys of
    ``_DropCounts`` always, these when they have something to say."""

    #: The ledger of fields coercion discarded (transforms.core.ledger), when not empty.
    discarded: dict[str, Any]
    #: Opt-in repairs by kind (``--profile lossless``).
    repairs: dict[str, int]
    #: The reader's and the writer's counted choices (docs/formats-readers-writers.md).
    reader_report: dict[str, int]
    writer_report: dict[str, int]
    #: Parquet values written as null because JSON cannot hold them, by column.
    non_finite_nulled: dict[str, int]
    #: The record continues a conversation stored at the provider (a Responses request with a
    #: ``previous_response_id``): results of calls made there are orphans here.
    partial_conversation: bool
    #: Answers in the conversation that arrived as an event stream cut off before its end
    #: (``assembly.truncated_stream``), written: a sink that is not for training, or
    #: ``--keep-truncated-streams``.
    truncated_stream: int
    #: Sendability violations of the output, by kind (``--check``).
    violations: dict[str, int]
    #: Tokens of the example as the sink wrote it (``--tokens``; transforms.record.tokens).
    tokens: int
    #: ``True`` when the example is over ``--max-example-tokens`` (and kept: ``--over-limit keep``).
    over_token_limit: bool
    #: ``True`` when the normalized conversation has no assistant message (``--tokens``).
    no_assistant_message: bool
    #: A conversation assembled from call-log records: its format and group, the calls that
    #: made it (file, position, call id, start), how many collapsed into it, its branch
    #: (``transforms.calllogs.assemble``).
    assembly: dict[str, Any]
    #: What shaping a training set did (transforms.dataset.training): weights kept, trailing turns trimmed.
    training: dict[str, int]
    #: ``--split``: the split the conversation is in (``train`` or a ``--split`` name).
    split: str
    #: ``--split``: the tool calls in the conversation as written (a split's statistics).
    tool_calls: int
    #: ``--dedupe``: the ids of the conversations collapsed into this one, in input order.
    duplicates: list[str]
    #: ``--examples each``: which of its conversation's examples this is (``k`` of ``n``, ``of`` its id).
    example: dict[str, Any]
    #: The conversation's scores (``metadata.scores``: its labels, one value a name) and its
    #: labels (``metadata.labels``, a correction as its number of messages), for the report's
    #: statistics per split and ``convnorm explain``.
    scores: dict[str, Any]
    labels: list[Any]
    #: ``--chat-template`` with a tokenizer folder: the rendered example's tokens.
    template_tokens: int
    #: ``--redact``: the finds replaced by placeholders, by kind (transforms.dataset.redact).
    redacted: dict[str, int]


class ViolationDetail(TypedDict):
    kind: str
    #: ``None``: the violation is the list itself (not a list).
    index: int | None
    tool_call_id: str | None
    detail: str


class ViolationReport(TypedDict):
    """One conversation checked as it is (``convnorm validate``)."""

    id: str
    source: str
    position: int
    messages: int
    violations: dict[str, int]
    #: The first violations one by one (all are counted in ``violations``).
    details: list[ViolationDetail]
