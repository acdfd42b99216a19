"""How the per-record steps read, normalize and write (no Beam import).

``Settings`` is a plain frozen dataclass that the DoFns carry to the workers. The command line
builds it from its options and checks it (``pipeline.settings.settings_problems``) before any
pipeline is built; the steps take it as valid.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Raw text kept in a dead letter, in characters.
DEFAULT_RAW_LIMIT = 2000


@dataclass(frozen=True)
class TokenSettings:
    """Fine-tuning readiness (``--tokens``): how examples are counted and what the run reports.

    See ``transforms.tokens`` (the counting) and docs/fine-tuning.md.
    """

    #: The encoding the counts are in (``--tokens``): ``o200k_base`` or ``cl100k_base``.
    encoding: str
    #: Tokens one example may hold (``--max-example-tokens``); ``None``: no limit checked.
    max_example_tokens: int | None = None
    #: The model whose documented limit ``max_example_tokens`` is (``None``: a number was given).
    limit_model: str | None = None
    #: ``--over-limit drop``: an example over the limit is an ``over_token_limit`` dead letter
    #: instead of an output record (``False``: it is written, counted and listed).
    drop_over_limit: bool = False
    #: ``--epochs``; ``None``: the default OpenAI's fine-tuning guide states for the dataset's size.
    epochs: int | None = None
    #: ``--price-per-mtok``: price of a million training tokens, for the cost estimate.
    price_per_mtok: float | None = None


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
    #: Roles whose messages are dropped before normalization (``--drop-role``), and roles
    #: given another one (``--map-role FROM=TO``): ``transforms.roles``.
    drop_roles: tuple[str, ...] = ()
    map_roles: tuple[tuple[str, str], ...] = ()
    raw_limit: int = DEFAULT_RAW_LIMIT
    #: Count tokens per example (``--tokens``); ``None``: no counting, no work per record.
    tokens: TokenSettings | None = None
