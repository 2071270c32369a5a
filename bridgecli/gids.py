"""Gids that name their host: the first eight hex digits of a gid are its host's tag.

A gid is minted on its entity's host, and its first 32 bits are :func:`host_tag` of that
host id. So ownership can be checked from the gid alone: the broker grants a joined host the
names and routing keys that start with its tag (one static pattern, whatever the number of
entities), and every reader refuses a frame or message whose gid carries another host's
tag. The other 90 bits stay random. Older, *legacy* gids are granted from the hub's records.
"""

from __future__ import annotations

import hashlib
import re
import uuid

TAG_HEX = 8
_TAG_RE = re.compile(r"^[0-9a-f]{8}\Z")
#: the part of a gid after its tag, as a regex (for broker permission patterns)
REST = r"-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


#: characters of a gid that tables show: the tag and 16 random bits, so entities of one host
#: differ, and what is shown still resolves as a gid prefix
SHORT = 13


def short(gid: str) -> str:
    """A gid as tables and listings show it (its first :data:`SHORT` characters)."""
    return gid[:SHORT]


def host_tag(host: str) -> str:
    """The eight hex digits that begin every gid minted on ``host``."""
    return hashlib.sha256(b"bridge-host:" + host.encode()).hexdigest()[:TAG_HEX]


def mint(host: str) -> str:
    """A new gid for an entity hosted on ``host``."""
    return host_tag(host) + str(uuid.uuid4())[TAG_HEX:]


def minted_on(gid: str, host: str) -> bool:
    """Does ``gid`` carry ``host``'s tag?"""
    return gid[:TAG_HEX] == host_tag(host)


def pattern(host: str) -> str:
    """A regex (no anchors) that matches exactly the gids minted on ``host``."""
    tag = host_tag(host)
    assert _TAG_RE.match(tag)
    return tag + REST
