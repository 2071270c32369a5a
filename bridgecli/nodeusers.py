"""A secured RabbitMQ node's own users: an admin and this host's user, with passwords made
here and kept 0600, and the definitions file RabbitMQ creates them from at boot (hashes only).

Why: a node whose ``guest`` every local user can log in as gives them every host's traffic
and the right to change users and permissions.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bridgecli import paths

#: the secured node's administrator (management API, users, permissions); host ids have no
#: dots, so no host's user can ever be named this
ADMIN_USER = "bridge.admin"
#: RabbitMQ's built-in user whose password everybody knows
GUEST = "guest"


def password_hash(password: str) -> str:
    """``password`` hashed as RabbitMQ's ``rabbit_password_hashing_sha256`` stores it:
    base64(salt + sha256(salt + password)) with a 4-byte salt, so that the definitions file
    the node imports at boot holds no password."""
    salt = secrets.token_bytes(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode("ascii")


def new_password() -> str:
    """A fresh broker password: 256 random bits, URL-safe (it goes into URIs unquoted)."""
    return secrets.token_urlsafe(32)


@dataclass
class NodeUsers:
    """A secured node's own users and their passwords, kept in ``credentials.json`` (0600).

    ``retire`` lists users still to be deleted once the node runs: ``guest`` of a node made
    before it was secured, the user of a host id that has since changed.
    """

    admin_password: str
    host_user: str
    host_password: str
    admin_user: str = ADMIN_USER
    retire: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> NodeUsers | None:
        """The saved users, or None when there are none (or the file is unreadable)."""
        try:
            raw = json.loads(path.read_text())
            return cls(**raw)
        except (OSError, ValueError, TypeError):
            return None

    def save(self, path: Path) -> None:
        write_private_json(path, asdict(self))

    def definitions(self) -> dict:
        """RabbitMQ definitions that create (or reset) both users with every permission on
        ``/``; the vhost is listed because a node with definitions creates no default one."""
        # impersonator: `bridge dlq retry` re-publishes a dead letter with its original user_id
        admin = (self.admin_user, self.admin_password, "administrator,impersonator")
        users = [admin, (self.host_user, self.host_password, "")]
        return {
            "vhosts": [{"name": "/"}],
            "users": [
                {
                    "name": name,
                    "password_hash": password_hash(password),
                    "hashing_algorithm": "rabbit_password_hashing_sha256",
                    "tags": tags,
                }
                for name, password, tags in users
            ],
            "permissions": [
                {"user": name, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"} for name, _, _ in users
            ],
        }


def write_private_json(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` atomically, readable by the owner only (0600)."""
    paths.ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(data, indent=2) + "\n")
    os.chmod(tmp, 0o600)  # an old tmp left by a crash may have had another mode
    os.replace(tmp, path)
