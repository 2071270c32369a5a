"""The ``webhook`` delivery backend: ``bridge register --deliver webhook:https://…``.

Each message is POSTed as its envelope JSON, the exact body that travelled through the
broker, to the entity's URL. The gateway acks the broker only after :meth:`deliver` returns,
so "delivered" means the receiver said 2xx (:mod:`.posting` says which failures are retried).
Delivery is at-least-once: a gateway killed between the 2xx and its ack POSTs again after a
restart, so receivers deduplicate on ``X-Bridge-Msg-Id``.

Settings, in the host's ``bridge.toml``::

    [plugins.webhook]
    timeout = 10          # seconds per POST
    secret = "…"          # optional: sign bodies (X-Bridge-Signature: sha256=HMAC)
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from bridgecli.config import Setting, positive
from bridgecli.errors import ConfigError, DeliveryError
from bridgecli.interfaces import BackendContext, Entity
from bridgecli_webhook import __version__
from bridgecli_webhook.posting import Outcome, post, signature

DEFAULT_TIMEOUT = 10.0

#: ``[plugins.webhook]``, declared so that ``bridge config set plugins.webhook.KEY`` checks it
PLUGIN_SETTINGS = (
    Setting("timeout", float, DEFAULT_TIMEOUT, "Seconds one POST may take.", check=positive),
    Setting("secret", str, None, "Key of the X-Bridge-Signature HMAC (unset: unsigned).", secret=True),
)


def check_url(address: str | None) -> str:
    """Return ``address`` if it is an absolute http(s) URL; else raise a ConfigError with
    the fix (bridge shows it at registration, long before any message is lost)."""
    if not address:
        raise ConfigError("the webhook backend needs a URL", "use --deliver webhook:https://host/path")
    parts = urllib.parse.urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"webhook address {address!r} is not an http(s) URL", "use --deliver webhook:https://host/path"
        )
    return address


@dataclass(frozen=True)
class Settings:
    """``[plugins.webhook]``, validated once when the gateway builds the backend."""

    timeout: float = DEFAULT_TIMEOUT
    secret: str | None = None

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> Settings:
        unknown = sorted(set(table) - {"timeout", "secret"})
        if unknown:
            raise ConfigError(
                f"[plugins.webhook] has unknown key(s) {', '.join(unknown)}", "the keys are timeout and secret"
            )
        timeout = table.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(
                f"[plugins.webhook] timeout must be a positive number of seconds, not {timeout!r}", "e.g. timeout = 10"
            )
        secret = table.get("secret")
        if secret is not None and (not isinstance(secret, str) or not secret):
            raise ConfigError("[plugins.webhook] secret must be a non-empty string", 'e.g. secret = "…"')
        return cls(float(timeout), secret)


def request_headers(entity_gid: str, envelope: Any, body: bytes, settings: Settings) -> dict[str, str]:
    """Headers a receiver can route and deduplicate on without parsing the body."""
    headers = {
        "User-Agent": f"bridgecli-webhook/{__version__}",
        "X-Bridge-Msg-Id": envelope.msg_id,
        "X-Bridge-Kind": envelope.kind,
        "X-Bridge-Recipient": entity_gid,
    }
    if settings.secret:
        headers["X-Bridge-Signature"] = signature(settings.secret, body)
    return headers


class WebhookBackend:
    """POSTs envelopes; built once per gateway by the plugin's factory."""

    #: network I/O may block for up to ``timeout``: keep it off the gateway's AMQP thread
    inline = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @classmethod
    def from_context(cls, context: BackendContext) -> WebhookBackend:
        return cls(Settings.from_table(context.config.plugin_settings("webhook")))

    def check_address(self, address: str | None) -> None:
        check_url(address)

    def send(self, url: str, entity_gid: str, envelope: Any) -> Outcome:
        """POST one envelope and return the classified outcome (used by ``webhook-test``)."""
        body = envelope.to_bytes()
        return post(
            url, body, headers=request_headers(entity_gid, envelope, body, self.settings), timeout=self.settings.timeout
        )

    def deliver(self, entity: Entity, envelope: Any) -> None:
        outcome = self.send(check_url(entity.address), entity.gid, envelope)
        if outcome.delivered:
            return
        if outcome.retryable:
            raise DeliveryError(
                f"webhook {entity.address} for {entity.label}: {outcome.detail}",
                "the gateway retries; check the receiver",
            )
        raise DeliveryError(
            f"webhook {entity.address} for {entity.label} refused the message: {outcome.detail}",
            "fix the URL or the receiver; the message is in bridge.dlq (bridge dlq retry)",
            retryable=False,
        )

    def status(self, entity: Entity) -> str:
        # A webhook has no session to be busy in; probing it on every heartbeat would be
        # traffic the receiver did not ask for.
        return "idle"
