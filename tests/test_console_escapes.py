"""What reaches the terminal: a control character from the data is printed escaped, never raw.

Each test feeds names and ids holding a colour escape, a newline, a carriage return and a
right-to-left override (``HOSTILE``) to one console line of convnorm: the plan of ``--dry-run``,
a run's summary table and log lines, ``convnorm explain`` and its errors, the progress line,
streaming's lines. None of them may print a raw control character (other than the newlines
that separate its own lines), and each prints the escaped form on the value's own line.
"""

from __future__ import annotations

import re

import pytest

from transforms.console_text import console_text

#: A colour escape, a newline, a carriage return, a right-to-left override.
HOSTILE = "\x1b[31m\n\r\u202e"
ESCAPED = r"\x1b[31m\n\r\u202e"
#: Every character the console escapes, but the newline (which separates a command's lines).
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


# --------------------------------------------------------------------------------------------
# The rule


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("\x1b", r"\x1b"),
        ("\n", r"\n"),
        ("\r", r"\r"),
        ("\t", r"\t"),
        ("\x00", r"\x00"),
        ("\x7f", r"\x7f"),
        ("\x9b", r"\x9b"),  # C1: a one-character CSI on some terminals
        ("\u2028", r"\u2028"),
        ("\u2029", r"\u2029"),
        ("\u202a", r"\u202a"),
        ("\u202e", r"\u202e"),
        ("\u2066", r"\u2066"),
        ("\u2069", r"\u2069"),
    ],
)
def test_each_control_character_is_shown_as_its_python_escape(raw, shown):
    assert console_text(f"a{raw}b") == f"a{shown}b"


def test_text_without_controls_is_unchanged_and_newlines_can_be_kept():
    plain = "logs/été 日本 \\x1b ‏ - … \u200b"
    assert console_text(plain) == plain
    assert console_text(f"one{HOSTILE}\ntwo", keep_newlines=True) == "one\\x1b[31m\n\\r\\u202e\ntwo"
    assert console_text(console_text(HOSTILE)) == console_text(HOSTILE)  # escaped text has none left
