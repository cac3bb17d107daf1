"""Import a Python file that is not in a package: a script of proofs/, docs/ or bench/."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file(path: Path, name: str | None = None) -> ModuleType:
    """The module in ``path``, imported as ``name`` (default: its file name).

    It is registered in ``sys.modules`` as an import would be, so that dataclasses in it
    (which look their module up) work with postponed annotations.
    """
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
