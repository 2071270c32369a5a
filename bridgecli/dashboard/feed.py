"""The dashboard's one AMQP connection: a tap on ``bridge.msg``, a tap on ``bridge.dlx``
(dead-letter events, for the rates) and a listener on ``bridge.roster`` (the fleet without a
local gateway). Exclusive auto-delete queues only: it never takes a message from an inbox.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from bridgecli import control_client
from bridgecli.amqp import tap as tapping
from bridgecli.amqp import topology
from bridgecli.config import Config
from bridgecli.dashboard.metrics import DashboardMetrics
from bridgecli.dashboard.traffic import Traffic
from bridgecli.roster import RosterView

logger = logging.getLogger("bridgecli.dashboard")
#: seconds the feed lets messages gather in the socket between two reads (well within the
#: page's one-second budget)
BATCH_PAUSE = 0.1


class BrokerFeed:
    """Runs the consumer loop on its own thread, reconnecting with backoff until :meth:`stop`.

    ``connected`` and ``error`` say what the page should show about the broker; ``metrics``
    counts the tapped messages by kind."""

    def __init__(
        self, config: Config, traffic: Traffic, roster: RosterView, metrics: DashboardMetrics | None = None
    ) -> None:
        self.metrics = metrics or DashboardMetrics()
        self.config = config
        self.traffic = traffic
        self.roster = roster
        self.connected = False
        self.error: str | None = None
        #: why dead-letter rates are unavailable (the broker user may not bind bridge.dlx)
        self.dead_letter_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-feed", daemon=True)

    def start(self) -> BrokerFeed:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def host_of(self, gid: str | None) -> str | None:
        entry = self.roster.get(gid) if gid else None
        return entry.host if entry else None

    def _run(self) -> None:
        from bridgecli.amqp.connection import CONNECTION_ERRORS, connect
        from bridgecli.errors import BridgeError

        delay = 0.5
        while not self._stop.is_set():
            connection = None
            try:
                connection = connect(self.config, name="bridge-dashboard")
                self._consume(connection)
                delay = 0.5
            except (BridgeError, *CONNECTION_ERRORS) as exc:
                self.error = str(exc) or type(exc).__name__
            except Exception as exc:  # keep serving the page; say what broke
                logger.exception("dashboard feed failed")
                self.error = f"{type(exc).__name__}: {exc}"
            finally:
                self.connected = False
                if connection is not None and connection.is_open:
                    try:
                        connection.close()
                    except Exception:  # the connection is dropped either way; what broke it is logged above
                        pass
            self._stop.wait(delay)
            delay = min(delay * 2, 5.0)

    def _consume(self, connection: Any) -> None:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=500)
        messages = tapping.bind(channel)
        roster = tapping.bind(channel, topology.ROSTER, "roster.#", prefix="bridge.listen")
        channel.basic_consume(messages, self._on_message, auto_ack=True)
        channel.basic_consume(roster, self._on_roster, auto_ack=True)
        # between full frames gateways send only what changed: ask each for its full frame
        control_client.ask_roster_sync(channel, self.config, self._on_roster)
        self._tap_dead_letters(connection)
        self.connected, self.error = True, None
        last_expiry = 0.0
        while not self._stop.wait(BATCH_PAUSE):
            # drain what arrived during the pause in one go: at 1,000 msg/s pika then wakes
            # ten times a second instead of for every few messages, which halves its cost
            connection.process_data_events(time_limit=0)
            if time.monotonic() - last_expiry > 1.0:
                self.roster.expire()
                last_expiry = time.monotonic()

    def _tap_dead_letters(self, connection: Any) -> None:
        """Bind a copy of ``bridge.dlx`` on its own channel: a broker user that may not read
        it only loses the dead-letter rate, not the whole feed."""
        import pika.exceptions

        try:
            channel = connection.channel()
            name = tapping.bind(channel, topology.DLX, "", prefix="bridge.tap.dlx")
            channel.basic_consume(name, self._on_dead_letter, auto_ack=True)
            self.dead_letter_error = None
        except pika.exceptions.ChannelClosedByBroker as exc:
            self.dead_letter_error = f"cannot read bridge.dlx ({exc.reply_text})"

    def _on_message(self, _channel: Any, method: Any, _props: Any, body: bytes) -> None:
        row = tapping.row(method.routing_key, body)
        self.metrics.tapped(row.get("kind"))
        sender = row.get("fromHost") or self.host_of(row.get("from"))
        self.traffic.add(row, sender, self.host_of(row.get("to") or method.routing_key))

    def _on_roster(self, _channel: Any, method: Any, props: Any, body: bytes) -> None:
        self.roster.apply_delivery(method, props, body)

    def _on_dead_letter(self, _channel: Any, method: Any, _props: Any, _body: bytes) -> None:
        host = self.host_of(method.routing_key)
        self.traffic.rates.count(host or "?", "dead")
