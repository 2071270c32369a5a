"""Configuration: ``bridge.toml`` < ``BRIDGE_*`` environment < command-line flags.

The schema is plain data (:data:`SETTINGS`): one :class:`Setting` per dotted key, with type,
default, environment variable and help. Everything that reads the file goes through here
(and every write through :mod:`bridgecli.config_edit`), so validation and errors are the
same everywhere. Two table families are kept
as they are (their launcher or plugin may be missing on this host): ``[profiles.<name>]``
(spawn profiles, read by the gateway that runs them) and ``[plugins.<name>]`` (a plugin's
settings); ``bridge config`` checks them (:mod:`bridgecli.config_tables`).
"""

from __future__ import annotations

import difflib
import os
import re
import socket
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridgecli import paths
from bridgecli.errors import ConfigError

HOST_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}\Z")
FREE_FORM_SECTIONS = ("profiles", "plugins")


def _validate_host_id(value: str) -> str:
    if not HOST_ID_RE.match(value):
        raise ValueError(
            "a host id of 1-63 characters from a-z 0-9 _ - starting with a letter or digit "
            "(it is used in queue names and routing keys, so no dots)"
        )
    return value


def _validate_uri(value: str) -> str:
    for uri in split_uris(value):
        if not uri.startswith(("amqp://", "amqps://")):
            raise ValueError("an amqp:// or amqps:// URI (several may be given, comma-separated)")
    return value


def positive(value: float) -> float:
    """A ``check`` for numbers that must be greater than 0."""
    if value <= 0:
        raise ValueError("a number greater than 0")
    return value


def non_negative(value: float) -> float:
    """A ``check`` for durations and sizes that may be 0 but not less."""
    if value < 0:
        raise ValueError("a number of at least 0")
    return value


def regexes(value: str | list[str]) -> str | list[str]:
    """A ``check`` for a regular expression, or a list of them (``list`` settings)."""
    for pattern in [value] if isinstance(value, str) else value:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"a valid regular expression ({pattern!r}: {exc})") from None
    return value


def split_uris(value: str) -> list[str]:
    """``broker.uri`` may list several URIs (cluster nodes) separated by commas."""
    return [part.strip() for part in value.split(",") if part.strip()]


def default_host_id() -> str:
    """Derive a routing-safe host id from the machine's hostname."""
    name = socket.gethostname().split(".")[0].lower()
    name = re.sub(r"[^a-z0-9_-]+", "-", name).strip("-_") or "host"
    return name[:63]


@dataclass(frozen=True)
class Setting:
    """One configuration key: its type, default and documentation.

    ``type`` is bool, int, float or str; ``list`` (a string or a list of strings — on the
    command line a TOML array like ``["a", "b"]``, else one string); or ``dict`` (a table of
    strings, written entry by entry as ``KEY.NAME``). ``check`` may also normalise a value.
    """

    key: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], Any] | None = None
    secret: bool = False

    @property
    def env(self) -> str:
        """The environment variable that overrides this key (``broker.uri`` → ``BRIDGE_BROKER_URI``)."""
        return "BRIDGE_" + self.key.replace(".", "_").upper()

    def parse(self, raw: Any, source: str) -> Any:
        """Convert ``raw`` (from TOML, env or CLI text) to this setting's type, or raise ConfigError."""
        try:
            value = self._coerce(raw)
            if self.choices is not None and value not in self.choices:
                raise ValueError("one of " + ", ".join(self.choices))
            if self.check is not None:
                value = self.check(value)
            return value
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"{source}: bad value {raw!r} for {self.key}",
                f"expected {exc}" if str(exc) else f"expected a {self.type.__name__}",
            ) from None

    def _coerce(self, raw: Any) -> Any:
        if self.type is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError("true or false")
        if self.type is int:
            if isinstance(raw, bool):
                raise ValueError("an integer")
            if isinstance(raw, int):
                return raw
            try:
                return int(str(raw).strip())
            except ValueError:
                raise ValueError("an integer") from None
        if self.type is float:
            if isinstance(raw, bool):
                raise ValueError("a number")
            try:
                return float(raw)
            except ValueError:
                raise ValueError("a number") from None
        if self.type is list:
            return _string_or_list(raw)
        if self.type is dict:
            # numbers too: env = { N = 1 } works, the gateway passes str(value)
            if isinstance(raw, dict) and all(
                isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in raw.values()
            ):
                return {str(k): v for k, v in raw.items()}
            raise ValueError(f"a table of strings: set one entry with {self.key}.NAME VALUE")
        if not isinstance(raw, (str, int, float)):
            raise ValueError("a string")
        return str(raw)


def _string_or_list(raw: Any) -> str | list[str]:
    """Text that reads as a TOML array of strings is one; other text stays a string, so a
    regex like ``[Yy]es`` is not mistaken for an array."""
    if isinstance(raw, str) and raw.lstrip().startswith("["):
        try:
            raw = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            return raw
    if isinstance(raw, str) or (isinstance(raw, list) and all(isinstance(v, str) for v in raw)):
        return raw
    raise ValueError('a string or a list of strings like ["a", "b"]')


