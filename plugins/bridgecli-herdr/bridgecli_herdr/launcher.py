"""The ``herdr`` launcher: split a herdr pane and run a spawn profile's command in it.

Start: ``pane.split`` (with the spec's ``env`` and ``cwd``), wait for the new shell's prompt,
then ``pane.send_input`` of the command plus Enter — herdr's split has no command field and a
fresh shell may not have bracketed paste on yet (README.md#herdr-methods, #herdr-paste).
Ready: ``ready_pattern`` shows, else ``agent.wait until [idle, done]``. Stop: no herdr method
closes a pane, so ``ctrl+c`` twice, then ``exit``, then wait for the pane to go.
Profile keys and settings: the README's "Launcher" and "Settings".
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bridgecli.errors import BridgeError, ConfigError, Timeout
from bridgecli.interfaces import LaunchHandle, LaunchSpec
from bridgecli_herdr.client import HerdrClient, HerdrError

if TYPE_CHECKING:
    from bridgecli.config import Config

DEFAULT_PROMPT = r"[$#%>] ?$"


class HerdrLauncher:
    """Launcher ``herdr`` (see the module docstring)."""

    def __init__(self, settings: Mapping[str, Any], client: HerdrClient) -> None:
        self.settings = dict(settings)
        self.client = client

    @classmethod
    def from_config(cls, config: Config) -> HerdrLauncher:
        raw = config.plugin_settings("herdr")
        return cls(raw, HerdrClient.from_settings(raw))

    def start(self, spec: LaunchSpec) -> LaunchHandle:
        """Split a pane, wait for its shell, type the command; return the new pane."""
        profile = spec.profile
        direction = str(profile.get("herdr_direction", "right"))
        if direction not in ("right", "down"):
            raise ConfigError(
                f"profile {spec.profile_name}: herdr_direction = {direction!r} is not right or down",
                'use herdr_direction = "right" or "down"',
            )
        params: dict[str, Any] = {
            "direction": direction,
            "focus": False,
            "env": {str(k): str(v) for k, v in spec.env.items()},
        }
        target = profile.get("herdr_pane") or self.settings.get("split_from") or os.environ.get("HERDR_PANE_ID")
        if target:
            params["target_pane_id"] = str(target)
        if spec.cwd:
            params["cwd"] = spec.cwd
        try:
            pane_id = str(self.client.request("pane.split", params)["pane"]["pane_id"])
            prompt = str(self.settings.get("prompt_pattern", DEFAULT_PROMPT))
            self._wait_output(pane_id, prompt, 10.0, "its shell prompt")
            command = spec.command if isinstance(spec.command, str) else shlex.join(spec.command)
            self.client.request("pane.send_input", {"pane_id": pane_id, "text": command, "keys": ["Enter"]})
        except HerdrError as exc:
            raise BridgeError(f"herdr could not start profile {spec.profile_name}: {exc.message}", exc.hint) from None
        data = {"pane_id": pane_id, "socket": str(self.client.path), "ready_pattern": profile.get("ready_pattern")}
        return LaunchHandle(launcher="herdr", deliver=f"herdr:{pane_id}", data=data)

    def _client_for(self, handle: LaunchHandle) -> HerdrClient:
        socket = handle.data.get("socket")
        if not socket or socket == str(self.client.path):
            return self.client
        return HerdrClient(socket, timeout=self.client.timeout)

    def _wait_output(
        self, pane_id: str, pattern: str, timeout: float, what: str, client: HerdrClient | None = None
    ) -> None:
        try:
            (client or self.client).request(
                "pane.wait_for_output",
                {
                    "pane_id": pane_id,
                    "source": "recent",
                    "match": {"type": "regex", "value": pattern},
                    "timeout_ms": int(timeout * 1000),
                },
                wait=timeout,
            )
        except HerdrError as exc:
            if exc.code == "timeout":
                raise Timeout(
                    f"herdr pane {pane_id} did not show {what} ({pattern!r}) within {timeout:g}s",
                    "look at the pane in herdr; check the profile's command and ready_pattern",
                ) from None
            raise

    def wait_ready(self, handle: LaunchHandle, timeout: float) -> None:
        """Block until the agent in the new pane is ready (see the module docstring)."""
        client = self._client_for(handle)
        pane_id = str(handle.data["pane_id"])
        pattern = handle.data.get("ready_pattern")
        try:
            if pattern:
                self._wait_output(pane_id, str(pattern), timeout, "ready_pattern", client)
                return
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout(
                        f"no agent became idle in herdr pane {pane_id} within {timeout:g}s",
                        "check the pane in herdr, or set ready_pattern in the profile",
                    )
                try:
                    client.request(
                        "agent.wait",
                        {"target": pane_id, "until": ["idle", "done"], "timeout_ms": max(int(left * 1000), 1)},
                        wait=left,
                    )
                    return
                except HerdrError as exc:
                    if exc.code == "timeout":
                        continue  # the deadline check above raises
                    if exc.code not in ("agent_not_found", "agent_not_running"):
                        raise
                    time.sleep(min(0.2, max(left, 0)))  # not detected yet: herdr sees it soon
        except HerdrError as exc:
            raise BridgeError(f"herdr pane {pane_id} of the new agent: {exc.message}", exc.hint) from None

    def stop(self, handle: LaunchHandle) -> None:
        """Double Ctrl-C, then ``exit``; wait for the pane to close (idempotent)."""
        client = self._client_for(handle)
        pane_id = str(handle.data["pane_id"])
        try:
            client.request("pane.send_keys", {"pane_id": pane_id, "keys": ["ctrl+c"]})
            client.request("pane.send_keys", {"pane_id": pane_id, "keys": ["ctrl+c"]})
            time.sleep(0.1)
            client.request("pane.send_input", {"pane_id": pane_id, "text": "exit", "keys": ["Enter"]})
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                client.request("pane.get", {"pane_id": pane_id})
                time.sleep(0.05)
        except HerdrError as exc:
            if exc.code == "pane_not_found":
                return
            raise BridgeError(f"herdr could not stop pane {pane_id}: {exc.message}", exc.hint) from None
        raise BridgeError(f"herdr pane {pane_id} is still open after Ctrl-C and exit", "close it in herdr by hand")

    def status(self, handle: LaunchHandle) -> str:
        try:
            pane = self._client_for(handle).request("pane.get", {"pane_id": str(handle.data["pane_id"])})["pane"]
        except HerdrError as exc:
            return "gone" if exc.code == "pane_not_found" else "unknown"
        return str(pane.get("agent_status", "unknown"))
