"""The contracts plugins implement: delivery backends, launchers, browser targets.

Plugins register *factories* for these through the hooks in :mod:`bridgecli.hookspecs`.
The types here are Protocols and plain dataclasses, so a plugin package depends on nothing
but ``bridgecli`` itself and never on gateway internals.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from bridgecli.config import Config
    from bridgecli.envelope import Envelope

#: Status words a backend or launcher may report; herdr's agent states plus ``gone``.
STATUSES = ("idle", "working", "blocked", "done", "unknown", "running", "gone")


@dataclass(frozen=True)
class Entity:
    """A message-addressable entity hosted on this machine (docs/design.md#names).

    ``deliver`` is ``BACKEND[:ADDRESS]`` as given to ``bridge register --deliver``.
    """

    gid: str
    label: str
    role: str  # agent | main | orchestrator
    deliver: str
    host: str
    created: float
    launcher: str | None = None
    launch_data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        return self.deliver.split(":", 1)[0]

    @property
    def address(self) -> str | None:
        parts = self.deliver.split(":", 1)
        return parts[1] if len(parts) == 2 and parts[1] else None


@dataclass(frozen=True)
class BackendContext:
    """What a backend factory gets: the host's configuration and a private state directory;
    ``store`` is the gateway's message store, for a backend whose traits say it records its
    messages itself (None outside a gateway)."""

    config: Config
    state_dir: Path
    host_id: str
    store: Any = None


@dataclass(frozen=True)
class BackendTraits:
    """How the gateway drives a backend; a backend declares them as its ``traits`` class
    attribute (one without gets ``BackendTraits(inline=backend.inline)``). Why: the gateway
    treats every backend, built-in or not, by these flags and never by its type."""

    #: ``deliver`` is fast and never blocks: called on the AMQP thread, not a worker thread
    inline: bool = False
    #: stage the message in the store before ``deliver`` (the entity may ``bridge reply`` to it
    #: while ``deliver`` runs)
    stage: bool = False
    #: ``deliver`` writes the message's dedup record itself, through ``BackendContext.store``
    #: and in the transaction the gateway passes it (``tx``); the backend then also
    #: implements :class:`RecordingBackend`
    records_itself: bool = False
    #: the entity pulls its messages (a hold): one a local ``send --wait`` / ``poll --wait``
    #: waits for may be recorded as taken by it at once (:meth:`RecordingBackend.record`)
    pulled: bool = False
    #: what the ``delivered`` receipt says when ``deliver`` returns None (:class:`Delivered`)
    delivered_how: str = "typed"


#: how a message reached its entity, as its ``delivered`` receipt says (docs/receipts.md)
HOW_TYPED, HOW_HELD, HOW_EXEC, HOW_ACCEPTED = "typed", "held", "exec", "accepted"


@dataclass(frozen=True)
class Delivered:
    """What :meth:`DeliveryBackend.deliver` may return instead of None: how the entity got the
    message (``how``), whether its turn already began with it (``read``: a structured client
    started a turn), and the client's own id for it (``ref``: a turn or message id). Why: the
    sender's ``bridge track`` shows the proof the backend had, not a guess."""

    how: str = HOW_TYPED
    read: bool = False
    ref: str | None = None


@runtime_checkable
class DeliveryBackend(Protocol):
    """Hands a message to an entity on this host: typed into its pane, run, or held
    (docs/design.md#invariant-3).

    The gateway acks the broker only after :meth:`deliver` returns, so ``deliver`` must
    return only once the entity *has* the message (a confirmed injection, a durable hold,
    an exit 0). It raises :class:`bridgecli.errors.DeliveryError` otherwise.
    """

    #: True when ``deliver`` is fast and never blocks (microseconds, no I/O waits); the
    #: gateway then calls it on its AMQP thread instead of a worker thread. A backend may
    #: also declare ``traits`` (:class:`BackendTraits`, read by :func:`traits_of`); their
    #: ``inline`` must agree with this one.
    inline: bool

    def check_address(self, address: str | None) -> None:
        """Validate ``ADDRESS`` of ``--deliver BACKEND:ADDRESS`` at registration; raise
        :class:`bridgecli.errors.BridgeError` with a fix when it is wrong."""

    def deliver(self, entity: Entity, envelope: Envelope) -> Delivered | None:
        """Deliver one message; return only when the entity has it (None: the backend's
        ``traits.delivered_how``, see :class:`Delivered`)."""

    def status(self, entity: Entity) -> str:
        """The entity's current status, one of :data:`STATUSES`."""


@runtime_checkable
class DeclaresTraits(Protocol):
    """A backend that declares its :class:`BackendTraits` (``traits = BackendTraits(...)``)."""

    traits: BackendTraits


@runtime_checkable
class RecordingBackend(Protocol):
    """A backend with ``records_itself`` or ``pulled``: writes a message as ``state`` (``held``,
    ``drained``, ``taken``) with its dedup record; False for a duplicate. ``tx`` is the store
    transaction the write joins (the gateway's open burst), None for one of its own."""

    def deliver(self, entity: Entity, envelope: Envelope, tx: Any = None) -> Delivered | None: ...

    def record(self, envelope: Envelope, state: str, received: float | None = None, tx: Any = None) -> bool: ...


def traits_of(backend: DeliveryBackend) -> BackendTraits:
    """The traits ``backend`` declares, or the default ones with its ``inline`` flag."""
    if isinstance(backend, DeclaresTraits):
        return backend.traits
    return BackendTraits(inline=bool(backend.inline))


BackendFactory = Callable[[BackendContext], DeliveryBackend]


@dataclass(frozen=True)
class LaunchSpec:
    """What a launcher starts: built by the gateway from a ``[profiles.NAME]`` table.

    ``env`` already contains ``BRIDGE_GID``, ``BRIDGE_HOST_ID`` and ``BRIDGE_GATEWAY_SOCKET``.
    ``profile`` is the whole table, for launcher-specific keys.
    """

    gid: str
    label: str
    role: str
    profile_name: str
    command: str | list[str]
    cwd: str | None
    env: Mapping[str, str]
    profile: Mapping[str, Any]
    log_dir: Path


@dataclass(frozen=True)
class LaunchHandle:
    """A started entity. ``data`` must be JSON-serialisable: it is stored with the entity so
    a restarted gateway can still stop it. ``deliver`` is how messages reach it
    (``BACKEND[:ADDRESS]``)."""

    launcher: str
    deliver: str
    data: Mapping[str, Any]


@runtime_checkable
class Launcher(Protocol):
    """Starts agents on this host for ``bridge spawn``, behind a readiness gate
    (docs/design.md#invariant-9)."""

    def start(self, spec: LaunchSpec) -> LaunchHandle:
        """Start the process; raise :class:`bridgecli.errors.BridgeError` (with the tail of
        its stderr when there is one) if it cannot be started."""

    def wait_ready(self, handle: LaunchHandle, timeout: float) -> None:
        """Block until the new entity can take messages; raise
        :class:`bridgecli.errors.Timeout` after ``timeout`` seconds."""

    def stop(self, handle: LaunchHandle) -> None:
        """Stop the entity (idempotent)."""

    def status(self, handle: LaunchHandle) -> str:
        """One of :data:`STATUSES`."""


LauncherFactory = Callable[["Config"], Launcher]


@dataclass(frozen=True)
class ExecutorOptions:
    """How a browser executor reaches the browser broker and names itself."""

    url: str  # ws://127.0.0.1:PORT
    token: str
    label: str
    executor_id: str | None
    settings: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class BrowserTarget(Protocol):
    """A kind of browser executor (docs/design.md#rules-of-the-browser-bridge): something that
    connects to the browser broker as role ``extension`` and carries out ``command`` frames in a
    real browser."""

    kind: str

    def launch(self, options: ExecutorOptions, *, headless: bool, stop: threading.Event) -> None:
        """Start a browser of this kind and serve it as an executor until ``stop`` is set."""

    def attach(self, options: ExecutorOptions, *, endpoint: str, stop: threading.Event) -> None:
        """Serve an already running browser at ``endpoint`` until ``stop`` is set."""


BrowserTargetFactory = Callable[["Config"], BrowserTarget]
