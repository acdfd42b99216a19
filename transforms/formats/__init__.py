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
    count_written,
    detect_reader,
    register_reader,
    register_writer,
)

# Built-in formats register themselves on import: add a format module's name here.
from transforms.formats import (  # noqa: E402, F401
    anthropic,
    flat,
    gemini,
    openai,
    openai_responses,
    sharegpt,
)
from transforms.formats.claims import read_forced, unrecognized  # noqa: E402

__all__ = [
    "READERS",
    "WRITERS",
    "Conversation",
    "FormatError",
    "Reader",
    "WriteContext",
    "Writer",
    "count_written",
    "detect_reader",
    "read_forced",
    "register_reader",
    "register_writer",
    "unrecognized",
]