SETTINGS: dict[str, Setting] = {
    s.key: s
    for s in [
        Setting(
            "broker.uri",
            str,
            None,
            "AMQP URI of the broker; several comma-separated URIs for a cluster. Unset: the "
            "embedded broker started by `bridge broker start`.",
            check=_validate_uri,
        ),
        Setting("broker.heartbeat", int, 30, "AMQP heartbeat in seconds."),
        Setting("broker.tls_ca", str, None, "CA certificate file for amqps://."),
        Setting("broker.tls_cert", str, None, "Client certificate file for amqps://."),
        Setting("broker.tls_key", str, None, "Client key file for amqps://.", secret=True),
        Setting(
            "hub.id",
            str,
            None,
            "Id of the hub this host joined (set by `bridge join`): the gateway then asks the "
            "hub's registrar for each new entity's broker grant.",
        ),
        Setting(
            "hub.metrics",
            str,
            None,
            "On the hub machine: the registrar serves /metrics on this address (PORT or HOST:PORT; "
            "loopback unless a host is given). Read by `bridge hub start`.",
        ),
        Setting(
            "host.id",
            str,
            None,
            "Stable id of this host, used in queue names and routing keys. Default: from the hostname.",
            check=_validate_host_id,
        ),
        Setting(
            "messaging.max_content_bytes", int, 262144, "Largest message content accepted by `bridge send`, in bytes."
        ),
        Setting(
            "messaging.inbox_queue_type",
            str,
            "classic",
            "Queue type of entity inboxes (quorum for RabbitMQ clusters).",
            choices=("classic", "quorum"),
        ),
        Setting("messaging.max_attempts", int, 5, "Delivery attempts before a message is dead-lettered to bridge.dlq."),
        Setting(
            "messaging.prefetch",
            int,
            250,
            "Unacked deliveries per inbox consumer (a burst of deliveries is acked together).",
        ),
        Setting(
            "messaging.dedup_window",
            int,
            100000,
            "How many received message ids the gateway remembers to drop repeats: the window in which a retry "
            "or a `--key` rerun is delivered once.",
        ),
        Setting(
            "messaging.nudge_after",
            float,
            300.0,
            "Seconds a held message may wait before its entity is nudged.",
            check=positive,
        ),
        Setting(
            "receipts.enabled",
            bool,
            True,
            "Track sent messages and send receipts back to senders' hosts (bridge track; docs/receipts.md).",
        ),
        Setting(
            "receipts.keep",
            float,
            604800.0,
            "Seconds this host keeps the record of a message it sent (bridge track).",
            check=positive,
        ),
        Setting(
            "history.enabled",
            bool,
            True,
            "Keep a searchable archive of what local entities send and receive (bridge history; docs/history.md).",
        ),
        Setting(
            "history.keep",
            float,
            2592000.0,
            "Seconds this host keeps an archived message (bridge history).",
            check=positive,
        ),
        Setting(
            "history.max_bytes",
            int,
            268435456,
            "Size cap of the message archive in bytes; the oldest messages go first.",
            check=positive,
        ),
        Setting("roster.interval", float, 5.0, "Presence heartbeat interval in seconds.", check=positive),
        Setting(
            "roster.expiry_missed", int, 3, "Missed heartbeats after which a roster entry expires.", check=positive
        ),
        Setting(
            "roster.relay",
            str,
            "auto",
            "Hear other hosts through a roster relay: auto (when one is heard, else every host), "
            "only (never every host) or off.",
            choices=("auto", "only", "off"),
        ),
        Setting(
            "security.sender_check",
            str,
            "off",
            "Dead-letter messages whose fromHost does not match the authenticated AMQP "
            "user (host: user must be security.host_user for that host; see docs/deploy.md).",
            choices=("off", "host"),
        ),
        Setting(
            "security.host_user", str, "{host}", "RabbitMQ user name of each host, as a template ({host} = host id)."
        ),
        Setting(
            "security.trusted_users",
            str,
            None,
            "Comma-separated RabbitMQ users that may publish for any host (ops tooling).",
        ),
        Setting("gateway.log_format", str, "human", "Gateway log lines.", choices=("human", "json")),
        Setting(
            "gateway.metrics",
            str,
            None,
            "Serve /metrics and /healthz on this address (PORT or HOST:PORT; loopback unless a host is given).",
        ),
        Setting("browser.port", int, 4517, "Loopback port of the browser broker."),
        Setting(
            "browser.token",
            str,
            None,
            "Shared browser-bridge token; wins over the token file (also OCB_TOKEN).",
            secret=True,
        ),
        Setting(
            "mcp.browser",
            bool,
            True,
            "Whether `bridge mcp` offers the browser tools and takes part in the browser-broker "
            "election (--browser/--no-browser).",
        ),
        Setting(
            "mcp.messaging",
            bool,
            True,
            "Whether `bridge mcp` offers the messaging tools, which need the local gateway "
            "(--messaging/--no-messaging).",
        ),
    ]
}


