"""Sphinx configuration for the trioqueue docs (built with ``-W``: warnings are errors)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

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

# The protocol's rule tables are rendered from the code at every build (render_rules.py)
# into _generated/, which docs/protocol.rst includes; so are its timing diagrams, drawn
# from the conformance traces in proofs/traces/ (render_timing.py).
sys.path.insert(0, str(_DOCS))
from render_rules import render  # noqa: E402
from render_timing import figures, render_all  # noqa: E402

(_DOCS / "_generated").mkdir(exist_ok=True)
(_DOCS / "_generated" / "rules.rst").write_text(render(), encoding="utf-8")
render_all(_DOCS / "_generated")
(_DOCS / "_generated" / "timing.rst").write_text(figures(), encoding="utf-8")

root_doc = "index"
exclude_patterns = ["_build", "_generated"]
pygments_style = "friendly"

html_theme = "furo"
html_title = f"trioqueue {release}"
pygments_dark_style = "monokai"

autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
