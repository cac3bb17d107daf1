"""Text the command line did not write itself, made safe to show on a terminal.

Queue names, errors, groups, payloads, worker names and every other stored field come from
whoever enqueued or ran a job. Written raw, an ESC starts an ANSI or OSC sequence (recolour,
retitle, hide text, write a link), a CR or LF makes a line of its own (``show`` could print a
forged ``error none``), and a bidi override turns ``"\\u202eliam"`` into ``mail`` on screen.

:func:`visible` is the one function that stops it, and every printer of the command line
uses it, on a terminal and through a pipe alike (a pipe ends on a terminal too, in ``less
-R`` or a CI log): the tables (:func:`~trioqueue.cli._terminal.format_table`, and
:func:`~trioqueue.cli._terminal.clip` before it cuts), the lines the commands print
(:func:`say`), the error line of :func:`trioqueue.cli.main` and the text log. Each character
that could act on the terminal is replaced by its Python escape (``\\x1b``, ``\\r``,
``\\n``, ``\\u202e``): C0 controls, DEL, C1 controls, the line and paragraph separators,
the bidi embeddings, overrides, isolates and marks, and lone surrogates (which no encoder
would write). Everything else stays as it is; a backslash stays one too, so JSON text and
paths read as they were (``\\x1b`` typed as four characters looks like an escaped ESC, and
is as harmless).

A field that spans lines on purpose (a multi-line error) is split with
:func:`visible_lines` and its lines printed indented under it, where they cannot pass for a
field of their own.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

__all__ = ["say", "visible", "visible_lines"]

#: The characters :func:`visible` escapes (see the module docstring).
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0, DEL, C1
    "\u061c\u200e\u200f"  # the Arabic letter mark, LRM, RLM
    "\u2028\u2029"  # line and paragraph separators
    "\u202a-\u202e\u2066-\u2069"  # bidi embeddings, overrides and isolates
    "\ud800-\udfff]"  # lone surrogates
)

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str) -> str:
    """``text`` with every character that could act on a terminal shown as its escape.

    One line always (a newline becomes ``\\n``); unchanged when there is nothing to escape;
    ``visible(visible(text)) == visible(text)``.
    """
    if text.isprintable():  # the usual case: nothing unsafe is printable (one C-level pass)
        return text
    return UNSAFE.sub(_escape, text)


def visible_lines(text: str) -> list[str]:
    """``text``'s lines (split at ``\\n`` only), each :func:`visible` (a CR shows as ``\\r``)."""
    return [visible(line) for line in text.split("\n")]


def say(*lines: str, file: TextIO | None = None) -> None:
    """Print ``lines`` to ``file`` (default: stdout), each made :func:`visible`: one line
    per argument, whatever it holds."""
    out = sys.stdout if file is None else file
    out.write("".join(visible(line) + "\n" for line in lines))
    out.flush()
