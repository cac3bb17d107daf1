"""How many wrong tokens a client may try (docs/dashboard.rst, "Safety rules"): the rule alone.

Sans-IO: no clock, no HTTP. Each client has a leaky bucket of failures: every wrong token
adds one, the bucket drains at ``refill`` failures per second, and a client whose bucket holds
``burst`` failures is refused until it has drained below that again (the answer says how long,
for ``Retry-After``). So a person who mistypes the token a few times never notices, and a
guesser gets ``burst`` tries, then one every ``1 / refill`` seconds. The table of clients is bounded: when it is full, buckets that have drained
are dropped first, then the oldest (a guesser spread over more addresses than the table holds
gets a fresh burst per evicted address; ``burst`` times the table size bounds what that buys).

The ASGI side (which requests are login attempts, the 429) is :mod:`trioqueue.web.logins`.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

__all__ = ["Bucket", "LoginThrottle", "client_key"]


@dataclass
class Bucket:
    """A client's failures: ``level`` as it stood at ``at``."""

    level: float
    at: float

    def drained(self, now: float, refill: float) -> float:
        return max(0.0, self.level - (now - self.at) * refill)


class LoginThrottle:
    """Failed logins per client, as leaky buckets (see the module's docstring)."""

    def __init__(self, *, burst: int = 10, refill: float = 0.1, max_clients: int = 4096) -> None:
        if burst < 1 or refill <= 0 or max_clients < 1:
            raise ValueError("burst and max_clients must be at least 1, refill above 0")
        self.burst = burst
        self.refill = refill
        self.max_clients = max_clients
        self._buckets: dict[str, Bucket] = {}

    def retry_after(self, client: str, now: float) -> int | None:
        """Whole seconds until ``client`` may try a token again; None when it may now."""
        bucket = self._buckets.get(client)
        if bucket is None:
            return None
        over = bucket.drained(now, self.refill) - (self.burst - 1)
        if over <= 0:
            return None
        return max(1, math.ceil(over / self.refill))

    def failed(self, client: str, now: float) -> None:
        """``client`` sent a wrong token at ``now``."""
        bucket = self._buckets.pop(client, None)
        level = 0.0 if bucket is None else bucket.drained(now, self.refill)
        self._make_room(now)
        self._buckets[client] = Bucket(level + 1.0, now)  # last in order: the newest

    def __len__(self) -> int:
        return len(self._buckets)

    def _make_room(self, now: float) -> None:
        if len(self._buckets) < self.max_clients:
            return
        for client, bucket in list(self._buckets.items()):
            if bucket.drained(now, self.refill) == 0.0:
                del self._buckets[client]
        while len(self._buckets) >= self.max_clients:
            del self._buckets[next(iter(self._buckets))]  # the oldest


def client_key(host: str | None) -> str:
    """Who a request comes from, for the throttle: its IP address, an IPv6 one by its /64
    (one machine usually holds a whole /64, so its addresses count as one client)."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)
