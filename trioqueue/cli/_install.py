"""How the command line says to install an optional extra, in one form for every hint.

trioqueue is not on the package index (``pip install 'trioqueue[dashboard]'`` fails on a
fresh machine): it installs from a checkout, or from the wheel built from one
(docs/tutorial.rst, step 1). Every hint the command line prints for a missing extra comes
from :func:`install_hint`, so they all say what works, alike; the embedded server's hint
(``trioqueue._backends.postgres.embedded.INSTALL_HINT``, below the command line) is written
in the same form, and tests/unit/test_docs_install.py holds every hint of the code to it.
"""

from __future__ import annotations

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """``install the dashboard extra: pip install -e '.[dashboard]' from a checkout, or the
    wheel with [dashboard]``, for ``extra``."""
    return (
        f"install the {extra} extra: pip install -e '.[{extra}]' from a checkout, "
        f"or the wheel with [{extra}]"
    )
