"""The ``bridge`` click root group, whose commands load lazily, and its error mapping.

Built-in commands are listed in :data:`BUILTIN_COMMANDS` with their short help, so
``bridge --help``, ``bridge --version`` and TAB completion import neither the command
modules nor pika. Plugin commands come from the ``register_commands`` hook and load the same
way. The :mod:`bridgecli.cli` package (with the click-free :mod:`bridgecli.fast_send`) is the
only place that prints to the terminal or exits; library code raises
:class:`bridgecli.errors.BridgeError`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from bridgecli import __version__, failures
from bridgecli.cli.lazy import Entry, LazyGroup
from bridgecli.errors import ExitCode

if TYPE_CHECKING:
    from bridgecli.config import Config

#: name -> ("module:attribute", short help). A test checks each short help against the
#: command's own help text, so the two cannot drift apart.
BUILTIN_COMMANDS: dict[str, tuple[str, str]] = {
    "answer": ("bridgecli.cli.send:answer", "Answer an ASK by its message id."),
    "ask": ("bridgecli.cli.send:ask", "Ask an entity a question (ASK); --wait for the ANSWER."),
    "broker": ("bridgecli.cli.broker:broker", "Run a private local RabbitMQ node for this user."),
    "browser": ("bridgecli.cli.browser:browser", "Drive browsers through the auto-elected browser broker."),
    "channel": ("bridgecli.cli.channel:channel", "Join, leave and list channels: one send reaches every member."),
    "completion": ("bridgecli.cli.completion:completion", "Print the shell completion script for bash, zsh or fish."),
    "config": ("bridgecli.cli.config:config", "Show and change settings in bridge.toml."),
    "dashboard": ("bridgecli.cli.dashboard:dashboard", "Serve a live web view of the fleet on 127.0.0.1."),
    "dlq": ("bridgecli.cli.dlq:dlq", "Inspect, retry or purge dead-lettered messages."),
    "doctor": ("bridgecli.cli.doctor:doctor", "Check config, broker, gateway and file permissions."),
    "entities": ("bridgecli.cli.register:entities", "List the entities registered on this host."),
    "history": (
        "bridgecli.cli.history:history",
        "Show and search the messages this host's entities sent and received.",
    ),
    "hook": ("bridgecli.cli.hook:hook", "Report a turn of an agent client to the gateway (its hooks run this)."),
    "hub": ("bridgecli.cli.hub:hub", "Make this machine the hub that other hosts join."),
    "install": (
        "bridgecli.cli.install:install",
        "Add bridge's MCP server to Claude Code, Codex, OpenCode, Gemini or Cursor.",
    ),
    "join": ("bridgecli.cli.join:join", "Join the hub that printed INVITE (`bridge hub invite HOSTID` on the hub)."),
    "mcp": ("bridgecli.cli.mcp:mcp", "Run the stdio MCP server for a main or orchestrator session."),
    "gateway": ("bridgecli.cli.gateway:gateway", "Run this host's gateway (blocking consumer loop)."),
    "plugins": ("bridgecli.cli.plugins:plugins", "List installed plugins and what they provide."),
    "poll": ("bridgecli.cli.poll:poll", "Drain messages held for an entity."),
    "register": ("bridgecli.cli.register:register", "Register an entity on this host; prints its gid."),
    "relay": (
        "bridgecli.cli.relay:relay",
        "Run a roster relay: hear every host's roster frames, publish what changed once a second.",
    ),
    "reply": ("bridgecli.cli.send:reply", "Reply to a message by its id."),
    "roster": ("bridgecli.cli.roster:roster", "Show who is where: the union presence view of all hosts."),
    "send": ("bridgecli.cli.send:send", "Send a message to an entity (gid or label)."),
    "service": ("bridgecli.cli.service:service", "Install systemd units for the gateway, hub or broker."),
    "show": ("bridgecli.cli.poll:show", "Show one message in full by its id."),
    "spawn": ("bridgecli.cli.spawn:spawn", "Start an agent from a profile on a host (cross-host spawn)."),
    "status": ("bridgecli.cli.status:status", "Show the local gateway's connection, entities and queues."),
    "stop": ("bridgecli.cli.spawn:stop", "Stop an entity through the launcher that started it."),
    "tap": ("bridgecli.cli.tap:tap", "Print live traffic on bridge.msg."),
    "track": ("bridgecli.cli.track:track", "Show what became of a message sent from this host."),
    "thread": ("bridgecli.cli.history:thread", "Show the conversation an archived message belongs to."),
    "token": ("bridgecli.cli.token:token", "Manage the browser bridge token file (bridge.json)."),
    "uninstall": ("bridgecli.cli.install:uninstall", "Remove bridge's MCP server entry from agent clients."),
    "unregister": ("bridgecli.cli.register:unregister", "Remove an entity from this host."),
}

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class AppContext:
    """Per-invocation state shared by commands: flag overrides and the lazily loaded config."""

    def __init__(self, overrides: dict[str, Any], traceback: bool) -> None:
        self.overrides = overrides
        self.traceback = traceback
        self._config: Config | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            from bridgecli import config

            self._config = config.load(self.overrides)
        return self._config


class RootTable:
    """The root group's commands: :data:`BUILTIN_COMMANDS` plus the ``register_commands`` hook's."""

    def entries(self) -> dict[str, Entry]:
        commands: dict[str, Entry] = {name: (target, help_, None) for name, (target, help_) in BUILTIN_COMMANDS.items()}
        from bridgecli import plugins

        loaded = plugins.get()
        for name, (plugin_name, value) in loaded.providers["commands"].items():
            target, help_ = value if isinstance(value, tuple) else (value, "")
            if name in commands:
                loaded.failures.setdefault(plugin_name, f"command {name!r} clashes with a built-in")
                continue
            commands[name] = (target, help_, plugin_name)
        return commands

    def entry(self, name: str) -> Entry | None:
        # a built-in needs no plugin scan: `bridge send` through the gateway must stay cheap
        if name in BUILTIN_COMMANDS:
            target, help_ = BUILTIN_COMMANDS[name]
            return (target, help_, None)
        return self.entries().get(name)

    def report_failures(self) -> None:
        from bridgecli import plugins

        for name, problem in plugins.get().failures.items():
            click.echo(
                f"bridge: warning: plugin {name} failed to load ({problem}); "
                f"the rest of bridge works — fix or uninstall it",
                err=True,
            )


@click.group(cls=LazyGroup, table=RootTable(), context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="bridge")
@click.option(
    "--broker-uri",
    metavar="URI",
    default=None,
    help="AMQP broker URI (overrides env BRIDGE_BROKER_URI and config broker.uri).",
)
@click.option(
    "--host-id", metavar="ID", default=None, help="This host's id (overrides env BRIDGE_HOST_ID and config host.id)."
)
@click.option(
    "--traceback",
    "show_traceback",
    is_flag=True,
    envvar="BRIDGE_DEBUG",
    help="Show the full traceback on errors (env BRIDGE_DEBUG=1).",
)
@click.pass_context
def root(ctx: click.Context, broker_uri: str | None, host_id: str | None, show_traceback: bool) -> None:
    """bridge — messaging between AI coding agents across hosts, and a browser bridge.

    One gateway per host moves messages through an AMQP broker; agents and scripts use the
    one-shot commands below. Run `bridge COMMAND -h` for each command's help.
    """
    ctx.obj = AppContext({"broker.uri": broker_uri, "host.id": host_id}, show_traceback)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI and map errors to one line + an exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        # Without standalone mode click *returns* the code of a click.exceptions.Exit
        # raised inside a command instead of raising it; keep it.
        result = root.main(args=args, prog_name="bridge", standalone_mode=False)
        if isinstance(result, int) and not isinstance(result, bool) and result:
            sys.exit(result)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("bridge: interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except (KeyboardInterrupt, Exception) as exc:  # the one mapping, shared with the fast path
        code, line = failures.outcome(exc, traceback=failures.wants_traceback(args))
        if line is not None:
            click.echo(line, err=True)
        sys.exit(code)
    sys.exit(ExitCode.OK)
