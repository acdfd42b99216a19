"""The record settings checked as the command line gave them (no Beam import).

Its messages name the command line's flags, so the check lives here, beside the options,
and not in ``transforms.settings``, which the workers carry.
"""

from __future__ import annotations

from transforms.formats import READERS, WRITERS
from transforms.profiles import PROFILES
from transforms.roles import MAP_TARGETS
from transforms.settings import Settings, TokenSettings
from transforms.tokens import ENCODINGS, FINE_TUNING_LIMITS, sink_view, unavailable


def settings_problems(settings: Settings) -> list[str]:
    """Every setting that cannot work, as sentences for a person."""
    found = []
    if settings.input_format != "auto" and settings.input_format not in READERS:
        found.append(f"unknown --format {settings.input_format!r}; known: auto, {', '.join(sorted(READERS))}")
    if settings.sink not in WRITERS:
        found.append(f"unknown --sink {settings.sink!r}; known: {', '.join(sorted(WRITERS))}")
    if settings.profile not in PROFILES:
        found.append(f"unknown --profile {settings.profile!r}; known: {', '.join(PROFILES)}")
    if not settings.messages_field:
        found.append("--messages-field must not be empty")
    if not settings.id_field:
        found.append("--id-field must not be empty")
    if settings.id_field == settings.messages_field:
        found.append("--id-field and --messages-field must differ")
    if not settings.tools_field or any(not part for part in settings.tools_field.split(".")):
        found.append(f"--tools-field {settings.tools_field!r} is not a dotted path of field names")
    if settings.max_tokens is not None and settings.max_tokens < 1:
        found.append("--max-tokens must be at least 1")
    if settings.raw_limit < 0:
        found.append("--dead-letter-raw-limit must be 0 or more")
    if settings.tokens is not None:
        found += token_problems(settings.tokens, settings)
    return found + _role_problems(settings)


def _role_problems(settings: Settings) -> list[str]:
    found = [f"--drop-role {role!r} is blank" for role in settings.drop_roles if not role.strip()]
    for source, target in settings.map_roles:
        if not source:
            found.append(f"--map-role {target!r} is not FROM=TO (e.g. exit=assistant)")
        elif target not in MAP_TARGETS:
            found.append(f"--map-role {source}={target}: the role must be one of {', '.join(MAP_TARGETS)}")
    both = sorted(set(settings.drop_roles) & {source for source, _ in settings.map_roles})
    if both:
        found.append(f"role(s) {', '.join(both)} given to both --drop-role and --map-role")
    return found


def token_problems(tokens: TokenSettings, settings: Settings) -> list[str]:
    """What cannot work in ``--tokens`` and its options; last, whether the tokenizer loads
    (the tokens extra installed: a missing extra is one line here, not a failed run)."""
    found = []
    if tokens.encoding not in ENCODINGS:
        return [f"unknown --tokens {tokens.encoding!r}; known: {', '.join(ENCODINGS)}"]
    if settings.sink in WRITERS and sink_view(settings.sink, settings.messages_field, settings.tools_field) is None:
        found.append(f"--tokens cannot count --sink {settings.sink}: it has no token view (transforms/tokens.py)")
    model = tokens.limit_model
    if model is not None and FINE_TUNING_LIMITS[model].encoding != tokens.encoding:
        found.append(
            f"--max-example-tokens {model} counts in {FINE_TUNING_LIMITS[model].encoding}, "
            f"not --tokens {tokens.encoding}"
        )
    if tokens.epochs is not None and tokens.epochs < 1:
        found.append("--epochs must be at least 1")
    if tokens.price_per_mtok is not None and not (0 <= tokens.price_per_mtok < float("inf")):
        found.append("--price-per-mtok must be a price, 0 or more")
    missing = unavailable(tokens.encoding)
    if missing:
        found.append(missing)
    return found
