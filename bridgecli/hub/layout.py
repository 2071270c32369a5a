"""Where the hub keeps its files, and its settings (``hub.json``).

Everything lives in ``<data dir>/hub`` (mode 0700, every file 0600): the CA and server
certificate, the hub database, the settings and the registrar's pid and log. The RabbitMQ
node itself stays the embedded node of ``bridge broker`` (``<data dir>/broker``), started
with the hub's listeners.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bridgecli import paths
from bridgecli.errors import CannotWrite

DEFAULT_AMQPS_PORT = 5671
#: how far apart the hub's and a joining host's clocks may be
MAX_CLOCK_SKEW = 300.0


def local_user(host_id: str | None = None) -> str:
    """The broker user of the hub machine's own gateway and CLI: the user named after its
    host id ``host_id`` (default: the saved hub's, else this configuration's), with full
    rights on loopback. Named after the host so that other hosts' sender check accepts what
    it publishes; full rights because the machine that runs the broker can read its database
    anyway, so restricting it would protect nothing."""
    if host_id is None:
        settings = load()
        if settings is not None:
            return settings.host_id
        from bridgecli import localbroker

        return localbroker.host_user()
    return host_id


def __getattr__(name: str) -> str:
    """``LOCAL_USER``: :func:`local_user` of this machine, computed when it is read (it
    follows the host id, so it cannot be a constant). Prefer ``local_user(host_id)``."""
    if name == "LOCAL_USER":
        return local_user()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def hub_dir() -> Path:
    return paths.data_dir() / "hub"


def db_path() -> Path:
    return hub_dir() / "hub.db"


def pki_dir() -> Path:
    return hub_dir() / "pki"


def cluster_dir() -> Path:
    """A cluster hub's node files: the Erlang cookie, the node's certificate and key."""
    return hub_dir() / "cluster"


def registrar_log() -> Path:
    return hub_dir() / "registrar.log"


@dataclass
class HubSettings:
    """What ``bridge hub start`` was given, kept so that a plain restart reproduces it."""

    hub_id: str
    host_id: str  # the hub machine's own bridge host id
    listen: list[tuple[str, int]] = field(default_factory=list)  # TLS listeners
    names: list[str] = field(default_factory=list)  # DNS names in the server certificate
    management_port: int = 0
    registrar_pid: int = 0
    active: bool = False  # hub start ran and hub stop has not
    cluster: bool = False  # the node is a cluster node (``hub start --cluster``)
    node_address: str = ""  # a cluster hub's node address: its node is ``bridge@node_address``
    converted_from: str = ""  # the node name this cluster hub's node had before ``--cluster``

    @property
    def addresses(self) -> list[str]:
        """The ``ADDR:PORT`` a joining host may dial: every named listener, then every name."""
        port = self.listen[0][1] if self.listen else DEFAULT_AMQPS_PORT
        shown = [f"[{a}]:{p}" if ":" in a else f"{a}:{p}" for a, p in self.listen if a not in ("0.0.0.0", "::")]
        return shown + [f"{n}:{port}" for n in self.names]


def load() -> HubSettings | None:
    """The saved settings, or None when this machine never ran ``bridge hub start``."""
    try:
        raw = json.loads((hub_dir() / "hub.json").read_text())
        raw["listen"] = [(str(a), int(p)) for a, p in raw.get("listen", [])]
        return HubSettings(**raw)
    except (OSError, ValueError, TypeError):
        return None


def save(settings: HubSettings) -> None:
    """Write ``hub.json`` atomically (0600 in the 0700 hub dir)."""
    from bridgecli.nodeusers import write_private_json

    path = hub_dir() / "hub.json"
    try:
        write_private_json(path, asdict(settings))
    except OSError as exc:
        raise CannotWrite(f"cannot write {path}: {exc.strerror}", "check the data directory") from None


def is_active_hub() -> bool:
    """True on the hub machine while its hub runs: its own commands then claim grants too."""
    settings = load()
    return bool(settings and settings.active)
