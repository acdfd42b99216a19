"""Text from the data as the console shows it: control characters escaped (no Beam import).

A file name, an id or a field name may hold characters a terminal acts on instead of showing:
an escape sequence (``ESC [ 31 m`` colours the rest of the screen, others move the cursor or
set the window title), a carriage return or a newline that overwrites or forges a line, a
bidirectional override that shows text in another order than it is. ``console_text`` replaces
each such character with its Python escape, as ``repr`` writes it:

- ``\\t``, ``\\n``, ``\\r``;
- ``\\xNN`` for the other C0 controls (U+0000 to U+001F), DEL (U+007F) and the C1 controls
  (U+0080 to U+009F);
- ``\\uNNNN`` for the line and paragraph separators (U+2028, U+2029) and the bidirectional
  embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069).

Every other character is left as it is (a backslash too, so that paths and messages read as
they always did): the escapes are for a person reading the console, not for reversing.
"""

from __future__ import annotations

import re

#: The characters the console shows escaped.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def console_text(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every character of ``CONTROL`` escaped (see the module docstring).

    ``keep_newlines``: newlines stay, for text whose lines are the layout's own (a table, a
    traceback); a value from the data never keeps them, so that it prints on one line.
    """
    return (_BUT_NEWLINE if keep_newlines else CONTROL).sub(_escape, text)


__all__ = ["CONTROL", "console_text"]
