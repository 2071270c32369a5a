"""The checks behind ``bridge doctor``: config, broker, capabilities, gateway, secrets.

Each check returns a :class:`Check` instead of raising, so one screen shows everything that
is wrong at once, each with its fix. ``fail`` means bridge cannot work until it is fixed;
``warn`` means a check could not be made or an optional part is not running (the gateway).
"""

from __future__ import annotations

import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridgecli import paths
from bridgecli.errors import BridgeError, ExitCode
from bridgecli.health import FAIL, OK, SKIP, WARN, Check, gateway_checks

__all__ = ["FAIL", "OK", "SKIP", "WARN", "Check", "run", "exit_code", "roster_freshness"]


def check_config(load: Callable[[], Any]) -> tuple[Check, Any]:
    """The configuration file parses and validates (and env/flags are valid)."""
    try:
        cfg = load()
    except BridgeError as exc:
        return Check("config", FAIL, exc.message, exc.hint or "fix the file", int(exc.exit_code)), None
    where = str(cfg.path) if cfg.path and cfg.path.exists() else f"{cfg.path} (absent: defaults)"
    return Check("config", OK, f"{where}; host id {cfg.host_id}"), cfg


def _broker_checks(cfg: Any) -> list[Check]:
    """Reach the broker, then probe the capabilities later features rely on."""
    from bridgecli.amqp.uri import resolve_broker_uri

    try:
        uris = resolve_broker_uri(cfg)
    except BridgeError as exc:
        return [Check("broker", FAIL, exc.message, exc.hint, int(exc.exit_code))]
    from bridgecli.amqp.connection import connect

    conn = None
    problems = []
    for uri in uris:
        try:
            # the same connection path as every other command: TLS settings, heartbeats,
            # and its error messages (refused credentials, vhost, unreachable)
            conn = connect(cfg, name="bridge doctor", connect_timeout=3, uris=[uri])
            break
        except BridgeError as exc:
            problems.append(exc.message)
        except (OSError, ValueError) as exc:  # TLS files missing/unreadable, bad URI
            problems.append(f"{_redact(uri)}: {type(exc).__name__}: {exc}")
    if conn is None:
        return [
            Check(
                "broker",
                FAIL,
                "; ".join(problems),
                "start it (`bridge broker start`) or fix broker.uri / BRIDGE_BROKER_URI "
                "(and broker.tls_* for amqps://)",
                int(ExitCode.BROKER_UNAVAILABLE),
            )
        ]
    try:
        props = server_properties(cfg, uri)
        product = _text(props.get("product", "?"))
        version = _text(props.get("version", "?"))
        checks = [Check("broker", OK, f"{_redact(uri)}: {product} {version}")]
        checks.append(_check_quorum(conn, cfg))
        checks.append(_check_delayed(conn, cfg.host_id))
        checks.append(_check_consumer_timeout(uri))
        return checks
    finally:
        try:
            conn.close()
        except Exception:  # closing a half-broken connection must not hide the report
            pass


def server_properties(cfg: Any, uri: str) -> dict[str, Any]:
    """What the broker says it is (``product``, ``version``) in ``connection.start``. Read on a
    short asynchronous connection: pika's ``SelectConnection`` exposes them publicly, its
    blocking adapter only on a private attribute. Empty when that connection fails."""
    import pika

    from bridgecli.amqp.connection import cut_while_opening, parameters

    found: dict[str, Any] = {}

    def opened(connection: Any) -> None:
        found.update(connection.server_properties or {})
        connection.close()

    def stop(connection: Any, *_: Any) -> None:
        connection.ioloop.stop()

    [params] = parameters(cfg, [uri], connect_timeout=3, name="bridge doctor")
    connection = pika.SelectConnection(
        params, on_open_callback=opened, on_open_error_callback=stop, on_close_callback=stop
    )
    try:
        connection.ioloop.start()
    except ValueError as exc:  # cut while it opened (any other ValueError is raised again)
        cut_while_opening(exc)
        connection.ioloop.close()
    return found


def _check_quorum(conn: Any, cfg: Any) -> Check:
    import pika.exceptions

    name = f"bridge.doctor.{uuid.uuid4()}"
    try:
        ch = conn.channel()
        ch.queue_declare(name, durable=True, arguments={"x-queue-type": "quorum"})
        ch.queue_delete(name)
        ch.close()
        return Check("quorum queues", OK, "supported")
    except pika.exceptions.AMQPError as exc:
        wanted = cfg.values.get("messaging.inbox_queue_type") == "quorum"
        if getattr(exc, "reply_code", None) == 403:
            return Check(
                "quorum queues",
                SKIP,
                "not probed: this host's broker user may only declare its own queues (least privilege)",
            )
        return Check(
            "quorum queues",
            FAIL if wanted else WARN,
            f"not supported ({exc})",
            "set messaging.inbox_queue_type = classic, or use RabbitMQ >= 3.8" if wanted else None,
            int(ExitCode.BROKER_UNAVAILABLE),
        )


