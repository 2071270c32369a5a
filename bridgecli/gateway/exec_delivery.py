"""The ``exec`` backend: run a command per message with the envelope as JSON on stdin.

For shell-script entities (``--deliver exec:'./handle.sh'``). Delivered means the command
exited 0 within the timeout; anything else is a failed attempt (retried, then dead-lettered).
The command is run through ``/bin/sh -c`` so users can write pipelines; it comes from the
local registration only — never from the wire.
"""

from __future__ import annotations

import json
import os
import subprocess

from bridgecli.envelope import Envelope
from bridgecli.errors import ConfigError, DeliveryError
from bridgecli.interfaces import BackendContext, BackendTraits, Entity

TIMEOUT = 60.0


class ExecBackend:
    inline = False
    #: the command may `bridge reply` to the message it is handling: make it findable first
    traits = BackendTraits(stage=True, delivered_how="exec")

    def __init__(self, context: BackendContext) -> None:
        self.context = context

    def check_address(self, address: str | None) -> None:
        if not address:
            raise ConfigError("the exec backend needs a command", "use --deliver 'exec:COMMAND'")

    def deliver(self, entity: Entity, envelope: Envelope) -> None:
        body = json.dumps({**envelope.to_wire(), "authenticatedUser": envelope.user_id}, ensure_ascii=False)
        env = {
            **os.environ,
            "BRIDGE_GID": entity.gid,
            "BRIDGE_MSG_ID": envelope.msg_id,
            "BRIDGE_FROM": envelope.sender,
            "BRIDGE_KIND": envelope.kind,
        }
        try:
            proc = subprocess.run(
                ["/bin/sh", "-c", entity.address or "false"],
                input=body.encode(),
                capture_output=True,
                timeout=TIMEOUT,
                env=env,
            )
        except subprocess.TimeoutExpired:
            raise DeliveryError(
                f"exec command for {entity.label} did not finish in {TIMEOUT:g}s",
                "make the command faster or return sooner",
            ) from None
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
            raise DeliveryError(
                f"exec command for {entity.label} exited {proc.returncode}: {' | '.join(tail)}",
                "fix the command; the message will be retried",
            )

    def status(self, entity: Entity) -> str:
        return "idle"
