"""``--redact secrets,emails,phones``: secrets and personal data replaced by typed placeholders
(no Beam import; opt-in, after the MEM-5 core, before the writer).

Agent logs carry API keys, bearer tokens, e-mail addresses and phone numbers. With ``--redact``
every text of a conversation's messages (contents, tool-call arguments, tool results) is
searched and each find replaced by ``[REDACTED:<kind>]``:

- ``secrets``: the regex detectors of Yelp's ``detect-secrets`` (AWS, GitHub, GitLab, Slack,
  Stripe, OpenAI, SendGrid, Twilio, JSON Web Tokens, basic-auth URLs, ...; its entropy and
  keyword heuristics are left out: they flag ordinary words), plus PEM private-key blocks,
  ``Bearer`` tokens, AWS secret access keys assigned to their name, quoted or not
  (``aws_secret_access_key=...``, ``AWS_SECRET_ACCESS_KEY: ...``, ``"SecretAccessKey": "..."``),
  and OpenAI's project, service-account and admin keys whole (``sk-proj-...``,
  ``sk-svcacct-...``, ``sk-admin-...``, with or without the ``T3BlbkFJ`` marker detect-secrets
  needs). The kind is the detector's (``aws_access_key``, ``github_token``, ...);
- ``emails``: addresses (``name@domain.tld``), kind ``email``;
- ``phones``: Google's ``phonenumbers`` matcher: numbers written in international form
  (``+1 650 253 0000``); ``phones:CC`` also the national numbers of region ``CC``
  (``phones:US``: ``(415) 555-2671``), ``CC`` one of ``phone_regions()`` (``phonenumbers``'
  two-letter ISO 3166 codes: the United Kingdom is ``GB``). Kind ``phone``.

JSON stays valid: arguments that are JSON text are parsed, their strings redacted, and written
back compact (only when something was found); an object's strings are redacted in place (a
copy). The placeholders hold no quote or backslash. Each find is counted by kind (drops/
``redacted``, summary.json ``redacted``). The detectors are the optional extra ``redact``.

Beyond the texts, everything a record writes (``Redaction``, called by the run step): ids by
``id_placeholder`` (the placeholder plus a stable hash of the find: deterministic, distinct,
a call and its result still paired), the record's other fields (``redact_fields``), names
counted by (``redact_names``), an assembled conversation's calls (``redact_assembly``),
reasoning and media carried around the core (``redact_reasoning``: a signed one holding a
find cannot change, it is left out and counted ``SIGNED_REASONING_LEFT_OUT``), a call log's
pieces before the assembly (``redact_piece``), and a dead letter's raw text and detail
(``transforms.record.record_steps.dead_letter``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Any, Callable, NamedTuple

from transforms.core.jsontext import compact_json, parse_json
from transforms.core.ledger import OPAQUE_KEYS

#: ``--redact`` kinds and the module each needs.
KINDS = {"secrets": "detect_secrets", "emails": None, "phones": "phonenumbers"}
EXTRA = "pip install -e '.[redact]' in convnorm's checkout"
#: Codes people give for a region that are not its ISO 3166 code (the EU's own abbreviations):
#: ``phones:UK`` would match no national number at all.
_NOT_ISO = {"UK": ("the United Kingdom", "GB"), "EL": ("Greece", "GR")}

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)
_BEARER = re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{16,})")
#: An AWS secret access key (40 base64 characters) assigned to its name, in the forms of the
#: credentials file, env files, YAML, shell, JSON (escaped too) and ``aws configure set``:
#: detect-secrets finds only a quoted value after ``aws``, so not ``AWS_SECRET_ACCESS_KEY=...``
#: nor the ``SecretAccessKey`` of ``aws sts`` output. The value must end where the key ends: a
#: longer token is something else.
_AWS_SECRET_NAME = r"(?:aws[_.-]?secret[_.-]?key|(?:aws[_.-]?)?secret[_.-]?access[_.-]?key)"
_AWS_SECRET = re.compile(
    rf"(?i)(?<![a-z0-9]){_AWS_SECRET_NAME}"
    r"\\?[\"']?(?:\s*(?:=>|[:=])\s*|\s+)\\?[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
#: A JSON key naming an AWS secret access key, and a value that is one (parsed JSON is redacted
#: value by value: the name is no longer in the text).
_AWS_SECRET_KEY = re.compile(rf"(?i)(?:.*[^a-z0-9])?{_AWS_SECRET_NAME}")
_AWS_SECRET_VALUE = re.compile(r"\s*[A-Za-z0-9/+]{40}\s*")
#: OpenAI's project, service-account and admin keys (and the ``sk-None-`` user keys), whole:
#: a prefix, then a random body of ``[A-Za-z0-9_-]`` (48 to 156 characters seen; 40 or more
#: here) holding a capital, a small letter and a digit. gitleaks and trufflehog need the
#: ``T3BlbkFJ`` marker inside, and detect-secrets' pattern stops at the first ``-`` or ``_``
#: after it (the key's tail left in clear); here the prefix and the body's length and letters
#: decide. Words and slugs stay: ``sk-learn``, ``task-proj-x``, ``sk-proj-frontend-tests``.
_OPENAI_KEY = re.compile(
    r"(?<![A-Za-z0-9])sk-(?:proj|svcacct|service|admin|None)-"
    r"(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])[A-Za-z0-9_-]{40,}"
)
#: detect-secrets detectors that are not secrets (a public IP address) or not spans (a key's header).
_LEFT_OUT = frozenset({"IPPublicDetector", "PrivateKeyDetector"})
#: A detector's first group is the secret when it is at least this long (else: its whole match).
_GROUP_MIN = 8


def placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def phone_regions() -> tuple[str, ...]:
    """The regions ``phones:CC`` takes: every one ``phonenumbers`` has a numbering plan for
    (two-letter ISO 3166 codes, sorted). Needs the redact extra."""
    import phonenumbers

    return tuple(sorted(phonenumbers.SUPPORTED_REGIONS))


def region_problem(region: str) -> str | None:
    """Why ``phones:<region>`` cannot work (the region upper-case), or None. Needs the redact extra."""
    regions = phone_regions()
    if region in regions:
        return None
    if region in _NOT_ISO:
        name, code = _NOT_ISO[region]
        return f"--redact phones:{region}: {region} is no region code; {name}'s is {code} (phones:{code})"
    return (
        f"--redact phones:{region}: no such region; phones:CC takes a two-letter ISO 3166 code with a "
        f"numbering plan ({', '.join(r for r in ('US', 'GB', 'DE', 'FR', 'IN', 'JP') if r in regions)}, ...: "
        f"{len(regions)} in all, listed in docs/fine-tuning.md)"
    )


def parse_kinds(text: str) -> tuple[tuple[str, ...], str | None, list[str]]:
    """``secrets,emails,phones:US`` -> (kinds, phone region or None, problems for a person).

    Refused: no kind at all (``''``, ``','``), an unknown kind, a region on another kind, two
    regions, a region ``phonenumbers`` does not have (``phones:UK``: it is GB), a missing extra."""
    kinds: list[str] = []
    region: str | None = None
    problems = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, value = part.partition(":")
        value = value.strip().upper()
        if name not in KINDS:
            problems.append(f"unknown --redact {name!r}; known: {', '.join(KINDS)} (phones:CC for a region's numbers)")
            continue
        if value and name != "phones":
            problems.append(f"--redact {part!r}: only phones takes a region (phones:US)")
            continue
        if value and region not in (None, value):
            problems.append(f"--redact takes one phone region, not phones:{region} and phones:{value}")
        region = region or value or None
        if name not in kinds:
            kinds.append(name)
    if not kinds and not problems:
        problems.append(
            f"--redact {text!r} needs at least one of {', '.join(KINDS)} (comma-separated; phones:CC for a "
            "region's numbers)"
        )
    for name in kinds:
        module = KINDS[name]
        if module is not None:
            try:
                __import__(module)
            except ImportError:
                problems.append(f"--redact {name} needs {module}: {EXTRA}")
                continue
        if name == "phones" and region is not None:
            problem = region_problem(region)
            if problem:
                problems.append(problem)
    return tuple(kinds), region, problems


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


@functools.lru_cache(maxsize=1)
def _secret_patterns() -> tuple[tuple[str, Any], ...]:
    """(kind, regex) of detect-secrets' regex detectors, then ours."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    found: list[tuple[str, Any]] = []
    detectors: dict[str, Any] = get_mapping_from_secret_type_to_class()
    for secret_type, cls in sorted(detectors.items()):
        if issubclass(cls, RegexBasedDetector) and cls.__name__ not in _LEFT_OUT:
            found += [(_slug(secret_type), pattern) for pattern in cls().denylist]
    # Ours first: on the same span the first detector names the kind.
    ours = (("aws_secret_access_key", _AWS_SECRET), ("openai_token", _OPENAI_KEY))
    return (("private_key", _PRIVATE_KEY), ("bearer_token", _BEARER), *ours, *found)


