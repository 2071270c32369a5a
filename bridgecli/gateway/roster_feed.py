"""How a gateway hears other hosts (docs/roster.md#the-roster-relay): through a roster relay or
every host directly, as ``roster.relay`` says and as the relay is heard.

``auto``: every host directly until a relay frame is heard, then the relay alone; when it is
silent for max(T, 3 s, three of its frames), every host directly again and a whole-view sync request. ``only``:
the relay alone. ``off``: every host directly. Hosts whose digests disagree are asked for in
one sync request at most once a second; expiry is held while the listener is down or the
relay late, and for :data:`REHEAR_GRACE` seconds after.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from bridgecli.gateway import log as glog

logger = logging.getLogger("bridgecli.gateway")

#: no expiry for this long after the listener or the relay is heard again, in seconds
REHEAR_GRACE = 30.0
#: at most one sync request for wanted hosts this often, in seconds
WANTED_EVERY = 1.0


class RelayWatch:
    """Drives ``listener`` (a RosterListener: ``direct``, ``hear_directly``, ``connected``,
    ``relay_refused``) from what ``view`` (a RosterView) hears of relays. ``ask(hosts)`` sends
    a sync request (None: the whole view); ``want_full()`` makes our next frame a full one.
    Called from presence's tick, and ``epoch`` from the listener's thread."""

    def __init__(
        self,
        mode: str,
        interval: float,
        view: Any,
        listener: Any,
        ask: Callable[[list[str] | None], None],
        want_full: Callable[[], None],
    ) -> None:
        self.mode = mode
        self.interval = interval
        self.view = view
        self.listener = listener
        self.ask = ask
        self.want_full = want_full
        #: how long the relay may be silent before auto mode hears every host again
        self.silence = max(interval, 3.0)  # a lost relay costs at most an interval of changes
        self._asked_at = -1e9
        self._was_connected = False
        view.relay.fed = mode == "only"

    @property
    def fed(self) -> bool:
        """Are other hosts heard through the relay (not directly)?"""
        return bool(self.view.relay.fed)

    def epoch(self, relay: str, epoch: str) -> None:
        """A new relay or epoch was heard: it may lack our part, so send it in full."""
        glog.event(logger, "roster relay heard", relay=relay, epoch=epoch)
        self.want_full()

    def tick(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        relay, listener = self.view.relay, self.listener
        connected = listener.connected.is_set()
        self._was_connected = self._was_connected or connected
        if (self._was_connected and not connected) or (relay.fed and relay.late(now)):
            self.view.hold_expiry(now + REHEAR_GRACE)
        if self.mode == "off":
            return
        heard = relay.state.heard_at
        silence = max(self.silence, 3 * relay.state.interval)  # a relay that speaks rarely: 3 frames
        live = heard is not None and now - heard <= silence and not listener.relay_refused
        if self.mode == "auto" and live and listener.direct:
            listener.hear_directly(False)
            relay.fed = True
        elif self.mode == "auto" and not live and not listener.direct:
            glog.event(logger, "roster relay silent: hearing every host directly", relay=relay.state.relay)
            listener.hear_directly(True)
            relay.fed = False
            self.ask(None)
        if now - self._asked_at >= WANTED_EVERY:
            wanted = relay.take_wanted()
            if wanted:
                self._asked_at = now
                self.ask(wanted)

    def whole_view_on_reconnect(self) -> bool:
        """Should a reconnected listener ask for the whole view? Not while fed by the relay:
        the view is intact and digests fetch only what changed."""
        return not self.fed

    def info(self) -> dict[str, Any]:
        """The ``roster_relay`` status line: feed, relay, epoch, age, refused."""
        return dict(self.view.relay.info())
