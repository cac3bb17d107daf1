"""What may not reach a terminal from stored text, defined on its own from Unicode's
categories and names (not from trioqueue/cli/_escape.py, whose gaps it is there to catch)."""

from __future__ import annotations

import unicodedata

#: Bidi formatting characters, by their Unicode names.
BIDI_NAMES: tuple[str, ...] = ("EMBEDDING", "OVERRIDE", "ISOLATE", "DIRECTIONAL FORMATTING")
BIDI_NAMES += ("TO-LEFT MARK", "TO-RIGHT MARK", "ARABIC LETTER MARK")


def unsafe(char: str) -> bool:
    """A character that acts on a terminal or on how the text around it reads."""
    if unicodedata.category(char) in ("Cc", "Zl", "Zp", "Cs"):
        return True
    name = unicodedata.name(char, "")
    return unicodedata.category(char) == "Cf" and any(part in name for part in BIDI_NAMES)


def unsafe_in(text: str) -> list[str]:
    """The unsafe characters of printed ``text``, a newline ending each line allowed."""
    return [c for line in text.split("\n") for c in line if unsafe(c)]