def _spans_of(pattern: Any, text: str) -> list[tuple[int, int]]:
    spans = []
    for match in pattern.finditer(text):
        if match.re.groups and match.group(1) and len(match.group(1)) >= _GROUP_MIN:
            spans.append(match.span(1))
        elif match.group(0):
            spans.append(match.span(0))
    return spans


def _finds(text: str, kinds: tuple[str, ...], region: str | None) -> list[tuple[int, int, str]]:
    finds: list[tuple[int, int, str]] = []
    if "secrets" in kinds:
        for kind, pattern in _secret_patterns():
            finds += [(start, end, kind) for start, end in _spans_of(pattern, text)]
    if "emails" in kinds and "@" in text:
        finds += [(m.start(), m.end(), "email") for m in _EMAIL.finditer(text)]
    if "phones" in kinds and any(c.isdigit() for c in text):
        import phonenumbers

        finds += [(m.start, m.end, "phone") for m in phonenumbers.PhoneNumberMatcher(text, region or "ZZ")]
    return finds


#: Texts up to this long have their finds remembered (``_remembered_finds``).
_REMEMBERED_CHARS = 2000


@functools.lru_cache(maxsize=4096)
def _remembered_finds(text: str, kinds: tuple[str, ...], region: str | None) -> tuple[tuple[int, int, str], ...]:
    """``_finds`` of a short text, remembered: keys, tags and ids repeat in every record, and
    the writer's copy of the record holds the texts of its messages again (at most 4,096 texts
    of ``_REMEMBERED_CHARS``: 8 MB)."""
    return tuple(_finds(text, kinds, region))


