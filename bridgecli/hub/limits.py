"""What one registrar request may be: its size, its shape, how often a user may send one.

The registrar serves every joined host from one queue, so a host that sends a body it cannot
parse, a claim for a million gids or thousands of requests a second would otherwise crash it
or make every other host's register and join wait. These limits are far above what a gateway
sends (one claim per register, one per connect naming all of that host's entities).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

#: the largest request body parsed (a claim of 1,000 entities with 64-character labels fits)
MAX_BODY = 64 * 1024
#: the longest entity label recorded
MAX_LABEL = 64
#: the most gids one claim or release may name
MAX_GIDS_PER_CLAIM = 1000
#: the most legacy (untagged) gids the hub records for one host; each one lengthens its grant
MAX_LEGACY_GIDS = 2000
#: sustained requests per second per broker user, and the burst allowed on top
RATE = 20.0
BURST = 100
#: every answer goes to the requester's own direct reply-to pseudo-queue, nowhere else
DIRECT_REPLY_PREFIX = "amq.rabbitmq.reply-to."
#: buckets kept before full (idle) ones are forgotten
_MAX_BUCKETS = 10_000


class BadBody(ValueError):
    """A request body that is not a JSON value within the limits; ``str()`` says why."""


def _no_constant(name: str) -> Any:
    raise BadBody(f"the request holds {name}, which is not JSON")


def parse_body(body: bytes) -> Any:
    """The JSON value of a request body, or :class:`BadBody`. The size is checked before
    anything is decoded, and nesting too deep for the parser is a refusal, not a crash."""
    if len(body) > MAX_BODY:
        raise BadBody(f"the request is {len(body)} bytes; the limit is {MAX_BODY}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadBody("the request is not UTF-8") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise BadBody("the request is nested too deeply") from None
    except BadBody:
        raise
    except ValueError as exc:
        raise BadBody(f"the request is not JSON ({str(exc)[:80]})") from None


def is_direct_reply_to(reply_to: Any) -> bool:
    """True when ``reply_to`` names a requester's direct reply-to consumer: an answer sent
    anywhere else (another host's inbox or control queue) would be published with the
    registrar's full rights."""
    return isinstance(reply_to, str) and reply_to.startswith(DIRECT_REPLY_PREFIX) and len(reply_to) <= 255


class RateLimiter:
    """A token bucket per key (a broker user): ``rate`` tokens a second, at most ``burst``."""

    def __init__(self, rate: float = RATE, burst: int = BURST, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs rate > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str) -> float:
        """Spend one of ``key``'s tokens: 0.0 when there was one, else the seconds until
        there will be (nothing is spent then)."""
        now = self.clock()
        tokens, last = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(now - last, 0.0) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            if len(self._buckets) > _MAX_BUCKETS:
                self._forget_full(now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return max((1.0 - tokens) / self.rate, 0.001)

    def _forget_full(self, now: float) -> None:
        full = [k for k, (t, last) in self._buckets.items() if t + (now - last) * self.rate >= self.burst]
        for key in full:
            del self._buckets[key]


def retry_after(seconds: float) -> float:
    """``seconds`` rounded up to the millisecond, as the ``retryAfter`` of an answer."""
    return math.ceil(seconds * 1000) / 1000
