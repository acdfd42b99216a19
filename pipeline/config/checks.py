"""The record settings checked as the command line gave them (no Beam import).

The record settings' rules live with them (``transforms.settings.problems``); here they name
the command line's flags, and the rules of ``--tokens`` (which name options that are not
record settings, and load the tokenizer) are added.
"""

from __future__ import annotations

from transforms.formats import WRITERS
from transforms.settings import Settings, TokenSettings, problems
from transforms.tokens import ENCODINGS, FINE_TUNING_LIMITS, sink_view, unavailable

#: Settings whose flag is not the field's name with dashes.
_FLAGS = {
    "input_format": "--format",
    "raw_limit": "--dead-letter-raw-limit",
    "drop_roles": "--drop-role",
    "map_roles": "--map-role",
}


def flag_name(field: str) -> str:
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


def settings_problems(settings: Settings) -> list[str]:
    """Every setting that cannot work, as sentences naming the flags: the record settings'
    rules (``transforms.settings.problems``), then ``--tokens``'."""
    found = problems(settings, flag_name)
    if settings.tokens is not None:
        found += token_problems(settings.tokens, settings)
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