def redact_text(
    text: str, kinds: tuple[str, ...], region: str | None, counts: dict[str, int], ids: bool = False
) -> str:
    """``text`` with every find replaced by its placeholder (overlaps: the earliest, longest wins);
    ``ids``: by ``id_placeholder``, which keeps distinct ids distinct."""
    finds = sorted(
        _remembered_finds(text, kinds, region) if len(text) <= _REMEMBERED_CHARS else _finds(text, kinds, region),
        key=lambda f: (f[0], -(f[1] - f[0])),
    )
    if not finds:
        return text
    out, at = [], 0
    for start, end, kind in finds:
        if start < at:
            continue  # inside a find already replaced
        out += [text[at:start], id_placeholder(kind, text[start:end]) if ids else placeholder(kind)]
        counts[kind] = counts.get(kind, 0) + 1
        at = end
    out.append(text[at:])
    return "".join(out)


def _redact_value(value: Any, redact: Callable[[str], str], key_of: Callable[[str], str] | None = None) -> Any:
    """``value``'s strings redacted; with ``key_of``, its objects' keys too (a secret can be a key)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_value(item, redact, key_of) for item in value]
    if isinstance(value, dict):
        new_key = (lambda key: key) if key_of is None else key_of
        return {new_key(key): _redact_keyed(key, item, redact, key_of) for key, item in value.items()}
    return value


def _redact_keyed(key: Any, item: Any, redact: Callable[[str], str], key_of: Callable[[str], str] | None) -> Any:
    """An object's value, redacted knowing its key: an AWS secret access key under its name is
    given to ``redact`` with a name before it, so that it is found and counted as in text."""
    if isinstance(key, str) and isinstance(item, str) and _AWS_SECRET_KEY.fullmatch(key):
        if _AWS_SECRET_VALUE.fullmatch(item):
            named = "aws_secret_access_key="
            return redact(named + item).removeprefix(named)
    return _redact_value(item, redact, key_of)


def _redact_arguments(args: Any, redact: Callable[[str], str], key_of: Callable[[str], str]) -> Any:
    """Call arguments: JSON text parsed and written back compact when something changed."""
    if not isinstance(args, str):
        return _redact_value(args, redact, key_of)
    try:
        parsed = parse_json(args)
    except (TypeError, ValueError, RecursionError):
        return redact(args)
    if isinstance(parsed, str):
        return redact(args)
    again = _redact_value(parsed, redact, key_of)
    return args if again == parsed else compact_json(again)


#: Message keys that are never text to search (roles, names, weights).
_NOT_TEXT = frozenset({"role", "name", "weight"})
#: Message and call keys that hold an id: redacted by ``id_placeholder`` (a call and its result
#: keep their pairing).
_ID_KEYS = frozenset({"tool_call_id"})
#: The flat shape's text key: its name needs no search.
_TEXT_KEYS = frozenset({"content"})


def redact_messages(
    messages: list[Any], kinds: tuple[str, ...], region: str | None, counts: dict[str, int]
) -> list[Any]:
    """Flat messages with their texts redacted (copies where something was found); ``counts``
    gets the finds by kind."""
    return Redaction(kinds, region, counts).messages(messages)


def _redact_messages(messages: list[Any], redact: Callable[[str], str], key_of: Callable[[str], str]) -> list[Any]:
    out = []
    for message in messages:
        if not isinstance(message, dict):  # a list as read (convnorm explain), not yet coerced
            out.append(_redact_value(message, redact, key_of))
            continue
        copy = {}
        for key, value in message.items():
            if key in _NOT_TEXT:
                copy[key] = value
            elif key in _ID_KEYS:
                copy[key] = key_of(value) if isinstance(value, str) else value
            elif key == "tool_calls" and isinstance(value, list):
                copy[key] = [_redact_call(call, redact, key_of) for call in value]
            else:
                # A key outside the flat shape (read, not yet coerced) can itself be a secret.
                copy[key if key in _TEXT_KEYS else key_of(key)] = _redact_value(value, redact, key_of)
        out.append(copy if copy != message else message)
    return out


def _redact_call(call: Any, redact: Callable[[str], str], key_of: Callable[[str], str]) -> Any:
    if not isinstance(call, dict):
        return call
    out = dict(call)
    if "args" in call:
        out["args"] = _redact_arguments(call["args"], redact, key_of)
    if isinstance(call.get("tool_call_id"), str):
        out["tool_call_id"] = key_of(call["tool_call_id"])
    return out if out != call else call


# --------------------------------------------------------------------------------------------
# Beyond the messages' texts: ids, the record's other fields, names, reasoning, raw lines

#: Hex digits of the hash an id's placeholder carries: 48 bits, so that ids stay distinct
#: among millions of conversations.
ID_HASH_CHARS = 12
#: Counted (``redacted``) for each signed reasoning left out: a find in it cannot be replaced
#: without breaking its signature.
SIGNED_REASONING_LEFT_OUT = "signed_reasoning_left_out"


def id_placeholder(kind: str, found: str) -> str:
    """``[REDACTED:<kind>:<hash>]``, the hash the first ``ID_HASH_CHARS`` hex digits of the
    find's SHA-256: the same find gives the same placeholder everywhere (a call and its result
    stay paired, a conversation's id is the same in every output), different finds different
    ones. A pseudonym, not a secret: a guessable value (a phone number) can be confirmed by
    hashing it."""
    digest = hashlib.sha256(found.encode("utf-8", "surrogatepass")).hexdigest()[:ID_HASH_CHARS]
    return f"[REDACTED:{kind}:{digest}]"


#: An id's placeholder (``id_placeholder``) standing in a text: a call log's piece is redacted
#: before its conversation is assembled, every find by an id's placeholder (``redact_piece``).
_ID_PLACEHOLDER = re.compile(r"\[REDACTED:([a-z0-9_]+):[0-9a-f]{%d}\]" % ID_HASH_CHARS)


def as_text(redacted_id: str) -> str:
    """An id as written (``id_placeholder``s) as a text holding it was written: each
    placeholder without its hash (a dead letter's raw line is redacted as text)."""
    return _ID_PLACEHOLDER.sub(lambda match: placeholder(match.group(1)), redacted_id)


def _redact(text: str, kinds: tuple[str, ...], region: str | None, counts: dict[str, int], ids: bool) -> str:
    """``redact_text``; an id's placeholder that a call log's piece got first is counted as the
    find it stands for, and in a text (not an id) becomes the text's placeholder."""
    if "[REDACTED:" in text:

        def plain(match: re.Match[str]) -> str:
            counts[match.group(1)] = counts.get(match.group(1), 0) + 1
            return match.group(0) if ids else placeholder(match.group(1))

        text = _ID_PLACEHOLDER.sub(plain, text)
    return redact_text(text, kinds, region, counts, ids)


class Redaction(NamedTuple):
    """One record's ``--redact``: the kinds, the phone region, and its finds counted by kind.

    ``memo``: each text's redaction, remembered for the record (the writer's copy of the record
    holds its messages' texts again, long ones too); ``None``: nothing remembered."""

    kinds: tuple[str, ...]
    region: str | None
    counts: dict[str, int]
    memo: dict[tuple[str, bool], tuple[str, dict[str, int]]] | None = None

    def _redacted(self, text: str, ids: bool) -> str:
        if self.memo is None:
            return _redact(text, self.kinds, self.region, self.counts, ids)
        done = self.memo.get((text, ids))
        if done is None:
            found: dict[str, int] = {}
            done = self.memo[(text, ids)] = (_redact(text, self.kinds, self.region, found, ids), found)
        for kind, n in done[1].items():
            self.counts[kind] = self.counts.get(kind, 0) + n
        return done[0]

    def text(self, text: str) -> str:
        return self._redacted(text, False)

    def id(self, value: Any) -> Any:
        """An id (a string; any other value as it is) by ``id_placeholder``."""
        return self._redacted(value, True) if isinstance(value, str) else value

    def value(self, value: Any) -> Any:
        """Any JSON value: its strings by placeholder, its objects' keys by ``id``."""
        return _redact_value(value, self.text, self.id)

    def messages(self, messages: list[Any]) -> list[Any]:
        return _redact_messages(messages, self.text, self.id)

    def uncounted(self) -> Redaction:
        """The same redaction, its finds not counted (what was counted once already)."""
        return self._replace(counts={})


def redact_fields(fields: dict[str, Any], id_field: str, messages_field: str, redaction: Redaction) -> dict[str, Any]:
    """A record's fields beside its messages (``metadata``, ``tools``, ...): its id by
    ``Redaction.id``, every other value's strings by placeholder, every key by ``Redaction.id``
    (the messages, redacted apart, as they are). The same dict when nothing was found."""
    out = {
        redaction.id(key): value
        if key == messages_field
        else redaction.id(value)
        if key == id_field
        else redaction.value(value)
        for key, value in fields.items()
    }
    return out if out != fields else fields


def _added(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {key: _added(a.get(key, 0), b.get(key, 0)) for key in {**a, **b}}
    return a + b if isinstance(a, int) and isinstance(b, int) else b


def redact_names(counted: dict[str, Any], redaction: Redaction) -> dict[str, Any]:
    """Counts by name (a ledger report ``{name: {"fields": n, "chars": c}}``, a reader's report,
    the values nulled by field) with each name that holds a find replaced by its placeholder:
    the counts of names that become the same are added up. The same dict when nothing was found."""
    merged: dict[str, Any] = {}
    for name, entry in counted.items():
        shown = redaction.text(name)
        if isinstance(entry, dict):  # counts by key under a name (a writer's tool fields)
            entry = redact_names(entry, redaction)
        merged[shown] = _added(merged[shown], entry) if shown in merged else entry
    if merged == counted and list(merged) == list(counted):
        return counted
    return {name: merged[name] for name in sorted(merged)}


def redact_assembly(assembly: dict[str, Any], redaction: Redaction) -> dict[str, Any]:
    """An ``assembly`` entry (``transforms.calllogs.assemble``) with its group and call ids
    by ``Redaction.id``: the conversation's id is made from its group."""
    out = dict(assembly)
    out["group"] = redaction.id(assembly.get("group"))
    if isinstance(assembly.get("chained"), list):
        # The ids of conversations of other groups chained into it (``calllogs.chained``).
        out["chained"] = [redaction.id(other) for other in assembly["chained"]]
    for name in ("calls", "tool_results_filled", "tool_results_unused"):
        if isinstance(assembly.get(name), list):
            out[name] = [
                {**entry, "call": redaction.id(entry.get("call"))} if isinstance(entry, dict) else entry
                for entry in assembly[name]
            ]
    return out


#: Keys of carried reasoning and media whose values are opaque (signatures, encrypted or inline
#: data): never searched, and a reasoning holding one is signed. Gemini's ``call_signatures``
#: maps call ids (redacted as ids, as the calls' are) to signatures.
_OPAQUE = OPAQUE_KEYS | {"text_signature", "call_signatures"}


def _signed(value: Any) -> bool:
    """Whether ``value`` holds a signature or an encrypted payload."""
    if isinstance(value, dict):
        return any((key in _OPAQUE and item not in (None, "", {})) or _signed(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_signed(item) for item in value)
    return False


def _redact_carried(value: Any, redaction: Redaction, keys: Redaction) -> Any:
    """Reasoning or media carried around the core: its text redacted, its opaque payloads
    (signatures, encrypted or base64 content: ``_OPAQUE``) and its provider as they are; its
    objects' keys by ``keys.id`` (a key is not signed)."""
    if isinstance(value, str):
        return redaction.text(value)
    if isinstance(value, list):
        return [_redact_carried(item, redaction, keys) for item in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "call_signatures" and isinstance(item, dict):
                # Counted where the calls themselves are.
                out[key] = {keys.uncounted().id(call): signature for call, signature in item.items()}
            elif key in _OPAQUE or key == "provider":
                out[key] = item
            else:
                out[keys.id(key)] = _redact_carried(item, redaction, keys)
        return out
    return value


def redact_reasoning(value: dict[str, Any], redaction: Redaction) -> dict[str, Any] | None:
    """A provider's reasoning as written (``formats.reasoning.FIELD``), redacted; ``None`` when
    a find stands in a signed one (a thinking block and its signature, an item and its
    encrypted content): its text cannot change without breaking the signature, so it must be
    left out (counted ``SIGNED_REASONING_LEFT_OUT``)."""
    found: dict[str, int] = {}
    out = _redact_carried(value, redaction._replace(counts=found), redaction)
    if not found:
        return value if out == value else out
    if _signed(value):
        redaction.counts[SIGNED_REASONING_LEFT_OUT] = redaction.counts.get(SIGNED_REASONING_LEFT_OUT, 0) + 1
        return None
    for kind, n in found.items():
        redaction.counts[kind] = redaction.counts.get(kind, 0) + n
    return dict(out)


def redact_media(items: Any, redaction: Redaction) -> Any:
    """Media carried beside their placeholders (``formats.media.FIELD``): URLs and texts
    redacted, inline data as it is."""
    out = _redact_carried(items, redaction, redaction)
    return items if out == items else out


def redact_piece(piece: Any, redaction: Redaction) -> Any:
    """A call log's piece (``calllogs.calls.Call``, ``ToolResult``, ``Rejected`` or ``Fragment``) redacted before its
    conversation is assembled, in a batch run as in a streaming one (whose pieces are kept in
    its output directory): every find by an id's placeholder, texts too, so that messages that
    differ stay different for the assembly (which matches calls by their messages). The run
    step turns a text's id placeholders into the text's own and counts them (``_redact``), so
    the conversation is written and counted as one read whole."""
    hashed = Redaction(redaction.kinds, redaction.region, {}, redaction.memo)
    changes: dict[str, Any] = {"group": hashed.id(piece.group), "call_id": hashed.id(piece.call_id)}
    fields = piece._fields
    if "history" in fields:
        changes["history"] = _redact_messages(piece.history, hashed.id, hashed.id)
        changes["output"] = _redact_messages(piece.output, hashed.id, hashed.id)
        changes["tools"] = _redact_value(piece.tools, hashed.id, hashed.id)
        changes["model"] = hashed.id(piece.model)
        if piece.discarded:
            changes["discarded"] = {hashed.text(name): value for name, value in piece.discarded.items()}
        # Response ids chain calls: the same placeholder on both sides keeps the chain.
        changes["response_id"] = hashed.id(piece.response_id)
        changes["previous_response_id"] = hashed.id(piece.previous_response_id)
    elif "key" in fields:
        # A part of a call read apart (``Fragment``): its key and the part as read (a LangSmith
        # run, OTel event bodies), every string and key, so that the parts of a key still meet
        # and the call they make is made of redacted texts only.
        changes["key"] = hashed.id(piece.key)
        changes["data"] = _redact_value(piece.data, hashed.id, hashed.id)
    elif "detail" in fields:
        # A part refused alone (``Rejected``): its dead letter's detail and raw text.
        changes["detail"] = hashed.text(piece.detail)
        changes["raw"] = hashed.text(piece.raw)
    else:
        changes["tool_call_id"] = hashed.id(piece.tool_call_id)
        changes["content"] = hashed.id(piece.content)
    return piece._replace(**changes)
