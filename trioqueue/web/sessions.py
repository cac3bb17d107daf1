"""Login sessions (docs/dashboard.rst, "Safety rules"): what the login cookie holds instead of
the token.

A session is a random id (256 bits) the server keeps in a bounded table with the time it was
made; the cookie carries the id and an HMAC of it under a key made afresh for each app, so a
cookie this app did not sign is refused without a lookup, and a cookie of another dashboard on
the same host (browsers send cookies to every port) means nothing here. Logging out removes the
id from the table: that cookie is then dead, wherever a copy of it went. Sessions end after
``lifetime`` seconds too, and when the table is full the oldest is dropped (that browser logs
in again). A restart forgets every session.

Sans-IO: every call takes ``now``; the cookie itself is set by :mod:`trioqueue.web.auth`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["Sessions"]


class Sessions:
    """The live sessions of one app."""

    def __init__(self, *, lifetime: float = 12 * 3600.0, max_sessions: int = 1000) -> None:
        self.lifetime = lifetime
        self.max_sessions = max_sessions
        self._key = secrets.token_bytes(32)
        self._started: dict[str, float] = {}  # id -> when it was made, oldest first

    def start(self, now: float) -> str:
        """A new session; the cookie's value (``id.signature``)."""
        while len(self._started) >= self.max_sessions:
            del self._started[next(iter(self._started))]
        session_id = secrets.token_urlsafe(32)
        self._started[session_id] = now
        return f"{session_id}.{self._sign(session_id)}"

    def valid(self, cookie: str | None, now: float) -> bool:
        """Whether ``cookie`` names a live session this app signed."""
        session_id = self._id_of(cookie)
        if session_id is None:
            return False
        started = self._started.get(session_id)
        if started is None:
            return False
        if now - started >= self.lifetime:
            del self._started[session_id]
            return False
        return True

    def end(self, cookie: str | None) -> None:
        """Log out: the session ``cookie`` names is no longer valid (a no-op for none)."""
        session_id = self._id_of(cookie)
        if session_id is not None:
            self._started.pop(session_id, None)

    def short_id(self, cookie: str | None) -> str | None:
        """What the audit log names the session of ``cookie`` by: 8 hex digits of a hash of
        its id under this app's key (the id is a credential, so no part of it is shown),
        the same for every request of that session. None for a cookie this app did not
        sign."""
        session_id = self._id_of(cookie)
        if session_id is None:
            return None
        return hmac.new(self._key, b"audit:" + session_id.encode(), hashlib.sha256).hexdigest()[:8]

    def __len__(self) -> int:
        return len(self._started)

    def _sign(self, session_id: str) -> str:
        return hmac.new(self._key, session_id.encode(), hashlib.sha256).hexdigest()

    def _id_of(self, cookie: str | None) -> str | None:
        """The id of a cookie this app signed, else None."""
        if not cookie:
            return None
        session_id, _, signature = cookie.partition(".")
        if not hmac.compare_digest(signature.encode(), self._sign(session_id).encode()):
            return None
        return session_id
