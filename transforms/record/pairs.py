"""``trl-dpo`` pairs across conversations, as plain functions: the claims a shard's candidates
make (a prompt key, a preference, a continuation: no record), the pairs each prompt's claims
make, and a shard's spilled candidates shaped by their verdicts. ``pipeline.graph.shard_pairs``
brings every shard's claims together by prompt key (one shuffle) and writes each shard's
outputs from its spill file, as ``--dedupe`` does (``transforms.record.dedupe``).

A *candidate* is a conversation the ``trl-dpo`` writer could not pair on its own (no correction,
no rejected output) whose labels judge a continuation (``transforms.formats.trl._candidate``):
the writer wrote its row with its continuation on the rejected side and none chosen, and its
claim ``(prompt key, preference, label name, continuation)``. The prompt key hashes the prompt
and tools as written (with ``--split``, within the conversation's split), so only conversations
whose prompts are the same pair: regenerations
(the branches ``<id>#branch<n>`` of one call-log group; records logged with one history) and
score differences between continuations of one prompt.

Of one prompt's candidates, the best (highest preference, then first in input order) is the
chosen side: every candidate that says less pairs with it, its row written with the best's
continuation as chosen (``PairedWith``); the best is refused, ``chosen_in_pairs``, naming the
rows it is in (``ChosenIn``); a candidate alone, one as good as the best, or one that says the
same as the best is refused (``no_pair``, ``tie``, ``same_continuation``: ``Unpaired``). The
conversations of one call-log group (a conversation assembled from call logs and its branches)
are decided together, apart from whole records: one alone with its prompt while its group holds
others is refused ``prompts_differ`` (its regenerations continue another history). Every
candidate gets exactly one verdict: each record read ends in one place. Determinism: the
decisions depend on the claims and places only.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, NamedTuple, Union

from transforms.core.jsontext import dumps_line, parse_json
from transforms.dataset.dataset_keys import PAIR_CLAIM, TRAIN
from transforms.formats._labels import same_output
from transforms.record.dedupe import KEPT, LETTERS, Conversation, Order
from transforms.record.record_settings import Settings

#: How a pair across conversations was decided: thumbs (a true one above a false one), or scores.
REGENERATION, SCORE_DIFFERENCE = "regeneration", "score_difference"


class PairClaim(NamedTuple):
    """What the pairing decides on for one candidate: its prompt key, place and continuation."""

    order: Order
    id: Any
    key: str
    preference: float
    label: str
    #: The judged continuation as the row writes it, as JSON text (``dumps_line``).
    continuation: bytes
    #: The call-log group of a conversation assembled from call logs (its id without
    #: ``#branch<n>``): its claims are decided together. ``None``: a whole record.
    group: str | None = None

    @property
    def route(self) -> str:
        """What its claim is brought together by: its group, else its prompt."""
        return self.key if self.group is None else self.group

    @property
    def shard(self) -> int:
        return self.order[0]


class PairedWith(NamedTuple):
    """Verdict: the candidate at ``order`` is the rejected side of a pair with ``chosen_id``."""

    order: Order
    chosen_id: Any
    chosen: bytes  # the chosen continuation, as JSON text
    kind: str
    label: str


class ChosenIn(NamedTuple):
    """Verdict: the candidate at ``order`` is the chosen side of the rows ``rejected_ids``."""

    order: Order
    rejected_ids: list[Any]


class Unpaired(NamedTuple):
    """Verdict: the candidate at ``order`` is in no pair, for ``reason``."""

    order: Order
    reason: str
    detail: str


PairVerdict = Union[PairedWith, ChosenIn, Unpaired]


def batch_pair_claims(shard: int, start: int, metrics: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A batch's candidates (their drop metrics) -> their claims as plain tuples (``PairClaim``'s
    fields), in input order; a conversation that is no candidate makes none."""
    out = []
    for offset, m in enumerate(metrics):
        claim = m.get(PAIR_CLAIM)
        if claim is not None:
            key, *rest = claim
            split = m.get("split", TRAIN)
            # A group's conversations (a call-log group and its branches) are decided together.
            group = f"{split}\0group\0{_BRANCH.sub('', str(m['id']))}" if "assembly" in m else None
            # With --split, only conversations of one split pair: a pair never spans two.
            out.append(((shard, start, offset), m["id"], f"{split}\0{key}", *rest, group))
    return out


