"""Least privilege per host, as data: the permissions a joined host's broker user gets.

Every name a host owns carries its host id or a gid with its tag (:mod:`bridgecli.gids`), so
one static set of patterns grants them, whatever the number of entities; only legacy gids
are listed one by one. No host may configure a shared object (whoever may declare one may
delete it) nor bind ``bridge.dlx`` or another host's delay exchange; bindings on the topic
exchanges are limited by topic permissions. The registrar applies these through the
management API; docs/deploy.md shows them as ``rabbitmqctl`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bridgecli import gids as gid_rules

#: where hosts send registrar requests; declared by the hub's registrar only (write, no configure)
REGISTRAR_EXCHANGE = "bridge.registrar"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
#: a host id, as it may appear in a control routing key
HOST = r"[a-z0-9][a-z0-9_-]{0,62}"
#: a channel's routing key (:mod:`bridgecli.channels`): one literal name, never ``*`` or ``#``
CHANNEL_KEY = r"chan\.[a-z0-9][a-z0-9_-]{0,62}"


@dataclass(frozen=True)
class HostPermissions:
    configure: str
    write: str
    read: str
    topic_msg_write: str
    topic_msg_read: str
    topic_roster_write: str
    topic_roster_read: str
    topic_control_write: str
    topic_control_read: str

    def topics(self) -> list[tuple[str, str, str]]:
        """(exchange, write, read) for each topic exchange."""
        return [
            ("bridge.msg", self.topic_msg_write, self.topic_msg_read),
            ("bridge.roster", self.topic_roster_write, self.topic_roster_read),
            ("bridge.ctl", self.topic_control_write, self.topic_control_read),
        ]

    def rabbitmqctl(self, user: str, vhost: str = "/") -> list[list[str]]:
        """The ``rabbitmqctl`` argument lists that apply these permissions to ``user``."""
        lines = [["set_permissions", "-p", vhost, user, self.configure, self.write, self.read]]
        for exchange, write, read in self.topics():
            lines.append(["set_topic_permissions", "-p", vhost, user, exchange, write, read])
        return lines


def owned_gids(host: str, legacy: Iterable[str] = ()) -> str:
    """A regex (no anchors) of the gids ``host`` owns: its tag's, and its ``legacy`` ones."""
    listed = sorted({g for g in legacy if not gid_rules.minted_on(g, host)})
    return "|".join([gid_rules.pattern(host), *(re.escape(g) for g in listed)])


def for_host(host: str, legacy_gids: Iterable[str] = (), *, registrar: bool = False) -> HostPermissions:
    """Least privilege for the gateway (and CLI) of ``host``, which owns the gids minted with
    its tag and ``legacy_gids``; ``registrar`` adds the right to publish to the hub's
    registrar."""
    h = re.escape(host)
    owned = owned_gids(host, legacy_gids)
    # bridge.reply.<host>.<uuid>: exclusive reply queues of spawn/stop requests, bound to
    # bridge.ctl under reply.<host>.<uuid>; bridge.delay.<host>[.<ms>]: this host's delay
    # exchange and its TTL tiers, which dead-letter into bridge.msg; bridge.listen.<host>.<uuid>:
    # the roster listener of a command run without a gateway
    own = (
        rf"control\.{h}|roster\.{h}|agent\.({owned})\.inbox|bridge\.(reply|listen)\.{h}\.{UUID}"
        rf"|bridge\.delay\.{h}(\.\d+)?"
    )
    shared = r"bridge\.(msg|roster|ctl)"
    claims = "|" + re.escape(REGISTRAR_EXCHANGE) if registrar else ""
    return HostPermissions(
        configure=rf"^({own})$",
        # bridge.dlx: the gateway dead-letters what it cannot deliver (it cannot bind it)
        write=rf"^({shared}|bridge\.dlx{claims}|{own})$",
        read=rf"^({shared}|{own})$",
        topic_msg_write=r".*",  # anyone may be sent to; the recipient's gateway checks the sender
        # bind (= receive) its own gids, and any channel: a queue_bind also needs write on the
        # queue, so only its own entities' inboxes can join a channel; no wildcard matches
        topic_msg_read=rf"^({owned}|{CHANNEL_KEY})$",
        topic_roster_write=rf"^roster\.{h}\.(_gateway|{owned})$",  # presence only for itself
        # bind every host's frames, and the relays' (never publish under relay.*: above)
        topic_roster_read=r"^(roster|relay)\.#$",
        # requests to any host and answers to any requester (each checks user_id); bind only
        # its own request key and its own reply keys
        topic_control_write=rf"^({HOST}|reply\.{HOST}\.{UUID})$",
        topic_control_read=rf"^({h}|reply\.{h}\.{UUID})$",
    )


def for_relay(name: str) -> HostPermissions:
    """Least privilege for a roster relay named ``name`` (the hub's runs as
    ``relay_frames.RELAY_USER``): consume every host frame from its own queue, publish relay
    frames only under ``relay.<name>`` and sync answers only under a reply key; nothing on
    ``bridge.msg``."""
    queue = r"bridge\.roster\.relay"
    return HostPermissions(
        configure=rf"^{queue}$",
        write=rf"^(bridge\.roster|bridge\.ctl|{queue})$",
        read=rf"^(bridge\.roster|{queue})$",
        topic_msg_write="^$",
        topic_msg_read="^$",
        topic_roster_write=rf"^relay\.{re.escape(name)}$",
        topic_roster_read=r"^roster\.#$",
        topic_control_write=rf"^reply\.{HOST}\.{UUID}$",
        topic_control_read="^$",
    )


#: an invite's enrolment user may only publish its one request to the registrar (its answer
#: comes back on direct reply-to, which needs no grant)
ENROL_PERMISSIONS = ("^$", rf"^{re.escape(REGISTRAR_EXCHANGE)}$", "^$")
