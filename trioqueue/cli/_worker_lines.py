"""The worker command's own lines, and how much of the library's log the commands show.

``trioqueue worker`` says a few things itself: the start banner, each signal and what it
does, the stop, the metrics address. As text (``--log-format text``, the default) they are
lines on stdout, for a person at a terminal. With ``--log-format json`` each is a JSON
record of its own (logger ``trioqueue.cli``, an ``event``), written by the same formatter
as the library's records and on the same stream, stderr, and so is the error a command
exits with: under Docker or journald the stream is JSON from its first line to its last, in
the order things happened. stderr rather than stdout because the library's records are
there already (deployments read them there), and stdout is for a command's result, of
which a worker has none.

``--log-level LEVEL`` (every command, beside ``-v``) sets how much of the library's log is
shown: that level and worse. Without it, ``-v`` means info and its absence warning.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TextIO, TypeAlias

from trioqueue.cli._escape import say
from trioqueue.cli._terminal import JsonLogFormatter

__all__ = [
    "LOGGER",
    "LOG_LEVELS",
    "JsonLines",
    "WorkerOut",
    "log_level",
    "say_ending",
    "say_line",
]

#: The logger named in the command line's own JSON records.
LOGGER = "trioqueue.cli"
#: ``--log-level``'s choices, as logging names them (lower case on the command line).
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class JsonLines:
    """The command's own lines as JSON records on ``stream`` (stderr), one per line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._formatter = JsonLogFormatter()

    def say(self, message: str, event: str, level: int = logging.INFO) -> None:
        """Write ``message`` as a record of ``level`` with this ``event``."""
        record = logging.LogRecord(LOGGER, level, __file__, 0, message, None, None)
        record.event = event
        self._stream.write(self._formatter.format(record) + "\n")
        self._stream.flush()


#: Where the worker's own lines go: a text stream, or JSON records.
WorkerOut: TypeAlias = "TextIO | JsonLines"


def say_line(out: WorkerOut, message: str, event: str) -> None:
    """One of the worker's own lines: text on ``out``, or a JSON record with ``event``."""
    if isinstance(out, JsonLines):
        out.say(message, event)
    else:
        say(message, file=out)


def say_ending(args: argparse.Namespace, prefix: str, message: str, event: str) -> None:
    """How a command ends, on stderr: with ``--log-format json`` a record of ``event``
    (an ``error`` at level ERROR, else WARNING), so that the stream stays JSON to its end;
    else ``prefix`` and ``message`` as text, a line per line of the message (one may list
    several problems), each made visible."""
    if getattr(args, "log_format", "text") == "json":
        level = logging.ERROR if event == "error" else logging.WARNING
        JsonLines(sys.stderr).say(message, event, level)
    else:
        say(*(prefix + message).split("\n"), file=sys.stderr)


def log_level(args: argparse.Namespace) -> int:
    """The level of the library's records a command shows: ``--log-level``, else info
    with ``-v``, else warning."""
    name: str | None = getattr(args, "log_level", None)
    if name is not None:
        return logging.getLevelNamesMapping()[name.upper()]
    return logging.INFO if getattr(args, "verbose", False) else logging.WARNING
