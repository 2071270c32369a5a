"""What the traffic view shows of a message sent from this host: the furthest state its
receipts reached, as ``bridge track`` shows them (the local gateway's ``receipts`` operation).

Pure data. The collector builds the cells each round; the event stream sends each page only
those that changed, so a busy host costs the page small updates, not the whole list again.
"""

from __future__ import annotations

from typing import Any

from bridgecli.receipts import DEAD, DELIVERED, READ, SENT

#: a message's states, furthest first: the one shown is the first it reached
FURTHEST = (DEAD, READ, DELIVERED, SENT)


def cell(record: dict[str, Any]) -> dict[str, Any] | None:
    """The traffic view's cell for one ledger record (``ledger.record_of``'s wire object):
    ``state`` (the furthest reached), ``detail`` (its how, or the dead letter's reason) and
    ``states`` (each state reached: ``at`` and ``how`` or ``reason``); None before any."""
    states = record.get("states")
    if not isinstance(states, dict):
        return None
    reached = {
        state: {key: states[state][key] for key in ("at", "how", "reason") if states[state].get(key) is not None}
        for state in FURTHEST
        if isinstance(states.get(state), dict)
    }
    furthest = next((state for state in FURTHEST if state in reached), None)
    if furthest is None:
        return None
    shown: dict[str, Any] = {"state": furthest, "states": reached}
    detail = reached[furthest].get("reason" if furthest == DEAD else "how")
    if detail:
        shown["detail"] = detail
    return shown


def cells(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """msgId -> :func:`cell` for each record with a state."""
    out = {}
    for record in records:
        shown = cell(record)
        if shown is not None and isinstance(record.get("msgId"), str):
            out[record["msgId"]] = shown
    return out


def changed(sent: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The cells of ``now`` that a page which got ``sent`` does not have yet. A record that
    left the gateway's newest window is not withdrawn: the page keeps its last state."""
    return {msg_id: shown for msg_id, shown in now.items() if sent.get(msg_id) != shown}
