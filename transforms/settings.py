"""How the per-record steps read, normalize and write (no Beam import).

``Settings`` is a plain frozen dataclass that the DoFns carry to the workers. ``problems``
holds the rules it must follow; the command line checks them, naming its flags
(``pipeline.settings.settings_problems``), before any pipeline is built, and the public DoFns
(``transforms.conversations.NormalizeConversation``) when they are made. The steps take it as valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from transforms.formats import READERS, WRITERS
from transforms.profiles import PROFILES

#: Raw text kept in a dead letter, in characters.
DEFAULT_RAW_LIMIT = 2000


@dataclass(frozen=True)
class Settings:
    """How to read, normalize and write records; validated by the options before use."""

    messages_field: str = "messages"
    id_field: str = "id"
    input_format: str = "auto"
    profile: str = "spec"
    sink: str = "flat"
    model: str | None = None
    max_tokens: int | None = None
    #: Dotted path of a record's tool definitions for the writers (``--tools-field``).
    tools_field: str = "tools"
    #: Also run the strict sendability check on every normalized conversation.
    check: bool = False
    raw_limit: int = DEFAULT_RAW_LIMIT


def field_name(field: str) -> str:
    return field


def problems(settings: Settings, named: Callable[[str], str] = field_name) -> list[str]:
    """Every setting that cannot work, as sentences for a person; ``named(field)`` is how the
    caller calls a field (the command line: its flag)."""
    found = []
    if settings.input_format != "auto" and settings.input_format not in READERS:
        found.append(
            f"unknown {named('input_format')} {settings.input_format!r}; known: auto, {', '.join(sorted(READERS))}"
        )
    if settings.sink not in WRITERS:
        found.append(f"unknown {named('sink')} {settings.sink!r}; known: {', '.join(sorted(WRITERS))}")
    if settings.profile not in PROFILES:
        found.append(f"unknown {named('profile')} {settings.profile!r}; known: {', '.join(PROFILES)}")
    if not settings.messages_field:
        found.append(f"{named('messages_field')} must not be empty")
    if not settings.id_field:
        found.append(f"{named('id_field')} must not be empty")
    if settings.id_field == settings.messages_field:
        found.append(f"{named('id_field')} and {named('messages_field')} must differ")
    if not settings.tools_field or any(not part for part in settings.tools_field.split(".")):
        found.append(f"{named('tools_field')} {settings.tools_field!r} is not a dotted path of field names")
    if settings.max_tokens is not None and settings.max_tokens < 1:
        found.append(f"{named('max_tokens')} must be at least 1")
    if settings.raw_limit < 0:
        found.append(f"{named('raw_limit')} must be 0 or more")
    return found