def _check_delayed(conn: Any, host: str) -> Check:
    """``bridge.delay.<host>`` is (or can be) the headers exchange of this host's TTL tiers;
    anything else there (e.g. the delayed-message plugin's exchange) would make every
    delayed send fail."""
    from bridgecli.amqp import topology
    from bridgecli.errors import Conflict

    try:
        ch = conn.channel()
        exchange = topology.delay_exchange(host)
        topology.declare(ch, exchange)
        ch.close()
        return Check("delay exchange", OK, f"{exchange.name} routes delayed sends to TTL queues")
    except Conflict as exc:
        return Check("delay exchange", FAIL, exc.message, exc.hint, int(exc.exit_code))
    except Exception as exc:
        return Check("delay exchange", WARN, f"not checked ({type(exc).__name__}: {exc})")


def _check_consumer_timeout(uri: str) -> Check:
    """Read ``consumer_timeout`` from the embedded node (rabbitmqctl); other brokers do not
    expose it over AMQP."""
    from bridgecli import localbroker

    info = localbroker.read_state()
    if info is None or info.uri != uri:
        return Check("consumer timeout", OK, "unknown (RabbitMQ default 30 min)")
    node = localbroker.LocalNode(Path(info.base), nodename=info.nodename)
    try:
        ms = node.consumer_timeout_ms()
    except (BridgeError, OSError) as exc:
        return Check("consumer timeout", WARN, f"unknown ({exc})")
    if ms is None:
        return Check("consumer timeout", OK, "disabled")
    return Check("consumer timeout", OK, f"{ms} ms ({ms / 60000:g} min)")


def check_gateway() -> list[Check]:
    """The local gateway answers on its socket (not running is only a warning), then the
    checks its ``/healthz`` makes too (:func:`bridgecli.health.gateway_checks`)."""
    from bridgecli.gateway.client import ping

    sock = paths.gateway_socket()
    answer = ping()
    if answer is None:
        return [
            Check(
                "gateway", WARN, f"not running (no answer on {sock})", "start it with `bridge gateway` (e.g. in tmux)"
            )
        ]
    parts = [
        f"host {answer.get('host', '?')}",
        f"pid {answer.get('pid', '?')}",
        f"{len(answer.get('entities') or [])} entities",
    ]
    return [Check("gateway", OK, f"answering on {sock}: " + ", ".join(parts)), *gateway_checks(answer)]


def check_roster() -> Check | None:
    """How fresh the local gateway's roster view is (None without a gateway: check_gateway
    says so)."""
    from bridgecli.errors import BridgeError
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.connect(paths.gateway_socket())
    if client is None:
        return None
    with client:
        try:
            answer = client.call("roster", timeout=5)
        except BridgeError as exc:
            return Check("roster", WARN, f"the gateway did not show its roster: {exc.message}")
    return roster_freshness(answer)


def roster_freshness(answer: dict[str, Any]) -> Check:
    """Judge a gateway's ``roster`` answer: stale when it has not heard its own frames for two
    intervals (its listener or the broker is behind: every other host's entries are then
    suspect too), when a host is unsynced (a missed delta), or when a host's frames are late."""
    interval, local = answer.get("interval"), answer.get("local_host")
    rows = [row for row in answer.get("hosts") or () if isinstance(row, dict)]
    if interval is None:
        return Check("roster", WARN, "the gateway's roster is not running yet", "wait a few seconds")
    if not rows:
        return Check("roster", OK, "no per-host freshness from this gateway (an older version)")
    relayed = relay_feed(answer.get("relay"), len(rows))
    if relayed is not None:
        return relayed
    own = next((row for row in rows if row.get("host") == local), None)
    if own is None or float(own.get("age") or 0) > 2 * interval:
        heard = "never" if own is None else f"{float(own['age']):.0f}s ago"
        return Check(
            "roster",
            WARN,
            f"stale: this gateway last heard its own heartbeat {heard} (interval {interval:g}s), so its roster "
            "listener is not connected or the broker delivers roster frames late",
            "see the roster line of `bridge status` and the backlog of the broker's roster queues",
        )
    unsynced = [_name(row) for row in rows if row.get("protocol") == 2 and not row.get("synced")]
    late = [
        f"{_name(row)} ({float(row.get('age') or 0):.0f}s)" for row in rows if float(row.get("age") or 0) > 2 * interval
    ]
    problems = []
    if unsynced:
        problems.append(
            f"missed frames of {', '.join(unsynced)}: their entries may be out of date until their next full frame"
        )
    if late:
        problems.append(f"no frame for over two intervals from {', '.join(late)}: about to expire")
    if problems:
        return Check("roster", WARN, "stale: " + "; ".join(problems), "these heal by themselves within six intervals")
    return Check("roster", OK, f"{len(rows)} hosts heard within two intervals, all synced")


