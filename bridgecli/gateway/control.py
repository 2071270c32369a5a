"""The control plane, gateway side (docs/design.md#invariant-9): serve ``control.<host>``.

A spawn request names a *profile*, looked up in this host's **own** ``[profiles.NAME]`` and
run by its launcher here — no command line travels. After the readiness gate the entity is
registered, announced on the roster and returned to the requester. Requests are acked on
receipt and never redelivered (running a spawn twice is worse than reporting a failure), and
carry an AMQP expiration, so one that waited while this gateway was down is dropped instead of
spawning late.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

import pika

from bridgecli import agent_kinds, gids, paths, receipts
from bridgecli.amqp import topology
from bridgecli.control_client import DEFAULT_READY_TIMEOUT
from bridgecli.error_wire import to_wire as error_to_wire
from bridgecli.errors import BridgeError, ConfigError, Conflict, NotFound, PermissionProblem, PluginError
from bridgecli.gateway import log as glog
from bridgecli.gateway import registration
from bridgecli.gateway.identity import IdentityPolicy
from bridgecli.hoststate.entities import validate_label, validate_role
from bridgecli.interfaces import Entity, LaunchHandle, LaunchSpec

logger = logging.getLogger("bridgecli.gateway")
#: the launch-data key that records which host spawned an entity (and so may stop it)
OWNER_KEY = "spawnedBy"


class ControlHost(Protocol):
    """What the control plane needs of the gateway (implemented by ``Gateway``)."""

    config: Any
    host: str
    queue_type: str
    registry: Any
    plugins: Any
    grants: Any
    #: the consuming connection and channel, and its publisher (I/O thread only)
    connection: Any
    channel: Any
    publisher: Any
    on_connect_hooks: list[Callable[[], None]]
    #: takes the receipt frames that arrive on ``control.<host>`` (``on_frame(user_id, body)``)
    tracking: Any

    @property
    def exclusive(self) -> bool: ...

    def consumed_elsewhere(self, queue: str, retry: Callable[[], None], what: str) -> bool: ...

    def after_step(self, fn: Callable[[], None]) -> None: ...

    def call_after_step(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any: ...

    def attach_entity(self, entity: Entity) -> None: ...

    def detach_entity(self, entity: Entity, reason: str = "unregistered") -> int: ...


class Control:
    """Serves spawn/stop requests for this host."""

    def __init__(self, gw: ControlHost) -> None:
        self.gw = gw

    @property
    def policy(self) -> IdentityPolicy:
        """The sender check as configured now (a running gateway re-reads it at connect)."""
        return IdentityPolicy.from_config(self.gw.config.values)

    def install(self) -> None:
        self.gw.on_connect_hooks.append(self.on_connect)

    def on_connect(self) -> None:
        """Consume ``control.<host>`` exclusively (retried while another client holds it), on a
        channel of its own. Why: the inbox consumers ack a burst with one ``multiple`` ack up to
        its last tag, which would also cover a control delivery acked later, between steps (an
        unknown-tag error that closes the channel)."""
        queue = f"control.{self.gw.host}"
        topology.declare(self.gw.channel, topology.control_queue(self.gw.host, self.gw.queue_type))
        if self.gw.consumed_elsewhere(queue, self.on_connect, "spawn/stop requests"):
            return
        channel = self.gw.connection.sync_channel(30.0, "control")
        channel.basic_consume(queue, self._on_request, exclusive=self.gw.exclusive)

    def _on_request(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        if props.type == receipts.FRAME_TYPE:  # what became of messages sent from here
            self.gw.tracking.on_frame(props.user_id, body)
            channel.basic_ack(method.delivery_tag)
            return
        channel.basic_ack(method.delivery_tag)
        try:
            request = json.loads(body)
            if not isinstance(request, dict) or request.get("type") not in ("spawn", "stop"):
                raise ValueError("not a spawn/stop request")
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            glog.event(logger, "bad control message dropped", logging.WARNING, error=str(exc)[:200])
            return
        reply_to = props.reply_to
        correlation = props.correlation_id
        given = request.get("requester")
        requester: dict[str, Any] = given if isinstance(given, dict) else {}
        claimed_host = requester.get("host") if isinstance(requester.get("host"), str) else None
        refusal = self.refusal(props.user_id, claimed_host, reply_to)
        if refusal is not None:
            glog.event(
                logger,
                "control request refused",
                logging.WARNING,
                error=refusal,
                user=props.user_id,
                from_host=str(claimed_host)[:80],
            )
            return
        assert claimed_host is not None
        glog.event(
            logger,
            f"control {request['type']} requested",
            profile=request.get("profile"),
            gid=request.get("gid"),
            by=requester.get("label") or requester.get("gid"),
            from_host=claimed_host,
            user=props.user_id,
        )
        threading.Thread(
            target=self._handle,
            args=(request, claimed_host, reply_to, correlation),
            name=f"control-{request['type']}",
            daemon=True,
        ).start()

    def refusal(self, user_id: str | None, host: str | None, reply_to: str | None) -> str | None:
        """Why a request published by broker user ``user_id`` for requester host ``host`` with
        answer key ``reply_to`` is refused, or None. A request speaks only for the host that
        published it, and is answered only under that host's own reply key, so a forged one
        can neither act for another host nor make this gateway write into its reply queue."""
        if not host:
            return "the request names no requester host"
        if not self.policy.speaks_for(user_id, host):
            return f"published by broker user {user_id!r}, which may not speak for host {host!r}"
        if topology.reply_key_host(reply_to or "") != host:
            return "reply_to is not a reply key of the requester's host"
        return None

    def _handle(
        self, request: dict[str, Any], requester_host: str, reply_to: str | None, correlation: str | None
    ) -> None:
        try:
            if request["type"] == "spawn":
                result = self.spawn(
                    request,
                    accepted=lambda seconds: self._answer(
                        reply_to, correlation, {"accepted": True, "waitReady": seconds}
                    ),
                    requester_host=requester_host,
                )
            else:
                result = self.stop(request, requester_host=requester_host)
            response = {"ok": True, **result}
        except BridgeError as exc:
            response = {"ok": False, "error": error_to_wire(exc)}
        except Exception as exc:
            glog.event(logger, "control request failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
            response = {
                "ok": False,
                "error": {
                    "code": "FAILURE",
                    "message": f"{type(exc).__name__}: {exc}",
                    "hint": "see the target gateway's log",
                },
            }
        if response["ok"]:
            glog.event(logger, f"control {request['type']} done", **{k: v for k, v in response.items() if k != "ok"})
        else:
            glog.event(
                logger, f"control {request['type']} refused", logging.WARNING, error=response["error"]["message"]
            )
        self._answer(reply_to, correlation, response)

    def _answer(self, reply_to: str | None, correlation: str | None, response: dict[str, Any]) -> None:
        """Answer through ``bridge.ctl`` under the requester's reply key (only it may bind
        it), not through the default exchange, and with this gateway's ``user_id``: the
        requester counts only an answer that the target host's own user published.
        ``reply_to`` was checked when the request arrived."""
        if not reply_to:
            return
        body = json.dumps(response).encode()
        props = pika.BasicProperties(
            correlation_id=correlation, content_type="application/json", user_id=self.gw.publisher.user_id
        )
        self.gw.after_step(
            lambda: self.gw.publisher.publish_raw(
                topology.CONTROL, reply_to, body, props, mandatory=False, what="control reply"
            )
        )

    # --- spawn / stop -----------------------------------------------------------------

    def spawn(
        self,
        request: dict[str, Any],
        accepted: Callable[[float], None] = lambda seconds: None,
        *,
        requester_host: str | None = None,
    ) -> dict[str, Any]:
        """Run a profile (merged with its agent kind, with the request's or profile's first
        ``prompt`` on its command line); ``accepted(seconds)`` is called with the readiness gate that applies
        (the request's ``waitReady``, else the profile's ``ready_timeout``, else 30 s) once the
        request passed every check and just before the launcher starts. The entity records
        ``requester_host`` (authenticated) as its owner: that host may stop it."""
        gw = self.gw
        name = str(request.get("profile") or "")
        tables = gw.config.profiles()
        table = tables.get(name)
        if table is None:
            known = ", ".join(sorted(tables)) or "none"
            raise NotFound(
                f"host {gw.host} has no profile {name!r} (profiles: {known})",
                f"add [profiles.{name}] to bridge.toml on {gw.host}",
            )
        profile = agent_kinds.resolve(name, table)
        # the prompt came over the wire: bounded and made inert before it goes anywhere
        prompt = agent_kinds.check_prompt(request.get("prompt")) or agent_kinds.check_prompt(
            profile.table.get("prompt")
        )
        command = profile.argv(prompt, gw.host)
        launcher_name = profile.launcher
        try:
            launcher = gw.plugins.provider("launchers", launcher_name)(gw.config)
        except BridgeError:
            raise
        except Exception as exc:
            raise PluginError(f"launcher {launcher_name} failed to load: {exc}", "check `bridge plugins`") from exc
        gid = gids.mint(gw.host)
        label = str(request.get("label") or profile.table.get("label") or f"{name}-{gid[-6:]}")
        role = str(profile.table.get("role", "agent"))
        # the label came over the wire and names a directory below: check it (and that it is
        # free) before anything touches the filesystem or starts a process
        validate_label(label)
        validate_role(role)
        if any(e.label == label for e in gw.registry.all()):
            raise Conflict(f"label {label!r} is already used on {gw.host}", "pass another --label")
        env = {str(k): str(v) for k, v in (profile.table.get("env") or {}).items()}
        env.update({"BRIDGE_GID": gid, "BRIDGE_HOST_ID": gw.host, "BRIDGE_GATEWAY_SOCKET": str(paths.gateway_socket())})
        spawn_root = (paths.state_dir() / "spawn").resolve()
        log_dir = (spawn_root / label).resolve()
        if log_dir.parent != spawn_root:  # belt and braces: validate_label already refuses this
            raise ConfigError(f"bad label {label!r}", "use a plain label (no path separators)")
        paths.ensure_private_dir(log_dir)  # its logs may quote messages: the owner's only
        spec = LaunchSpec(
            gid=gid,
            label=label,
            role=role,
            profile_name=name,
            command=command,
            cwd=profile.table.get("cwd"),
            env=env,
            profile=profile.launch_table(prompt),
            log_dir=log_dir,
        )
        try:
            timeout = float(request.get("waitReady") or profile.table.get("ready_timeout") or DEFAULT_READY_TIMEOUT)
        except (TypeError, ValueError):
            raise ConfigError(
                f"profile {name!r} on {gw.host} has a bad ready_timeout",
                f"set [profiles.{name}] ready_timeout to a number of seconds",
            ) from None
        accepted(timeout)
        handle = launcher.start(spec)
        try:
            launcher.wait_ready(handle, timeout)
            entity = registration.register(
                gw.registry,
                gw.plugins,
                gw.config,
                label=label,
                role=role,
                deliver=handle.deliver,
                gid=gid,
                launcher=launcher_name,
                launch_data={**handle.data, OWNER_KEY: requester_host or gw.host},
                grants=gw.grants,
            )
        except BaseException:
            try:
                launcher.stop(handle)
            finally:
                pass
            raise
        gw.call_after_step(lambda: gw.attach_entity(entity))
        return {
            "gid": gid,
            "host": gw.host,
            "label": label,
            "role": role,
            "deliver": handle.deliver,
            "launcher": launcher_name,
        }

    def stop(self, request: dict[str, Any], *, requester_host: str | None = None) -> dict[str, Any]:
        """Stop and unregister an entity, for its owner only: the host that spawned it
        (recorded at spawn) or its own host. ``requester_host`` is the authenticated host of
        the request; None is this host (a local caller)."""
        gw = self.gw
        gid = str(request.get("gid") or "")
        entity = gw.registry.get(gid)
        if entity is None:
            raise NotFound(f"host {gw.host} has no entity {gid}", "check `bridge roster`")
        owner = entity.launch_data.get(OWNER_KEY) if isinstance(entity.launch_data, dict) else None
        if requester_host not in (None, gw.host, owner):
            raise PermissionProblem(
                f"host {requester_host} may not stop {entity.label} on {gw.host}: only its own host"
                + (f" or {owner}, which spawned it" if owner and owner != gw.host else ""),
                f"ask on {owner or gw.host}",
            )
        stopped = False
        if entity.launcher:
            launcher = gw.plugins.provider("launchers", entity.launcher)(gw.config)
            launcher.stop(LaunchHandle(launcher=entity.launcher, deliver=entity.deliver, data=dict(entity.launch_data)))
            stopped = True
        gw.call_after_step(lambda: gw.detach_entity(entity, "stopped"))
        gw.registry.remove(entity.gid)
        registration.release(gw.grants, entity)
        return {"gid": entity.gid, "host": gw.host, "label": entity.label, "process_stopped": stopped}
