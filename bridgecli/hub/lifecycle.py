"""``bridge hub start|stop|status``: the embedded node made reachable over TLS, plus the registrar.

The hub is the embedded RabbitMQ node of ``bridge broker`` started with three additions: an
amqps listener on the given addresses (certificate from the hub's own CA), the management
plugin on loopback (the registrar's way to change users and permissions in milliseconds),
and the registrar process. Plain AMQP and ``guest`` stay on loopback for this machine's own
gateway and CLI. Settings, CA, users and grants are kept, so a plain restart reproduces all.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridgecli import localbroker
from bridgecli.errors import BrokerUnavailable, ConfigError, Timeout
from bridgecli.hub import layout
from bridgecli.hub.layout import DEFAULT_AMQPS_PORT, HubSettings
from bridgecli.hub.pki import HubPki
from bridgecli.hub.store import HubStore
from bridgecli.rabbitnode import free_port, pid_alive, port_is_free


def parse_listen(text: str) -> tuple[str, int | None]:
    """``ADDR`` or ``ADDR:PORT`` (``[v6]:PORT`` for IPv6) → (address, port or None)."""
    host, port = text, None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    elif text.count(":") == 1:
        host, port = text.split(":")
    try:
        ipaddress.ip_address(host)
        number = int(port) if port is not None else None
        if number is not None and not 0 < number < 65536:
            raise ValueError
    except ValueError:
        raise ConfigError(
            f"bad --listen {text!r}", "give an IP address of this machine, optionally with :PORT (e.g. 192.0.2.10:5671)"
        ) from None
    return host, number


def _choose_ports(wanted: list[tuple[str, int | None]], before: HubSettings | None) -> list[tuple[str, int]]:
    """A port for each listener: the one asked for, else the one it had, else 5671 when
    free, else a free one (a port of our own running listener counts as free)."""
    kept = dict(before.listen) if before else {}
    chosen = []
    for addr, port in wanted:
        if port is None:
            port = kept.get(addr) or (DEFAULT_AMQPS_PORT if port_is_free(DEFAULT_AMQPS_PORT, addr) else free_port())
        chosen.append((addr, port))
    return chosen


def _tls_conf(pki: HubPki, listen: list[tuple[str, int]]) -> list[str]:
    lines = [f"listeners.ssl.{i} = {f'[{a}]' if ':' in a else a}:{p}" for i, (a, p) in enumerate(listen, 1)]
    return lines + [
        f"ssl_options.cacertfile = {pki.ca_cert}",
        f"ssl_options.certfile = {pki.server_cert}",
        f"ssl_options.keyfile = {pki.server_key}",
        "ssl_options.verify = verify_none",
        "ssl_options.fail_if_no_peer_cert = false",
    ]


@dataclass
class HubStart:
    settings: HubSettings
    already_running: bool
    restarted_plain_broker: bool
    ca_fingerprint: str
    seconds: float


def start(config: Any, listen: list[str], names: list[str], timeout: float = 90.0) -> HubStart:
    """Start (or keep) the hub. ``listen``/``names`` replace the saved ones when given."""
    began = time.monotonic()
    before = layout.load()
    host_id = config.host_id
    wanted = [parse_listen(x) for x in listen] or [(a, p) for a, p in (before.listen if before else [])]
    if not wanted:
        raise ConfigError(
            "the hub needs an address to listen on",
            "give the address other hosts reach this machine at: `bridge hub start --listen ADDR`",
        )
    names = list(names) or (before.names if before else [])
    settings = HubSettings(
        hub_id=before.hub_id if before else host_id,
        host_id=host_id,
        listen=_choose_ports(wanted, before),
        names=names,
        management_port=before.management_port if before else 0,
        registrar_pid=before.registrar_pid if before else 0,
    )
    pki = HubPki(layout.pki_dir())
    pki.ensure_ca(settings.hub_id)
    reissued = pki.ensure_server_cert([a for a, _ in settings.listen if a not in ("0.0.0.0", "::")], names)
    running = localbroker.read_state()
    same = (
        before is not None
        and before.active
        and running is not None
        and running.management_port
        and before.listen == settings.listen
        and not reissued
    )
    restarted_plain = running is not None and not running.management_port
    if running is not None and not same:
        localbroker.stop()
        running = None
    if running is None:
        mgmt = (
            settings.management_port
            if settings.management_port and port_is_free(settings.management_port)
            else free_port()
        )
        result = localbroker.start(
            timeout, management=True, management_port=mgmt, extra_conf=_tls_conf(pki, settings.listen)
        )
        settings.management_port = result.info.management_port
    else:
        settings.management_port = running.management_port
    settings.active = True
    layout.save(settings)
    _own_local_entities(settings)
    if not pid_alive(settings.registrar_pid):
        settings.registrar_pid = _start_registrar(timeout)
        layout.save(settings)
    return HubStart(
        settings,
        already_running=bool(same),
        restarted_plain_broker=bool(restarted_plain),
        ca_fingerprint=pki.ca_fingerprint(),
        seconds=time.monotonic() - began,
    )


def _own_local_entities(settings: HubSettings) -> None:
    """The hub machine's entities registered before it became a hub are its own from now on,
    so that no joining host can claim their gids."""
    from bridgecli.hoststate.entities import open_registry

    store = HubStore(layout.db_path())
    try:
        store.claim(settings.host_id, [(e.gid, e.label) for e in open_registry().all()])
    finally:
        store.close()


def _start_registrar(timeout: float) -> int:
    """Launch the registrar process and wait until it consumes its queue."""
    log = layout.registrar_log()
    offset = log.stat().st_size if log.exists() else 0
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bridgecli.hub.registrar"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ),
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = _read_from(log, offset)
        if "registrar serving" in text:
            return process.pid
        if process.poll() is not None:
            raise BrokerUnavailable(f"the hub's registrar exited at start: {text.strip()[-300:]}", f"see {log}")
        time.sleep(0.1)
    raise Timeout(f"the hub's registrar did not start within {timeout:g}s", f"see {log}")


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def stop(timeout: float = 30.0) -> bool:
    """Stop the registrar and the node; False when no hub was running."""
    settings = layout.load()
    if settings is None or not settings.active:
        return False
    if pid_alive(settings.registrar_pid):
        try:
            os.killpg(settings.registrar_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while pid_alive(settings.registrar_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    localbroker.stop(timeout)
    settings.active, settings.registrar_pid = False, 0
    layout.save(settings)
    return True


def status() -> dict[str, Any]:
    """The hub's state for ``bridge hub status``."""
    settings = layout.load()
    node = localbroker.read_state()
    if settings is None:
        return {"running": False, "configured": False, "dir": str(layout.hub_dir())}
    pki = HubPki(layout.pki_dir())
    store = HubStore(layout.db_path())
    try:
        now = time.time()
        hosts = [h for h in store.hosts() if h.revoked is None]
        invites = [i for i in store.invites() if i.state(now) == "open"]
    finally:
        store.close()
    return {
        "running": bool(settings.active and node is not None),
        "configured": True,
        "hub": settings.hub_id,
        "host": settings.host_id,
        "addresses": settings.addresses,
        "ca_fingerprint": pki.ca_fingerprint() if pki.ca_cert.exists() else None,
        "registrar": {"pid": settings.registrar_pid or None, "alive": pid_alive(settings.registrar_pid)},
        "broker": {
            "pid": node.pid if node else None,
            "amqp_port": node.amqp_port if node else None,
            "management_port": settings.management_port,
        },
        "hosts": len(hosts),
        "open_invites": len(invites),
        "dir": str(layout.hub_dir()),
    }