def relay_feed(relay: Any, hosts: int) -> Check | None:
    """A warning when the gateway hears only a roster relay that was silent for two of its
    intervals, or hears over :data:`DIRECT_HOSTS_MAX` hosts directly; else None."""
    if not isinstance(relay, dict):
        return None
    if str(relay.get("feed") or "").startswith("relay"):
        age, every = relay.get("age"), float(relay.get("interval") or 1.0)
        if age is None or float(age) > 2 * every:
            heard = "never" if age is None else f"{float(age):.0f}s ago"
            return Check(
                "roster",
                WARN,
                f"fed by the roster relay alone, which was last heard {heard}: other hosts' changes go unheard",
                "start `bridge relay` (or the hub), or set roster.relay = auto",
            )
    elif hosts > DIRECT_HOSTS_MAX:
        return Check(
            "roster",
            WARN,
            f"hears {hosts} hosts directly: every host's frame reaches every gateway (broker work grows as hosts²)",
            "run a roster relay (`bridge relay`, or the hub's)",
        )
    return None


#: more hosts than this heard directly is a fleet that wants a roster relay
DIRECT_HOSTS_MAX = 200


def _name(row: dict[str, Any]) -> str:
    from bridgecli.sanitize import sanitize_line

    return sanitize_line(str(row.get("host")), max_chars=128)


def check_clients() -> Check:
    """Which agent clients run bridge's MCP server and its hooks (bridgecli.client_hooks); an
    entry or hook that runs another or a missing ``bridge``, or a hook missing, is a warning
    (the client's session would lose bridge's tools or receipts, not bridge itself)."""
    from bridgecli import client_hooks, clients

    entries = clients.configured()
    hooks = client_hooks.configured()
    bad = [f"{e.client} ({e.file}): {e.problem}" for e in entries if e.problem]
    bad += [f"{h.client} hooks ({h.file}): {h.problem}" for h in hooks if h.problem]
    if bad:
        return Check(
            "agent clients",
            WARN,
            "; ".join(bad),
            "rerun `bridge install CLIENT` with this bridge (or fix the file by hand)",
        )
    if not entries and not hooks:
        return Check("agent clients", OK, "no client has bridge configured (`bridge install --all` adds it)")
    text = "bridge configured for " + (", ".join(f"{e.client} ({e.file})" for e in entries) or "no client")
    if hooks:
        text += "; hooks for " + ", ".join(f"{h.client} ({h.file})" for h in hooks)
    return Check("agent clients", OK, text)


def check_secret_files(cfg: Any) -> list[Check]:
    """Files holding secrets must not be readable by group or others."""
    from bridgecli.config import SETTINGS, read_file

    checks = []
    cfg_path = paths.config_file()
    if cfg_path.exists():
        try:
            data = read_file(cfg_path)
        except BridgeError:
            data = {}
        secret_keys = [
            key
            for key, s in SETTINGS.items()
            if s.secret and key.split(".", 1)[1] in (data.get(key.split(".", 1)[0]) or {})
        ]
        if _has_password(str((data.get("broker") or {}).get("uri") or "")):
            secret_keys.insert(0, "broker.uri (a password)")
        if secret_keys:
            checks.append(_perm_check("config file permissions", cfg_path, f"holds {', '.join(secret_keys)}"))
    token = paths.user_cache_root() / "opencode-browser" / "bridge.json"
    if token.exists():
        checks.append(_perm_check("browser token file permissions", token, "holds the browser token"))
    if not checks:
        checks.append(Check("secret files", OK, "no secret files found"))
    return checks


def _has_password(uri: str) -> bool:
    creds = uri.split("://", 1)[-1].rpartition("@")[0]
    return ":" in creds


def _perm_check(name: str, path: Path, why: str) -> Check:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return Check(
            name, FAIL, f"{path} is mode {mode:03o} and {why}", f"run `chmod 600 {path}`", int(ExitCode.PERMISSION)
        )
    return Check(name, OK, f"{path} is mode {mode:03o}")


def run(load_config: Callable[[], Any]) -> list[Check]:
    """Every check, in the order the report shows them."""
    config_check, cfg = check_config(load_config)
    checks = [config_check]
    if cfg is None:
        checks.append(Check("broker", SKIP, "skipped: the configuration is invalid"))
    else:
        checks.extend(_broker_checks(cfg))
    checks.extend(check_gateway())
    roster = check_roster()
    if roster is not None:
        checks.append(roster)
    checks.append(check_clients())
    checks.extend(check_secret_files(cfg))
    return checks


def exit_code(checks: list[Check]) -> ExitCode:
    """OK when nothing failed, else the code of the first failure."""
    for check in checks:
        if check.status == FAIL:
            return ExitCode(check.code)
    return ExitCode.OK


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _redact(uri: str) -> str:
    if "@" not in uri or "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"
