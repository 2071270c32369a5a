"""Pins ``bridgecli.private_apis.click_completion`` to click: ``Parameter`` keeps the
``shell_complete=`` function in ``_custom_shell_complete``, for options and arguments alike,
that attribute is what click's own completion calls, and the CLI snapshot finds bridge's
completion functions through it."""

from __future__ import annotations

import inspect

import click
import pytest
from click.shell_completion import CompletionItem

from bridgecli.cli import complete, snapshot
from bridgecli.private_apis.click_completion import custom_shell_complete


def _offer(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(f"{param.name}:{incomplete}")]


def test_parameter_takes_shell_complete_and_keeps_it_in_the_private_attribute():
    assert "shell_complete" in inspect.signature(click.Parameter.__init__).parameters
    assert "_custom_shell_complete" in click.Parameter.__annotations__


@pytest.mark.parametrize(("kind", "decls"), [(click.Option, ["--who"]), (click.Argument, ["who"])])
def test_options_and_arguments_hold_the_function_click_calls(kind, decls):
    param = kind(decls, shell_complete=_offer)
    assert param._custom_shell_complete is _offer
    assert custom_shell_complete(param) is _offer
    ctx = click.Context(click.Command("x", params=[param]))
    assert [item.value for item in param.shell_complete(ctx, "ab")] == ["who:ab"]  # click's own path
    plain = kind(decls)
    assert custom_shell_complete(plain) is None
    assert plain.shell_complete(ctx, "ab") == []


def test_the_cli_snapshot_still_finds_bridges_completions(bridge_home):
    tree = snapshot.build([])["tree"]["commands"]
    send = {p["name"]: p["complete"] for p in tree["send"]["params"]}
    roster = {p["name"]: p["complete"] for p in tree["roster"]["params"]}
    assert send["target"] == ["callback", complete.targets.__name__]  # an argument
    assert roster["host"] == ["callback", complete.hosts.__name__]  # an option
