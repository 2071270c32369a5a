"""The fleet as the page shows it: hosts and entities, with the ones that disappeared kept
and marked gone — a vanished agent is news, so it is never silently dropped."""

from __future__ import annotations

from typing import Any

#: most gone entities remembered (the oldest are forgotten first)
MAX_GONE = 500


class FleetTracker:
    """Merges successive roster views; not thread-safe (one collector thread calls it)."""

    def __init__(self) -> None:
        self._hosts: dict[str, dict[str, Any]] = {}
        self._entities: dict[str, dict[str, Any]] = {}

    def update(
        self, gateways: list[dict[str, Any]], entries: list[dict[str, Any]], local: dict[str, Any] | None, now: float
    ) -> dict[str, Any]:
        """``gateways``/``entries`` are roster rows (``GatewayEntry``/``RosterEntry`` as
        dicts); ``local`` is the local gateway's ``status`` answer, which adds what heartbeats
        do not carry for this host (broker URIs and server). Returns ``{"hosts", "entities"}``."""
        live_hosts = set()
        for g in gateways:
            live_hosts.add(g["host"])
            started = g.get("started")
            self._hosts[g["host"]] = {
                "host": g["host"],
                "version": g.get("version"),
                "lastSeen": g.get("last_seen"),
                "uptime": round(now - started) if started else None,
                "entities": g.get("entities"),
                "broker": "connected",
                "gone": False,
                "local": False,
            }
        if local is not None:
            broker = local.get("broker") or {}
            row = self._hosts.setdefault(local["host"], {"host": local["host"], "lastSeen": None, "entities": None})
            server = broker.get("server") or {}
            row.update(
                {
                    "version": local.get("version"),
                    "uptime": round(local.get("uptime") or 0),
                    "broker": ("connected" if broker.get("connected") else "disconnected (reconnecting)"),
                    "brokerServer": " ".join(str(server.get(k, "")) for k in ("product", "version")).strip(),
                    "gone": False,
                    "local": True,
                }
            )
            live_hosts.add(local["host"])
        for host, row in self._hosts.items():
            if host not in live_hosts and not row["gone"]:
                row.update(gone=True, goneSince=now, broker="no heartbeat")
        live = set()
        for e in entries:
            live.add(e["gid"])
            self._entities[e["gid"]] = {
                "gid": e["gid"],
                "label": e["label"],
                "host": e["host"],
                "role": e["role"],
                "backend": e["backend"],
                "status": e["status"],
                "lastSeen": e["last_seen"],
                "channels": list(e.get("channels") or ()),
                "gone": False,
            }
        for gid, row in self._entities.items():
            if gid not in live and not row["gone"]:
                row.update(gone=True, goneSince=now, status="gone")
        gone = [g for g, r in self._entities.items() if r["gone"]]
        for gid in gone[: max(0, len(gone) - MAX_GONE)]:
            del self._entities[gid]
        return {
            "hosts": sorted(self._hosts.values(), key=lambda r: r["host"]),
            "entities": sorted(self._entities.values(), key=lambda r: (r["host"], r["label"], r["gid"])),
        }
