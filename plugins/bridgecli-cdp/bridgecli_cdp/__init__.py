"""bridgecli-cdp: a browser target that drives Chromium over the DevTools protocol.

Packaged exactly as a third-party plugin: an entry point in the ``bridgecli`` group pointing
at :mod:`bridgecli_cdp.plugin`.
"""

__version__ = "0.1.0"
