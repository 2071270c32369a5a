"""A sample bridge plugin: one command, one delivery backend, one launcher, one browser target,
and the settings of its launcher's profiles and of [plugins.sample].

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


@bridgecli.hookimpl
def register_profile_settings(register):
    register("sample-launcher", "bridgecli_sample.impl:PROFILE_SETTINGS")


@bridgecli.hookimpl
def register_plugin_settings(register):
    register("sample", "bridgecli_sample.impl:PLUGIN_SETTINGS")
    register("sample-broken", "bridgecli_sample.impl:NOT_SETTINGS")


def _backend(context):
    from bridgecli_sample.impl import FileBackend

    return FileBackend(context)


def _launcher(config):
    raise NotImplementedError("the sample launcher is a placeholder")


def _target(config):
    raise NotImplementedError("the sample browser target is a placeholder")
