"""What ``trioqueue worker`` imports by name: ``MODULE:HANDLER``, ``MODULE:MAPPING``, the hooks
and ``--resources``, each refused in one line (exit 2) when it does not import or is of the
wrong kind, with the file and line of the user's code that failed.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import trioqueue
from trioqueue.cli._commands.common import EXIT_FAILED, CliError

#: What a pool works with: a handler, or a whole config from a mapping.
PoolSpec: TypeAlias = "Callable[..., Any] | trioqueue.WorkerConfig"


def pool_specs(target: str | None, queues: Sequence[str]) -> list[tuple[str, PoolSpec]]:
    """``(queue, handler or config)`` per pool, from the ``MODULE:HANDLER`` argument and
    the ``--queue`` options, in the order given.

    ``--queue Q`` (no ``=``) names the queue of ``MODULE:HANDLER``; without one, that
    argument names a mapping. ``--queue Q=MODULE:HANDLER`` adds a pool of its own.
    """
    plain = [queue for queue in queues if "=" not in queue]
    pairs = [queue.partition("=") for queue in queues if "=" in queue]
    specs: list[tuple[str, PoolSpec]] = []
    if len(plain) > 1:
        raise CliError(
            f"--queue {plain[0]} and --queue {plain[1]}: MODULE:HANDLER works on one queue; "
            "give each other queue its handler, --queue Q=MODULE:HANDLER"
        )
    if plain and target is None:
        raise CliError(f"--queue {plain[0]} needs a handler: MODULE:HANDLER --queue {plain[0]}")
    if plain and target is not None:
        specs.append((plain[0], import_handler(target)))
    elif target is not None:
        specs.extend(import_mapping(target).items())
    for queue, _, spec in pairs:
        specs.append((queue, import_handler(spec)))
    if not specs:
        raise CliError(
            "nothing to work on: give MODULE:HANDLER --queue Q, --queue Q=MODULE:HANDLER "
            "(repeatable), or MODULE:MAPPING"
        )
    counts = collections.Counter(queue for queue, _ in specs)
    twice = [queue for queue, count in counts.items() if count > 1]
    if twice:
        raise CliError(f"queue {twice[0]!r} is given twice: one pool per queue")
    return specs


def import_mapping(spec: str) -> dict[str, PoolSpec]:
    """The mapping ``{queue: handler or WorkerConfig}`` named by ``MODULE:ATTR``.

    A WorkerConfig's queue is its key; one that names another queue is refused.

    Raises:
        CliError: it does not import, is not a non-empty mapping of queue names to
            callables or WorkerConfigs, or a config's queue disagrees with its key.
    """
    target = import_object(spec, "the mapping", "MAPPING")
    if not isinstance(target, Mapping):
        if callable(target):
            raise CliError(f"{spec} is a handler: name its queue, {spec} --queue Q")
        raise CliError(
            f"{spec} must be a mapping of queue names to handlers or WorkerConfigs, "
            f"not {type(target).__name__}"
        )
    if not target:
        raise CliError(f"{spec} is an empty mapping: no queue to work on")
    specs: dict[str, PoolSpec] = {}
    for queue, value in target.items():
        if not isinstance(queue, str):
            raise CliError(f"{spec}: queue names must be strings, got {queue!r}")
        if isinstance(value, trioqueue.WorkerConfig):
            if value.queue not in (queue, DEFAULT_QUEUE):
                raise CliError(
                    f"{spec}[{queue!r}] is a WorkerConfig for queue {value.queue!r}: "
                    "make the key and its queue agree"
                )
            specs[queue] = dataclasses.replace(value, queue=queue)
        elif callable(value):
            specs[queue] = value
        else:
            raise CliError(
                f"{spec}[{queue!r}] must be a handler (callable) or a WorkerConfig, "
                f"not {type(value).__name__}"
            )
    return specs


#: WorkerConfig's default queue: a config in a mapping that leaves it takes its key.
DEFAULT_QUEUE = "default"


class ReportedResources:
    """``--resources MODULE:ATTR``: the imported factory's context manager, whose failures
    on entry or exit become one line (exit 1) instead of a traceback.

    Imported at once (a bad spec exits 2 before connecting); called and entered by
    ``run_workers``, before any pool starts.
    """

    def __init__(self, spec: str) -> None:
        target = import_object(spec, "--resources", "ATTR")
        if not (callable(target) or hasattr(target, "__aenter__")):
            raise CliError(
                f"--resources {spec} must be an async context manager or a function "
                f"returning one, not {type(target).__name__}"
            )
        self.spec = spec
        self._target = target
        self._manager: contextlib.AbstractAsyncContextManager[Any] | None = None

    async def __aenter__(self) -> Any:
        target = self._target
        try:
            manager = target if hasattr(target, "__aenter__") else target()
            if not hasattr(manager, "__aenter__"):
                raise TypeError(f"it returned {type(manager).__name__}, not a context manager")
            value = await manager.__aenter__()
        except Exception as exc:
            raise self._failed("starting", exc) from exc
        self._manager = manager
        return value

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._manager is not None  # entered
        try:
            answer: bool | None = await self._manager.__aexit__(*exc_info)
        except Exception as exc:
            if exc is exc_info[1]:
                raise  # the pools' own error, passed through
            raise self._failed("stopping", exc) from exc
        return answer

    def _failed(self, when: str, exc: Exception) -> CliError:
        return CliError(
            f"--resources {self.spec} failed {when}: {type(exc).__name__}: {exc}{_where(exc)}",
            EXIT_FAILED,
        )


def import_handler(
    spec: str, what: str = "handler", attribute: str = "HANDLER"
) -> Callable[..., Any]:
    """The callable named by ``MODULE:HANDLER`` (``HANDLER`` may be dotted).

    The current directory is importable, as with ``python -m``. ``what`` and ``attribute``
    name it in the messages (a hook: ``--on-job-failed``, ``ATTR``).

    Raises:
        CliError: the spec is malformed, the module or attribute is missing, or it is not
            callable.
    """
    target = import_object(spec, what, attribute)
    if not callable(target):
        raise CliError(f"{spec} is not callable")
    handler: Callable[..., Any] = target
    return handler


def import_object(spec: str, what: str, attribute_name: str) -> Any:
    """The object named by ``MODULE:ATTR`` (see :func:`import_handler`)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CliError(f"{what} must look like MODULE:{attribute_name}, got {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import module {module_name!r}: {exc}") from exc
    except Exception as exc:  # the module itself failed: a SyntaxError, or raised at import
        raise CliError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}{_where(exc)}"
        ) from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CliError(f"module {module_name!r} has no attribute {attribute!r}") from None
    return target


def _where(exc: BaseException) -> str:
    """Where an import failed: the file and line, as far as the user's own code goes.

    A SyntaxError carries them in its message already. Otherwise it is the innermost frame
    outside the import machinery and the standard library, so that an error raised inside
    (say) ``json`` points at the user's call of it.
    """
    if isinstance(exc, SyntaxError):
        return ""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<frozen ")
    ]
    own = [frame for frame in frames if not _is_library_file(frame.filename)]
    if not (own or frames):
        return ""
    frame = (own or frames)[-1]
    return f" (at {frame.filename}, line {frame.lineno})"


def _is_library_file(filename: str) -> bool:
    """True for a file of the standard library or of an installed package."""
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"]}
    return any(filename.startswith(root + os.sep) for root in roots)
