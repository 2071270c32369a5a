"""The chaos soak's checker (pure): every send is ok, lost (confirmed, never delivered),
duplicated (read twice by its recipient, unannounced), redelivered (read again only with the
``redelivered`` flag, after a reader died before its confirm), reordered (after a later
confirmed send of the same pair) or unknown (its command failed ambiguously); a delivery nobody
sent is unexpected. Pass: 0 lost, 0 duplicated, 0 unexpected (docs/reliability.md).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

CLASSES = ("ok", "lost", "duplicated", "redelivered", "reordered", "unknown")


@dataclass(frozen=True)
class Send:
    """One ``bridge send``: who to whom, its message id, its place in the sender's order."""

    sender: str
    recipient: str
    msg_id: str
    seq: int
    confirmed: bool


@dataclass(frozen=True)
class Delivery:
    """One message a recipient read (``seq``: the order that recipient read them in)."""

    recipient: str
    msg_id: str
    seq: int
    #: the gateway said so: a reader before this one was handed it and never confirmed
    redelivered: bool = False


@dataclass
class Verdict:
    """The class of every send (by message id), the unexpected deliveries, and totals."""

    classes: dict[str, str] = field(default_factory=dict)
    unexpected: list[Delivery] = field(default_factory=list)
    unknown_delivered: int = 0

    def totals(self) -> dict[str, int]:
        counts = Counter(self.classes.values())
        out = {name: counts.get(name, 0) for name in CLASSES}
        out["unexpected"] = len(self.unexpected)
        return out

    @property
    def passed(self) -> bool:
        totals = self.totals()
        return totals["lost"] == 0 and totals["duplicated"] == 0 and totals["unexpected"] == 0


def check(sends: Iterable[Send], deliveries: Iterable[Delivery]) -> Verdict:
    """Classify ``sends`` against ``deliveries`` (see the module docstring for the classes)."""
    sends = list(sends)
    by_id = {send.msg_id: send for send in sends}
    seen: dict[tuple[str, str], list[int]] = defaultdict(list)
    unflagged: Counter[tuple[str, str]] = Counter()
    verdict = Verdict()
    for delivery in sorted(deliveries, key=lambda d: (d.recipient, d.seq)):
        send = by_id.get(delivery.msg_id)
        if send is None or send.recipient != delivery.recipient:
            verdict.unexpected.append(delivery)
            continue
        seen[(delivery.recipient, delivery.msg_id)].append(delivery.seq)
        unflagged[(delivery.recipient, delivery.msg_id)] += not delivery.redelivered
    first_at: dict[str, int] = {}
    for send in sends:
        got = seen.get((send.recipient, send.msg_id), [])
        if len(got) > 1:
            # every copy but one flagged: a reader dropping flagged repeats reads it once
            announced = unflagged[(send.recipient, send.msg_id)] <= 1
            verdict.classes[send.msg_id] = "redelivered" if announced else "duplicated"
        elif not send.confirmed:
            verdict.classes[send.msg_id] = "unknown"
            verdict.unknown_delivered += len(got)
        elif not got:
            verdict.classes[send.msg_id] = "lost"
        else:
            verdict.classes[send.msg_id] = "ok"
            first_at[send.msg_id] = got[0]
    pairs: dict[tuple[str, str], list[Send]] = defaultdict(list)
    for send in sends:
        if send.msg_id in first_at:
            pairs[(send.sender, send.recipient)].append(send)
    for pair in pairs.values():
        pair.sort(key=lambda s: s.seq)
        earliest_later = None  # the smallest delivery position among the later sends
        for send in reversed(pair):
            at = first_at[send.msg_id]
            if earliest_later is not None and earliest_later < at:
                verdict.classes[send.msg_id] = "reordered"
            earliest_later = at if earliest_later is None else min(earliest_later, at)
    return verdict
