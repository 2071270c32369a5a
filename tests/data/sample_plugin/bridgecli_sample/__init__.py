"""A sample bridge plugin: one command, one delivery backend, one launcher, one browser target.

Everything heavy lives in ``impl``; this module only registers names, so loading the plugin
costs nothing on ``bridge --help``.
"""

import bridgecli


@bridgecli.hookimpl
def register_commands(register):
    register("sample-hello", "bridgecli_sample.impl:hello", "Say hello from the sample plugin.")


@bridgecli.hookimpl
def register_delivery_backends(register):
    register("sample-file", _backend)


@bridgecli.hookimpl
def register_launchers(register):
    register("sample-launcher", _launcher)


@bridgecli.hookimpl
def register_browser_targets(register):
    register("sample-browser", _target)


def _backend(context):
    from bridgecli_sample.impl import FileBackend

    return FileBackend(context)


def _launcher(config):
    raise NotImplementedError("the sample launcher is a placeholder")


def _target(config):
    raise NotImplementedError("the sample browser target is a placeholder")
