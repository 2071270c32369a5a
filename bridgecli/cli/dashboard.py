"""``bridge dashboard``: the fleet at a glance, live, in a browser."""

from __future__ import annotations

import click

from bridgecli.cli import output


@click.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1 to serve on (0: any free port).",
)
@click.option("--no-open", "no_open", is_flag=True, help="Do not open the page in a browser.")
@output.json_option
@click.pass_obj
def dashboard(app, port: int, no_open: bool, as_json: bool) -> None:
    """Serve a live web view of the fleet on 127.0.0.1.

    Prints the page's URL, which carries a random token (the page then keeps it in a
    cookie), and opens it. The page shows every host and entity, the traffic on bridge.msg,
    messages held on this host, dead letters (retry and purge them there), the browser
    bridge and throughput. It reads the local gateway's socket, a tap on bridge.msg and
    bridge.dlq, and never takes a message from an inbox. Ctrl-C stops.
    """
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        from bridgecli.errors import MissingDependency

        raise MissingDependency(
            "bridge dashboard needs Starlette and uvicorn, which are not installed",
            "pip install 'bridgecli[dashboard]'",
        ) from None
    from bridgecli.dashboard.server import Dashboard

    server = Dashboard(app.config, port)
    if as_json:
        output.data({"url": server.url, "port": server.port}, compact=True)
    else:
        output.line(server.url)
    output.note("bridge dashboard: serving on 127.0.0.1 only; the URL's token is the key — Ctrl-C stops")
    if not no_open:
        import webbrowser

        webbrowser.open(server.url)
    server.serve()
