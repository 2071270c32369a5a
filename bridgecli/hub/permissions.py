"""Least privilege per host, as data: the regexes of the deploy guide, for one host's gids.

Inbox names (``agent.<gid>.inbox``) carry no host, so a host's own inboxes can only be named
by listing its gids; everything else is static per host. The hub's registrar applies these
through the management API whenever a host's gids change; the deploy guide shows the same
regexes as ``rabbitmqctl`` lines for people who run their own broker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: exchanges every gateway declares (configure), publishes to (write) and binds from (read)
EXCHANGES = r"bridge\.(msg|roster|control|dlx|delay)"
#: where hosts send grant claims; declared by the hub's registrar only (write, no configure)
REGISTRAR_EXCHANGE = "bridge.registrar"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@dataclass(frozen=True)
class HostPermissions:
    configure: str
    write: str
    read: str
    topic_msg_write: str
    topic_msg_read: str
    topic_roster_write: str
    topic_roster_read: str

    def rabbitmqctl(self, user: str, vhost: str = "/") -> list[list[str]]:
        """The ``rabbitmqctl`` argument lists that apply these permissions to ``user``."""
        return [
            ["set_permissions", "-p", vhost, user, self.configure, self.write, self.read],
            ["set_topic_permissions", "-p", vhost, user, "bridge.msg", self.topic_msg_write, self.topic_msg_read],
            [
                "set_topic_permissions",
                "-p",
                vhost,
                user,
                "bridge.roster",
                self.topic_roster_write,
                self.topic_roster_read,
            ],
        ]


def for_host(host: str, gids: Iterable[str], *, registrar: bool = False) -> HostPermissions:
    """Least privilege for the gateway (and CLI) of ``host`` owning entities ``gids``;
    ``registrar`` adds the right to publish grant claims to the hub's registrar."""
    h = re.escape(host)
    owned = "|".join(re.escape(g) for g in sorted(gids)) or "(?!)"
    own_queues = rf"control\.{h}|roster\.{h}|agent\.({owned})\.inbox"
    # bridge.dlq: declared and bound by every gateway at connect, read only by ops.
    # bridge.delay.<ms>: the TTL tiers of the fallback delay exchange.
    # bridge.reply.<uuid>: exclusive reply queues of spawn/stop requests, bound to
    # bridge.control under their own name (answers never use the default exchange).
    shared_queues = rf"bridge\.dlq|bridge\.delay\.\d+|bridge\.reply\.{UUID}"
    claims = "|" + re.escape(REGISTRAR_EXCHANGE) if registrar else ""
    return HostPermissions(
        configure=rf"^({EXCHANGES}|{shared_queues}|{own_queues})$",
        write=rf"^({EXCHANGES}{claims}|{shared_queues}|{own_queues})$",
        read=rf"^({EXCHANGES}|bridge\.reply\.{UUID}|{own_queues})$",
        topic_msg_write=r".*",  # anyone may be sent to; the recipient's gateway checks the sender
        topic_msg_read=rf"^({owned})$",  # bind (= receive) only its own gids
        topic_roster_write=rf"^roster\.{h}\.",  # announce presence only for itself
        topic_roster_read=r"^roster\.#$",
    )


#: an invite's enrolment user may only publish its one request to the registrar (its answer
#: comes back on direct reply-to, which needs no grant)
ENROL_PERMISSIONS = ("^$", rf"^{re.escape(REGISTRAR_EXCHANGE)}$", "^$")
