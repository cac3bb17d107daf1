"""docs/api.rst documents the public API, all of it, and nothing private.

Checked on the autodoc directives of the docs' pages: every name of ``trioqueue.__all__``
has one, ``trioqueue.testing`` and ``trioqueue.web`` are documented whole (``:members:``
with no list, so autodoc follows their ``__all__`` as names are added), every name of
``trioqueue.metrics.__all__`` has one on some page, and no directive names a private
module or object.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import trioqueue
import trioqueue.metrics
import trioqueue.testing
import trioqueue.web

DOCS = Path(__file__).resolve().parents[2] / "docs"
DIRECTIVE = re.compile(r"^\.\. auto(\w+):: (\S+)\n((?:   .*\n|\s*\n)*)", re.MULTILINE)


def _directives(page: str) -> list[tuple[str, str, str]]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return [(m.group(1), m.group(2), m.group(3)) for m in DIRECTIVE.finditer(text)]


def _all_directives() -> list[tuple[str, str, str]]:
    return [d for page in sorted(DOCS.glob("*.rst")) for d in _directives(page.name)]


def test_every_public_name_is_documented() -> None:
    names = {name for _, name, _ in _directives("api.rst")}
    missing = [n for n in trioqueue.__all__ if f"trioqueue.{n}" not in names]
    assert not missing


def test_testing_and_web_are_documented_by_their_all() -> None:
    modules = {name: options for kind, name, options in _directives("api.rst") if kind == "module"}
    for module in ("trioqueue.testing", "trioqueue.web"):
        options = modules[module]
        assert re.search(r":members:\s*\n", options), module  # no list: __all__ decides
        assert ":private-members:" not in options
        assert ":undoc-members:" not in options
        assert ":imported-members:" not in options
        assert ":ignore-module-all:" not in options


def test_every_testing_and_web_name_reaches_the_page() -> None:
    # autodoc lists a module's __all__ names that it can see (dir) and that have their own
    # docstring; the others (a lazy import, a type alias) need a directive of their own.
    named = {name for _, name, _ in _directives("api.rst")}
    for module in (trioqueue.testing, trioqueue.web):
        for name in module.__all__:
            if f"{module.__name__}.{name}" in named:
                continue
            obj = getattr(module, name)
            assert name in dir(module), f"{module.__name__}.{name}: give it a directive"
            assert inspect.isclass(obj) or inspect.isfunction(obj), name
            assert obj.__doc__, f"{module.__name__}.{name} has no docstring"


def test_excluded_members_have_their_own_directive() -> None:
    named = {name for _, name, _ in _directives("api.rst")}
    for kind, module, options in _directives("api.rst"):
        excluded = re.search(r":exclude-members: (.*)\n", options)
        if kind == "module" and excluded:
            for name in excluded.group(1).split(","):
                assert f"{module}.{name.strip()}" in named, name


def test_every_metrics_name_is_documented_somewhere() -> None:
    names = {name for _, name, _ in _all_directives()}
    missing = [n for n in trioqueue.metrics.__all__ if f"trioqueue.metrics.{n}" not in names]
    assert not missing


def test_no_directive_names_a_private_object() -> None:
    for kind, name, options in _all_directives():
        assert not any(part.startswith("_") for part in name.split(".")), (kind, name)
        assert ":private-members:" not in options, name


def test_the_documented_modules_export_what_they_say() -> None:
    for module in (trioqueue.testing, trioqueue.web, trioqueue.metrics):
        for name in module.__all__:
            assert not name.startswith("_")
            assert getattr(module, name) is not None
