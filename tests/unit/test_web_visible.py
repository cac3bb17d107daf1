"""The dashboard shows hidden characters as escapes (issue 22, item 8): trioqueue/web/visible.py."""

from __future__ import annotations

import pytest

from trioqueue.web.pages import environment
from trioqueue.web.visible import _HIDDEN, visible, visible_lines


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("a\rb", "a\\rb"),
        ("a\nb\tc", "a\\nb\\tc"),
        ("\x1b[31mred\x07", "\\x1b[31mred\\x07"),
        ("del\x7f c1\x85", "del\\x7f c1\\x85"),
        ("\u202eliam", "\\u202eliam"),
        ("\u2066iso\u2069 \u200emark\u200f \u061c", "\\u2066iso\\u2069 \\u200emark\\u200f \\u061c"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("zero\u200bwidth\u2060\ufeff\xad", "zero\\u200bwidth\\u2060\\ufeff\\xad"),
        # Unchanged: scripts written right to left, and the joiners emoji need.
        ("مرحبا שלום", "مرحبا שלום"),
        ("👩\u200d💻 a\u200cb", "👩\u200d💻 a\u200cb"),
        ("plain \\u202e text", "plain \\u202e text"),
    ],
)
def test_hidden_characters_show_as_escapes(stored: str, shown: str) -> None:
    assert visible(stored) == shown


def test_a_multi_line_field_keeps_its_lines_and_tabs() -> None:
    assert visible_lines("Traceback:\n\tline <1>\r\n\u202e").__html__() == (
        "Traceback:\n\tline &lt;1&gt;\\r\n\\u202e"
    )


def test_every_template_value_is_shown_visible_unless_marked_verbatim() -> None:
    env = environment()
    template = env.from_string(
        '<a title="{{ name }}">{{ name }}</a><input value="{{ name|verbatim }}">'
        "<pre>{{ text|visible_lines }}</pre>{{ name|tojson }}"
    )
    out = template.render(name="\u202e<b>", text="1\n2\r")
    assert out == (
        '<a title="\\u202e&lt;b&gt;">\\u202e&lt;b&gt;</a><input value="\u202e&lt;b&gt;">'
        '<pre>1\n2\\r</pre>"\\u202e\\u003cb\\u003e"'
    )


def test_no_hidden_character_is_printable() -> None:
    # visible() returns printable text untouched without the regex pass: that holds only
    # while every character it escapes is one str.isprintable() refuses.
    hidden = [c for c in map(chr, range(0x110000)) if _HIDDEN.match(c)]
    assert hidden and not any(c.isprintable() for c in hidden)
