"""Error types and exit codes.

Library code raises :class:`BridgeError` subclasses; only ``bridgecli.cli`` turns them into
one-line messages and exit codes. Every error names the problem *and* the fix, because the
people reading them are often agents that will act on the text literally.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Process exit codes of ``bridge``; documented in ``docs/cli.md``.

    Scripts branch on these, so a value never changes meaning once released.
    """

    OK = 0
    FAILURE = 1  #: unexpected failure (a bug): rerun with --traceback
    USAGE = 2  #: bad command line (click's own code)
    CONFIG = 3  #: bad or unreadable configuration
    BROKER_UNAVAILABLE = 4  #: cannot reach or talk to the AMQP broker
    GATEWAY_UNAVAILABLE = 5  #: no local gateway answers on its socket
    NOT_FOUND = 6  #: unknown target, message id, profile, host, plugin …
    AMBIGUOUS = 7  #: a label matches several entities
    TIMEOUT = 8  #: a --wait/--wait-ready deadline passed
    REJECTED = 9  #: the message was refused (too large, unroutable, nacked, invalid)
    PLUGIN = 10  #: a plugin failed
    MISSING_DEPENDENCY = 11  #: a required program or optional extra is not installed
    PERMISSION = 12  #: unsafe file permissions or access refused
    CONFLICT = 13  #: already exists / already running / inequivalent broker arguments
    BROWSER = 14  #: browser bridge error (re-electing, owned group, no executor)
    CANNOT_WRITE = 15  #: a file bridge had to write could not be (read-only, full disk, not a dir)
    INVITE = 16  #: a hub invite that is malformed, used, expired or revoked
    TLS = 17  #: a TLS handshake failed: certificate not trusted, wrong hub, bad client files
    CLOCK = 18  #: this host's clock and the hub's are too far apart
    RATE_LIMITED = 19  #: the hub's registrar is refusing this host's requests for a while
    DEAD_LETTERED = 20  #: the message was dead-lettered on the recipient's host (`bridge track`)
    BAD_CHANNEL = 21  #: a channel name that is not lower-case letters, digits, '-' and '_'
    NOT_A_MEMBER = 22  #: leaving a channel the entity is not in
    EMPTY_CHANNEL = 23  #: sending to a channel nobody has joined
    METRICS_ADDRESS = 24  #: a metrics address (gateway's, hub registrar's) is malformed or taken
    NO_SYSTEMD = 25  #: a service unit needs systemd, which is not running here
    NOT_A_CLUSTER = 26  #: a cluster operation on a hub that is not a cluster (yet)
    INTERRUPTED = 130  #: stopped by Ctrl-C


class BridgeError(Exception):
    """Base of every error a user can fix.

    ``message`` says what went wrong, ``hint`` says what to do about it. ``str()`` gives the
    single line the CLI prints.
    """

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} — {self.hint}"
        return self.message


class ConfigError(BridgeError):
    exit_code = ExitCode.CONFIG


class UsageProblem(ConfigError):
    """A request its command line cannot make (``send --lines`` with ``--wait``). A
    :class:`ConfigError` everywhere (the wire too); the click commands show it as click's usage
    error (exit 2), like every other bad command line."""


class BrokerUnavailable(BridgeError):
    exit_code = ExitCode.BROKER_UNAVAILABLE


class Unconfirmed(BrokerUnavailable):
    """A message was handed to the broker but its confirm never came (the connection dropped,
    the confirm timed out): it may or may not have been delivered. Resending it with the same
    message id is safe, since the receiver drops repeats; ``bridge send`` does so by itself."""


class GatewayUnavailable(BridgeError):
    exit_code = ExitCode.GATEWAY_UNAVAILABLE


class NotFound(BridgeError):
    exit_code = ExitCode.NOT_FOUND


class Ambiguous(BridgeError):
    exit_code = ExitCode.AMBIGUOUS


class Timeout(BridgeError):
    exit_code = ExitCode.TIMEOUT


