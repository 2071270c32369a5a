"""Run the real ``bridge gateway`` with a SIGKILL injected at one stage of its Nth burst.

``BRIDGE_TEST_FAULT=STAGE:N`` with STAGE one of ``before-commit`` (records written in the open
batch transaction, not committed), ``after-commit`` (committed, no ack sent) or ``after-ack``
(the burst's acks written to the socket) — counting bursts — or, counting bursts that hand
a message to a waiting client, ``handoff-after-commit`` (committed, the client not answered
yet) or ``handoff-commit-fails`` (the commit raises a disk I/O error instead; the gateway
lives), ``burst-raises`` (the burst's flush raises an unexpected error before it commits;
the gateway lives), or ``ack-twice`` (the burst's last delivery is acked again once its acks
went out: the broker closes the consuming channel; the gateway lives). The gateway is bridge's own code, unchanged: this
only wraps two of its methods to kill the process at the stage's boundary, which is how a
crash at that instant looks to the broker and the store.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys


def _install(stage: str, nth: int) -> None:
    from bridgecli.gateway.daemon import Gateway
    from bridgecli.hoststate.transaction import Transaction

    bursts = {"n": 0, "armed": False}
    flush, commit = Gateway.flush_batch, Transaction.commit

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def commit_tx(self) -> None:
        if bursts["armed"] and stage == "before-commit":
            die()
        if bursts["armed"] and stage == "handoff-commit-fails":
            bursts["armed"] = False
            raise sqlite3.OperationalError("disk I/O error (injected)")
        commit(self)
        if bursts["armed"] and stage in ("after-commit", "handoff-after-commit"):
            die()

    def flush_batch(self) -> None:
        counted = self.burst.handoffs if stage.startswith("handoff") else self.burst.deliveries
        if counted:
            bursts["n"] += 1
            bursts["armed"] = bursts["n"] == nth
        else:
            bursts["armed"] = False
        synced = self.store.syncs
        if bursts["armed"] and stage == "burst-raises":
            bursts["armed"] = False
            raise RuntimeError("a bug in the burst (injected)")
        last_tag = counted[-1][0] if counted else None
        flush(self)
        if bursts["armed"] and stage == "ack-twice":
            bursts["armed"] = False
            self.burst.sync_and_ack()
            self.channel.basic_ack(last_tag)  # an unknown delivery tag now: a channel error
        if bursts["armed"] and stage == "after-ack":
            # the acks follow the store's sync (queued for a while): let them go out now
            self.burst.sync_and_ack()
            assert self.store.syncs > synced

            def write_acks_and_die() -> None:
                self.connection.process_data_events(time_limit=0.05)
                self.connection.process_data_events(time_limit=0)
                die()

            if self.stepper.stepping:  # a burst flushed inside the loop: its step ends first
                self.connection.after_step(write_acks_and_die)
            else:
                write_acks_and_die()

    Gateway.flush_batch, Transaction.commit = flush_batch, commit_tx


def main() -> None:
    stage, _, nth = os.environ["BRIDGE_TEST_FAULT"].partition(":")
    assert stage in (
        "before-commit",
        "after-commit",
        "after-ack",
        "handoff-after-commit",
        "handoff-commit-fails",
        "burst-raises",
        "ack-twice",
    ), stage
    _install(stage, int(nth or 1))
    from bridgecli.entry import main as bridge_main

    sys.argv = ["bridge", "gateway"]
    bridge_main()


if __name__ == "__main__":
    main()
