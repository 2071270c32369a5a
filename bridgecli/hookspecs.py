"""The plugin hooks of bridge, grouped by what they extend.

Every hook follows the ``register(...)`` pattern: the host passes a callback and the plugin
calls it once per thing it provides. That lets the host validate names, attribute each
provider to its plugin (for ``bridge plugins``) and catch a failing plugin per call without
losing the others. Hooks are called once per plugin (all results are collected); return
values are ignored. ``docs/plugin-hooks.md`` documents each with its exact signature, and a
meta-test fails when a hook here is undocumented or untested.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

from bridgecli.interfaces import BackendFactory, BrowserTargetFactory, LauncherFactory

hookspec = pluggy.HookspecMarker("bridgecli")


# --- CLI -------------------------------------------------------------------------------


@hookspec
def register_commands(register: Callable[[str, str, str], None]) -> None:
    """Contribute top-level ``bridge`` commands, loaded lazily.

    Call ``register(name, "package.module:attribute", short_help)`` for each command. The
    module is imported only when the command runs (or its own ``--help`` is shown), so
    ``bridge --help`` and shell completion stay fast; ``short_help`` is what the root
    ``--help`` lists. A name that a built-in command already uses is refused.
    """


# --- messaging -------------------------------------------------------------------------


@hookspec
def register_delivery_backends(register: Callable[[str, BackendFactory], None]) -> None:
    """Contribute delivery backends (``bridge register --deliver NAME[:ADDRESS]``).

    Call ``register(name, factory)``; ``factory(context: BackendContext)`` returns a
    :class:`bridgecli.interfaces.DeliveryBackend`. The gateway builds each backend once, when
    an entity first needs it.
    """


@hookspec
def register_launchers(register: Callable[[str, LauncherFactory], None]) -> None:
    """Contribute launchers for spawn profiles (``[profiles.X] launcher = "NAME"``).

    Call ``register(name, factory)``; ``factory(config)`` returns a
    :class:`bridgecli.interfaces.Launcher`.
    """


@hookspec
def register_profile_settings(register: Callable[[str, str], None]) -> None:
    """Declare the keys a launcher reads from its spawn profiles, so that
    ``bridge config set profiles.NAME.KEY VALUE`` can check them.

    Call ``register(launcher, "package.module:attribute")``; the attribute is a sequence of
    :class:`bridgecli.config.Setting` whose ``key`` is the bare key (``"tmux_split"``). It is
    imported only by ``bridge config``. The keys every profile has (launcher, command, cwd,
    env, label, role, ready_timeout) are declared by bridge and may not be declared again.
    """


@hookspec
def register_plugin_settings(register: Callable[[str, str], None]) -> None:
    """Declare the keys of a ``[plugins.NAME]`` table, so that ``bridge config set
    plugins.NAME.KEY VALUE`` can check them and ``bridge config show`` lists them.

    Call ``register(name, "package.module:attribute")``; the attribute is a sequence of
    :class:`bridgecli.config.Setting` whose ``key`` is the bare key (``"socket"``), imported
    only by ``bridge config``. Read the values with ``config.plugin_settings(name)``.
    """


# --- browser ---------------------------------------------------------------------------


@hookspec
def register_browser_targets(register: Callable[[str, BrowserTargetFactory], None]) -> None:
    """Contribute browser executor kinds (``bridge browser launch --kind NAME``).

    Call ``register(kind, factory)``; ``factory(config)`` returns a
    :class:`bridgecli.interfaces.BrowserTarget`.
    """