class Rejected(BridgeError):
    exit_code = ExitCode.REJECTED


class DeadLettered(BridgeError):
    """The recipient's gateway dead-lettered the message: its receipt says why."""

    exit_code = ExitCode.DEAD_LETTERED


class BadChannelName(BridgeError):
    exit_code = ExitCode.BAD_CHANNEL


class NotAMember(BridgeError):
    exit_code = ExitCode.NOT_A_MEMBER


class EmptyChannel(BridgeError):
    """A channel message the broker could route to no inbox: the channel has no members."""

    exit_code = ExitCode.EMPTY_CHANNEL


class MetricsAddressError(BridgeError):
    """``gateway.metrics`` / ``--metrics`` / ``hub.metrics`` cannot be served: malformed, or the port is taken."""

    exit_code = ExitCode.METRICS_ADDRESS


class NoSystemd(BridgeError):
    """``bridge service`` needs a running systemd (its ``--dry-run`` does not)."""

    exit_code = ExitCode.NO_SYSTEMD


class NotACluster(BridgeError):
    """A cluster operation (a node invite, the node list) on a hub whose node is not a cluster
    node, or ``--cluster`` where the broker directory holds a node this machine did not make."""

    exit_code = ExitCode.NOT_A_CLUSTER


class PluginError(BridgeError):
    exit_code = ExitCode.PLUGIN


class MissingDependency(BridgeError):
    exit_code = ExitCode.MISSING_DEPENDENCY


class PermissionProblem(BridgeError):
    exit_code = ExitCode.PERMISSION


class Conflict(BridgeError):
    exit_code = ExitCode.CONFLICT


class InviteError(BridgeError):
    exit_code = ExitCode.INVITE


class TlsError(BrokerUnavailable):
    """The broker is reachable but the TLS handshake failed (a reconnect loop retries it)."""

    exit_code = ExitCode.TLS


class ClusterPeerUnreachable(BrokerUnavailable):
    """A cluster node to join does not answer over TLS distribution (down, port blocked,
    or a certificate from another CA): the joining node was left running alone."""


class ClockSkew(BridgeError):
    exit_code = ExitCode.CLOCK


class RateLimited(BridgeError):
    """The hub's registrar refused a request because this host sent too many; retrying later
    helps, unlike a refusal."""

    exit_code = ExitCode.RATE_LIMITED


class BrowserError(BridgeError):
    exit_code = ExitCode.BROWSER


class CannotWrite(BridgeError):
    """Writing a file failed at the operating-system level (the old file, if any, is intact)."""

    exit_code = ExitCode.CANNOT_WRITE


class DeliveryError(BridgeError):
    """A delivery backend could not hand a message to its entity.

    ``retryable=False`` means retrying cannot help (bad address, pane gone for good); the
    gateway then dead-letters at once instead of spending the remaining attempts.
    """

    exit_code = ExitCode.FAILURE

    def __init__(self, message: str, hint: str | None = None, *, retryable: bool = True) -> None:
        super().__init__(message, hint)
        self.retryable = retryable


def error_class(code: str, name: str | None = None) -> type[BridgeError]:
    """The class of this module that declares exit code ``code`` (its name, as the wire
    carries it); :class:`BridgeError` for ``FAILURE`` and any code no class declares. Each
    class's ``exit_code`` is the one list of the pairs, so a new error needs no table.
    ``name``: a class of this module with that exit code and this name is preferred (a
    subclass such as :class:`Unconfirmed` that shares its base's code)."""
    found: type[BridgeError] | None = None
    queue: list[type[BridgeError]] = [BridgeError]
    while queue:  # breadth first: a base declaring a code comes before its subclasses
        cls = queue.pop(0)
        if cls.__module__ == __name__ and cls.exit_code.name == code:
            if name is not None and cls.__name__ == name:
                return cls
            if found is None and "exit_code" in vars(cls):
                found = cls
        queue += cls.__subclasses__()
    return found or BridgeError