SHOW_LISTS_KEYS = "`bridge config show` lists every key and its value."
TABLES_HINT = (
    "Spawn profiles go under profiles.NAME.KEY (e.g. profiles.dev.command), plugin "
    "settings under plugins.NAME.KEY (e.g. plugins.tmux.socket)."
)


def unknown_key_hint(key: str) -> str:
    """What to write instead of ``key``: the nearest valid keys, else the valid keys of its
    section, else every key and where the profile and plugin tables live — so the error
    itself says what is allowed."""
    close = difflib.get_close_matches(key, SETTINGS, n=3, cutoff=0.8)
    if close:
        return "did you mean " + " or ".join(close) + "?"
    section = key.split(".", 1)[0]
    keys = [k for k in SETTINGS if k.split(".", 1)[0] == section]
    if keys:
        return "valid keys: " + ", ".join(keys) + "."
    return "valid keys: " + ", ".join(SETTINGS) + ". " + TABLES_HINT


@dataclass
class Config:
    """The effective configuration: file values overlaid by environment and flags."""

    values: dict[str, Any]
    sources: dict[str, str]
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: Path | None = None
    #: unknown keys found in the file, when it was loaded with ``allow_unknown`` (ignored)
    unknown: list[str] = field(default_factory=list)

    def get(self, key: str) -> Any:
        """Return the effective value of ``key`` (schema keys only)."""
        if key not in SETTINGS:
            raise ConfigError(f"unknown configuration key {key!r}", f"{unknown_key_hint(key)} {SHOW_LISTS_KEYS}")
        return self.values[key]

    @property
    def host_id(self) -> str:
        return self.values["host.id"] or default_host_id()

    def profiles(self) -> dict[str, dict[str, Any]]:
        """Spawn profiles defined in this host's own file."""
        return dict(self.tables.get("profiles", {}))

    def plugin_settings(self, name: str) -> dict[str, Any]:
        """The ``[plugins.<name>]`` table, for a plugin to validate itself."""
        return dict(self.tables.get("plugins", {}).get(name, {}))


def read_file(path: Path) -> dict[str, Any]:
    """Parse a TOML file; a missing file is an empty configuration."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})", f"fix or remove {path}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})", "check the file's permissions") from None


def _unknown_in_file(path: Path, key: str) -> ConfigError:
    return ConfigError(
        f"{path}: unknown key {key!r}",
        f"{unknown_key_hint(key)} Fix it in the file, or remove it with `bridge config unset {key}`",
    )


def flatten(
    data: Mapping[str, Any], path: Path, unknown: list[str] | None = None
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Split a parsed file into schema keys (validated) and free-form tables.

    Unknown keys are errors naming the file and the key, so a typo never silently falls back
    to a default — unless ``unknown`` is a list, which then collects them instead (for
    ``bridge config show``, which must still work on the file it is meant to help repair).
    """
    flat: dict[str, Any] = {}
    tables: dict[str, dict[str, Any]] = {}
    for section, body in data.items():
        if section in FREE_FORM_SECTIONS:
            if not isinstance(body, dict) or not all(isinstance(v, dict) for v in body.values()):
                raise ConfigError(
                    f"{path}: [{section}] must hold tables like [{section}.NAME]", "see `bridge config --help`"
                )
            tables[section] = body
            continue
        if not isinstance(body, dict):
            if unknown is not None:
                unknown.append(section)
                continue
            raise ConfigError(
                f"{path}: unknown key {section!r}",
                'keys live in sections, e.g. [broker] uri = "amqp://…". Remove '
                f"it with `bridge config unset {section}`",
            )
        for name, raw in body.items():
            key = f"{section}.{name}"
            setting = SETTINGS.get(key)
            if setting is None:
                if unknown is not None:
                    unknown.append(key)
                    continue
                raise _unknown_in_file(path, key)
            flat[key] = setting.parse(raw, str(path))
    return flat, tables


def load(
    overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None, *, allow_unknown: bool = False
) -> Config:
    """Build the effective configuration.

    ``overrides`` are command-line flags (already typed; ``None`` values are ignored).
    ``allow_unknown`` ignores unknown keys in the file and lists them in ``Config.unknown``
    instead of failing (bad values of known keys still fail).
    """
    env = os.environ if env is None else env
    path = paths.config_file()
    unknown: list[str] | None = [] if allow_unknown else None
    flat, tables = flatten(read_file(path), path, unknown)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, setting in SETTINGS.items():
        values[key], sources[key] = setting.default, "default"
        if key in flat:
            values[key], sources[key] = flat[key], str(path)
        if env.get(setting.env, "") != "":
            values[key] = setting.parse(env[setting.env], f"environment variable {setting.env}")
            sources[key] = f"env {setting.env}"
    if "browser.token" in SETTINGS and env.get("OCB_TOKEN") and sources["browser.token"] == "default":
        values["browser.token"], sources["browser.token"] = env["OCB_TOKEN"], "env OCB_TOKEN"
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key], sources[key] = SETTINGS[key].parse(value, "command line"), "flag"
    return Config(values=values, sources=sources, tables=tables, path=path, unknown=unknown or [])
