"""Text the dashboard shows, with the characters that fool the eye shown as escapes.

A stored string (a queue name, an error, a payload) can hold characters that do not show
as themselves: a right-to-left override turns ``"\\u202eliam"`` into what reads as
``mail``, a CR or a line separator breaks a line where none is, zero-width characters make
two names look alike. The backends refuse such characters in the names they store now
(docs/usage.rst, "Enqueue jobs"), but errors and payloads may hold them, and so may names
stored by an earlier release. The pages show each as the escape Python would write
(``\\r``, ``\\x1b``, ``\\u202e``), so what the page shows is what is stored.

Every ``{{ ... }}`` of a template passes through :func:`finalize`, so no field of any page
can be forgotten. A value a form posts back or a script reads must stay exactly as
stored: the template marks it ``|verbatim`` (HTML-escaped only). A multi-line field shown
in a ``<pre>`` keeps its line breaks and tabs with ``|visible_lines``.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

__all__ = ["Html", "finalize", "verbatim", "visible", "visible_lines"]

#: Shown as escapes: C0 and C1 controls and DEL; bidirectional formatting (U+061C, U+200E,
#: U+200F, U+202A-U+202E, U+2066-U+2069); line and paragraph separators (U+2028,
#: U+2029); and the invisible formatting characters (soft hyphen, Mongolian vowel
#: separator, zero-width space, word joiner and invisible operators, byte order mark,
#: interlinear annotations). The zero-width (non-)joiners U+200C and U+200D stay as they
#: are: emoji and several scripts need them to show right.
_HIDDEN = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u061c\u180e\u200b\u200e\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)
_HIDDEN_BUT_LINES = re.compile(_HIDDEN.pattern.replace("\x00-\x1f", "\x00-\x08\x0b-\x1f"))
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


@dataclass(frozen=True, slots=True)
class Html:
    """Text already HTML-escaped. Jinja's autoescape takes it as it is, by the
    ``__html__`` protocol (markupsafe's, which every Jinja markup value follows)."""

    text: str

    def __html__(self) -> str:
        return self.text


def visible(text: str) -> str:
    """``text`` with every character of :data:`_HIDDEN` written as its escape."""
    if text.isprintable():  # the usual case: none of _HIDDEN is printable (one C-level pass)
        return text
    return _HIDDEN.sub(_escape, text)


def visible_lines(text: str) -> Html:
    """:func:`visible`, but line feeds and tabs stay (a traceback in a ``<pre>``)."""
    return Html(_html_escape(_HIDDEN_BUT_LINES.sub(_escape, text)))


def verbatim(value: object) -> Html:
    """``value`` HTML-escaped and nothing else: for a form's value or a script's data,
    which must read back exactly as stored."""
    return Html(_html_escape(str(value)))


def _html_escape(text: str) -> str:
    """As Jinja's autoescape writes it (markupsafe's ``escape``), so that every value of
    a page is escaped alike."""
    return html.escape(text, quote=False).replace('"', "&#34;").replace("'", "&#39;")


def finalize(value: object) -> object:
    """Jinja's ``finalize``: every string a template outputs is made :func:`visible`,
    unless it is markup already (a macro's output, ``|verbatim``, ``|visible_lines``)."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return visible(value)
    return value
