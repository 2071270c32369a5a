"""Answering a waiting local request from the thread that hands it its messages.

Shared by the operations that may be answered that way (``send`` and ``poll`` with a wait) and
by the local API, which supplies the :class:`EarlyAnswer` of each client connection. Why:
docs/decisions/answer-waiters-from-the-commit.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bridgecli.hoststate.store import StoredMessage

#: response field: ids the client must confirm (op ``confirm``) once it has the messages;
#: the local API holds them again when the connection ends without that
PENDING = "pending"
#: response field: the answer already went out (:class:`EarlyAnswer`); nothing more to write
ANSWERED = "answered"
#: messages with more content than this are answered by the request's own thread: the thread
#: that hands them over must not spend its time encoding them
EARLY_MAX = 64 * 1024


class EarlyAnswer(Protocol):
    """A client connection's way to answer its waiting request from another thread."""

    def answer(self, result: dict[str, Any]) -> bool:
        """Write ``result`` without blocking (its thread writes the rest); False: nothing written."""


def early_answer(
    early: EarlyAnswer, build: Callable[[list[StoredMessage]], dict[str, Any]], sent: list[dict[str, Any]]
) -> Callable[[list[StoredMessage]], bool]:
    """The answer for :meth:`.waiters.Waiters.offer`: ``build``'s response to the handed
    messages (at most :data:`EARLY_MAX` of content), written through ``early``, kept in ``sent``."""

    def answer(handed: list[StoredMessage]) -> bool:
        if sum(len(m.envelope.content) for m in handed) > EARLY_MAX:
            return False
        response = build(handed)
        written = early.answer(response)
        if written:
            sent.append(response)
        return written

    return answer


def answered(response: dict[str, Any]) -> dict[str, Any]:
    """What an operation whose ``response`` went out early returns to the local API."""
    return {ANSWERED: True, **({PENDING: response[PENDING]} if PENDING in response else {})}
