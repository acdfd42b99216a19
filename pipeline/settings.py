"""The record settings checked as the command line gave them (no Beam import).

The rules live with the settings (``transforms.settings.problems``); here they name the
command line's flags.
"""

from __future__ import annotations

from transforms.settings import Settings, problems

#: Settings whose flag is not the field's name with dashes.
_FLAGS = {"input_format": "--format", "raw_limit": "--dead-letter-raw-limit"}


def flag_name(field: str) -> str:
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


def settings_problems(settings: Settings) -> list[str]:
    """Every setting that cannot work, as sentences naming the flags."""
    return problems(settings, flag_name)
