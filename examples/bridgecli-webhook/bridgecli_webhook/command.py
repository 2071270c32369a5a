"""``bridge webhook-test URL``: POST a sample message the way the gateway would.

Contributed through the ``register_commands`` hook and imported only when it runs. It lets
the owner of a receiver check URL, TLS, secret and status codes before registering an entity.
"""

from __future__ import annotations

import json
import uuid

import click

from bridgecli.envelope import Envelope
from bridgecli.errors import Rejected
from bridgecli_webhook.backend import Settings, WebhookBackend, check_url


@click.command()
@click.argument("url")
@click.option(
    "--message", "-m", default="webhook-test from bridge", show_default=True, help="Content of the sample message."
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON on stdout.")
@click.pass_obj
def webhook_test(app, url: str, message: str, as_json: bool) -> None:
    """POST a sample message to a webhook URL and report what bridge would do.

    Uses this host's [plugins.webhook] settings (timeout, secret). A 2xx answer exits 0; any
    other outcome exits 9 and says whether the gateway would retry it or dead-letter it.
    """
    check_url(url)
    backend = WebhookBackend(Settings.from_table(app.config.plugin_settings("webhook")))
    probe = str(uuid.uuid4())
    envelope = Envelope(kind="SEND", sender=probe, recipient=probe, content=message, sender_label="webhook-test")
    outcome = backend.send(url, probe, envelope)
    verdict = (
        "delivered"
        if outcome.delivered
        else "would be retried, then dead-lettered"
        if outcome.retryable
        else "would be dead-lettered at once"
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "url": url,
                    "msgId": envelope.msg_id,
                    "delivered": outcome.delivered,
                    "retryable": outcome.retryable,
                    "status": outcome.status,
                    "detail": outcome.detail,
                }
            )
        )
    if not outcome.delivered:
        raise Rejected(
            f"{url} answered {outcome.detail}: a message {verdict}",
            "check the receiver" if outcome.retryable else "fix the URL or the receiver",
        )
    if not as_json:
        click.echo(f"{url} answered {outcome.detail}: {verdict} (msgId {envelope.msg_id})")
