"""The ``herdr`` delivery backend: prompt an agent in a herdr pane, confirmed.

``--deliver herdr:<pane-id>`` (``w1:p3``; inside herdr: ``herdr:$HERDR_PANE_ID``).

One delivery: the pane must exist (else a retryable failure); nothing is typed while the
agent is ``blocked`` (a dialog would take the text as its answer) — wait up to
``blocked_wait``, then fail retryably; send the sanitised frame with ``pane.send_input`` (or
``agent.prompt``); confirm by the frame's marker in ``pane.read`` or a moved
``state_change_seq``, because a successful request is not proof of delivery
(README.md#herdr-no-proof). The README's "How a delivery works" has the details.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bridgecli.blocking import wait_unblocked
from bridgecli.errors import BridgeError, ConfigError, DeliveryError, NotFound
from bridgecli.framing import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, SHELL_PREFIX, Frame, render
from bridgecli_herdr.client import HerdrClient, HerdrError

if TYPE_CHECKING:
    from bridgecli.envelope import Envelope
    from bridgecli.interfaces import BackendContext, Entity

#: herdr pane ids (``w1:p3``) or the legacy forms it still accepts (``p_3``, ``p_1_3``, ``1-3``)
PANE_RE = re.compile(r"^(w[0-9A-Z]+:p[0-9A-Z]+|p_\d+(_\d+)?|\d+-\d+)$")
GONE_CODES = ("pane_not_found",)
BLOCKED = "blocked"


def _number(settings: Mapping[str, Any], key: str, default: float) -> float:
    try:
        value = float(settings.get(key, default))
    except (TypeError, ValueError):
        raise ConfigError(
            f"[plugins.herdr] {key} must be a number, not {settings.get(key)!r}", f"fix {key} in bridge.toml"
        ) from None
    if value < 0:
        raise ConfigError(f"[plugins.herdr] {key} must not be negative", f"fix {key} in bridge.toml")
    return value


@dataclass(frozen=True)
class HerdrSettings:
    """``[plugins.herdr]`` keys that shape delivery (README lists them)."""

    blocked_wait: float = 20.0
    confirm_timeout: float = 5.0
    max_bytes: int = DEFAULT_MAX_BYTES
    max_lines: int = DEFAULT_MAX_LINES
    method: str = "send_input"  # send_input | prompt
    multiline: str = "paste"  # paste | line

    @classmethod
    def load(cls, settings: Mapping[str, Any]) -> HerdrSettings:
        method = str(settings.get("method", cls.method))
        multiline = str(settings.get("multiline", cls.multiline))
        if method not in ("send_input", "prompt"):
            raise ConfigError(
                f"[plugins.herdr] method = {method!r} is not send_input or prompt", "fix method in bridge.toml"
            )
        if multiline not in ("paste", "line"):
            raise ConfigError(
                f"[plugins.herdr] multiline = {multiline!r} is not paste or line", "fix multiline in bridge.toml"
            )
        return cls(
            blocked_wait=_number(settings, "blocked_wait", cls.blocked_wait),
            confirm_timeout=_number(settings, "confirm_timeout", cls.confirm_timeout),
            max_bytes=int(_number(settings, "max_inline_bytes", cls.max_bytes)),
            max_lines=int(_number(settings, "max_inline_lines", cls.max_lines)),
            method=method,
            multiline=multiline,
        )


class HerdrBackend:
    """Delivery backend ``herdr`` (see the module docstring)."""

    inline = False

    def __init__(self, settings: HerdrSettings, client: HerdrClient) -> None:
        self.settings = settings
        self.client = client

    @classmethod
    def from_context(cls, context: BackendContext) -> HerdrBackend:
        raw = context.config.plugin_settings("herdr")
        return cls(HerdrSettings.load(raw), HerdrClient.from_settings(raw))

    # --- DeliveryBackend ------------------------------------------------------------

    def check_address(self, address: str | None) -> None:
        """The address must be a herdr pane id that exists on the configured server."""
        if not address or not PANE_RE.match(address):
            raise ConfigError(
                f"herdr pane id {address!r} is not valid",
                "use --deliver herdr:w1:p3 (inside herdr: herdr:$HERDR_PANE_ID)",
            )
        try:
            self.client.request("pane.get", {"pane_id": address})
        except HerdrError as exc:
            if exc.code in GONE_CODES:
                raise NotFound(f"herdr has no pane {address}", "list panes with `herdr pane list`") from None
            raise

    def deliver(self, entity: Entity, envelope: Envelope) -> None:
        """Send the framed message once the agent is not blocked; return once confirmed."""
        pane_id = entity.address
        if not pane_id:
            raise DeliveryError(
                f"entity {entity.label} has no herdr pane in --deliver {entity.deliver!r}",
                "re-register it with --deliver herdr:<pane-id>",
                retryable=False,
            )
        try:
            pane = self._wait_unblocked(pane_id)
            agent = pane.get("agent")
            seq = pane.get("state_change_seq") if agent else None
            frame = render(
                envelope,
                max_bytes=self.settings.max_bytes,
                max_lines=self.settings.max_lines,
                line_prefix="" if agent else SHELL_PREFIX,
            )
            self._send(pane_id, frame, agent is not None)
            self._confirm(pane_id, frame, seq)
        except HerdrError as exc:
            raise self._failure(pane_id, exc) from None

    def status(self, entity: Entity) -> str:
        """herdr's agent status (idle/working/blocked/done/unknown), or ``gone``."""
        if not entity.address:
            return "gone"
        try:
            pane = self.client.request("pane.get", {"pane_id": entity.address})["pane"]
        except HerdrError as exc:
            return "gone" if exc.code in GONE_CODES else "unknown"
        except BridgeError:
            return "unknown"
        status = str(pane.get("agent_status", "unknown"))
        return status if status in ("idle", "working", "blocked", "done", "unknown") else "unknown"

    # --- steps ----------------------------------------------------------------------

    def _pane(self, pane_id: str) -> dict[str, Any]:
        """The pane's state in one request where possible: ``agent.get`` (status and
        ``state_change_seq``) for agent panes, ``pane.get`` for the rest."""
        try:
            return self.client.request("agent.get", {"target": pane_id})["agent"]
        except HerdrError as exc:
            if exc.code != "agent_not_found":
                raise
        return self.client.request("pane.get", {"pane_id": pane_id})["pane"]

    def _wait_unblocked(self, pane_id: str) -> dict[str, Any]:
        """Return the pane once its agent is not blocked; never type into a dialog."""
        return wait_unblocked(
            lambda: self._pane(pane_id),
            lambda pane: pane.get("agent_status") == BLOCKED,
            timeout=self.settings.blocked_wait,
            failure=lambda: DeliveryError(
                f"the agent in herdr pane {pane_id} is blocked on an approval dialog; "
                f"nothing was typed (waited {self.settings.blocked_wait:g}s)",
                "answer the dialog in herdr; the message is retried",
                retryable=True,
            ),
        )

    def _seq(self, pane_id: str) -> int | None:
        try:
            return int(self.client.request("agent.get", {"target": pane_id})["agent"].get("state_change_seq", 0))
        except HerdrError as exc:
            if exc.code == "agent_not_found":
                return None
            raise

    def _send(self, pane_id: str, frame: Frame, is_agent: bool) -> None:
        text = frame.one_line() if self.settings.multiline == "line" else frame.text
        if self.settings.method == "prompt" and is_agent:
            self.client.request("agent.prompt", {"target": pane_id, "text": text})
        else:
            self.client.request("pane.send_input", {"pane_id": pane_id, "text": text, "keys": ["Enter"]})

    def _confirm(self, pane_id: str, frame: Frame, seq: int | None) -> None:
        deadline = time.monotonic() + self.settings.confirm_timeout
        lines = min(len(frame.lines) + 50, 1000)
        delay = 0.005
        while True:
            read = self.client.request("pane.read", {"pane_id": pane_id, "source": "recent", "lines": lines})
            if frame.marker in str(read.get("read", {}).get("text", "")):
                return
            if seq is not None and (now := self._seq(pane_id)) is not None and now > seq:
                return
            if time.monotonic() >= deadline:
                raise DeliveryError(
                    f"herdr accepted message {frame.msg_id} for pane {pane_id} but neither its header "
                    f"{frame.marker} nor an agent state change showed within {self.settings.confirm_timeout:g}s",
                    "the prompt may be stranded in the composer (herdr can swallow the Enter); check the pane",
                    retryable=True,
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _failure(self, pane_id: str, exc: HerdrError) -> DeliveryError:
        if exc.code in GONE_CODES:
            # retryable: the gateway retries with backoff and dead-letters after
            # messaging.max_attempts (a pane that is gone for good costs a few seconds)
            return DeliveryError(
                f"herdr pane {pane_id} is gone ({exc.message})",
                "the agent's pane was closed; restart it and re-register the entity",
                retryable=True,
            )
        if exc.code == "agent_blocked":
            return DeliveryError(
                f"the agent in herdr pane {pane_id} is blocked; herdr refused the prompt",
                "answer the dialog in herdr; the message is retried",
                retryable=True,
            )
        if exc.code == "protocol_mismatch":
            return DeliveryError(exc.message, exc.hint, retryable=True)
        return DeliveryError(f"herdr could not deliver to {pane_id}: {exc.message}", exc.hint, retryable=True)
