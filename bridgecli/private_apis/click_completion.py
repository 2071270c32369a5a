"""The function a click parameter was given as ``shell_complete=``, which click keeps private.

Relies on ``Parameter._custom_shell_complete``: click stores the ``shell_complete=`` argument
there and offers no public accessor. Gains: the CLI snapshot (:mod:`bridgecli.cli.snapshot`)
records which function of :mod:`bridgecli.cli.complete` completes a parameter, so a TAB is
answered without importing click (docs/decisions/click-free-tab-and-help.md). If click changes
it, ``tests/private_apis/test_click_completion.py`` fails (else every parameter would read as
having none, and TAB would offer nothing for it): read the new name off ``Parameter.__init__``,
or mark our parameters through a public ``click.ParamType`` instead.
"""

from __future__ import annotations

TYPE_CHECKING = False  # imports nothing: click is the caller's
if TYPE_CHECKING:
    from typing import Any

    import click


def custom_shell_complete(param: click.Parameter) -> Any:
    """The ``shell_complete=`` function ``param`` was built with, or None."""
    return getattr(param, "_custom_shell_complete", None)
