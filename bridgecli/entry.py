"""The ``bridge`` console script: the click-free fast paths first, then the click CLI.

Kept outside :mod:`bridgecli.cli` because importing that package imports click, which is the
cost the fast paths exist to avoid: TAB completion and ``bridge --help``
(:mod:`bridgecli.cli.fastpath`), ``bridge --version`` (its start-up goal,
docs/design.md#goal-startup, had too thin a margin with click loaded),
:mod:`bridgecli.fast_send` and ``bridge hook`` (:mod:`bridgecli.hooks`, run in every agent turn).
"""

from __future__ import annotations

import sys

#: what click's ``version_option`` on the root group prints (``%(prog)s, version %(version)s``);
#: tests/cli/test_root.py checks the two paths print the same bytes.
VERSION_LINE = "bridge, version {version}\n"


def _fast_path(argv: list[str]) -> bool:
    """Answer a TAB or ``bridge --help`` from the CLI snapshot (bridgecli.cli.fastpath);
    False when click must answer."""
    import os

    instruction = os.environ.get("_BRIDGE_COMPLETE")
    if instruction:
        from bridgecli.cli import fastpath

        text = fastpath.complete(instruction)
        if text is None:
            return False
        _write(sys.stdout, text)
        return True
    if argv == ["--help"] or argv == ["-h"]:
        from bridgecli.cli import fastpath

        printed = fastpath.root_help()
        if printed is None:
            return False
        _write(sys.stdout, printed[0])
        _write(sys.stderr, printed[1])
        return True
    return False


def _write(stream, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:  # `bridge --help | head -1`: as the click path, not a traceback
        pass


def main() -> None:
    """Run ``bridge`` with ``sys.argv``."""
    argv = sys.argv[1:]
    if _fast_path(argv):
        sys.exit(0)
    if argv == ["--version"] or argv == ["-V"]:
        from bridgecli import __version__

        try:
            sys.stdout.write(VERSION_LINE.format(version=__version__))
            sys.stdout.flush()
        except BrokenPipeError:  # `bridge --version | true`: as the click path, not a traceback
            pass
        sys.exit(0)
    if argv and argv[0] == "hook" and "-h" not in argv and "--help" not in argv:
        from bridgecli import hooks

        sys.exit(hooks.run(argv[1:]))
    if argv and argv[0] in ("send", "ask", "reply", "answer"):  # the keys of fast_send.OPTIONS
        from bridgecli import fast_send

        code = fast_send.run(argv)
        if code is not None:
            sys.exit(code)
    from bridgecli.cli import main as cli_main

    cli_main(argv)
