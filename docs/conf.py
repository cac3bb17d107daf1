"""Sphinx configuration for the trioqueue docs (built with ``-W``: warnings are errors)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

_DOCS = Path(__file__).resolve().parent
_ROOT = _DOCS.parent
_PROJECT = tomllib.loads((_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

project = "trioqueue"
author = "the trioqueue authors"
copyright = "the trioqueue authors"
release = _PROJECT["version"]
version = ".".join(release.split(".")[:2])

# autodoc and napoleon are ready for API pages; no page uses them yet, so the
# docs build before the package is complete. No intersphinx: builds stay offline.
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

# The protocol's rule tables and its timing diagrams are committed in generated/ (written by
# ``python docs/regenerate.py --write`` from the code and the conformance traces, and checked
# to be current by tests/unit/test_generated_docs.py), so a reader of the repository sees
# them too; docs/protocol.rst includes them from there, and the build writes none of them.

# The guarantees (from proofs/backers.py) and the named queries beside the memory model's
# methods, for docs/guarantees.rst and docs/reference-model.rst (render_reference.py), are
# rendered at every build into _generated/ (not committed).
sys.path.insert(0, str(_DOCS))
from render_reference import write as write_reference  # noqa: E402

write_reference(_DOCS / "_generated")

root_doc = "index"
exclude_patterns = ["_build", "_generated", "generated"]
pygments_style = "friendly"

html_theme = "furo"
html_title = f"trioqueue {release}"
pygments_dark_style = "monokai"

autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# docs/reference-model.rst shows SQL beside the model's methods in two columns.
html_static_path = ["_static"]
html_css_files = ["side-by-side.css"]


def _drop_inherited_docstring(
    app: object, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    # A type alias such as ``trioqueue.testing.Fault`` (a union) has no docstring of its
    # own: autodoc shows its type's ("Represent a PEP 604 union type"). Drop that; the
    # page says what the alias is.
    own = getattr(obj, "__doc__", None)
    if what == "data" and own is not None and own == getattr(type(obj), "__doc__", None):
        lines.clear()


def _drop_private_aliases(app: Any) -> list[object]:
    # autodoc records each public object also under the private module it is defined in
    # (``trioqueue._types.JobInfo`` for ``trioqueue.JobInfo``), so that type hints naming
    # the private path link to the public entry. Once every page is written, drop those
    # aliases, so that objects.inv (what other projects link against) lists public names
    # only. Runs on html-collect-pages: after the pages, before the inventory is dumped.
    objects = app.env.get_domain("py").objects
    for name in [n for n, entry in objects.items() if entry.aliased and "._" in n]:
        del objects[name]
    return []


def setup(app: Any) -> None:
    app.connect("autodoc-process-docstring", _drop_inherited_docstring)
    app.connect("html-collect-pages", _drop_private_aliases)
