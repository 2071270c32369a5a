"""The sample plugin's command and backend, imported only when used."""

import json

import click

from bridgecli.config import Setting

#: keys of profiles with launcher = "sample-launcher", besides the common ones
PROFILE_SETTINGS = (Setting("sample_mode", str, "fast", "How the sample launcher starts.", choices=("fast", "slow")),)

#: keys of [plugins.sample]
PLUGIN_SETTINGS = (
    Setting("greeting", str, "hello", "What sample-hello says."),
    Setting("retries", int, 3, "How often to retry."),
    Setting("token", str, None, "A secret the sample never prints.", secret=True),
)

#: a declaration that is not a list of settings (a plugin bug bridge must report)
NOT_SETTINGS = {"greeting": "hello"}


@click.command()
@click.argument("name", default="world")
def hello(name):
    """Say hello from the sample plugin."""
    click.echo(f"hello {name} from bridgecli-sample")


class FileBackend:
    """Appends each delivered envelope as a JSON line to ``ADDRESS`` (a file path)."""

    inline = True

    def __init__(self, context):
        self.context = context

    def check_address(self, address):
        if not address:
            from bridgecli.errors import BridgeError

            raise BridgeError("sample-file needs a file path", "use --deliver sample-file:/path")

    def deliver(self, entity, envelope):
        with open(entity.address, "a") as handle:
            handle.write(json.dumps(envelope.to_wire()) + "\n")

    def status(self, entity):
        return "idle"
