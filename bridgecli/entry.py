"""The ``bridge`` console script: the click-free fast path first, then the click CLI.

Kept outside :mod:`bridgecli.cli` because importing that package imports click, which is the
cost the fast path (:mod:`bridgecli.fast_send`) exists to avoid.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run ``bridge`` with ``sys.argv``."""
    argv = sys.argv[1:]
    if argv and argv[0] in ("send", "ask", "reply", "answer"):  # the keys of fast_send.OPTIONS
        from bridgecli import fast_send

        code = fast_send.run(argv)
        if code is not None:
            sys.exit(code)
    from bridgecli.cli import main as cli_main

    cli_main(argv)
