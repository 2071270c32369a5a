"""A joined host learns the cluster nodes added after it joined.

At each connect the gateway asks the hub's registrar for every node's AMQPS address (the
``nodes`` request) and appends the ones its ``broker.uri`` lacks, with the same credentials,
scheme and vhost as its first URI. Addresses are never removed; the new list is used from
the next reconnect on. Malformed answers are logged and ignored.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

logger = logging.getLogger("bridgecli.gateway")

_HOSTNAME = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,252}[a-z0-9])?")
_PORT = re.compile(r"[0-9]{1,5}")
_DEFAULT_PORTS = {"amqps": 5671, "amqp": 5672}


def node_address(entry: Any) -> str | None:
    """``entry`` as a normalised ``host:port`` (IPv6 bracketed, names lowercased), or None
    when it is not one: only such strings ever reach the config file."""
    if not isinstance(entry, str) or len(entry) > 300:
        return None
    host, sep, port = entry.rpartition(":")
    if not sep or not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        host = host.lower()
        return f"{host}:{int(port)}" if _HOSTNAME.fullmatch(host) else None
    return f"[{ip.compressed}]:{int(port)}" if ip.version == 6 else f"{ip}:{int(port)}"


def _address_of(uri: str) -> str | None:
    """The normalised ``host:port`` a configured URI points at (None when unreadable)."""
    try:
        parts = urlsplit(uri)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return node_address(f"{host}:{port}")


def merge_uris(configured: list[str], brokers: Any) -> tuple[list[str], list[Any]]:
    """``configured`` followed by a URI for every address of ``brokers`` it lacks, each
    built from the first URI (its user, password, scheme and vhost); and the entries
    ignored as malformed. Pure, so the rule is testable without a hub."""
    if not configured or not isinstance(brokers, list):
        return list(configured), [] if isinstance(brokers, list) else [brokers]
    first = urlsplit(configured[0])
    userinfo = first.netloc.rpartition("@")[0]
    known = {_address_of(u) for u in configured}
    merged, ignored = list(configured), []
    for entry in brokers:
        address = node_address(entry)
        if address is None:
            ignored.append(entry)
        elif address not in known:
            known.add(address)
            netloc = f"{userinfo}@{address}" if userinfo else address
            merged.append(urlunsplit((first.scheme, netloc, first.path, first.query, first.fragment)))
    return merged, ignored


def learn(grants: Any) -> None:
    """Ask the registrar for the nodes and add the missing ones to ``broker.uri`` in the
    config file (and to the running config, for the next reconnect). Never raises."""
    from bridgecli import paths
    from bridgecli.config import read_file, split_uris
    from bridgecli.config_edit import set_values
    from bridgecli.gateway import log as glog

    config = grants.config
    try:
        brokers = grants.nodes()
        if brokers is None:
            return
        path = paths.config_file()
        current = read_file(path).get("broker", {}).get("uri")
        if not isinstance(current, str) or current != config.values.get("broker.uri"):
            return  # broker.uri comes from the environment or a flag: the file is not it
        merged, ignored = merge_uris(split_uris(current), brokers)
        if ignored:
            glog.event(logger, "ignored malformed node addresses", logging.WARNING, entries=repr(ignored)[:200])
        if len(merged) == len(split_uris(current)):
            return
        joined = ",".join(merged)
        set_values({"broker.uri": joined})
        config.values["broker.uri"] = joined
        glog.event(logger, f"broker.uri now lists {len(merged)} nodes", takes_effect="next reconnect")
    except Exception as exc:  # learning is best effort: the configured nodes keep working
        glog.event(logger, "could not learn the hub's nodes", logging.WARNING, error=str(exc))


def learn_in_background(grants: Any) -> None:
    """Run :func:`learn` on its own thread when this is a joined host: a hub that is away
    must not hold up the connect."""
    if grants is not None and grants.config.values.get("hub.id"):
        threading.Thread(target=learn, args=(grants,), name="bridge-learn-nodes", daemon=True).start()
