"""The registrar's side of ``bridge join --node``: a node invite traded for cluster secrets.

The answer carries the Erlang cookie, the hub CA, a distribution certificate and an AMQPS
server certificate (each with a new key) for the invite's address, the existing nodes, the
AMQPS port and the admin credential of the node's own registrar. It travels only on the
enrolment connection, inside the TLS the joining machine verified against the invite's CA:
nothing of it is stored on the hub but the node's record. Also the cluster part of a host's enrolment answer.
"""

from __future__ import annotations

import logging
from typing import Any

from bridgecli.errors import BrokerUnavailable
from bridgecli.hub import cluster, layout, node_registrar
from bridgecli.hub.hub_store import HubStore, InviteRecord
from bridgecli.hub.pki import HubPki
from bridgecli.node_dist import node_name

logger = logging.getLogger("bridgecli.hub.registrar")


def host_extra(store: HubStore) -> dict[str, Any]:
    """What a host's enrolment answer adds on a cluster hub: every node's AMQPS address,
    so that the host can fail over between them."""
    return {"cluster": True, "brokers": [n.address for n in store.nodes()]}


def node_answer(store: HubStore, record: InviteRecord, now: float) -> dict[str, Any]:
    """Issue the node's certificates, record the node, and return the answer (secrets
    included) for the used node invite ``record``."""
    settings = layout.load()
    if settings is None and cluster.read_node_record() is not None:  # a node machine's registrar
        raise BrokerUnavailable(
            "only the hub machine's registrar can issue node certificates, and another one is active",
            "retry when the hub machine's registrar is active (restart the other nodes' brokers)",
        )
    if settings is None or not settings.cluster or not record.address:
        return {"ok": False, "kind": "invite", "error": "this hub is not a cluster", "hint": cluster.FRESH_HINT}
    pki = HubPki(layout.pki_dir())
    address, port = record.address, settings.listen[0][1]
    node_key, node_cert = pki.issue_node_cert(f"node-{address}", [address])
    amqps_key, amqps_cert = pki.issue_amqps_cert([address])
    nodes = [{"name": n.name, "nodename": n.nodename, "address": n.address} for n in store.nodes()]
    store.add_node(record.host, f"{address}:{port}", node_name(address))
    logger.info("node %s (%s) enrolled (invite %s)", record.host, node_name(address), record.invite_id)
    return {
        "ok": True,
        "hub": settings.hub_id,
        "name": record.host,
        "address": address,
        "nodename": node_name(address),
        "cookie": cluster.cookie(),
        "ca": pki.ca_cert.read_text(),
        "nodeCert": node_cert.decode(),
        "nodeKey": node_key.decode(),
        "amqpsCert": amqps_cert.decode(),
        "amqpsKey": amqps_key.decode(),
        "nodes": nodes,
        "amqpsPort": port,
        "hubTime": now,
        "registrar": node_registrar.answer_part(settings.host_id),
    }
