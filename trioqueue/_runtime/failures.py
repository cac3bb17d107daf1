"""What a failed attempt says about its exception: the ``last_error`` text, the exception's
qualified class name and its formatted traceback (docs/protocol.rst §14, "Errors and
tracebacks").

Formatting a traceback walks every frame and reads source lines, so it is done only for an
attempt that raised, once, as soon as it raised. The exception itself is kept too, until
the attempt's outcome line is logged with it (docs/usage.rst, "Logging"): its traceback
holds the attempt's frames, which hold it, so the runtime lets go of it then
(:meth:`Raised.logged`) rather than leave the cycle to the garbage collector. A success
costs nothing here.
"""

from __future__ import annotations

import traceback as tb

from trioqueue._core.tracebacks import bound_traceback

__all__ = ["Raised", "from_exception", "from_exit", "from_group", "qualified_name"]


class Raised:
    """An attempt's failure that an exception raised."""

    __slots__ = ("error_type", "exception", "text", "traceback")

    def __init__(
        self, text: str, error_type: str, traceback: str, exception: BaseException | None
    ) -> None:
        self.text = text  # "Type: message", for last_error
        self.error_type = error_type
        self.traceback = traceback  # bounded (MAX_TRACEBACK_CHARS)
        self.exception = exception  # for the outcome's log line; None once logged

    def logged(self) -> None:
        """The outcome's line is logged: the exception is needed no more."""
        self.exception = None


def from_group(group: BaseExceptionGroup[Exception], text: str) -> Raised:
    """What ``except* Exception`` caught from a claim hook or handler, with its ``text``.

    ``except*`` wraps an exception raised bare in a group of its own; that wrapper is
    the runtime's, not the handler's, so the exception itself is what is named and
    formatted. A group the handler raised is named and formatted whole.
    """
    return from_exception(_unwrapped(group), text)


def from_exit(own: BaseException, text: str, before: Raised | None) -> Raised:
    """A ``BaseException`` that got out of the attempt (``SystemExit``, say), ``text``
    naming all of it. With an error the handler raised ``before`` it, that error keeps its
    type, and both tracebacks are kept, the earlier first."""
    escaped = from_exception(own, text)
    if before is None:
        return escaped
    both = before.traceback + "\nThen, leaving the attempt:\n\n" + escaped.traceback
    return Raised(text, before.error_type, bound_traceback(both), own)


def qualified_name(kind: type[BaseException]) -> str:
    """``module.QualName`` of an exception class; a builtin's bare name (``ValueError``)."""
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def from_exception(exc: BaseException, text: str) -> Raised:
    """``exc`` as the failure whose ``last_error`` is ``text``: formatted whole, and named
    as ``text`` names it (see :func:`_named`)."""
    formatted = "".join(tb.format_exception(exc))
    return Raised(text, qualified_name(type(_named(exc))), bound_traceback(formatted), exc)


def _named(exc: BaseException) -> BaseException:
    """The exception that ``last_error`` names: a group of one exception (what a trio
    nursery raises around a single error) says ``Type: message`` of that one, so its type
    is that one's too; a group of several is named as the group."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _unwrapped(group: BaseExceptionGroup[Exception]) -> BaseException:
    if type(group) is ExceptionGroup and not group.message and len(group.exceptions) == 1:
        return group.exceptions[0]
    return group
