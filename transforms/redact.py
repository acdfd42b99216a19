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
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable

from transforms.jsontext import compact_json, parse_json

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


def redact_text(text: str, kinds: tuple[str, ...], region: str | None, counts: dict[str, int]) -> str:
    """``text`` with every find replaced by its placeholder (overlaps: the earliest, longest wins)."""
    finds = sorted(_finds(text, kinds, region), key=lambda f: (f[0], -(f[1] - f[0])))
    if not finds:
        return text
    out, at = [], 0
    for start, end, kind in finds:
        if start < at:
            continue  # inside a find already replaced
        out += [text[at:start], placeholder(kind)]
        counts[kind] = counts.get(kind, 0) + 1
        at = end
    out.append(text[at:])
    return "".join(out)


def _redact_value(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_value(item, redact) for item in value]
    if isinstance(value, dict):
        return {key: _redact_keyed(key, item, redact) for key, item in value.items()}
    return value


def _redact_keyed(key: Any, item: Any, redact: Callable[[str], str]) -> Any:
    """An object's value, redacted knowing its key: an AWS secret access key under its name is
    given to ``redact`` with a name before it, so that it is found and counted as in text."""
    if isinstance(key, str) and isinstance(item, str) and _AWS_SECRET_KEY.fullmatch(key):
        if _AWS_SECRET_VALUE.fullmatch(item):
            named = "aws_secret_access_key="
            return redact(named + item).removeprefix(named)
    return _redact_value(item, redact)


def _redact_arguments(args: Any, redact: Callable[[str], str]) -> Any:
    """Call arguments: JSON text parsed and written back compact when something changed."""
    if not isinstance(args, str):
        return _redact_value(args, redact)
    try:
        parsed = parse_json(args)
    except (TypeError, ValueError, RecursionError):
        return redact(args)
    if isinstance(parsed, str):
        return redact(args)
    again = _redact_value(parsed, redact)
    return args if again == parsed else compact_json(again)


#: Message keys that are never text to search (roles, ids, names, weights).
_NOT_TEXT = frozenset({"role", "tool_call_id", "name", "weight"})


def redact_messages(
    messages: list[Any], kinds: tuple[str, ...], region: str | None, counts: dict[str, int]
) -> list[Any]:
    """Flat messages with their texts redacted (copies where something was found); ``counts``
    gets the finds by kind."""

    def redact(text: str) -> str:
        return redact_text(text, kinds, region, counts)

    out = []
    for message in messages:
        copy = {}
        for key, value in message.items():
            if key in _NOT_TEXT:
                copy[key] = value
            elif key == "tool_calls" and isinstance(value, list):
                copy[key] = [
                    {**call, "args": _redact_arguments(call["args"], redact)} if "args" in call else call
                    for call in value
                ]
            else:
                copy[key] = _redact_value(value, redact)
        out.append(copy if copy != message else message)
    return out
