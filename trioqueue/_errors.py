"""The exceptions trioqueue raises."""

from __future__ import annotations

from collections.abc import Iterable


class TrioqueueError(Exception):
    """Base class of every error trioqueue raises on its own account."""


class ConfigError(TrioqueueError, ValueError):
    """A worker configuration is invalid. ``problems`` lists every violation found."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        listing = "\n".join(f"  - {problem}" for problem in self.problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"invalid worker configuration ({count} {noun}):\n{listing}")


class BackendError(TrioqueueError):
    """A backend operation failed (a lost connection, a server error, an injected fault)."""


class UnknownJobError(TrioqueueError, LookupError):
    """No job has the given id."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"no job with id {job_id}")
