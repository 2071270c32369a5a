"""The one contract of the local API: everything its operations may touch of the gateway.

Every operation of :mod:`.operations` and the server in :mod:`.server` see the gateway only as
:class:`ApiGateway`; ``Gateway`` satisfies it structurally, and whoever starts a gateway hands
it over. Why a contract: an operation's reach is then read here, not found by reading the
daemon (docs/decisions/local-api-contract.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from bridgecli.config import Config
    from bridgecli.envelope import Envelope
    from bridgecli.gateway.archive_writer import ArchiveWriter
    from bridgecli.gateway.memberships import Memberships
    from bridgecli.gateway.tracking import Tracking
    from bridgecli.gateway.waiters import Waiters
    from bridgecli.hoststate.entities import Registry
    from bridgecli.hoststate.store import Store
    from bridgecli.interfaces import Entity
    from bridgecli.roster import RosterView

T = TypeVar("T")


class WouldWait(Exception):
    """A request run on the loop thread, which must never wait, met a step that waits (a first
    registration, a roster still filling); its whole operation then runs on a worker thread."""


class ApiGateway(Protocol):
    """What the local API may use of its gateway: the host's state, its waiters, the fleet's
    view, and a few gateway actions. Nothing else of the daemon is reachable from here."""

    @property
    def host(self) -> str:
        """This host's id."""

    @property
    def config(self) -> Config:
        """The loaded configuration (read only)."""

    @property
    def started(self) -> float:
        """When the gateway started (``time.time()``)."""

    @property
    def max_content(self) -> int:
        """The largest message content a local sender may send (bytes)."""

    @property
    def store(self) -> Store:
        """The host's message store: held messages, dedup records, replies."""

    @property
    def registry(self) -> Registry:
        """The entities registered on this host."""

    @property
    def waiters(self) -> Waiters:
        """Local calls blocked on a message, and the hand-offs to them."""

    @property
    def tracking(self) -> Tracking:
        """Receipts: the ledger of messages sent from here, and what hooks report."""

    @property
    def history(self) -> ArchiveWriter:
        """The archive of what local entities sent and received, and its writer."""

    @property
    def memberships(self) -> Memberships:
        """Channel memberships of local entities: join and leave."""

    @property
    def roster(self) -> RosterView | None:
        """The fleet's roster view, once presence is installed."""

    def is_connected(self) -> bool:
        """Whether the consuming connection is up."""

    def can_publish(self) -> bool:
        """Whether the publish lane is connected (a loop-thread send needs it)."""

    def broker_server(self) -> dict[str, Any]:
        """The broker's product and version, as the publish lane's connection reported them."""

    def consuming(self, gid: str) -> bool:
        """Whether ``gid``'s inbox has a live consumer of this gateway."""

    def consumed_by_others(self) -> Iterable[str]:
        """Queues of this host that another client consumes (a clone of this host?)."""

    def extra_status(self) -> dict[str, Any]:
        """The extra lines of ``bridge status``, by name."""

    def call_after_step(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run ``fn`` on the I/O thread after the loop's current step and return its result
        (from a thread that may wait)."""

    def queue_depths(self) -> dict[str, int]:
        """Ready counts of each local inbox and of the DLQ (I/O thread: call through :meth:`call_after_step`)."""

    def resolve_target(self, target: str, force: bool = False, may_wait: bool = True) -> str:
        """A gid for ``target``; without ``may_wait`` a lookup that waits raises :class:`WouldWait`."""

    def once_roster_complete(self, lookup: Callable[[], T], may_wait: bool = True) -> T:
        """``lookup()``, retried while the roster has not heard every host yet."""

    def add_entity(self, **fields: Any) -> Entity:
        """Register an entity and start serving it (may wait for the I/O thread)."""

    def remove_entity(self, entity: Entity) -> int:
        """Stop serving ``entity`` and forget it; how many of its messages were dead-lettered."""

    def submit(self, envelopes: list[Envelope], delay_ms: int | None, timeout: float) -> list[Future]:
        """Publish through the publish lane from a thread that may wait; one confirm per envelope."""

    def publish_in_loop(self, envelopes: list[Envelope], delay_ms: int | None) -> list[Future]:
        """Publish from the loop thread without waiting; one confirm per envelope."""
