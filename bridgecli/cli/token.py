"""``bridge token``: manage the browser bridge token file (``bridge.json``).

The token is the one secret of the browser bridge: the host writes it, guests read it, and a
human pastes it into the extension. These commands never print it unless asked (``show``,
``rotate``, which exist to hand it over), and they refuse a file others can read.
"""

from __future__ import annotations

import click

from bridgecli.cli import output
from bridgecli.errors import ConfigError, NotFound


@click.group()
def token() -> None:
    """Manage the browser bridge token file (bridge.json).

    The file is <user cache dir>/opencode-browser/bridge.json, mode 0600: the broker host
    writes {port, token} there and guests read it. An explicit token (config browser.token,
    env BRIDGE_BROWSER_TOKEN or OCB_TOKEN) wins over the file and is written to it.
    """


def _port(app) -> int:
    return app.config.get("browser.port")


@token.command("path")
@output.json_option
def path_(as_json: bool) -> None:
    """Print the path of the token file."""
    from bridgecli.browser import token_file

    path = token_file.path()
    if as_json:
        output.data({"path": str(path), "exists": path.exists()})
    else:
        output.line(str(path))


@token.command()
@output.json_option
@click.pass_obj
def show(app, as_json: bool) -> None:
    """Print the token (to paste into the browser extension)."""
    from bridgecli.browser import token_file

    data = token_file.read()
    if data is None:
        raise NotFound(
            f"no token file at {token_file.path()}",
            "start the broker with `bridge browser serve`, or run `bridge token rotate`",
        )
    explicit = app.config.get("browser.token")
    if explicit and explicit != data["token"]:
        output.warn(
            f"{app.config.sources['browser.token']} sets a different token; the next broker host will write that one"
        )
    if as_json:
        output.data({"path": str(token_file.path()), **data})
    else:
        output.line(data["token"])


@token.command()
@output.json_option
@click.pass_obj
def rotate(app, as_json: bool) -> None:
    """Generate a new token and write it (prints it)."""
    from bridgecli.browser import token_file

    current = token_file.read() if token_file.path().exists() else None
    port = current.get("port", _port(app)) if current else _port(app)
    new = token_file.new_token()
    token_file.write(port, new)
    if as_json:  # the same shape as `bridge token show --json`
        output.data({"path": str(token_file.path()), **(token_file.read() or {})})
    else:
        output.line(new)
    output.note(
        "wrote a new token: restart the broker host (`bridge browser serve`) and paste "
        "the token into the browser extension"
    )


@token.command("set")
@click.argument("value", metavar="TOKEN")
@click.pass_obj
def set_(app, value: str) -> None:
    """Write TOKEN to the token file (at least 16 visible characters)."""
    from bridgecli.browser import token_file

    if len(value) < 16 or not value.isprintable() or any(c.isspace() for c in value):
        raise ConfigError(
            "a token needs at least 16 printable characters and no spaces", "generate one with `bridge token rotate`"
        )
    current = token_file.read() if token_file.path().exists() else None
    port = current.get("port", _port(app)) if current else _port(app)
    token_file.write(port, value)
    output.note(f"wrote {token_file.path()}; restart the broker host to use it")


@token.command()
def clear() -> None:
    """Delete the token file (the next broker host generates a new token)."""
    from bridgecli.browser import token_file

    if token_file.clear():
        output.note(f"removed {token_file.path()}")
    else:
        output.note(f"no token file at {token_file.path()}")
