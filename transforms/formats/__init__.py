"""Reader/writer registry for conversation log formats (no Beam import).

``READERS`` and ``WRITERS`` map a format name to its ``Reader`` / ``Writer``; importing this
package registers every built-in format. See ``base`` for the contract.
"""

from transforms.formats.base import (
    READERS,
    WRITERS,
    Conversation,
    FormatError,
    Reader,
    WriteContext,
    Writer,
    detect_reader,
    register_reader,
    register_writer,
)

# Built-in formats register themselves on import; one line per format module.
from transforms.formats import flat  # noqa: E402,F401
from transforms.formats import openai  # noqa: E402,F401
from transforms.formats import openai_responses  # noqa: E402,F401
from transforms.formats import anthropic  # noqa: E402,F401
from transforms.formats import sharegpt  # noqa: E402,F401

__all__ = [
    "READERS",
    "WRITERS",
    "Conversation",
    "FormatError",
    "Reader",
    "WriteContext",
    "Writer",
    "detect_reader",
    "register_reader",
    "register_writer",
]
