"""Implements ``register_comands`` (sic): pluggy's check_pending must reject it."""

import bridgecli


@bridgecli.hookimpl
def register_comands(register):
    register("never", "nowhere:nothing", "never shown")
