"""What the dataset-level steps need of each conversation, made by the per-record step (no Beam).

``--dedupe`` and ``--split`` act on the whole dataset (``pipeline.graph.shard_dataset``: a
shuffle), but what they look at is one conversation's, computed where it is normalized:

- **content keys** (``--dedupe exact|prefix``): a hash of the messages as the writer gets them
  (after the weights and the trailing turns, ``transforms.dataset.training``) and the record's
  tool definitions. Ids and every other field of the record are left aside: two
  conversations with the same tools and messages are the same training example. ``full`` is
  the hash of them all; ``prefixes`` (``prefix`` only) the hashes of the tools and each of its
  shorter runs of first messages, so that a conversation whose ``full`` is among another's
  ``prefixes`` is a prefix of it;
- **the split** (``--split eval=0.05[,test=0.05]``): a hash of the group key (``--split-by``, a
  dotted path into the input record; the record id without it) and ``--split-seed``, as a
  number in [0, 1), against the splits' cumulative shares; the rest is ``train``. The same key
  and seed always give the same split: adding data never moves a conversation, and every
  conversation of a group (a user, a session) lands on one side.

The keys travel in the drop metrics under ``CONTENT_KEYS`` (a private key the dataset step
removes before ``drops/`` is written); the split is the drop metrics' ``split``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from transforms.core.jsontext import canonical_json, canonical_lines

#: The drop metrics' private key of a conversation's content keys: ``[full, prefixes]``.
CONTENT_KEYS = "_content_keys"
#: A ``trl-dpo`` candidate's claim for pairs across conversations (``transforms.record.pairs``):
#: private to the pairing step like ``CONTENT_KEYS``, never written.
PAIR_CLAIM = "_pair_claim"
#: The drop metrics' keys no output holds.
PRIVATE_KEYS = (CONTENT_KEYS, PAIR_CLAIM)
#: The split every conversation not drawn into another is in.
TRAIN = "train"
DEDUPE_CHOICES = ("none", "exact", "prefix")
#: A split's name: it becomes an output directory beside ``normalized/`` (which holds ``train``).
SPLIT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
#: Names a split cannot take: the run's own outputs and files.
RESERVED_NAMES = frozenset({TRAIN, "normalized", "drops", "dead_letter", "violations", "summary", "report"})
#: The content keys' bytes: 16 (as hex), far past any chance collision at dataset sizes.
_LINK_BYTES = 16
#: A prefix's link as ``content_keys`` keeps it: a whole SHA-256 digest (no slice made per
#: message); its first ``_LINK_BYTES`` are its key.
LINK_SIZE = 32


def content_keys(messages: list[Any], tools: Any, with_prefixes: bool) -> list[Any]:
    """``[full, prefixes]``: the hash of the tools and every message (hex), and (``with_prefixes``)
    the hash of the tools and the first 1, 2, ... messages, ``LINK_SIZE`` bytes each, joined: a
    conversation's ``full`` is among another's prefixes when its messages begin the other's.
    Without prefixes (``exact``) ``full`` is one hash of the tools and the messages whole (a
    hash and a serialization per message cost ``exact`` about half of what it added to a plain
    run), another key than ``prefix``'s, which only ``prefix`` runs compare."""
    if not with_prefixes:
        # JSON text holds no NUL byte: the two texts cannot run into each other.
        whole = b"whole\0" + canonical_json(tools) + b"\0" + canonical_json(messages)
        return [hashlib.sha256(whole).digest()[:_LINK_BYTES].hex(), b""]
    # One running hash of the tools and the messages, each message's text and a newline (which
    # compact JSON text never holds); a prefix's link is the digest so far (``digest`` leaves
    # the hash going on: no copy, no new hash per message). Each message's text from one
    # ``map`` (C), one update and one digest per message in a comprehension (no call to
    # append), bound methods: this loop runs once per message of a ``prefix`` run, about a
    # tenth of its CPU. ``update`` gives None: the test only orders the update before the digest.
    texts = canonical_lines(messages)
    running = hashlib.sha256(b"tools\0" + canonical_json(tools) + b"\n")
    update, digest = running.update, running.digest
    links = [digest() for text in texts if update(text) is None]
    # The digest after the last message is ``full``; those after 1, ..., n - 1 are the links
    # (none for the tools alone).
    full = links.pop() if links else digest()
    # The prefixes' links as one bytes value, 32 bytes each (``prefix_keys``): a text per
    # message made most of what a conversation's claim held and shuffled.
    return [full[:_LINK_BYTES].hex(), b"".join(links)]


def prefix_keys(prefixes: bytes) -> list[str]:
    """``content_keys``' prefixes as content keys (the text a ``full`` key is), shortest first."""
    return [prefixes[i : i + _LINK_BYTES].hex() for i in range(0, len(prefixes), LINK_SIZE)]


def parse_splits(text: str) -> tuple[tuple[tuple[str, float], ...], list[str]]:
    """``eval=0.05,test=0.05`` -> ``((name, share), ...)`` and the problems found (for a person)."""
    splits: list[tuple[str, float]] = []
    problems = []
    for part in text.split(","):
        name, equals, share_text = part.strip().partition("=")
        try:
            share = float(share_text)
        except ValueError:
            share = -1.0
        if not equals or not (0 < share < 1):
            problems.append(f"--split {part.strip()!r} is not NAME=SHARE with 0 < SHARE < 1 (e.g. eval=0.05)")
        elif not SPLIT_NAME.match(name) or name in RESERVED_NAMES:
            problems.append(
                f"--split name {name!r}: lower-case letters, digits and _, starting with a letter, "
                f"and none of {', '.join(sorted(RESERVED_NAMES))} (train is what the others leave)"
            )
        elif any(name == other for other, _ in splits):
            problems.append(f"--split names {name!r} twice")
        else:
            splits.append((name, share))
    if not problems and sum(share for _, share in splits) >= 1:
        problems.append("--split shares must leave something for train (their sum is 1 or more)")
    return tuple(splits), problems


def split_of(key: str, seed: int, splits: tuple[tuple[str, float], ...]) -> str:
    """The split of a conversation whose group key is ``key``: deterministic in (key, seed)."""
    digest = hashlib.sha256(f"{seed}\0{key}".encode("utf-8", "surrogatepass")).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    edge = 0.0
    for name, share in splits:
        edge += share
        if point < edge:
            return name
    return TRAIN


def group_key(record: Any, path: str | None, record_id: str) -> tuple[str, bool]:
    """The text a record's split is drawn from: the value at ``path`` (``--split-by``), or the
    record id (``path`` is None, or the record has no value there: ``False``)."""
    if path is None:
        return record_id, True
    value = record
    for step in path.split("."):
        if not isinstance(value, dict) or value.get(step) is None:
            return record_id, False
        value = value[step]
    return (value if isinstance(value, str) else canonical_json(value).decode("utf-8", "replace")), True


def split_output(name: str) -> str:
    """The output directory of a split's records: ``normalized`` for ``train``, else its name."""
    return "normalized" if name == TRAIN else name


def output_names(splits: tuple[tuple[str, float], ...]) -> tuple[str, ...]:
    """The output directories of the splits' records, ``normalized`` first."""
    return ("normalized", *(name for name, _ in splits))
