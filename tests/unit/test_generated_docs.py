"""docs/generated/: the rule tables and timelines committed to the repository are what
``docs/regenerate.py`` writes from the code and the conformance traces today, and they are
the files docs/protocol.rst includes (docs/porting.rst, "The rule tables and timelines")."""

from __future__ import annotations

import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
sys.path.insert(0, str(DOCS))

import regenerate  # noqa: E402  (docs/ is not a package: put on the path above)
import render_timing  # noqa: E402


def test_the_committed_files_are_what_the_code_gives_today() -> None:
    stale = regenerate.stale_files(regenerate.expected_files())
    names = ", ".join(p.name for p in stale)
    assert not stale, f"docs/generated/ is out of date ({names}): run `{regenerate.COMMAND}`"


def test_a_changed_missing_or_extra_file_is_stale(tmp_path: Path) -> None:
    """The check can fail: each way a folder can drift is found, and ``write`` mends it."""
    expected = regenerate.expected_files(tmp_path)
    regenerate.write(expected, tmp_path)
    assert regenerate.stale_files(expected, tmp_path) == []
    changed, missing = tmp_path / "rules.rst", tmp_path / "timing.rst"
    changed.write_text(changed.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    missing.unlink()
    extra = tmp_path / "timing-a-dropped-diagram.svg"
    extra.write_text("<svg/>", encoding="utf-8")
    assert regenerate.stale_files(expected, tmp_path) == sorted([changed, missing, extra])
    regenerate.write(expected, tmp_path)
    assert regenerate.stale_files(expected, tmp_path) == []
    assert not extra.exists()


def test_every_file_says_it_is_generated_and_how_to_regenerate_it() -> None:
    for path, text in regenerate.expected_files().items():
        assert "Generated" in text and regenerate.COMMAND in text, path.name


def test_the_protocol_includes_the_committed_files() -> None:
    """The two ``.. include::`` lines of docs/protocol.rst name committed files, and every
    figure of ``timing.rst`` names a committed SVG."""
    protocol = (DOCS / "protocol.rst").read_text(encoding="utf-8")
    included = re.findall(r"^\.\. include:: (\S+)$", protocol, re.MULTILINE)
    assert {"generated/rules.rst", "generated/timing.rst"} <= set(included)
    timing = (regenerate.OUT / "timing.rst").read_text(encoding="utf-8")
    figures = re.findall(r"^\.\. figure:: /(\S+)$", timing, re.MULTILINE)
    assert len(figures) == len(render_timing.DIAGRAMS)
    for figure in figures:
        assert (DOCS / figure).is_file(), figure
    readme = (regenerate.OUT / "README.md").read_text(encoding="utf-8")
    for image in re.findall(r"!\[[^]]*\]\(([^)]+)\)", readme):
        assert (regenerate.OUT / image).is_file(), image