#: A branch's suffix on its group's id (``transforms.calllogs.assemble``).
_BRANCH = re.compile(r"#branch\d+$")


def decide_routed(claims: list[PairClaim]) -> Iterator[tuple[int, PairVerdict]]:
    """The claims brought together by one route (a prompt, or a call-log group) -> a verdict for
    each, by shard: each prompt's candidates decided together (``decide_pairs``); in a group, a
    candidate alone with its prompt while the group holds others is refused ``prompts_differ``
    (its regenerations do not continue the same history)."""
    by_prompt: dict[str, list[PairClaim]] = {}
    for claim in claims:
        by_prompt.setdefault(claim.key, []).append(claim)
    grouped = len(by_prompt) > 1 and claims[0].group is not None
    for key in sorted(by_prompt):
        for shard, verdict in decide_pairs(by_prompt[key]):
            if grouped and isinstance(verdict, Unpaired) and len(by_prompt[key]) == 1:
                others = sorted(str(c.id) for c in claims if c.key != key)
                verdict = Unpaired(
                    verdict.order, "prompts_differ", f"the group's {', '.join(others)} have another prompt"
                )
            yield shard, verdict


def decide_pairs(claims: list[PairClaim]) -> Iterator[tuple[int, PairVerdict]]:
    """One prompt's candidates -> a verdict for each, by shard (see the module's docstring)."""
    ranked = sorted(claims, key=lambda c: (-c.preference, c.order))
    best, rest = ranked[0], ranked[1:]
    if not rest:
        yield best.shard, Unpaired(best.order, "no_pair", "no other conversation has its prompt")
        return
    kind = REGENERATION if {c.preference for c in ranked} <= {0.0, 1.0} else SCORE_DIFFERENCE
    rejected = []
    for claim in sorted(rest, key=lambda c: c.order):
        if claim.preference == best.preference:
            yield claim.shard, Unpaired(claim.order, "tie", f"its labels say as much as those of {best.id}")
        elif same_output(parse_json(claim.continuation), parse_json(best.continuation)):
            yield claim.shard, Unpaired(claim.order, "same_continuation", f"it says the same as {best.id}")
        else:
            rejected.append(claim.id)
            yield claim.shard, PairedWith(claim.order, best.id, best.continuation, kind, best.label)
    if rejected:
        yield best.shard, ChosenIn(best.order, rejected)
    else:
        yield best.shard, Unpaired(best.order, "no_pair", "the other conversations of its prompt say as much")


def shape_pair(conversation: Conversation, verdict: Any, settings: Settings) -> tuple[str, Any]:
    """A spilled conversation and its verdict -> ``(KEPT, the pair row)`` or ``(LETTERS, its
    dead letter)``; a conversation that is no candidate (a pair of its own) is kept as it is."""
    if verdict is None:
        return KEPT, conversation
    metrics = dict(conversation.metrics)
    if isinstance(verdict, PairedWith):
        record = dict(conversation.item) if isinstance(conversation.item, dict) else None
        if record is None:
            record = parse_json(conversation.line)
        record["chosen"] = parse_json(verdict.chosen)
        line = dumps_line(record)
        metrics["pair"] = {"kind": verdict.kind, "label": verdict.label, "chosen": verdict.chosen_id}
        metrics["writer_report"] = {"pairs_from": {verdict.kind: 1}}
        item = record if isinstance(conversation.item, dict) else line
        return KEPT, conversation._replace(metrics=metrics, item=item, line=line)
    if isinstance(verdict, ChosenIn):
        ids = ", ".join(str(i) for i in verdict.rejected_ids)
        reason, detail = "chosen_in_pairs", f"its answer is the chosen side of the pairs written as {ids}"
    else:
        reason, detail = verdict.reason, verdict.detail
    line = conversation.line if conversation.line is not None else dumps_line(conversation.item)
    raw = line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
    letter = {
        "source": metrics["source"],
        "position": metrics["position"],
        "reason": "unwritable",
        "detail": f"{settings.sink}: {reason}: {detail}",
        # The candidate's row as written (the input's text is not kept past the step).
        "raw": raw[: settings.raw_limit],
        "id": metrics["id"],
    }
    if "assembly" in metrics:  # assembled from call logs: its calls, for explain (and its group's)
        letter["assembly"] = metrics["assembly"]
    return LETTERS, letter
