"""Which broker to talk to: ``broker.uri`` when configured, else the embedded node.

Deliberately free of pika so that commands can resolve (and report) the broker before
paying for the import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridgecli.errors import BrokerUnavailable

if TYPE_CHECKING:
    from bridgecli.config import Config


def resolve_broker_uri(config: Config) -> list[str]:
    """The broker URIs to try, in order.

    ``broker.uri`` (flag, env ``BRIDGE_BROKER_URI`` or file; comma-separated for a cluster)
    wins; otherwise the URI recorded by a running ``bridge broker start``. Raises
    BrokerUnavailable when neither exists.
    """
    from bridgecli.config import split_uris

    configured = config.values.get("broker.uri")
    if configured:
        return split_uris(configured)
    from bridgecli import localbroker

    recorded = localbroker.recorded_uri()
    if recorded:
        return [recorded]
    raise BrokerUnavailable(
        "no broker is configured", "run `bridge broker start` or set broker.uri / BRIDGE_BROKER_URI"
    )


def redact(uri: str) -> str:
    """``broker.uri`` with every password replaced by ``***`` (for output and logs)."""
    from bridgecli.config import split_uris

    shown = []
    for one in split_uris(uri) or [uri]:
        scheme, sep, rest = one.partition("://")
        creds, at, host = rest.rpartition("@")
        if sep and at and ":" in creds:
            one = f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"
        shown.append(one)
    return ",".join(shown)
