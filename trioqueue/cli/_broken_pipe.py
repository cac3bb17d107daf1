"""A reader that stops early (``trioqueue status | head -1``) ends the command quietly.

Once ``head`` has its line it closes the pipe, and the command's next write raises
``BrokenPipeError`` (Python ignores SIGPIPE, so the error arrives as an exception, and trio
may deliver it inside an exception group). :func:`trioqueue.cli.main` catches it and calls
:func:`quiet_exit`, Python's own recipe (the ``signal`` module's docs, "Note on SIGPIPE"):
the standard output is pointed at ``/dev/null``, so that the interpreter's last flush at exit
cannot fail again and print its ``Exception ignored`` lines.

The exit code is 141, 128 + SIGPIPE, the code ``cat`` or ``yes`` give when the same happens
to them: ``set -o pipefail`` then sees the output was cut short, as it does for them, and a
plain pipeline takes ``head``'s code as ever.
"""

from __future__ import annotations

import os
import signal
import sys

from trioqueue._errors import leaves

__all__ = ["EXIT_BROKEN_PIPE", "is_broken_pipe", "quiet_exit"]

#: 128 + SIGPIPE, as a shell reports a process that SIGPIPE ended.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def is_broken_pipe(exc: BaseException) -> bool:
    """True for a BrokenPipeError, also one that trio delivers inside (nested) groups."""
    if isinstance(exc, BaseExceptionGroup):
        return all(isinstance(leaf, BrokenPipeError) for leaf in leaves(exc))
    return isinstance(exc, BrokenPipeError)


def quiet_exit() -> int:
    """Point the standard output at ``/dev/null`` (what is still buffered goes nowhere)
    and return :data:`EXIT_BROKEN_PIPE`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_BROKEN_PIPE
