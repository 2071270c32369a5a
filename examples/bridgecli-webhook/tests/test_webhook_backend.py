"""The webhook backend against a real HTTP server on 127.0.0.1, built exactly as the gateway
builds it: bridge's plugin manager finds the installed entry point, the factory gets a
BackendContext from this host's configuration."""

from __future__ import annotations

import json
import socket

import pytest

from bridgecli import config, plugins
from bridgecli.envelope import Envelope
from bridgecli.errors import ConfigError, DeliveryError
from bridgecli.interfaces import BackendContext, Entity
from bridgecli_webhook.posting import signature
from tests.support.env import run_bridge

GID = "aaaaaaaa-1111-4111-8111-111111111111"
SENDER = "bbbbbbbb-2222-4222-8222-222222222222"


@pytest.fixture
def make_backend(bridge_home):
    def build(settings: str = ""):
        bridge_home.config_file.parent.mkdir(parents=True, exist_ok=True)
        bridge_home.config_file.write_text(f"[plugins.webhook]\n{settings}\n")
        plugins.reset()
        factory = plugins.get().provider("backends", "webhook")
        return factory(BackendContext(config=config.load(), state_dir=bridge_home.root, host_id="t"))

    return build


def entity(url: str) -> Entity:
    return Entity(gid=GID, label="hook", role="agent", deliver=f"webhook:{url}", host="t", created=0.0)


def envelope(content: str = "hello") -> Envelope:
    return Envelope(kind="SEND", sender=SENDER, recipient=GID, content=content, sender_label="main")


def test_2xx_is_delivered_with_the_envelope_json_and_signed_headers(make_backend, receiver):
    backend = make_backend('secret = "s3cret"')
    url = receiver.script("/hook", [204])
    env = envelope("héllo\nworld")
    backend.deliver(entity(url), env)
    [post] = receiver.posts("/hook")
    assert post.json == env.to_wire()
    assert post.headers["Content-Type"] == "application/json"
    assert post.headers["X-Bridge-Msg-Id"] == env.msg_id and post.headers["X-Bridge-Kind"] == "SEND"
    assert post.headers["X-Bridge-Recipient"] == GID
    assert post.headers["X-Bridge-Signature"] == signature("s3cret", post.body)


@pytest.mark.parametrize("status", [500, 503, 429, 408])
def test_server_errors_and_throttling_are_retryable(make_backend, receiver, status):
    url = receiver.script("/busy", [status])
    with pytest.raises(DeliveryError) as err:
        make_backend().deliver(entity(url), envelope())
    assert err.value.retryable and f"HTTP {status}" in str(err.value)


@pytest.mark.parametrize("status", [400, 404, 410])
def test_client_errors_are_not_retryable(make_backend, receiver, status):
    url = receiver.script("/bad", [status])
    with pytest.raises(DeliveryError) as err:
        make_backend().deliver(entity(url), envelope())
    assert not err.value.retryable and "refused the message" in str(err.value)


def test_a_redirect_is_not_followed_and_not_retryable(make_backend, receiver):
    url = receiver.script("/moved", [301])
    with pytest.raises(DeliveryError) as err:
        make_backend().deliver(entity(url), envelope())
    assert not err.value.retryable and "not followed" in str(err.value)
    assert len(receiver.requests) == 1  # nothing was sent anywhere else


def test_timeout_and_refused_connection_are_retryable(make_backend, receiver):
    backend = make_backend("timeout = 0.3")
    with pytest.raises(DeliveryError) as err:
        backend.deliver(entity(receiver.script("/slow", ["hang"])), envelope())
    assert err.value.retryable and "timed out after 0.3s" in str(err.value)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(DeliveryError) as err:
        backend.deliver(entity(f"http://127.0.0.1:{port}/gone"), envelope())
    assert err.value.retryable and "cannot connect" in str(err.value)


@pytest.mark.parametrize("address", [None, "", "ftp://x/y", "localhost:8080/hook", "http:///nohost"])
def test_bad_addresses_are_refused_with_the_fix(make_backend, address):
    with pytest.raises(ConfigError, match="webhook:https://host/path"):
        make_backend().check_address(address)


@pytest.mark.parametrize(
    "settings, problem",
    [
        ("timeout = 0", "positive number"),
        ('timeout = "soon"', "positive number"),
        ('secret = ""', "non-empty string"),
        ("retries = 3", "unknown key"),
    ],
)
def test_bad_settings_are_config_errors_naming_the_key(make_backend, settings, problem):
    with pytest.raises(ConfigError, match=problem):
        make_backend(settings)


def test_register_refuses_a_bad_url_before_anything_is_stored(bridge_home):
    proc = run_bridge("register", "--label", "hook", "--deliver", "webhook:ftp://x", env=bridge_home.env)
    assert proc.returncode == 3 and "is not an http(s) URL" in proc.stderr
    assert json.loads(run_bridge("entities", "--json", env=bridge_home.env).stdout)["entities"] == []


def test_plugins_lists_what_the_webhook_plugin_provides(bridge_home):
    listing = json.loads(run_bridge("plugins", "--json", env=bridge_home.env).stdout)
    webhook = next(p for p in listing["plugins"] if p["name"] == "webhook")
    assert webhook["builtin"] is False
    assert webhook["provides"]["backends"] == ["webhook"]
    assert webhook["provides"]["commands"] == ["webhook-test"]
    assert webhook["provides"]["plugin_settings"] == ["webhook"]


def test_bridge_config_checks_the_declared_settings(bridge_home):
    ok = run_bridge("config", "set", "plugins.webhook.secret", "s3cret", env=bridge_home.env)
    assert ok.returncode == 0, ok.stderr
    bad = run_bridge("config", "set", "plugins.webhook.timeout", "0", env=bridge_home.env)
    assert bad.returncode == 3 and "expected a number greater than 0" in bad.stderr
    typo = run_bridge("config", "set", "plugins.webhook.secrett", "x", env=bridge_home.env)
    assert typo.returncode == 3 and "did you mean secret?" in typo.stderr
    shown = json.loads(run_bridge("config", "show", "--json", env=bridge_home.env).stdout)
    rows = {r["key"]: r for r in shown["settings"]}
    assert rows["plugins.webhook.secret"]["value"] == "********"
    assert rows["plugins.webhook.timeout"] == {**rows["plugins.webhook.timeout"], "value": 10.0, "source": "default"}


def test_webhook_test_command(bridge_home, receiver):
    ok = run_bridge("webhook-test", receiver.script("/ok", [200]), env=bridge_home.env)
    assert ok.returncode == 0 and "answered HTTP 200: delivered" in ok.stdout
    assert receiver.posts("/ok")[0].json["content"] == "webhook-test from bridge"
    bad = run_bridge("webhook-test", receiver.script("/nope", [404]), "--json", env=bridge_home.env)
    assert bad.returncode == 9  # ExitCode.REJECTED
    assert json.loads(bad.stdout)["retryable"] is False
    assert "would be dead-lettered at once" in bad.stderr
    busy = run_bridge("webhook-test", receiver.script("/busy", [503]), env=bridge_home.env)
    assert busy.returncode == 9 and "would be retried" in busy.stderr
