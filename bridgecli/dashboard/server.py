"""Running a dashboard: bind 127.0.0.1 (never another address), make the token, start the
feed and the collector, and serve with uvicorn until interrupted."""

from __future__ import annotations

import secrets
import socket

from bridgecli.config import Config
from bridgecli.errors import Conflict

#: the only address the dashboard listens on: it shows every host's messages
BIND = "127.0.0.1"


class Dashboard:
    """One dashboard. Construction binds the port (so :attr:`url` is known before serving);
    :meth:`serve` blocks."""

    def __init__(self, config: Config, port: int = 0) -> None:
        self.config = config
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((BIND, port))
        except OSError as exc:
            self.sock.close()
            raise Conflict(
                f"cannot listen on {BIND}:{port} ({exc.strerror})", "pass another --port, or --port 0 for any free one"
            ) from None
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.token = secrets.token_urlsafe(32)

    @property
    def url(self) -> str:
        return f"http://{BIND}:{self.port}/?token={self.token}"

    def serve(self) -> None:
        import prometheus_client
        import uvicorn

        from bridgecli.dashboard import browser_view
        from bridgecli.dashboard.app import create_app
        from bridgecli.dashboard.collector import Collector, DeadLetterView
        from bridgecli.dashboard.feed import BrokerFeed
        from bridgecli.dashboard.metrics import DashboardMetrics
        from bridgecli.dashboard.traffic import Traffic
        from bridgecli.gateway.identity import IdentityPolicy
        from bridgecli.roster import RosterView

        prometheus_client.disable_created_metrics()  # the process is the dashboard's own
        traffic = Traffic()
        # the fleet as heartbeats tell it, judged like a gateway judges them (docs/roster.md)
        roster = RosterView(
            self.config.values["roster.expiry_missed"],
            policy=IdentityPolicy.from_config(self.config.values),
            local_host=self.config.host_id,
        )
        metrics = DashboardMetrics(lambda: feed.connected)
        feed = BrokerFeed(self.config, traffic, roster, metrics).start()
        dead_letters = DeadLetterView(self.config)
        browser = browser_view.BrowserView(self.config)
        collector = Collector(self.config, feed, dead_letters, browser.snapshot, metrics=metrics)
        collector.start()
        app = create_app(self.token, self.port, collector, traffic, dead_letters, metrics)
        server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, access_log=False)
        )
        try:
            server.run(sockets=[self.sock])
        finally:
            collector.stop()
            browser.close()
            feed.stop()
            self.sock.close()
